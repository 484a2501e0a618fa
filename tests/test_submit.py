"""privboard submit: a method from another package reaches the leaderboard only with its
privacy claim checked. The example package (examples/uniform-rr-plugin) goes from
install to a row on the site beside the archive; each broken variant
(tests/plugins/example_variants) is refused with its reason, and so is its bundle;
bad input stops with one line."""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from benchmarks import archive
from benchmarks.submission import bundle
from benchmarks.cli import main
from benchmarks.records import CATALOGUE
from benchmarks.privacy import randomizers
from plugins.installed import (EXAMPLE, HERE, ROOT, Submitted, dist_info, example_metadata,
                               installed_suite, submit)

VARIANTS = ("privboard-example-variants", "0.0.1", {"variants": "example_variants"})
# Every variant at epsilon 1 on digits, one seed: a run and its audited twin each.
SUITE = """name = "tiny-submissions"
[[block]]
datasets = ["digits"]
methods = ["uniform-rr-knn", "own-rr-knn", "true-labels-knn", "own-rr-3x-knn",
           "under-claimed-knn", "no-ledger-knn", "scratch-ledger-knn", "raises-mid-fit-knn",
           "second-model-knn"]
epsilons = [1]
seeds = [0]
"""
AUDIT_LINE = r"audited ε ≥ ([\d.]+) at [\d.]+% \({}\) exceeds the claim 1$"
REPLAY_LINE = (r"reads private data beside the layer's releases: with the labels altered and "
               r"the 1 release replayed, the prediction for test input \d+ moved from")
REPLAY_SCOPE = "the method contract (depends on private data only through"


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """The example and its variants installed; the tiny suite of them."""
    with installed_suite(tmp_path_factory.mktemp("plugins"), SUITE,
                         {str(EXAMPLE): example_metadata(), str(HERE): VARIANTS}) as path:
        yield path


@pytest.fixture(scope="module")
def submitted(suite, tmp_path_factory):
    """method -> its submission of the tiny suite (or of ``suite_file``, a path or a
    name), made once."""
    made: dict[tuple[str, Path | str], Submitted] = {}

    def submitted(method: str, suite_file: Path | str = suite) -> Submitted:
        if (method, suite_file) not in made:
            made[method, suite_file] = submit(method, suite_file,
                                              tmp_path_factory.mktemp("bundles") / "bundle")
        return made[method, suite_file]
    return submitted


def report(results: Path, out: Path, capsys, *flags: str) -> tuple[int, str]:
    code = main(["report", "--results", str(results), "--out", str(out), *flags])
    return code, capsys.readouterr().err


def public_files(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*")
            if path.is_file() and bundle.PRIVATE not in path.relative_to(folder).parts]


