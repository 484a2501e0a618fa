"""Private selection: run a random number K of DP candidates and release the best one
(Papernot and Steinke, "Hyperparameter Tuning with Renyi Differential Privacy", ICLR 2022;
the pure-DP case is Liu and Talwar, STOC 2019).

K follows the truncated negative binomial law D(eta, gamma) of Papernot and Steinke:
P[K = k] proportional to (1 - gamma)^k prod_{l<k} (l + eta) / (l + 1), for k >= 1. Shape
eta = 0 is the logarithmic law, eta = 1 the geometric one. If one candidate (its training
and its score, with its settings drawn from a fixed space) is (lambda, e(lambda))-RDP at
every order, releasing the best of the K candidates by their scores is
(lambda, e'(lambda))-RDP with (their Theorem 2)

    e'(lambda) = e(lambda) + (1 + eta) min_mu [(1 - 1/mu) e(mu) + log(1/gamma) / mu]
                 + log(E[K]) / (lambda - 1).

dp_accounting computes it (``rdp.repeat_and_select_rdp``). The theorem covers the best
candidate's output alone: K, and the other candidates' settings and scores, are never
released (a known K would leave the guarantee of a fixed number of candidates, which is
weaker).

A candidate is charged to a ledger of its own, and its curve must stay within the one
the selection was charged for: a candidate that spends more stops the selection.

A selection may keep its scores as they come (``Progress``): interrupted, it resumes at
its next candidate and releases what the uninterrupted run would have released.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable

import numpy as np

from benchmarks.privacy import rdp
from benchmarks.privacy.errors import InputError
from benchmarks.privacy.ledger import Ledger, PureEpsilon, RdpCurve, Touches

MECHANISM = "private selection"
SCORE = "Laplace count of correct validation predictions"
# A candidate's curve may exceed the planned one by float rounding only.
_CURVE_SLACK = 1e-9


@dataclasses.dataclass(frozen=True)
class Repetitions:
    """The law of the number of candidates K: truncated negative binomial with this mean
    and shape eta (0: logarithmic, 1: geometric)."""

    mean: float
    shape: float

    def __post_init__(self) -> None:
        if not (isinstance(self.mean, (int, float)) and self.mean > 1 and math.isfinite(self.mean)):
            raise InputError(f"the mean number of candidates must be a number > 1, "
                             f"got {self.mean!r}")
        if not (isinstance(self.shape, (int, float)) and 0 <= self.shape < math.inf):
            raise InputError(f"the shape of the number of candidates must be a finite "
                             f"number >= 0, got {self.shape!r}")

    @functools.cached_property
    def gamma(self) -> float:
        """The law's gamma, from its mean (dp_accounting's inversion, conservative)."""
        from dp_accounting.rdp.rdp_privacy_accountant import _gamma_truncated_negative_binomial

        return float(_gamma_truncated_negative_binomial(self.shape, self.mean))

    def pmf(self, k: np.ndarray) -> np.ndarray:
        """P[K = k] for integers k (0 below 1)."""
        k = np.asarray(k, dtype=np.float64)
        gamma, eta = self.gamma, float(self.shape)
        safe = np.maximum(k, 1.0)
        if eta == 0:
            p = (1 - gamma) ** safe / (safe * math.log(1 / gamma))
        else:
            # prod_{l<k} (l + eta) / (l + 1) = Gamma(k + eta) / (Gamma(eta) k!)
            from scipy.special import gammaln

            log_coefficient = gammaln(safe + eta) - gammaln(eta) - gammaln(safe + 1)
            p = np.exp(log_coefficient + safe * math.log1p(-gamma)) / (gamma ** -eta - 1)
        return np.where(k >= 1, p, 0.0)

    def draw(self, rng: np.random.Generator) -> int:
        """One K, by inverting the distribution function with one uniform draw."""
        u, k, cumulative = rng.random(), 0, 0.0
        chunk = 64
        while True:
            ks = np.arange(k + 1, k + chunk + 1)
            cumulative_ks = cumulative + np.cumsum(self.pmf(ks))
            hit = np.flatnonzero(cumulative_ks >= u)
            if hit.size:
                return int(ks[hit[0]])
            k, cumulative = k + chunk, float(cumulative_ks[-1])
            if cumulative >= 1 - 1e-15:  # rounding left u just above the total mass
                return k

    def as_dict(self) -> dict[str, Any]:
        return {"law": "truncated negative binomial", "mean": float(self.mean),
                "shape": float(self.shape), "gamma": self.gamma}


def selection_curve(candidate_curve: np.ndarray, law: Repetitions) -> np.ndarray:
    """The RDP curve (at rdp.ORDERS) of releasing the best of K candidates, each with
    ``candidate_curve``."""
    return rdp.repeat_and_select_rdp(candidate_curve, law.mean, law.shape)


def score_epsilon(candidate_epsilon: float) -> float:
    """The epsilon of a candidate's validation score: a fifth of its training's. Its
    examples are not the training's, so the two compose in parallel; a fifth keeps the
    score's pure curve, min(e, alpha e^2 / 2), under a Gaussian training's at every order
    that the conversion to (epsilon, delta) uses, and costs a Laplace noise of 5 / e
    correct predictions."""
    return candidate_epsilon / 5


def noisy_correct_count(ledger: Ledger, correct: np.ndarray, epsilon: float,
                        rng: np.random.Generator, touches: Touches) -> float:
    """The number of ``correct`` predictions plus Laplace noise of scale 1 / epsilon:
    epsilon-DP, since one example (its label, or the whole record, added or removed)
    moves the count by at most 1."""
    correct = np.asarray(correct, dtype=bool)
    if touches.examples is None or len(touches.examples) != len(correct):
        raise InputError("a validation count touches exactly its examples")
    if not epsilon > 0 or math.isinf(epsilon):
        raise InputError(f"the validation count needs a finite epsilon > 0, got {epsilon!r}")
    Ledger.of(ledger, SCORE).charge(SCORE, touches, PureEpsilon(epsilon),
                                    examples=len(correct))
    noisy = float(correct.sum()) + float(rng.laplace(0.0, 1.0 / epsilon))
    return ledger.released(SCORE, noisy, epsilon=epsilon, touches=touches)


@dataclasses.dataclass
class Selected:
    """What a selection releases: the best candidate's result and its noisy score. Its
    index and the number of candidates are not released (``private`` keeps them)."""

    result: Any
    score: float
    private: dict[str, Any]


class Progress:
    """The noisy scores of a selection's finished candidates, by index: a private
    diagnostic, never published. This one lives in memory; a subclass that keeps them in
    a file lets an interrupted selection resume, and must key the file by everything the
    candidates' results depend on, since a resumed selection trusts the scores it finds."""

    def __init__(self) -> None:
        self.scores: dict[int, float] = {}

    def record(self, index: int, score: float) -> None:
        self.scores[index] = score

    def clear(self) -> None:
        self.scores = {}


