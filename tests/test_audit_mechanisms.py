"""Mechanism audits: honest mechanisms are not flagged, known-broken variants (defined here
only, never registered) are, and the command's exit codes, error lines and JSON."""
import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest

from benchmarks.cli import main
from benchmarks.privacy import mechanism_audit as audits
from benchmarks.privacy.erm_noise import AUDIT_EXAMPLES, AUDIT_REGULARIZATION, output_noise_rate
from benchmarks.privacy.mechanism_audit import (MECHANISMS, AuditSpec, LabelRow,
                                                NeighbouringPair, audit, label_sampler, lookup,
                                                output_values, votes_sampler)
from benchmarks.privacy.randomizers import AUDIT_CLASSES as NUM_CLASSES
from benchmarks.privacy.randomizers import AUDIT_TOP_K, optimal_k
from charged import gnmax, lnmax, rr_top_k, rr_with_prior
from methods.pate import PateConfidentGnmax, calibrated_sigma2  # registers PATE's audits

THRESHOLD = PateConfidentGnmax.defaults["threshold"]
SIGMA1 = PateConfidentGnmax.defaults["sigma1"]

TRIALS = 2000
# DP-ERM's noise sampler draws one vector per call (about 1 ms): fewer runs keep it fast.
ERM_TRIALS = 300


# ----- known-broken variants -------------------------------------------------------------------

def rr_top_k_flipping_to_any_label(labels, priors, k, epsilon, rng):
    """BROKEN: RRTop-k whose flips are redrawn from all K - 1 other labels, not within the
    top-k set. An output outside the set then has positive probability from a label inside it
    and zero from a label outside it: an infinite ratio."""
    out = rr_top_k(labels, priors, k, epsilon, rng)
    top = np.argsort(-priors, axis=1, kind="stable")[:, :k]
    flipped = (top == labels[:, None]).any(axis=1) & (out != labels)
    other = rng.integers(0, priors.shape[1] - 1, len(labels))
    other += other >= labels  # uniform over the labels other than the row's own
    out[flipped] = other[flipped]
    return out


def rr_with_first_rows_top_set(labels, priors, epsilon, rng):
    """BROKEN: every row randomizes within row 0's top-k* set, while its keep probability
    e^eps / (e^eps + k - 1) uses its own k*. The keep probability is calibrated for a set of
    size k but the flips spread over the k0 - 1 other members of row 0's set, so keeping a
    label against flipping to it is e^eps (k0 - 1) / (k - 1): above e^eps for any row whose
    k* is smaller than row 0's (infinite when its k* is 1)."""
    k = optimal_k(priors, epsilon)
    leader_set = np.argsort(-priors[0], kind="stable")[:k[0]]
    n = len(labels)
    inside = np.isin(labels, leader_set)
    position = np.argmax(leader_set[None, :] == labels[:, None], axis=1)
    other = rng.integers(0, len(leader_set) - 1, n)
    other += other >= position  # a member other than the label itself
    kept = rng.random(n) * (np.exp(epsilon) + k - 1) < np.exp(epsilon)
    flipped_or_drawn = np.where(inside, leader_set[other],
                                leader_set[rng.integers(0, len(leader_set), n)])
    return np.where(inside & kept, labels, flipped_or_drawn)


# The batch that breaks it: row 0 has a uniform prior (k* = 6 for every epsilon), the audited
# rows a prior uniform on classes 0 and 1 (k* = 2). Honest: RR on {0, 1}, ratio e^eps. Broken:
# label 1 reaches output 0 with probability 1 / (5 (e^eps + 1)), so the ratio is 5 e^eps.
UNIFORM_PRIOR = (1 / NUM_CLASSES,) * NUM_CLASSES
TWO_CLASS_PRIOR = (0.5, 0.5) + (0.0,) * (NUM_CLASSES - 2)


def behind_a_uniform_row(randomize):
    def sample(row, trials, epsilon, rng):
        labels = np.r_[0, np.full(trials, row.label)]
        priors = np.vstack([UNIFORM_PRIOR, np.tile(row.prior, (trials, 1))])
        return randomize(labels, priors, epsilon, rng)[1:]
    return sample


def batch_spec(randomize):
    pair = NeighbouringPair(LabelRow(0, TWO_CLASS_PRIOR), LabelRow(1, TWO_CLASS_PRIOR),
                            "label 0, prior uniform on classes 0-1", "label 1, the same prior")
    return AuditSpec("RRWithPrior rows behind a row with a uniform prior", (pair,),
                     behind_a_uniform_row(randomize), output_values)


