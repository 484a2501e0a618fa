"""The audited twins' protocol: a method's new audit protocol gives its twins new cells and
leaves every configuration, run and other twin as it was; the twins of the earlier
protocol are superseded on the site."""
import hashlib
import json

import pytest

from benchmarks import archive
from benchmarks.cli import main
from benchmarks.records import RunRecord
from benchmarks.registry import get_method
from benchmarks.suites import load_suite

GAUSSIAN_RELEASES = {"dp-sgd", "labeldp-pro", "dp-sgd-scatternet"}


def identity_before_protocols(config_id: str, seed: int, audit: bool) -> str:
    """The cell identity as records had it before audit protocols."""
    identity = {"config_id": config_id, "seed": seed}
    blob = json.dumps({**identity, "audit": True} if audit else identity, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


@pytest.mark.parametrize("suite", ["quick", "label-dp-small"])
def test_only_the_gaussian_releases_twins_change_cells(suite):
    for cell in load_suite(suite).cells:
        before = identity_before_protocols(cell.config_id, cell.seed, cell.audit)
        moved = cell.audit and cell.method in GAUSSIAN_RELEASES
        assert (cell.cell_id != before) == moved, cell.describe()
        assert get_method(cell.method).audit_protocol == (2 if cell.method in GAUSSIAN_RELEASES
                                                          else 1)


def test_a_twin_record_hashes_to_its_protocols_cell():
    twin = next(r for r in archive.load() if r.is_audit and r.method == "dp-sgd")
    assert twin.audit_protocol == 1 and "audit_protocol" not in twin.public_dict()
    data = {**twin.public_dict(), "audit_protocol": 2}
    with pytest.raises(Exception, match="hash"):  # the old cell id, now of protocol 2
        RunRecord.from_dict(data)
    cell = next(c for c in load_suite(twin.suite).cells
                if c.audit and c.config_id == twin.config_id)
    moved = RunRecord.from_dict({**data, "cell_id": cell.cell_id})
    assert moved.public_dict()["audit_protocol"] == 2 and moved.cell_id == cell.cell_id


def test_the_earlier_protocols_twins_are_superseded_and_the_others_shown():
    import reports

    rows = reports.load_rows(results=None)
    audited = rows.dropna(subset=["audited_epsilon"])
    assert not set(audited["method"]) & GAUSSIAN_RELEASES  # until their twins run again
    assert {"lp-1st", "alibi"} <= set(audited["method"])


def test_run_takes_only_the_cells_it_is_given(capsys):
    cells = load_suite("smoke").cells
    assert main(["run", "--suite", "smoke", "--cells", f"{cells[0].cell_id}, {cells[1].cell_id}",
                 "--dry-run", "--results", "/nonexistent-results"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed[:-1]] == [cells[0].cell_id, cells[1].cell_id]