@pytest.mark.integration
def test_the_example_goes_from_install_to_a_row_on_the_site(submitted, tmp_path, capsys):
    """On the grid of the smoke suite, which names it nowhere: its datasets, epsilons and
    seeds, beside the archive's smoke rows."""
    done = submitted("uniform-rr-knn", "smoke")
    assert (done.code, done.failed) == (0, [])
    assert "digits uniform-rr-knn eps=2 seed=0" in done.err  # the progress bar, as run's

    manifest = json.loads((done.bundle / bundle.MANIFEST).read_text())
    assert manifest["passed"] and manifest["accounting"] == bundle.CHARGED_BY_CONSTRUCTION
    source = EXAMPLE / "uniform_rr_plugin" / "__init__.py"
    assert manifest["source"]["files"] == {
        "uniform_rr_plugin/__init__.py": "sha256:" + hashlib.sha256(
            source.read_bytes()).hexdigest()}
    assert manifest["plugin"]["package"] == "privboard-uniform-rr"
    assert manifest["environment"]["plugin"] == "privboard-uniform-rr 0.1.0"
    [replayed] = [check["found"] for check in manifest["checks"]
                  if check["check"].startswith("depends on private data only through")]
    assert replayed.startswith("1 release of randomized response replayed with the labels "
                               "altered: identical predictions (the replayed fit took ")
    submission = bundle.load(done.bundle)
    runs = [r for r in submission.records if r.kind == "run"]
    audits = [r for r in submission.records if r.is_audit]
    # digits at 2, 4 and inf (delta dropped: the method needs none), digits-7v9 and
    # breast-cancer at their epsilon and inf; a twin per private configuration
    assert sorted((r.dataset, r.epsilon, r.delta) for r in runs) == [
        ("breast-cancer", 1, 0), ("breast-cancer", math.inf, 0), ("digits", 2, 0),
        ("digits", 4, 0), ("digits", math.inf, 0), ("digits-7v9", math.log(4), 0),
        ("digits-7v9", math.inf, 0)]
    assert len(audits) == 4
    for audit in audits:  # four twins share 4% of the submission's 5%: each at 1%
        assert audit.audit["release"]["where"] == ["randomized response"]
        assert audit.audit["confidence"] == pytest.approx(0.99)

    # The kept share of the private labels is a private diagnostic: in private/ only.
    private = [json.loads(path.read_text())["kept_label_share"]
               for path in (done.bundle / bundle.PRIVATE).glob("*.json")]
    assert len(private) == 11
    # (at epsilon = inf every label is kept: a share of 1 is no secret)
    secrets = {text for share in private if 0 < share < 1
               for text in (repr(share), f"{share:.6g}")}
    assert secrets
    # Beside the archive's smoke suite alone: the whole archive is test_archive's.
    store, site = tmp_path / "archive", tmp_path / "site"
    shutil.copytree(archive.ARCHIVE / "smoke", store / "smoke")
    shutil.copy(archive.ARCHIVE / CATALOGUE, store)  # its configurations are current
    assert report(done.bundle, site, capsys, "--archive", str(store)) == (0, "")
    for path in public_files(done.bundle) + public_files(site):
        text = path.read_text(errors="ignore")
        assert path.suffix != ".json" or '"diagnostics"' not in text, path
        assert not {secret for secret in secrets if secret in text}, path

    index = (site / "tables.html").read_text()
    digits = index[index.index('id="digits"'):]
    digits = digits[:digits.index("</section>")]
    assert "<strong>lp-1st</strong>" in digits  # the archive's smoke suite, beside it
    row = digits[digits.index("<strong>uniform-rr-knn</strong>"):]
    row = row[:row.index("</tr>")]
    assert "third-party" in row and "privboard-uniform-rr 0.1.0" in row
    assert "charged by construction" in row and "at release ≥" in row
    rows = pd.read_csv(site / "rows.csv")
    mine = rows[rows["method"] == "uniform-rr-knn"]
    assert len(mine) == 7 and set(mine["source"]) == {"third-party"}
    assert set(mine["suite"]) == {"smoke"} and (mine["n"] == 1).all()


@pytest.mark.parametrize("method, reason, scope, accounting", [
    ("true-labels-knn", REPLAY_LINE, REPLAY_SCOPE, bundle.NOT_RUN),
    ("second-model-knn", REPLAY_LINE, REPLAY_SCOPE, bundle.NOT_RUN),
    ("own-rr-3x-knn", AUDIT_LINE.format("from the model"), "(audit)", bundle.SELF_ACCOUNTED),
    ("under-claimed-knn", r"the record claims epsilon 0\.5, delta 0, but its ledger's "
                          r"charges compose to epsilon 1, delta 0$", "seed=0",
     bundle.CHARGED_BY_CONSTRUCTION),
    ("no-ledger-knn", r"raised InputError: randomized response needs the run's privacy "
                      r"ledger to charge, got NoneType", "the method contract (fits",
     bundle.NOT_RUN),
    ("scratch-ledger-knn", r"randomized response was handed a ledger that is not the "
                           r"run's: its release is charged to no record$",
     "the method contract (charges the run's ledger", bundle.NOT_RUN),
])
def test_a_broken_submission_is_refused_with_its_reason(submitted, method, reason, scope,
                                                        accounting, tmp_path, capsys):
    done = submitted(method)
    assert done.code == 1
    assert any(re.search(reason, line) and scope in line for line in done.failed), done.failed
    manifest = json.loads((done.bundle / bundle.MANIFEST).read_text())
    assert (manifest["passed"], manifest["accounting"]) == (False, accounting)
    code, err = report(done.bundle, tmp_path / "site", capsys, "--no-archive")
    assert code == 2 and "is refused" in err and re.search(reason, err.strip()), err
    assert not (tmp_path / "site").exists()


