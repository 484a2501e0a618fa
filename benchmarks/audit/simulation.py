"""Exact simulations of honest audited twins: how often a release exactly as private as
its claim is flagged (benchmarks.audit.levels holds every verdict at 5%; these measure
it). Each simulated run hands the audit's own code what a twin's run would hand it, and
its verdict is ``levels.judge``'s.

- Gaussian releases (``gaussian_twin``): the phantoms' evidence reads only how many of
  a mechanism's n steps put each phantom in each bin, so those counts are drawn from
  their exact law instead of step by step: a phantom in the set is sampled in
  K ~ Binomial(n, q) steps, and its counts are a multinomial of n - K draws over the
  bins' probabilities under N(0, s^2) plus one of K under N(c, s^2), c the direction of
  its vector and s the noise in clip norms (its sum, read only where there is no noise,
  is c K + s sqrt(n) N). The probes' and the real coordinates' squares of noise are
  chi-squared. The model's canaries are a model that shows each of them as the release
  does: as many more phantoms in the same releases, read as the model audit reads its
  evidence.
- Label releases (``label_twin``): the layer's own mechanism on the canaries' labels,
  read by the audit's own code; the model is one that memorises each canary's released
  label.
- Noise checks (``checked_twin``, DP-ERM and PATE): the checks themselves, which draw
  the mechanism at its charged setting; the model is randomized response on each
  canary's coin at the claimed epsilon, the release for which the one-run bound is tight.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from benchmarks.audit import levels
from benchmarks.audit.canaries import IMAGE_CANARIES, LABEL, Canaries, centred_ranks
from benchmarks.audit.claim_audit import guess_counts, rejects_curve, right_guesses
from benchmarks.audit.one_run import one_run_bound
from benchmarks.audit.training import (PHANTOMS, model_release_audit, release_audit,
                                       steinke_bound)
from benchmarks.privacy import Ledger, Neighbours, noise_checks
from benchmarks.privacy.claimed_profile import ClaimedProfile
from benchmarks.privacy.phantom_canaries import (EDGES, PROBES, PhantomCanaries,
                                                  bin_probabilities)


@dataclasses.dataclass(frozen=True)
class GaussianRelease:
    """``steps`` releases of one mechanism: its noise in clip norms, its sampling rate
    and the real coordinates it noises over all its steps."""

    mechanism: str
    noise: float
    sampling_rate: float
    steps: int
    real_values: int


def add_release(rng: np.random.Generator, planted: PhantomCanaries, release: GaussianRelease,
                real_noise: float = 1.0) -> None:
    """The counts and sums of ``release`` on ``planted`` (module docstring), its real
    coordinates noised at ``real_noise`` times the phantoms' noise."""
    m, steps, s = len(planted), release.steps, release.noise
    sampled, direction = np.zeros(m, np.int64), np.zeros(m)
    rows = planted.rows
    sampled[rows] = rng.binomial(steps, release.sampling_rate, len(rows))
    direction[rows] = planted.signs
    edges = EDGES * s
    counts = multinomial(rng, steps - sampled, bin_probabilities(edges, 0.0, s))
    for sign in (1.0, -1.0):
        shifted = np.flatnonzero((direction == sign) & (sampled > 0))
        if len(shifted):
            counts[:, shifted] += multinomial(rng, sampled[shifted],
                                              bin_probabilities(edges, sign, s))
    planted.add(release.mechanism, release.sampling_rate, s, steps, counts,
                direction * sampled + s * np.sqrt(steps) * rng.standard_normal(m),
                *noise_squares(rng, release, real_noise))


def noise_squares(rng: np.random.Generator, release: GaussianRelease,
                  real_noise: float = 1.0) -> tuple[float, int, float, int]:
    """The sums of squares of ``release``'s noise on its probes and on its real
    coordinates (noised at ``real_noise`` times the phantoms' noise), each with its number
    of values: s^2 times chi-squared draws."""
    s, probes = release.noise, PROBES * release.steps
    return (s * s * 2 * rng.standard_gamma(probes / 2), probes,
            (real_noise * s) ** 2 * 2 * rng.standard_gamma(release.real_values / 2),
            release.real_values)


def multinomial(rng: np.random.Generator, draws: np.ndarray, p: np.ndarray) -> np.ndarray:
    """One multinomial of ``draws[i]`` draws over the probabilities ``p`` per column i,
    (bins, columns), exactly, each bin the cheaper way: the bins that expect less than
    one draw a column (the tails, or every bin of a sampled phantom's few steps) by each
    draw's bin, the others bin by bin, after a binomial per column splits its draws
    between the two."""
    rare = p * draws.mean() < 1
    if rare.all():
        return each_draw(rng, draws, p)
    if not rare.any():
        return bin_by_bin(rng, draws, p)
    counts = np.empty((len(p), len(draws)), np.uint16)
    to_rare = rng.binomial(draws, p[rare].sum() / p.sum())
    counts[rare] = each_draw(rng, to_rare, p[rare])
    counts[~rare] = bin_by_bin(rng, draws - to_rare, p[~rare] / p[~rare].sum())
    return counts


