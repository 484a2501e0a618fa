"""`privboard verify CELL_ID`: the smallest archived cells (a DP-ERM cell, a spread-LR
cell, a short LP-1ST cell) train again to the last digit on this machine, each re-run is
written as a verification record, a difference is reported with its probable cause, and
an unknown cell is refused with one line."""
from __future__ import annotations

import json

import pytest

from benchmarks import archive
from benchmarks.cli import main
from benchmarks.records import RunRecord, read_records
from benchmarks.verify import differences

# Archived smoke cells: DP-ERM objective perturbation, spread LR, LP-1ST (one epoch).
SMALLEST = {"a072e5ec225ec5e56d54": "dp-erm-objective", "41c8fbc4a32f81ad95af": "spread-lr",
            "fe83bdf604ad93bfa094": "lp-1st"}


@pytest.mark.parametrize("cell", sorted(SMALLEST))
def test_the_smallest_archived_cells_are_identical_when_run_again(cell, tmp_path, capfd):
    results = tmp_path / "results"
    assert main(["verify", cell, "--results", str(results)]) == 0, capfd.readouterr()
    verdict = capfd.readouterr().out.splitlines()[0]
    assert verdict.startswith("identical: ") and f" {SMALLEST[cell]} " in verdict
    [record] = read_records(results)
    assert record.kind == "verification" and record.verification["cell_id"] == cell
    assert record.verification["verdict"] == "identical"


def test_a_different_result_names_each_difference_and_its_probable_cause(tmp_path, capfd):
    """A local copy of an archived record whose accuracy was changed: the re-run differs
    in that metric alone, and the recorded commit is not this one."""
    cell = "41c8fbc4a32f81ad95af"
    results = tmp_path / "results"
    results.mkdir()
    record = json.loads((archive.ARCHIVE / "smoke" / f"{cell}.json").read_text())
    accuracy = record["metrics"]["accuracy_pct"]
    record["metrics"]["accuracy_pct"] = 12.5
    record["provenance"]["git_commit"] = "0" * 40
    (results / f"{cell}.json").write_text(json.dumps(record))
    assert main(["verify", cell, "--results", str(results), "--no-archive"]) == 1
    out = capfd.readouterr().out
    assert out.startswith("different: digits-7v9 spread-lr")
    assert f"metrics.accuracy_pct: 12.5 recorded, {accuracy} re-run" in out
    assert "probable cause: another commit (0000000000 recorded" in out
    verification = [r for r in read_records(results) if r.kind == "verification"]
    assert [r.verification["verdict"] for r in verification] == ["different"]


def test_a_different_spent_epsilon_is_different(tmp_path, capfd):
    """A local copy of an archived record that claims to have spent another epsilon: the
    re-run's metrics agree, its epsilon does not."""
    cell = "41c8fbc4a32f81ad95af"
    results = tmp_path / "results"
    results.mkdir()
    record = json.loads((archive.ARCHIVE / "smoke" / f"{cell}.json").read_text())
    spent = record["privacy"]["epsilon"]
    record["privacy"]["epsilon"] = spent / 2
    (results / f"{cell}.json").write_text(json.dumps(record))
    assert main(["verify", cell, "--results", str(results), "--no-archive"]) == 1
    out = capfd.readouterr().out
    assert out.startswith("different: digits-7v9 spread-lr")
    assert f"privacy.epsilon: {spent / 2} recorded, {spent} re-run" in out
    assert "metrics." not in out


def test_an_unknown_cell_is_refused_with_one_line(tmp_path, capsys):
    assert main(["verify", "0123456789abcdef0123", "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown cell '0123456789abcdef0123'" in err[0]
    assert list(tmp_path.iterdir()) == []



def test_a_fresh_audit_equals_its_stored_form():
    """An audited twin's re-run holds its audit in memory (noise checks as a tuple), the
    record read back from JSON (a list): the same result, no difference."""
    stored = json.loads((archive.ARCHIVE / "smoke" / "41c8fbc4a32f81ad95af.json").read_text())
    recorded, again = RunRecord.from_dict(stored), RunRecord.from_dict(stored)
    recorded.audit = {"epsilon_lower_bound": 0.5, "noise_checks": []}
    again.audit = {"epsilon_lower_bound": 0.5, "noise_checks": ()}
    assert differences(recorded, again) == {}
    again.audit = {"epsilon_lower_bound": 0.6, "noise_checks": ()}
    assert list(differences(recorded, again)) == ["audit.epsilon_lower_bound"]