def test_an_honest_self_accounted_method_passes_and_the_site_says_so(submitted, tmp_path,
                                                                    monkeypatch, capsys):
    """The site is built as the archive's is: without TensorFlow, from the bundle's
    records, the baselines and its catalogue."""
    done = submitted("own-rr-knn")
    assert (done.code, done.failed) == (0, [])
    manifest = json.loads((done.bundle / bundle.MANIFEST).read_text())
    assert manifest["accounting"] == bundle.SELF_ACCOUNTED
    assert manifest["own_charges"] == ["my randomized response"]
    assert "not replayable: self-accounted (it charges my randomized response itself" in [
        check["found"] for check in manifest["checks"]
        if check["check"].startswith("depends on private data only through")][0]
    site = tmp_path / "site"
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # any import of it fails
    assert report(done.bundle, site, capsys, "--no-archive") == (0, "")
    index = (site / "tables.html").read_text()
    row = index[index.index("<strong>own-rr-knn</strong>"):]
    row = row[:row.index("</tr>")]
    assert "self-accounted" in row and "my randomized response" in row
    assert "its audit is its only check" in row
    for page in ("methods/own-rr-knn.html", f"cells/{row.split('cells/')[1][:20]}.html"):
        assert "privboard-example-variants 0.0.1" in (site / page).read_text(), page


def test_a_leak_of_three_times_the_claim_through_the_layer_is_caught_at_the_release(
        suite, tmp_path, monkeypatch, capsys):
    real = randomizers._randomize
    monkeypatch.setattr(randomizers, "_randomize", lambda labels, priors, k, epsilon, rng:
                        real(labels, priors, k, 3 * epsilon, rng))
    code = main(["submit", "--method", "uniform-rr-knn", "--suite", str(suite), "--out",
                 str(tmp_path / "bundle")])
    failed = capsys.readouterr().out
    assert code == 1
    found = re.search(r"\(audit\): " + AUDIT_LINE.format("at the release").rstrip("$"),
                      failed)
    assert found and float(found.group(1)) > 1.5, failed


def test_a_method_that_raises_mid_fit_is_refused_in_one_line_and_leaves_no_part(submitted):
    done = submitted("raises-mid-fit-knn")
    assert done.code == 1
    assert done.failed == ["digits raises-mid-fit-knn eps=1 seed=0: RuntimeError: the "
                           "method failed; its message may quote the training data, so it "
                           "is kept with the private diagnostics"]
    assert [path.name for path in done.bundle.parent.iterdir()] == ["bundle"]  # no staging
    # The message quotes released labels: in the private diagnostics, nowhere public.
    private = [json.loads(p.read_text()) for p in (done.bundle / bundle.PRIVATE).glob("*")]
    assert any("out of memory after the release of" in d["error"] for d in private)
    assert not any("out of memory" in p.read_text() for p in public_files(done.bundle))
    with pytest.raises(bundle.BundleError, match="1 check.* failed: digits raises-mid"):
        bundle.load(done.bundle)


def test_a_bundle_that_does_not_match_its_digests_or_its_checks_is_refused(
        submitted, tmp_path, capsys):
    honest, leaky = tmp_path / "honest", tmp_path / "leaky"
    shutil.copytree(submitted("uniform-rr-knn").bundle, honest)
    shutil.copytree(submitted("own-rr-3x-knn").bundle, leaky)
    run = next(p for p in honest.glob("*.json")
               if json.loads(p.read_text()).get("kind") == "run")
    record = json.loads(run.read_text())
    record["metrics"]["accuracy_pct"] = 99.9
    run.write_text(json.dumps(record))
    code, err = report(honest, tmp_path / "site", capsys, "--no-archive")
    assert code == 2 and f"{run} does not match its digest" in err

    # Its digest taken out of the manifest: nothing to check it against.
    manifest = json.loads((honest / bundle.MANIFEST).read_text())
    del manifest["records"][run.name]["sha256"]
    (honest / bundle.MANIFEST).write_text(json.dumps(manifest))
    code, err = report(honest, tmp_path / "site", capsys, "--no-archive")
    assert code == 2 and f"bundle file {run} has no digest" in err
    assert len(err.strip().splitlines()) == 1

    # Checks marked as passed by hand: the records still show the audit above its claim.
    manifest = json.loads((leaky / bundle.MANIFEST).read_text())
    manifest["passed"] = True
    for check in manifest["checks"]:
        check.update(passed=True, line="")
    (leaky / bundle.MANIFEST).write_text(json.dumps(manifest))
    code, err = report(leaky, tmp_path / "site", capsys, "--no-archive")
    assert code == 2 and "exceeds its claim" in err