def erm_noise_with_gamma_shape_one(minimiser, trials, epsilon, rng):
    """BROKEN: DP-ERM's noise with radius ~ Gamma(1) instead of Gamma(dimension). In two
    dimensions its density grows like 1/|b| near 0: unbounded ratio near the minimiser."""
    beta = output_noise_rate(epsilon, AUDIT_EXAMPLES, AUDIT_REGULARIZATION)
    direction = rng.standard_normal((trials, len(minimiser)))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return np.asarray(minimiser) + rng.gamma(1.0, 1 / beta, (trials, 1)) * direction


def lnmax_counting_one_changed_vote(votes, epsilon, rng):
    """BROKEN: LNMax calibrated as if a teacher changed one count (gamma = epsilon). Moving its
    vote changes two, so one query is (2 epsilon)-DP."""
    return lnmax(votes, epsilon, rng)


def gnmax_with_a_tenth_of_the_noise(votes, epsilon, rng):
    """BROKEN: GNMax with the calibrated sigma divided by 10."""
    return gnmax(votes, calibrated_sigma2(epsilon) / 10, rng)


def confident_gnmax_with_a_noiseless_check(votes, epsilon, rng):
    """BROKEN: Confident-GNMax whose threshold check leaves out its sigma1 noise: a top count
    at the threshold is always answered, one vote below it never."""
    sigma2 = calibrated_sigma2(epsilon, SIGMA1)
    return np.where(votes.max(axis=1) >= THRESHOLD, gnmax(votes, sigma2, rng), -1)


# ----- honest mechanisms are not flagged; broken ones are ---------------------------------------

def test_the_registry_holds_only_the_real_mechanisms():
    """Every audit is registered beside its mechanism's code, in the privacy layer or a
    method's module, and the layer's own register when their modules load."""
    lookup("rr-with-prior")
    assert {"randomized-response", "rr-top-k", "rr-with-prior", "cluster-histogram",
            "dp-erm-output-noise", "pate-lnmax", "pate-gnmax",
            "pate-confident-gnmax"} <= set(MECHANISMS)
    for name, spec in MECHANISMS.items():
        assert spec.sample.__module__.startswith(("benchmarks.privacy.", "methods.")), name


@pytest.mark.parametrize("name", ["randomized-response", "rr-top-k", "rr-with-prior",
                                  "cluster-histogram", "laplace-one-hot"])
@pytest.mark.parametrize("epsilon", [0.5, 2.0, 6.0])
def test_honest_label_mechanisms_are_not_flagged_and_the_audit_is_tight(name, epsilon):
    result = audit(lookup(name), epsilon, audits.DEFAULT_TRIALS, seed=1)
    assert not result.flagged, result
    assert result.lower_bound > 0.7 * epsilon, result  # the worst case is found


@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_honest_erm_output_noise_is_not_flagged(epsilon):
    result = audit(lookup("dp-erm-output-noise"), epsilon, ERM_TRIALS, seed=3)
    assert 0.25 * epsilon < result.lower_bound <= epsilon, result


# The least share of the claim an honest audit reaches: the worst case is found. The Gaussian
# aggregators' audits see less of their claim: the RDP calibration adds more noise than an exact
# (epsilon, delta) one would, and their most telling events are rarer than 1 in 10,000 runs.
@pytest.mark.parametrize("name, share", [("pate-lnmax", 0.4), ("pate-gnmax", 0.1),
                                         ("pate-confident-gnmax", 0.1)])
@pytest.mark.parametrize("epsilon", [1.0, 2.0, 6.0])
def test_honest_pate_aggregators_are_not_flagged(name, share, epsilon):
    result = audit(lookup(name), epsilon, audits.DEFAULT_TRIALS, seed=1)
    assert share * epsilon < result.lower_bound <= epsilon, result


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_flipping_to_any_label_is_flagged(epsilon):
    spec = dataclasses.replace(
        lookup("rr-top-k"),
        sample=label_sampler(lambda y, p, eps, rng: rr_top_k_flipping_to_any_label(
            y, p, AUDIT_TOP_K, eps, rng)))
    result = audit(spec, epsilon, TRIALS, seed=2)
    assert result.flagged, result
    assert "label 5" in result.d_prime  # found through the label outside the top-k set


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_first_rows_top_set_for_the_batch_is_flagged(epsilon):
    result = audit(batch_spec(rr_with_first_rows_top_set), epsilon, TRIALS, seed=4)
    assert result.flagged, result
    honest = audit(batch_spec(rr_with_prior), epsilon, TRIALS, seed=4)
    assert not honest.flagged, honest


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_laplace_one_hot_at_half_its_noise_is_flagged(epsilon, monkeypatch):
    import scipy.stats

    from benchmarks.privacy import randomizers

    monkeypatch.setattr(randomizers, "one_hot_noise",
                        lambda eps: scipy.stats.laplace(scale=1 / eps))
    result = audit(lookup("laplace-one-hot"), epsilon, TRIALS, seed=2)
    assert result.flagged, result


