"""The audited twins' protocol: a method's new audit protocol gives its twins new cells and
leaves every configuration, run and other twin as it was; the twins of the earlier
protocol are superseded on the site."""
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from benchmarks import archive
from benchmarks.cli import main
from benchmarks.records import RunRecord
from benchmarks.registry import get_method
from benchmarks.suites import load_suite

from leaderboard_inputs import catalogued, rehashed

GAUSSIAN_RELEASES = {"dp-sgd", "labeldp-pro", "dp-sgd-scatternet", "dp-sgd-label-dp"}
# 3: the phantoms' worlds are the neighbouring relation's, the real coordinates' noise is
# checked, the claim test runs at its share of the verdict's level.
GAUSSIAN_PROTOCOL = 3


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
        assert get_method(cell.method).audit_protocol == (
            GAUSSIAN_PROTOCOL if cell.method in GAUSSIAN_RELEASES else 1)


def test_a_twin_record_hashes_to_its_protocols_cell():
    twin = next(r for r in archive.load()
                if r.is_audit and r.method == "dp-sgd" and r.audit_protocol == 1)
    assert "audit_protocol" not in twin.public_dict()
    data = {**twin.public_dict(), "audit_protocol": GAUSSIAN_PROTOCOL}
    with pytest.raises(Exception, match="hash"):  # the old cell id, now of protocol 3
        RunRecord.from_dict(data)
    cell = next(c for c in load_suite(twin.suite).cells
                if c.audit and c.config_id == twin.config_id)
    moved = RunRecord.from_dict({**data, "cell_id": cell.cell_id})
    assert moved.public_dict()["audit_protocol"] == GAUSSIAN_PROTOCOL
    assert moved.cell_id == cell.cell_id


def test_the_earlier_protocols_twins_are_superseded_and_the_others_shown():
    """The archive keeps the Gaussian releases' twins of protocol 1 beside their re-runs;
    only the re-runs, which tested their claims, are shown (the archive's catalogue says
    which protocol is current: its runs' code's)."""
    import reports

    rows = reports.load_rows(results=None)
    audited = rows.dropna(subset=["audited_epsilon"])
    gaussian = audited[audited["method"].isin(GAUSSIAN_RELEASES)]
    assert {"dp-sgd", "labeldp-pro", "dp-sgd-scatternet"} <= set(gaussian["method"])
    assert gaussian["claim_epsilon"].notna().all()
    assert {"lp-1st", "alibi"} <= set(audited["method"])


def test_run_takes_only_the_cells_it_is_given(capsys):
    cells = load_suite("smoke").cells
    assert main(["run", "--suite", "smoke", "--cells", f"{cells[0].cell_id}, {cells[1].cell_id}",
                 "--dry-run", "--results", "/nonexistent-results"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed[:-1]] == [cells[0].cell_id, cells[1].cell_id]


def dp_sgd_twin(run: dict, protocol: int, rejected: bool) -> dict:
    """A twin of the golden DP-SGD run, audited under ``protocol``."""
    release = {"epsilon_lower_bound": 0.5, "guesses": 1000, "correct": 680, "ceiling": 3.5,
               "where": ["DP-SGD noisy clipped sum"], "canaries": 100_000,
               "observed": "each phantom canary's coordinate of the 100 noisy releases"}
    if protocol > 1:
        release["claim_test"] = {
            "rejected": rejected, "claimed_epsilon": 1.83, "empirical_epsilon": 1.31,
            "empirical_noise_scale": 1.3, "delta": 1e-5, "confidence": 0.975,
            "canaries": 500_000, "guesses": [1000], "correct": [702],
            "claim": "DP-SGD (Poisson-sampled Gaussian): noise multiplier 1.7, sampling rate "
                     "0.004, 100 steps; composed by the PLD accountant (dp_accounting)",
            "test": "f-DP in one run (Mahloujifar, Melis, Chaudhuri 2025)"}
    audit = {"canaries": 1000, "canary_kind": "inclusion", "ceiling": 5.5, "claimed_delta": 1e-5,
             "claimed_epsilon": run["epsilon"], "confidence": 0.95, "correct": 300,
             "dataset": run["dataset"], "epsilon_lower_bound": 0.0, "flagged": rejected,
             "guesses": 500, "method": "dp-sgd", "notion": "golden", "release": release,
             "seconds": 60.0, "seed": 0, "training_examples": 60000}
    twin = {**run, "kind": "audit", "metrics": {}, "audit": audit,
            **({"audit_protocol": protocol} if protocol > 1 else {})}
    return rehashed(twin)


@pytest.mark.parametrize("rejected", [  # a site each, 7 s: the rejected one in this tier
    pytest.param(False, marks=pytest.mark.integration), True], ids=["not-rejected", "rejected"])
def test_the_site_shows_a_tested_claims_verdict_and_empirical_epsilon(tmp_path, rejected):
    import reports

    golden = Path(__file__).parent / "golden" / "records"
    records = tmp_path / "records"
    shutil.copytree(golden, records)
    run = json.loads((golden / "mnist-dpsgd-e2-s0.json").read_text())
    for protocol in (1, GAUSSIAN_PROTOCOL):
        twin = dp_sgd_twin(run, protocol, rejected)
        (records / f"{twin['cell_id']}.json").write_text(json.dumps(twin))
    site = tmp_path / "site"
    html = reports.build(catalogued(records, tmp_path / "catalogued"), site).read_text()
    assert "emp. ε 1.31" in html
    assert ("✗ refuted" if rejected else "✓ claim not rejected") + " at 5%" in html
    assert "1 record of 1 configuration" in html  # the protocol-1 twin, superseded
    cell = (site / "cells" / f"{run['config_id']}.html").read_text()
    assert "The claimed trade-off curve (DP-SGD (Poisson-sampled Gaussian)" in cell
    assert ("rejected" if rejected else "not rejected") + "</strong> at level 2.5%" in cell
    assert "Empirical ε 1.310" in cell and "not a lower bound" in cell
    assert "Its tests together at the level 5%" in cell


def test_a_claim_whose_run_rejects_no_curve_of_its_family_shows_no_empirical_epsilon(
        tmp_path):
    """Where even 4 times the claim's noise is not rejected, the record's empirical
    epsilon is 0: the site shows none, never "emp. ε 0.00", which would read as no
    leakage."""
    import reports

    golden = Path(__file__).parent / "golden" / "records"
    records = tmp_path / "records"
    shutil.copytree(golden, records)
    run = json.loads((golden / "mnist-dpsgd-e2-s0.json").read_text())
    twin = dp_sgd_twin(run, GAUSSIAN_PROTOCOL, rejected=False)
    twin["audit"]["release"]["claim_test"].update(empirical_epsilon=0.0,
                                                  empirical_noise_scale=None)
    (records / f"{twin['cell_id']}.json").write_text(json.dumps(twin))
    site = tmp_path / "site"
    html = reports.build(catalogued(records, tmp_path / "catalogued"), site).read_text()
    assert "emp. ε: none rejected" in html and "emp. ε 0.00" not in html
    cell = (site / "cells" / f"{run['config_id']}.html").read_text()
    assert "No empirical ε: the run rejects none of the claim's curves" in cell
