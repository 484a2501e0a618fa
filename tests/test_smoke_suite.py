"""End to end: the smoke suite runs every method family through the CLI and the
leaderboard is built from its records."""
import csv

from benchmarks.cli import main
from benchmarks.records import read_records
from benchmarks.registry import all_methods
from benchmarks.suites import load_suite


def test_smoke_suite_runs_and_reports(tmp_path, smoke_results):
    results, site = smoke_results, tmp_path / "site"
    records = list(read_records(results))
    runnable = [c for c in load_suite("smoke").cells if not c.skip]
    assert len(records) == len(runnable)
    assert all(r.ok for r in records)
    assert {r.method for r in records} == {c.method for c in runnable}
    assert main(["report", "--results", str(results), "--out", str(site)]) == 0
    with open(site / "rows.csv") as f:
        ours = [row for row in csv.DictReader(f) if row.get("suite") == "smoke"]
    assert {row["method"] for row in ours} == {c.method for c in runnable}


def test_every_method_family_is_in_the_smoke_suite():
    in_smoke = {c.method for c in load_suite("smoke").cells}
    families = {cls.__module__ for cls in all_methods().values()}
    covered = {all_methods()[name].__module__ for name in in_smoke}
    assert covered == families