def each_draw(rng: np.random.Generator, draws: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``multinomial`` by drawing each draw's bin: a uniform read through the cumulative
    probabilities (``p`` need not sum to 1), counted per column."""
    columns = np.repeat(np.arange(len(draws), dtype=np.int32), draws)
    cumulative = np.cumsum(p)
    bins = np.searchsorted(cumulative[:-1], cumulative[-1] * rng.random(len(columns)),
                           side="right")
    bins *= len(draws)
    bins += columns
    return np.bincount(bins, minlength=len(p) * len(draws)).reshape(
        len(p), len(draws)).astype(np.uint16)


def bin_by_bin(rng: np.random.Generator, draws: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``multinomial`` bin by bin: each bin's count a binomial of the draws left at its
    share of the probability left (``p`` sums to 1)."""
    counts = np.zeros((len(p), len(draws)), np.uint16)
    left, rest = draws.astype(np.int64), 1.0
    for b, share in enumerate(p[:-1]):
        if rest <= 0:
            break
        drawn = rng.binomial(left, min(1.0, max(0.0, share / rest)))
        counts[b] = drawn
        left -= drawn
        rest -= share
    counts[-1] += left.astype(np.uint16)
    return counts


# A simulated twin, judged at a family-wise level (its own, or a share of a submission's).
Twin = Callable[[float], levels.Verdict]


def gaussian_twin(rng: np.random.Generator, releases: tuple[GaussianRelease, ...],
                  claim: ClaimedProfile, neighbours: Neighbours, epsilon: float,
                  phantoms: int = PHANTOMS, canaries: int = IMAGE_CANARIES,
                  real_noise: float = 1.0) -> Twin:
    """One exact run of ``releases`` (claimed: ``claim``, the cell's budget ``epsilon`` at
    the claim's delta) with ``phantoms`` phantoms and a model of ``canaries`` canaries."""
    coins = rng.integers(0, 2, phantoms + canaries).astype(bool)
    planted = PhantomCanaries(coins, neighbours)
    for release in releases:
        add_release(rng, planted, release, real_noise)
    evidence, coins = planted.evidence(), planted.coins
    tested, tested_coins = evidence[:phantoms], coins[:phantoms]
    counts = guess_counts(phantoms)
    correct = right_guesses(tested, tested_coins, counts)
    steinke = steinke_bound(tested, tested_coins, claim.delta, 1 - levels.FAMILY_WISE_LEVEL)
    shown = evidence[phantoms:]  # inclusion canaries are read by rank (canaries.py)
    if neighbours is Neighbours.ADD_REMOVE:
        shown = centred_ranks(shown)
    checks = [check.as_dict(0.0) for check in planted.noise_checks()]

    def at(family_wise: float) -> levels.Verdict:
        claim_level = levels.test_levels(levels.GAUSSIAN, family_wise,
                                         len(checks))[levels.CLAIM]
        rejected = rejects_curve(claim.tradeoff(), phantoms, counts, correct, claim_level)
        model = one_run_bound(shown, coins[phantoms:], claim.delta, 1 - family_wise)
        return levels.judge({
            **_model(model, epsilon, claim.delta, 1 - family_wise),
            "release": {"canaries": steinke.canaries, "guesses": steinke.guesses,
                        "correct": steinke.correct, "claim_test": {"rejected": rejected}},
            "noise_checks": checks})
    return at


def _model(bound, epsilon: float, delta: float, confidence: float) -> dict[str, Any]:
    """The fields of a twin's record that the verdict reads of its model audit."""
    return {"confidence": confidence, "claimed_epsilon": epsilon, "claimed_delta": delta,
            "canaries": bound.canaries, "guesses": bound.guesses, "correct": bound.correct}


# (ledger, labels, rng, examples) -> the release of ``labels``, through the ledger.
LabelRelease = Callable[[Ledger, np.ndarray, np.random.Generator, np.ndarray], Any]


def label_twin(rng: np.random.Generator, release: LabelRelease, classes: int, epsilon: float,
               canaries: int = IMAGE_CANARIES) -> Twin:
    """One run of ``release`` on ``canaries`` label canaries, one pair of ``classes``
    fixed in advance, at a pure claim of ``epsilon``."""
    pair = rng.choice(classes, 2, replace=False)
    planted = Canaries(LABEL, np.zeros((canaries, 1)), np.tile(pair, (canaries, 1)))
    coins = rng.integers(0, 2, canaries).astype(bool)
    rows = np.arange(canaries)
    ledger = Ledger()
    ledger.watch(rows)
    release(ledger, planted.labels[rows, coins.astype(int)], rng, rows)
    evidence, where, observed = planted.release_evidence(ledger.observed, 0)

    def at(family_wise: float) -> levels.Verdict:
        model = one_run_bound(evidence, coins, 0.0, 1 - family_wise)
        return levels.judge({**_model(model, epsilon, 0.0, 1 - family_wise),
                             "release": release_audit(evidence, where, observed, coins, 0.0,
                                                      1 - family_wise)})
    return at


def checked_twin(rng: np.random.Generator, charged: Ledger, epsilon: float, delta: float,
                 canaries: int) -> Twin:
    """One twin whose release is checked by its noise checks (the charges of
    ``charged``): DP-ERM's, whose release is the model, and PATE's, with none."""
    checks = [check.as_dict(0.0) for check in noise_checks.check_ledger(charged, rng)]
    coins = rng.integers(0, 2, canaries).astype(bool)
    kept = rng.random(canaries) < np.exp(epsilon) / (1 + np.exp(epsilon))
    shown = np.where(coins == kept, 1.0, -1.0)

    def at(family_wise: float) -> levels.Verdict:
        model = one_run_bound(shown, coins, delta, 1 - family_wise)
        released = (model_release_audit(model, [c.mechanism for c in charged.charges])
                    if charged.model_releases else None)
        return levels.judge({**_model(model, epsilon, delta, 1 - family_wise),
                             "release": released, "noise_checks": checks})
    return at


def flagged(runs: int, twin: Callable[[np.random.Generator], Twin], seed: int = 0,
            family_wise: float = levels.FAMILY_WISE_LEVEL) -> int:
    """How many of ``runs`` simulated twins are flagged at ``family_wise``."""
    rng = np.random.default_rng(seed)
    return sum(twin(rng)(family_wise).flagged for _ in range(runs))
