"""End to end: the smoke suite runs every method family through the CLI and the
leaderboard is built from its records; one worker and several give the same records."""
import csv
import dataclasses
import json
from pathlib import Path

import pytest

from benchmarks import datasets, runner
from benchmarks.cli import main
from benchmarks.executors import default_workers
from benchmarks.records import CATALOGUE, read_records
from benchmarks.registry import all_methods
from benchmarks.suites import load_suite
from benchmarks.worker_pool import WorkerPool


@pytest.mark.integration
def test_smoke_suite_runs_and_reports(tmp_path, smoke_results):
    results, site = smoke_results, tmp_path / "site"
    records = list(read_records(results))
    runnable = [c for c in load_suite("smoke").cells if not c.skip]
    assert len(records) == len(runnable)
    assert all(r.ok for r in records)
    assert {r.method for r in records} == {c.method for c in runnable}
    assert main(["report", "--results", str(results), "--out", str(site), "--no-archive"]) == 0
    with open(site / "rows.csv") as f:
        ours = [row for row in csv.DictReader(f) if row.get("suite") == "smoke"]
    assert {row["method"] for row in ours} == {c.method for c in runnable}


def test_every_method_family_is_in_the_smoke_suite():
    in_smoke = {c.method for c in load_suite("smoke").cells}
    families = {cls.__module__ for cls in all_methods().values()}
    covered = {all_methods()[name].__module__ for name in in_smoke}
    assert covered == families


TIMING = ("wall_time_s", "started_at", "finished_at")
# One smoke cell of each kind of training: Keras fit, a traced step drawing from a
# seeded generator, teachers and an aggregator, a NumPy solver, EM on NumPy.
ONE_OF_EACH_KIND = {"lp-1st", "dp-sgd", "pate-confident-gnmax", "dp-erm-objective",
                    "spread-lr"}


def comparable(results: Path) -> dict[str, dict]:
    """Every record by file name, without its timing: metrics, privacy, provenance and
    diagnostics included."""
    return {path.name: {k: v for k, v in json.loads(path.read_text()).items()
                        if k not in TIMING}
            for path in results.glob("*.json") if path.name != CATALOGUE}


@pytest.mark.integration
def test_one_worker_and_several_give_the_same_records(tmp_path, smoke_results):
    """The smoke suite's records (most of them trained one after another in one process:
    tests/conftest.py) against one cell of each kind run by the default executor, two or
    more worker processes side by side, each cell in a fresh one."""
    workers = max(2, default_workers())
    smoke = load_suite("smoke")
    cells = list({c.method: c for c in smoke.cells
                  if c.method in ONE_OF_EACH_KIND and not c.skip}.values())
    suite = dataclasses.replace(smoke, cells=tuple(cells))
    results = tmp_path / "results"
    assert runner.run(suite, results, datasets.data_dir(), echo=lambda line: None,
                      executor=WorkerPool(workers)) == 0
    names = {f"{c.cell_id}.json" for c in cells}
    expected = {name: r for name, r in comparable(smoke_results).items() if name in names}
    assert len(expected) == len(cells) == len(ONE_OF_EACH_KIND)
    assert comparable(results) == expected
