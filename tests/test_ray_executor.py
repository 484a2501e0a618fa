"""Suites on Ray: records equal to the local executor's with default flags, resuming
across executors in both directions, and a cell whose worker dies retried, then recorded
as failed."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from benchmarks import datasets, runner
from benchmarks.cli import main
from benchmarks.ray_executor import RayExecutor, train_cell
from benchmarks.records import read_records
from benchmarks.suites import load_suite
from test_runner import finished, write_suite  # the runner tests' 4-cell suite
from conftest import CACHING
from test_smoke_suite import comparable
from test_worker_pool import mini_at_epsilon_one

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance for the tests that run in this process; an executor uses
    a running instance instead of starting its own."""
    ray.init(address="local", include_dashboard=False)
    yield
    ray.shutdown()


def kill_after_a_new_record(cmd: list[str], results: Path) -> dict[str, bytes]:
    """Start a run, kill -9 it once it has written a record; the records it left."""
    before = len(finished(results))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and len(finished(results)) == before:
        time.sleep(0.1)
    started = psutil.Process(proc.pid).children(recursive=True)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # Ray's agents outlive a killed driver by a minute or so; none of its processes can
    # write a record (the driver writes them all), so they are simply stopped here.
    for process in started:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(started, timeout=30)
    return finished(results)


# First in the file: its run on Ray starts a Ray instance of its own, better done before
# this module's shared instance exists.
def test_a_suite_killed_on_ray_is_finished_locally(tmp_path):
    """Killed on Ray (kill -9 of the driver), finished locally: every record the killed
    run left is kept as it was, and none is written twice. A local run killed and resumed
    is tests/test_runner.py's; a suite started locally and finished on Ray is below."""
    results, suite = tmp_path / "results", write_suite(tmp_path)
    run = ["run", "--suite", suite, "--results", str(results)]
    on_ray = kill_after_a_new_record(
        [sys.executable, "-m", "benchmarks.cli", *run, "--executor", "ray"], results)
    assert 1 <= len(on_ray) < 4
    assert main([*run, "--executor", "local"]) == 0
    after = finished(results)
    assert len(after) == 4 and all(after[name] == data for name, data in on_ray.items())
    assert len({json.loads(data)["cell_id"] for data in after.values()}) == 4
    assert all(record.ok for record in read_records(results))


# What a Ray worker could do otherwise than a local one: the numerics pins of a
# TensorFlow method (DP-SGD) and of a numpy one (spread LR), and every cell that trains
# or reads a model cached in the data folder (the SSL encoder, PATE's teachers, the
# ScatterNet features). Every other smoke cell takes one of these paths.
ON_RAY = {"dp-sgd", "spread-lr"} | CACHING


def test_the_smoke_suite_on_ray_gives_the_local_records_bit_for_bit(tmp_path, local_ray,
                                                                   smoke_results):
    """Ray with its default flags against the local records (the smoke fixture's: most
    cells in one process, those that cache a model in fresh ones): a suite started
    locally (its first cell's record) is finished on Ray, which leaves that record as it
    was and trains the other cells to the local records' bits, metric for metric."""
    on_ray = tmp_path / "ray"
    smoke = load_suite("smoke")
    cells = [c for c in smoke.cells if c.method in ON_RAY and not c.skip]
    suite = dataclasses.replace(smoke, cells=tuple(cells))
    started = f"{cells[0].cell_id}.json"
    on_ray.mkdir()
    shutil.copy(smoke_results / started, on_ray / started)
    assert runner.run(suite, on_ray, datasets.data_dir(), echo=lambda line: None,
                      executor=RayExecutor()) == 0
    expected = {name: record for name, record in comparable(smoke_results).items()
                if name in {f"{c.cell_id}.json" for c in cells}}
    assert len(expected) == len(cells) >= len(ON_RAY)
    assert comparable(on_ray) == expected
    assert (on_ray / started).read_bytes() == (smoke_results / started).read_bytes()


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


def test_a_cell_whose_worker_dies_is_retried_then_recorded_as_failed(tmp_path, local_ray):
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


@pytest.mark.parametrize("argv, message", [
    (["--address", "localhost:6379"], "--address needs --executor ray"),
    (["--executor", "ray", "--cpus-per-cell", "0"], "--cpus-per-cell must be a number > 0"),
    (["--executor", "ray", "--gpus-per-cell", "nan"], "--gpus-per-cell must be a number >= 0"),
    (["--executor", "ray", "--gpus-per-cell", "0.00001"], "Ray refuses the resources"),
    (["--executor", "ray", "--max-retries", "-1"], "--max-retries must be >= 0"),
    (["--executor", "ray", "--address", "127.0.0.1:1"],
     "cannot join the Ray cluster at 127.0.0.1:1: Connection refused"),
    (["--workers", "0"], "--workers must be >= 1, got 0"),
    (["--workers", "2", "--executor", "ray"], "--workers needs --executor local"),
    (["--workers", "1", "--max-retries", "2"], "--max-retries needs --workers 2 or more"),
    (["--workers", "2", "--max-retries", "-1"], "--max-retries must be >= 0"),
])
def test_bad_executor_options_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    results = tmp_path / "results"
    assert main(["run", "--suite", "smoke", "--results", str(results), *argv]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1
    assert not results.exists()


def test_listing_status_and_help_import_neither_tensorflow_nor_ray(tmp_path):
    code = ("import contextlib, io, sys\n"
            "from benchmarks.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['list'])\n"
            f"    main(['status', '--suite', 'smoke', '--results', {str(tmp_path)!r}])\n"
            "    try: main(['run', '--help'])\n"
            "    except SystemExit: pass\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'ray'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
