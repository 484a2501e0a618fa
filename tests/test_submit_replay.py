"""privboard submit against methods that read private data where a loose replay would not
look (tests/plugins/replay_variants): under full DP the last records of the training
set; beside a release that cannot be replayed, the rows it does not read; a second
release made only on some data; a charge described by the private labels. Each is
refused by the contract's replay check, before its suite runs; a method with a release
that cannot be replayed and nothing else to hide passes, marked with that release, not
charged by construction."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from benchmarks.submission import bundle, contract_checks
from benchmarks.cli import main
from benchmarks.submission.ledger_watch import watch
from benchmarks.privacy import Ledger, noise_checks, records
from benchmarks.privacy.erm_noise import objective_perturbation_noise
from plugins.installed import EXAMPLE, HERE, example_metadata, installed_suite, submit

PACKAGE = ("privboard-replay-variants", "0.0.1", {"replay": "replay_variants"})
SUITE = """name = "tiny-replay-submissions"
[[block]]
datasets = ["digits"]
methods = ["noisy-centroids-validated", "noisy-centroids-described"]
epsilons = [1]
delta = 1e-5
seeds = [0]

[[block]]
datasets = ["digits"]
methods = ["one-row-not-replayed-knn", "one-row-not-replayed-honest-knn",
           "second-release-knn"]
epsilons = [1]
seeds = [0]
"""
LEAK = r"reads private data beside the layer's releases: with {} altered"
SCOPE = "the method contract (depends on private data only through"


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    with installed_suite(tmp_path_factory.mktemp("plugins"), SUITE,
                         {str(EXAMPLE): example_metadata(), str(HERE): PACKAGE}) as path:
        yield path


def test_the_honest_full_dp_method_is_replayed_with_every_record_altered(suite):
    from replay_variants import NoisyCentroids

    outcomes, _ = contract_checks.run_all(NoisyCentroids)
    assert [line for _, line, _ in outcomes if line] == []
    [found] = [found for name, _, found in outcomes if name.startswith("depends on")]
    assert found.startswith("1 release of Gaussian mean of clipped vectors replayed with all "
                            "240 records altered: identical predictions"), found


@pytest.mark.parametrize("method, reason", [
    # every record altered under full DP: the validation split at the end moves too
    ("noisy-centroids-validated", LEAK.format("all 240 records")
     + r" and the 1 release replayed, the prediction for test input \d+ moved"),
    # the release that cannot be replayed keeps the first label; the others are altered
    ("one-row-not-replayed-knn", LEAK.format("the labels of 239 of the 240 examples")
     + r" and the 1 release replayed, the prediction for test input \d+ moved"),
    # releases and charges match in number and order, touches compared with the examples
    ("second-release-knn", LEAK.format("the labels") + r", charge 2 \(randomized "
                                                       r"response\) came after the 1 charge"),
    ("noisy-centroids-described", LEAK.format("all 240 records")
     + r", charge 1 \(Gaussian mean of clipped vectors\) had another touches than in the "
       r"recorded fit"),
])
def test_a_read_the_replay_once_missed_is_refused(suite, method, reason, tmp_path):
    done = submit(method, suite, tmp_path / "bundle")
    assert done.code == 1
    assert any(re.search(reason, line) and SCOPE in line for line in done.failed), done.failed
    manifest = json.loads((done.bundle / bundle.MANIFEST).read_text())
    assert (manifest["passed"], manifest["accounting"]) == (False, bundle.NOT_RUN)


def test_a_release_that_cannot_be_replayed_is_named_and_never_charged_by_construction(
        suite, tmp_path, capsys):
    done = submit("one-row-not-replayed-honest-knn", suite, tmp_path / "bundle")
    assert (done.code, done.failed) == (0, [])
    manifest = json.loads((done.bundle / bundle.MANIFEST).read_text())
    assert manifest["accounting"] == (
        "charged by the privacy layer, not replayed: objective perturbation (its "
        "minimiser is computed outside the layer)")
    [replayed] = [check["found"] for check in manifest["checks"]
                  if check["check"].startswith("depends on private data only through")]
    assert replayed.startswith("1 release of randomized response replayed with the labels "
                               "of 239 of the 240 examples altered: identical predictions; "
                               "not replayed: objective perturbation"), replayed
    code = main(["report", "--results", str(done.bundle), "--out", str(tmp_path / "site"),
                 "--no-archive"])
    assert (code, capsys.readouterr().err) == (0, "")
    index = (tmp_path / "site" / "tables.html").read_text()
    row = index[index.index("<strong>one-row-not-replayed-honest-knn</strong>"):]
    row = row[:row.index("</tr>")]
    assert "not replayed: objective perturbation" in row
    assert "charged by construction" not in row


def test_an_audits_noise_checks_are_not_calls_of_the_fit_but_a_methods_own_are():
    """The audited twin reruns objective perturbation on probes with ledgers of its own
    (above, the honest method passes); the same checks run from a method's code are
    calls on ledgers that are not the run's."""
    ledger = Ledger()
    objective_perturbation_noise(ledger, 2, epsilon=1.0, regularization=1.0,
                                 curvature_bound=0.25, rng=np.random.default_rng(0),
                                 touches=records(np.arange(10)))
    with watch() as seen:
        noise_checks.check_ledger(ledger, np.random.default_rng(0))
    assert seen.uncharged(ledger) == ["objective perturbation was handed a ledger that is "
                                      "not the run's: its release is charged to no record"]