def test_a_plugin_whose_import_fails_stops_with_one_line_naming_its_package(tmp_path):
    """As a user meets it: a fresh process, with the broken package installed."""
    site = tmp_path / "site"
    dist_info(site, "privboard-broken-import", "0.1.0", {"broken": "broken_import_plugin"})
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(HERE), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "benchmarks.cli", "submit", "--method",
                           "anything", "--suite", "smoke", "--out", str(tmp_path / "b")],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "privboard: error: the plugin package privboard-broken-import 0.1.0 failed to "
        "import its entry point broken = broken_import_plugin (privboard.methods): "
        "ModuleNotFoundError: No module named 'privboard_dependency_that_is_not_installed'"]


@pytest.mark.parametrize("argv, message", [
    (["--method", "uniform-rr-kn"], "unknown method 'uniform-rr-kn'; did you mean "
                                    "'uniform-rr-knn'?"),
    (["--method", "lp-1st"], "lp-1st is one of privboard's own methods"),
    (["--method", "uniform-rr-knn", "--suite", "{ratings_only}"],
     "suite ratings has no cells that uniform-rr-knn can run (its datasets: movielens-1m)"),
    (["--method", "uniform-rr-knn", "--seeds", "0,0"], "--seeds takes distinct integers"),
    (["--method", "uniform-rr-knn", "--out", "{not_a_bundle}"], "exists and is not a bundle"),
])
def test_bad_input_stops_with_one_line(suite, argv, message, tmp_path, capsys):
    not_a_bundle = tmp_path / "mine"
    not_a_bundle.mkdir()
    (not_a_bundle / "notes.txt").write_text("keep me")
    ratings_only = tmp_path / "ratings.toml"
    ratings_only.write_text('[[block]]\ndatasets = ["movielens-1m"]\nmethods = ["lp-1st"]\n'
                            'epsilons = [1]\nseeds = [0]\n')
    args = {"--suite": str(suite), "--out": str(tmp_path / "bundle")}
    for flag, value in zip(argv[::2], argv[1::2]):
        args[flag] = value.format(not_a_bundle=not_a_bundle, ratings_only=ratings_only)
    code = main(["submit", *[item for pair in args.items() for item in pair]])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "bundle").exists()
    assert (not_a_bundle / "notes.txt").read_text() == "keep me"


def test_help_describes_the_checks(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["submit", "--help"])
    assert exited.value.code == 0
    assert "--method METHOD" in capsys.readouterr().out


def test_every_test_of_an_audits_verdict_is_a_check_at_its_level():
    """A noise check below its charge (DP-ERM's and GNMax's releases, which a one-run
    bound cannot see) fails a check with its figure and level; so does a rejected claimed
    curve; the bounds are checks too, each at its level (benchmarks.audit.levels), so
    that what submit passes the bundle's reader never refuses."""
    from benchmarks.submission.submit import audit_checks

    audit = {"claimed_epsilon": 1.0, "claimed_delta": 0.0, "confidence": 0.99,
             "canaries": 100, "guesses": 50, "correct": 30, "release": None,
             "noise_checks": [{"mechanism": "output perturbation", "claim": "Gamma(d, 2/ε)",
                               "measured": "mean radius 0.5", "p_value": 1e-5,
                               "flagged": True}]}
    checks = audit_checks(audit, "a cell")
    assert [check.check for check in checks] == [
        "the audit from the model stays within the claim",
        "the noise of output perturbation is as charged"]
    assert [check.line for check in checks if not check.passed] == [
        "the noise of output perturbation is below its charge (Gamma(d, 2/ε)): mean "
        "radius 0.5, p = 1e-05 at level 0.2%"]
    audit["noise_checks"] = [{"mechanism": "DP-SGD noisy clipped sum, its real coordinates",
                              "claim": "the noise of its phantom coordinates",
                              "measured": "noise variance 1.0002 of the phantoms'",
                              "p_value": 0.6, "flagged": False}]
    audit["release"] = {"canaries": 100_000, "guesses": 1000, "correct": 560, "claim_test": {
        "rejected": True, "claim": "DP-SGD: noise multiplier 1", "canaries": 500_000}}
    assert [check.line for check in audit_checks(audit, "a cell") if not check.passed] == [
        "the claimed curve (DP-SGD: noise multiplier 1) is rejected at level 0.5% on 500000 "
        "phantom canaries"]
    audit["release"]["claim_test"]["rejected"] = False
    assert all(check.passed for check in audit_checks(audit, "a cell"))
    audit["correct"] = 50  # every guess of the model right: a bound above the claim
    [failed] = [check.line for check in audit_checks(audit, "a cell") if not check.passed]
    assert re.fullmatch(AUDIT_LINE.format("from the model"), failed), failed


