"""The local executor with several workers: resuming after kill -9, a worker that dies
retried then recorded as failed, and a cache entry that cells side by side want trained
once. Its records equal one worker's: tests/test_smoke_suite.py."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from benchmarks import datasets, runner
from benchmarks.cli import main
from benchmarks.records import read_records
from benchmarks.suites import load_suite
from benchmarks.worker_pool import WorkerPool
from test_runner import finished, write_suite  # the runner tests' 4-cell suite


@pytest.mark.integration
def test_two_workers_killed_with_kill_minus_nine_then_resumed(tmp_path):
    """Killed once a record exists: its workers end with it, every record it left is
    kept as it was, and the resumed run writes each missing cell once."""
    results, suite = tmp_path / "results", write_suite(tmp_path)
    cmd = [sys.executable, "-m", "benchmarks.cli", "run", "--suite", suite,
           "--results", str(results), "--workers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and not finished(results):
        time.sleep(0.1)
    workers = psutil.Process(proc.pid).children(recursive=True)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    _, alive = psutil.wait_procs(workers, timeout=120)
    for process in alive:  # not the behaviour asked for: fail, but leave no process
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    assert not alive, "a worker outlived the killed run"
    first = finished(results)
    assert 1 <= len(first) < 4
    assert main(cmd[3:]) == 0  # resumed in this process, with two workers again
    after = finished(results)
    assert len(after) == 4 and all(after[name] == data for name, data in first.items())
    assert len({json.loads(data)["cell_id"] for data in after.values()}) == 4
    assert all(record.ok for record in read_records(results))


@dataclasses.dataclass
class Dying:
    """A worker's task whose process dies the given number of times for each seed's cell
    before it trains the cell. Each attempt leaves a file: a dead worker keeps no count
    in memory. Picklable, for worker processes and Ray tasks alike."""

    attempts: Path
    deaths_by_seed: dict[int, int]

    def __call__(self, cell, data_dir, progress=None):
        attempt = len(list(self.attempts.glob(f"{cell.cell_id}-*"))) + 1
        (self.attempts / f"{cell.cell_id}-{attempt}").touch()
        if attempt <= self.deaths_by_seed[cell.seed]:
            os._exit(1)
        return runner.train_in_worker(cell, data_dir, progress)


def mini_at_epsilon_one(tmp_path: Path):
    mini = load_suite(write_suite(tmp_path))
    return dataclasses.replace(mini, cells=tuple(c for c in mini.cells if c.epsilon == 1))


@pytest.mark.integration
def test_a_cell_whose_worker_dies_is_retried_then_recorded_as_failed(tmp_path):
    results, attempts = tmp_path / "results", tmp_path / "attempts"
    attempts.mkdir()
    pool = WorkerPool(2, max_retries=1, task=Dying(attempts, {0: 1, 1: 2}))
    assert runner.run(mini_at_epsilon_one(tmp_path), results, datasets.data_dir(),
                      executor=pool, echo=lambda line: None) == 1
    records = {record.seed: record for record in read_records(results)}
    assert records[0].ok  # died once, then trained on the retry
    assert not records[1].ok  # died on the try and on the one retry
    assert records[1].error == ("lost in a local worker (retries allowed: 1): its process "
                                "exited with code 1")
    assert records[1].provenance["device"] == "unknown: the worker died"
    tries = sorted(path.name.rsplit("-", 1)[1] for path in attempts.iterdir())
    assert tries == ["1", "1", "2", "2"]  # each cell: its try and its one retry


def _encoder_entry(data_dir: str, ready, answers) -> None:
    from methods.nn import ssl_encoder

    x = datasets.load("digits").train.x[:256]
    ready.wait()  # both processes ask at once
    features = ssl_encoder.encoder_features(
        x, None, data_dir=data_dir, seed=0,
        settings={"epochs": 1, "batch_size": 64, "projection_dim": 16})
    answers.put(features.cached)


@pytest.mark.integration
def test_two_processes_asking_for_one_cache_entry_train_it_once(tmp_path):
    """The SSL encoder's cache (PATE's teachers take the same lock): one process trains
    the entry, the other waits and loads it."""
    context = multiprocessing.get_context("spawn")
    ready, answers = context.Barrier(2), context.Queue()
    processes = [context.Process(target=_encoder_entry, args=(str(tmp_path), ready, answers))
                 for _ in range(2)]
    for process in processes:
        process.start()
    cached = sorted(answers.get(timeout=600) for _ in processes)
    for process in processes:
        process.join()
    assert cached == [False, True]
    assert len(list((tmp_path / "cache" / "encoders").glob("*.npz"))) == 1