def select(ledger: Ledger, touches: Touches, law: Repetitions, candidate_curve: np.ndarray,
           rng: np.random.Generator,
           candidate: Callable[[int], tuple[Any, np.ndarray, float]],
           progress: Progress | None = None) -> Selected:
    """Charge ``ledger`` for the best of K candidates, each within ``candidate_curve``,
    draw K, and run ``candidate(j)`` for j = 0..K-1: each returns (result, the RDP curve
    its own ledger composed to, its noisy score). Returns the candidate with the highest
    score (the first of equal ones).

    With ``progress``, each score is kept as it comes, and a resumed selection runs only
    the candidates it has no score of, and its best scored one again for its result: that
    one must reproduce its score, or the progress is discarded and the selection stops.
    """
    candidate_curve = np.asarray(candidate_curve, dtype=np.float64)
    Ledger.of(ledger, MECHANISM).charge(
        MECHANISM, touches, RdpCurve(tuple(selection_curve(candidate_curve, law))),
        **law.as_dict())
    count = law.draw(rng)
    scored = dict(progress.scores) if progress is not None else {}
    # The first of the best scored: the one whose result the loop must have again.
    rerun = max(scored, key=lambda j: (scored[j], -j)) if scored else None
    best: tuple[float, int, Any] | None = None
    for j in range(count):
        if j in scored and j != rerun:
            result, score = None, scored[j]  # cannot beat the rerun one: never released
        else:
            result, spent, score = candidate(j)
            if np.any(np.asarray(spent) > candidate_curve * (1 + _CURVE_SLACK) + _CURVE_SLACK):
                # No failure names a candidate: its index would tell how many ran.
                raise InputError("a candidate of the private selection spent more than the "
                                 "curve the selection was charged for")
            if j in scored and score != scored[j]:
                progress.clear()
                raise InputError("a candidate did not reproduce the score it had before the "
                                 "selection was interrupted; its progress is discarded, run "
                                 "it again")
            if progress is not None:
                progress.record(j, score)
        if best is None or score > best[0]:
            best = (score, j, result)
    if progress is not None:
        progress.clear()
    score, index, result = best
    return Selected(result, score, {"candidates": count, "selected": index})
