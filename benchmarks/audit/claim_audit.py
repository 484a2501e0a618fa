"""A release's claimed privacy profile tested in one run, from the evidence on each canary
(benchmarks.privacy.one_run_fdp, Mahloujifar, Melis and Chaudhuri 2025).

The auditor guesses "in the set" where a canary's evidence (its log-likelihood ratio) is
positive and "not in it" elsewhere, on the c' canaries of largest |evidence|. The c' are
shares of m fixed here, before any run (CLAIM_GUESS_SHARES). One share, 0.2% of the
canaries: in simulations of the suites' releases with 10^6 canaries, at epsilon 1 and 4,
honest and with 0.7 times their noise, it gave the tightest test, or within 1% of it in
noise scale; two shares, each tested at half the level (Bonferroni), lost 2 to 4%. With
several, each is tested at level (1 - confidence) / (their number), so that the claim,
when it holds, is rejected with probability at most 1 - confidence.

The verdict: is the claimed curve rejected? Beside it, the empirical epsilon: the
epsilon, at the claim's delta, of the boundary of the family of the claim under scaled
noise (benchmarks.privacy.claimed_profile): curves with more noise than it are rejected,
those with less are not. It is the claim's own shape fitted to this run, not a lower
bound on epsilon: a mechanism outside the family could violate its curve elsewhere.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from benchmarks.privacy.claimed_profile import ClaimedProfile
from benchmarks.privacy.one_run_fdp import rejects

CLAIM_GUESS_SHARES = (0.002,)
# The noise scales of the family searched, and the ratio at which the search stops. A
# release rejected even at half its noise reports the epsilon of half its noise (the
# accountant is slow at small noise, and the verdict does not depend on it).
NOISE_SCALES, SCALE_TOLERANCE = (0.5, 4.0), 1.01
_STEP = math.sqrt(2)  # the search's steps out from the claim
TEST = "f-DP in one run (Mahloujifar, Melis, Chaudhuri 2025)"


@dataclasses.dataclass(frozen=True)
class ClaimAudit:
    rejected: bool  # the claimed curve is rejected: the release is less private than charged
    claimed_epsilon: float  # the claimed curve's epsilon at delta
    empirical_epsilon: float  # that of the family's boundary; 0 when nothing is rejected
    empirical_noise_scale: float | None  # the boundary; None when nothing is rejected
    delta: float
    confidence: float
    canaries: int
    guesses: tuple[int, ...]
    correct: tuple[int, ...]
    claim: str
    test: str = TEST

    def as_dict(self) -> dict[str, Any]:
        """As a record stores it (JSON: lists, not tuples)."""
        return dataclasses.asdict(self) | {"guesses": list(self.guesses),
                                           "correct": list(self.correct)}


def guess_counts(canaries: int, shares: tuple[float, ...] = CLAIM_GUESS_SHARES) -> list[int]:
    return sorted({max(1, int(share * canaries)) for share in shares})


def right_guesses(evidence: np.ndarray, coins: np.ndarray, counts: list[int]) -> list[int]:
    """Right guesses among the ``count`` canaries of largest |evidence|, for each count;
    ties keep the canaries' order, which is fixed before the coins."""
    evidence, coins = np.asarray(evidence), np.asarray(coins, dtype=bool)
    strongest_first = np.argsort(-np.abs(evidence), kind="stable")
    right = np.cumsum(((evidence > 0) == coins)[strongest_first])
    return [int(right[count - 1]) for count in counts]


def audit_claim(evidence: np.ndarray, coins: np.ndarray, claim: ClaimedProfile,
                confidence: float = 0.95,
                shares: tuple[float, ...] = CLAIM_GUESS_SHARES) -> ClaimAudit:
    """Test ``claim`` on the canaries' ``evidence`` (> 0: "in the set") and their coins,
    at level 1 - ``confidence``."""
    m = len(evidence)
    counts = guess_counts(m, shares)
    correct = right_guesses(evidence, coins, counts)

    def rejected(scale: float) -> bool:
        return rejects_curve(claim.scaled(scale).tradeoff(), m, counts, correct, 1 - confidence)

    boundary = noise_boundary(rejected)
    return ClaimAudit(
        rejected=rejected(1.0), claimed_epsilon=claim.epsilon(),
        empirical_epsilon=0.0 if boundary is None else claim.scaled(boundary).epsilon(),
        empirical_noise_scale=boundary, delta=claim.delta, confidence=confidence,
        canaries=m, guesses=tuple(counts), correct=tuple(correct), claim=claim.describe())


def rejects_curve(curve, canaries: int, counts: list[int], correct: list[int],
                  level: float) -> bool:
    """Whether ``correct[i]`` right guesses of ``counts[i]`` reject ``curve`` for some i,
    each tested at ``level`` over their number."""
    return any(rejects(curve, canaries, c, w, level / len(counts))
               for c, w in zip(counts, correct))


def noise_boundary(rejected) -> float | None:
    """The least noise scale in NOISE_SCALES whose curve is rejected, to SCALE_TOLERANCE
    (rejection grows with the scale): the smallest scale when all are, None when none is.
    The search steps out from the claim (scale 1), where it mostly ends: the accountant
    is slowest at the far, small scales."""
    smallest, largest = NOISE_SCALES
    low = high = 1.0
    if rejected(1.0):
        while True:
            if high <= smallest:
                return smallest
            low = max(high / _STEP, smallest)
            if not rejected(low):
                break
            high = low
    else:
        while True:
            if low >= largest:
                return None
            high = min(low * _STEP, largest)
            if rejected(high):
                break
            low = high
    while high / low > SCALE_TOLERANCE:
        middle = math.sqrt(low * high)
        low, high = (low, middle) if rejected(middle) else (middle, high)
    return high
