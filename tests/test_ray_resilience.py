"""Suites on Ray that lose a process: the driver killed, then the suite finished
locally; a cell whose worker dies retried, then recorded as failed. Both run on one Ray
instance (ray_address), as drivers share a cluster. Apart from the smoke suite's tests
(tests/test_ray_executor.py), so the two pytest workers share them."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import datasets, runner
from benchmarks.cli import main
from benchmarks.ray_executor import RayExecutor, train_cell
from benchmarks.records import read_records
from test_runner import finished, write_suite  # the runner tests' 4-cell suite
from test_worker_pool import mini_at_epsilon_one

pytest.importorskip("ray")

pytestmark = pytest.mark.integration  # Ray processes: `make test-integration`


@pytest.fixture(scope="module")
def ray_address() -> str:
    """One local Ray instance for this module's tests, as a cluster that drivers join:
    the executor keeps an instance its caller started, and a driver in another process
    joins it with --address. (The smoke suite's test on Ray starts its own, with the
    default flags.)"""
    import ray

    context = ray.init(include_dashboard=False)
    yield context.address_info["gcs_address"]
    ray.shutdown()


def kill_after_a_new_record(cmd: list[str], results: Path) -> dict[str, bytes]:
    """Start a run, kill -9 it once it has written a record; the records it left."""
    before = len(finished(results))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and len(finished(results)) == before:
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return finished(results)


def test_a_suite_killed_on_ray_is_finished_locally(tmp_path, ray_address):
    """Killed on Ray (kill -9 of a driver that joined the cluster), finished locally:
    every record the killed run left is kept as it was, and none is written twice. A
    local run killed and resumed is tests/test_runner.py's; a suite started locally and
    finished on Ray is tests/test_ray_executor.py's."""
    results, suite = tmp_path / "results", write_suite(tmp_path)
    run = ["run", "--suite", suite, "--results", str(results)]
    on_ray = kill_after_a_new_record(
        [sys.executable, "-m", "benchmarks.cli", *run, "--executor", "ray",
         "--address", ray_address], results)
    assert 1 <= len(on_ray) < 4
    assert main([*run, "--executor", "local", "--workers", "1"]) == 0  # in this process
    after = finished(results)
    assert len(after) == 4 and all(after[name] == data for name, data in on_ray.items())
    assert len({json.loads(data)["cell_id"] for data in after.values()}) == 4
    assert all(record.ok for record in read_records(results))


def dying(attempts: Path, deaths_by_seed: dict[int, int]):
    """A Ray task of test_worker_pool.Dying: Ray takes a function, pickled by value,
    since its workers cannot import the tests."""

    def task(cell, data_dir):
        attempt = len(list(attempts.glob(f"{cell.cell_id}-*"))) + 1
        (attempts / f"{cell.cell_id}-{attempt}").touch()
        if attempt <= deaths_by_seed[cell.seed]:
            os._exit(1)
        return train_cell(cell, data_dir)

    return task


@pytest.mark.usefixtures("ray_address")
def test_a_cell_whose_worker_dies_is_retried_then_recorded_as_failed(tmp_path):
    results, attempts = tmp_path / "results", tmp_path / "attempts"
    attempts.mkdir()
    executor = RayExecutor(max_retries=1, task=dying(attempts, {0: 1, 1: 2}))
    assert runner.run(mini_at_epsilon_one(tmp_path), results, datasets.data_dir(),
                      executor=executor, echo=lambda line: None) == 1
    records = {record.seed: record for record in read_records(results)}
    assert records[0].ok  # died once, then trained on the retry
    assert not records[1].ok  # died on the try and on the one retry
    assert records[1].error.startswith("lost on Ray (retries allowed: 1): WorkerCrashedError")
    assert "\n" not in records[1].error
    assert records[1].provenance["device"] == "unknown: the worker died"
    tries = sorted(path.name.rsplit("-", 1)[1] for path in attempts.iterdir())
    assert tries == ["1", "1", "2", "2"]  # each cell: its try and its one retry
