"""PATE's noisy-argmax aggregators of teacher votes (Papernot et al. 2017, 2018), and the
smooth-sensitivity release of their data-dependent cost.

``votes`` is a (queries, classes) matrix of non-negative integer counts: for each query,
how many teachers voted for each class. Every aggregator is vectorised over the queries:
one noise draw per (query, class) from the Generator's own samplers. Bad input raises
InputError (a ValueError) with one line.

Each release takes the run's ledger and charges the RDP of the noise it draws with (their
analysis is benchmarks.privacy.pate) to every record: a teacher's vote moves when any
record of its shard changes.
"""
from __future__ import annotations

import numpy as np
from scipy import stats

from benchmarks.privacy import noise_checks
from benchmarks.privacy import pate as analysis
from benchmarks.privacy.errors import InputError
from benchmarks.privacy.ledger import Ledger, RdpCurve, records
from benchmarks.privacy.pate import as_generator, as_positive, as_threshold_step, as_votes


def lnmax(ledger: Ledger, votes, gamma: float, rng: np.random.Generator) -> np.ndarray:
    """LNMax (2017): per query, argmax_j n_j + Laplace(scale 1 / gamma). Returns the labels."""
    v = as_votes(votes)
    gamma = as_positive(gamma, "gamma")
    ledger = Ledger.of(ledger, "LNMax")
    ledger.charge("LNMax", records(), RdpCurve(len(v) * analysis.lnmax_rdp(gamma)),
                  queries=len(v), gamma=gamma)
    return ledger.released("LNMax", _lnmax(v, gamma, as_generator(rng)), gamma=gamma)


def _lnmax(v: np.ndarray, gamma: float, rng: np.random.Generator) -> np.ndarray:
    return np.argmax(v + rng.laplace(0.0, 1.0 / gamma, size=v.shape), axis=1)