class Stop(Exception):
    pass


def test_each_audited_twin_of_a_submission_runs_at_its_share_of_the_4_percent(
        tmp_path, monkeypatch):
    """The k audited twins of a submission share 4% of its 5%: each cell is run with its
    bounds at 1 - 4%/k (the first cell run tells), k the twins of LP-1ST on the quick
    suite's grid."""
    from benchmarks import runner
    from benchmarks.registry import get_method
    from benchmarks.submission import submit as submission
    from benchmarks.suites import load_suite

    cells = submission.cells_of(load_suite("quick", grid_for="lp-1st"), get_method("lp-1st"))
    given = []

    def run_cell(cell, data, context, audit_confidence):
        given.append(audit_confidence)
        raise Stop

    class NoData:
        def get(self, name, data_dir):
            return None

    monkeypatch.setattr(runner, "run_cell", run_cell)
    monkeypatch.setattr(runner, "DatasetSlot", NoData)
    with pytest.raises(Stop):
        submission.run_cells(cells, tmp_path)
    twins = sum(cell.audit for cell in cells)
    assert twins > 1 and given == [pytest.approx(1 - 0.04 / twins)]


@pytest.mark.integration  # a site built: tens of seconds
def test_one_report_shows_local_runs_and_several_bundles_each_with_its_facts(
        submitted, tmp_path, capsys):
    """What make publish runs: one's own runs and any number of bundles in one site, each
    third-party row beside its own bundle's package and mark; two bundles of one method
    are refused."""
    honest, own = submitted("uniform-rr-knn").bundle, submitted("own-rr-knn").bundle
    results, site = tmp_path / "results", tmp_path / "site"
    results.mkdir()
    shutil.copy(archive.ARCHIVE / CATALOGUE, results)  # as privboard run writes one
    for path in (archive.ARCHIVE / "smoke").glob("*.json"):
        if json.loads(path.read_text()).get("method") == "lp-1st":
            shutil.copy(path, results)
    assert main(["report", "--results", str(results), str(honest), str(own), "--no-archive",
                 "--out", str(site)]) == 0
    rows = pd.read_csv(site / "rows.csv")
    assert set(rows[(rows["method"] == "lp-1st") & (rows["n"] > 0)]["source"]) == {"this machine"}
    tables = (site / "tables.html").read_text()
    for method, package, mark in (
            ("uniform-rr-knn", "privboard-uniform-rr 0.1.0", "charged by construction"),
            ("own-rr-knn", "privboard-example-variants 0.0.1", "self-accounted")):
        assert set(rows[rows["method"] == method]["source"]) == {"third-party"}
        row = tables[tables.index(f"<strong>{method}</strong>"):]
        row = row[:row.index("</tr>")]
        assert package in row and mark in row, method
        assert package in (site / "how-to-read.html").read_text()
    assert ("the third-party submissions of privboard-uniform-rr 0.1.0, "
            "privboard-example-variants 0.0.1") in (site / "index.html").read_text()

    again = tmp_path / "again.bundle"
    shutil.copytree(honest, again)
    assert main(["report", "--results", str(honest), str(again), "--no-archive", "--out",
                 str(tmp_path / "other")]) == 2
    assert f"bundles {honest} and {again} both submit uniform-rr-knn" in capsys.readouterr().err