def test_erm_noise_with_the_wrong_radius_law_is_flagged():
    spec = dataclasses.replace(lookup("dp-erm-output-noise"),
                               sample=erm_noise_with_gamma_shape_one)
    result = audit(spec, 1.0, ERM_TRIALS, seed=5)
    assert result.flagged, result
    assert result.event.startswith("|x - ")  # a ball around a minimiser


@pytest.mark.parametrize("name, broken", [("pate-lnmax", lnmax_counting_one_changed_vote),
                                          ("pate-gnmax", gnmax_with_a_tenth_of_the_noise)])
@pytest.mark.parametrize("epsilon", [1.0, 2.0])
def test_pate_aggregators_with_too_little_noise_are_flagged(name, broken, epsilon):
    spec = dataclasses.replace(lookup(name), sample=votes_sampler(broken))
    result = audit(spec, epsilon, audits.DEFAULT_TRIALS, seed=2)
    assert result.flagged, result


def test_a_noiseless_threshold_check_is_flagged():
    spec = dataclasses.replace(lookup("pate-confident-gnmax"),
                               sample=votes_sampler(confident_gnmax_with_a_noiseless_check))
    result = audit(spec, 1.0, audits.DEFAULT_TRIALS, seed=2)
    assert result.flagged, result
    assert result.d.startswith("votes (200, 50)")  # the top count at the threshold


def test_the_audit_is_deterministic_for_a_seed():
    first = audit(lookup("rr-with-prior"), 1.0, 500, seed=9)
    assert audit(lookup("rr-with-prior"), 1.0, 500, seed=9) == first
    assert audit(lookup("rr-with-prior"), 1.0, 500, seed=10) != first


# ----- the command ------------------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["rr-top", "--epsilon", "1"], "did you mean 'rr-top-k'?"),
    (["rr-top-k", "--epsilon", "0"], "epsilon must be finite and > 0"),
    (["rr-top-k", "--epsilon", "-1"], "epsilon must be finite and > 0"),
    (["rr-top-k", "--epsilon", "nan"], "epsilon must be finite and > 0"),
    (["rr-top-k", "--epsilon", "inf"], "epsilon must be finite and > 0"),
    (["rr-top-k", "--epsilon", "1", "--trials", "99"], "trials must be an integer >= 100"),
    (["rr-top-k", "--epsilon", "1", "--seed", "-1"], "seed must be an integer >= 0"),
    (["pate-gnmx", "--epsilon", "1"], "did you mean 'pate-gnmax'?"),
    (["pate-lnmax", "--epsilon", "0"], "epsilon must be finite and > 0"),
    (["pate-confident-gnmax", "--epsilon", "nan"], "epsilon must be finite and > 0"),
])
def test_bad_input_exits_2_with_one_error_line(argv, message, capsys):
    assert main(["audit", "mechanism", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("privboard: error: ")
    assert message in lines[0]


def test_help_lists_every_mechanism_whole(capsys):
    with pytest.raises(SystemExit):
        main(["audit", "mechanism", "--help"])
    words = capsys.readouterr().out.replace(",", " ").split()
    assert set(MECHANISMS) <= set(words)


def test_json_output(capsys):
    assert main(["audit", "mechanism", "rr-top-k", "--epsilon", "1", "--trials", "500", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == {"name", "mechanism", "claimed_epsilon", "claimed_delta",
                            "lower_bound", "flagged", "confidence", "trials", "seed", "d",
                            "d_prime", "event", "count_d", "count_d_prime"}
    assert printed["name"] == "rr-top-k" and printed["flagged"] is False
    assert printed["claimed_epsilon"] == 1.0 and printed["trials"] == 500
    assert 0 < printed["lower_bound"] <= 1.0


def test_text_output_and_flagged_exit_code(monkeypatch, capsys):
    assert main(["audit", "mechanism", "randomized-response", "--epsilon", "1", "--trials", "500"]) == 0
    assert "consistent with the claim" in capsys.readouterr().out
    monkeypatch.setitem(MECHANISMS, "broken-batch", batch_spec(rr_with_first_rows_top_set))
    assert main(["audit", "mechanism", "broken-batch", "--epsilon", "1", "--trials", "500"]) == 1
    out = capsys.readouterr().out
    assert "FLAGGED: the lower bound exceeds the claimed epsilon" in out
    assert "event: output in {" in out


@pytest.mark.integration
def test_runs_as_a_module():
    done = subprocess.run([sys.executable, "-m", "benchmarks.cli", "audit", "mechanism",
                           "cluster-histogram", "--epsilon", "2", "--trials", "300", "--json"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["name"] == "cluster-histogram"