def gnmax(ledger: Ledger, votes, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """GNMax (2018): per query, argmax_j n_j + N(0, sigma^2). Returns the labels."""
    v = as_votes(votes)
    sigma = as_positive(sigma, "sigma")
    ledger = Ledger.of(ledger, "GNMax")
    ledger.charge("GNMax", records(), RdpCurve(len(v) * analysis.gnmax_rdp(sigma)),
                  queries=len(v), sigma2=sigma)
    return ledger.released("GNMax", _gnmax(v, sigma, as_generator(rng)), sigma=sigma)


def _gnmax(v: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    return np.argmax(v + rng.normal(0.0, sigma, size=v.shape), axis=1)


def confident_gnmax(ledger: Ledger, votes, threshold: float, sigma1: float, sigma2: float,
                    rng: np.random.Generator, answered_target: int | None = None,
                    ) -> tuple[np.ndarray, np.ndarray, int]:
    """Confident-GNMax (2018): a query is answered only if max_j n_j + N(0, sigma1^2) >=
    threshold; an answered one gets GNMax with sigma2.

    The queries are asked in order, and with ``answered_target`` asking stops once that
    many are answered: the stop depends on released outputs only, and the queries after
    it are neither released nor charged. Returns (answered, labels, asked): a boolean mask
    over the queries (False after the stop), the labels (-1 where the noisy check failed),
    and how many queries were asked. The threshold noise is drawn for every query first,
    then the GNMax noise for the queries that pass it.
    """
    v = as_votes(votes)
    threshold, sigma1 = as_threshold_step(threshold, sigma1)
    if threshold is None:
        raise InputError("Confident-GNMax needs a threshold and sigma1")
    sigma2 = as_positive(sigma2, "sigma2")
    ledger = Ledger.of(ledger, "Confident-GNMax")
    rng = as_generator(rng)
    answered = _passes(v, threshold, sigma1, rng)
    labels = np.full(len(v), -1, dtype=np.intp)
    labels[answered] = _gnmax(v[answered], sigma2, rng)
    target = answered_target or len(v)
    reached = np.flatnonzero(np.cumsum(answered) == target)
    asked = int(reached[0]) + 1 if len(reached) else len(v)
    answered[asked:] = False
    answered, labels, asked = ledger.released(
        "Confident-GNMax", (answered, labels, asked), threshold=threshold, sigma1=sigma1,
        sigma2=sigma2, answered_target=answered_target)
    ledger.charge("Confident-GNMax threshold check (every query asked)", records(),
                  RdpCurve(asked * analysis.threshold_rdp(sigma1)),
                  queries=asked, threshold=threshold, sigma1=sigma1)
    ledger.charge("GNMax (answered queries)", records(),
                  RdpCurve(int(answered.sum()) * analysis.gnmax_rdp(sigma2)),
                  answered=int(answered.sum()), sigma2=sigma2)
    return answered, labels, asked


def _passes(v: np.ndarray, threshold: float, sigma1: float,
            rng: np.random.Generator) -> np.ndarray:
    """Confident-GNMax's noisy check of every query: max_j n_j + N(0, sigma1^2) >= T."""
    return v.max(axis=1) + rng.normal(0.0, sigma1, size=len(v)) >= threshold


def release_data_dependent_epsilon(ledger: Ledger, votes, answered=None, *, sigma2: float,
                                   order: float, beta: float, noise_multiplier: float,
                                   rng: np.random.Generator, threshold: float | None = None,
                                   sigma1: float | None = None,
                                   ) -> analysis.SmoothSensitivityRelease:
    """The smooth-sensitivity release of the run's data-dependent RDP
    (analysis.release_data_dependent_rdp), charged with the release's own RDP curve, which
    follows from the beta and noise multiplier it drew with alone."""
    ledger = Ledger.of(ledger, "the smooth-sensitivity release")
    release = analysis.release_data_dependent_rdp(
        votes, answered, sigma2=sigma2, order=order, beta=beta,
        noise_multiplier=noise_multiplier, rng=rng, threshold=threshold, sigma1=sigma1)
    ledger.charge("smooth-sensitivity release of the data-dependent epsilon", records(),
                  RdpCurve(release.rdp), order=release.order, beta=release.beta,
                  noise_multiplier=release.noise_multiplier)
    return ledger.released("the smooth-sensitivity release", release, sigma2=sigma2,
                           order=order, beta=beta, noise_multiplier=noise_multiplier,
                           threshold=threshold, sigma1=sigma1)


# ----- the noise checks of the aggregators at a run's charged setting ---------------------
# (benchmarks.privacy.noise_checks): each runs the aggregator's own code on probe votes
# where the claimed noise overturns the outcome at a known rate, and fails when it is
# overturned too rarely.

# Probe queries of two classes whose counts differ by about sqrt(2) sigma2: GNMax answers
# the smaller one with probability P(N(0, 2 sigma2^2) > gap), 16% at exactly sqrt(2)
# sigma2, against 2% at sigma2 / 2. 400 probes tell the two apart at any level a check
# needs (expected flips 64 against 9).
PROBES = 400


def _gnmax_answers(probes: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    return gnmax(Ledger(), probes, sigma, rng)


def _confident_gnmax_answers(probes: np.ndarray, sigma: float, rng: np.random.Generator
                             ) -> np.ndarray:
    """Confident-GNMax's answers to probes whose top counts all pass its threshold check
    (10 sigma1 above it)."""
    offset = int(np.ceil(100 * (sigma + 1)))
    _, labels, _ = confident_gnmax(Ledger(), probes + offset, threshold=offset - 10,
                                   sigma1=1.0, sigma2=sigma, rng=rng)
    return labels


def _binomial_check(mechanism: str, claim: str, what: str, overturned: int,
                    expected: float) -> noise_checks.NoiseCheck:
    """p: the chance of so few overturned probes (or fewer) under the claimed noise."""
    return noise_checks.NoiseCheck(
        mechanism, claim, f"{overturned} of {PROBES} probe queries {what} "
        f"({expected * PROBES:.1f} expected)", float(stats.binom.cdf(overturned, PROBES,
                                                                     expected)))


def _gnmax_check(answers):
    def check(charge, rng: np.random.Generator) -> noise_checks.NoiseCheck:
        sigma = float(charge.details["sigma2"])
        gap = max(1, round(np.sqrt(2) * sigma))
        flips = int((answers(np.tile([gap, 0], (PROBES, 1)), sigma, rng) != 0).sum())
        expected = float(stats.norm.sf(gap / (np.sqrt(2) * sigma)))
        return _binomial_check(charge.mechanism, f"sigma2 = {sigma:.4g}: a lead of {gap} "
                               f"votes is overturned with probability {expected:.3f}",
                               "answered with the smaller count", flips, expected)
    return check


def _lnmax_check(charge, rng: np.random.Generator) -> noise_checks.NoiseCheck:
    """Two classes 2 / gamma votes apart: the difference of two Laplace(1 / gamma)
    draws exceeds a gap t with probability e^(-gamma t) (1 + gamma t / 2) / 2, 13.5% at
    t = 2 / gamma against 2.7% at twice gamma."""
    gamma = float(charge.details["gamma"])
    gap = max(1, round(2 / gamma))
    expected = 0.5 * np.exp(-gamma * gap) * (1 + gamma * gap / 2)
    labels = lnmax(Ledger(), np.tile([gap, 0], (PROBES, 1)), gamma, rng)
    return _binomial_check(charge.mechanism, f"gamma = {gamma:.4g}: a lead of {gap} votes "
                           f"is overturned with probability {expected:.3f}",
                           "answered with the smaller count", int((labels != 0).sum()),
                           expected)


def _threshold_check(charge, rng: np.random.Generator) -> noise_checks.NoiseCheck:
    """Queries whose top count is sigma1 or more below the threshold: the check passes
    them with probability P(N(0, 1) >= gap / sigma1), 16% one sigma1 below against 2% at
    sigma1 / 2."""
    threshold, sigma1 = float(charge.details["threshold"]), float(charge.details["sigma1"])
    top = max(0, int(np.floor(threshold - sigma1)))
    expected = float(stats.norm.sf((threshold - top) / sigma1))
    passed, _, _ = confident_gnmax(Ledger(), np.tile([top, 0], (PROBES, 1)), threshold,
                                   sigma1, 1.0, rng)
    return _binomial_check(charge.mechanism, f"threshold {threshold:.4g}, sigma1 = "
                           f"{sigma1:.4g}: a top count of {top} passes with probability "
                           f"{expected:.3f}", "passed the check", int(passed.sum()), expected)


noise_checks.register("LNMax", _lnmax_check)
noise_checks.register("GNMax", _gnmax_check(_gnmax_answers))
noise_checks.register("Confident-GNMax threshold check (every query asked)", _threshold_check)
noise_checks.register("GNMax (answered queries)", _gnmax_check(_confident_gnmax_answers))
