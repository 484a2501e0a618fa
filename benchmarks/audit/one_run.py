"""From the evidence on each canary to the one-run lower bound on epsilon.

The auditor guesses the coins of the r canaries with the strongest evidence and abstains
on the rest. r is not tuned on the results: the shares of m in GUESS_SHARES are fixed
here, before any audit, and each r is judged at confidence 1 - (1 - confidence) / (their
number). The largest of those bounds is reported; by Bonferroni, the chance that any of
them exceeds the true epsilon is at most 1 - confidence. A few shares cost little (each
bound is at 98.3% instead of 95%) and suit both models that memorise most canaries (all
guesses) and models that memorise a few (the strongest quarter).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from benchmarks.privacy.audit_bounds import one_run_lower_bound, saturation

GUESS_SHARES = (0.25, 0.5, 1.0)


@dataclasses.dataclass(frozen=True)
class OneRunBound:
    epsilon: float  # the lower bound
    confidence: float
    canaries: int
    guesses: int  # of the share whose bound is reported
    correct: int
    ceiling: float  # the bound if every guess of every share were right


def guess_counts(canaries: int, shares: tuple[float, ...] = GUESS_SHARES) -> list[int]:
    """The numbers of guesses tried with ``canaries`` canaries (distinct, at least one)."""
    return sorted({max(1, int(share * canaries)) for share in shares})


def one_run_bound(evidence: np.ndarray, coins: np.ndarray, delta: float = 0.0,
                  confidence: float = 0.95,
                  shares: tuple[float, ...] = GUESS_SHARES) -> OneRunBound:
    """Guess coin 1 where the evidence is positive, 0 elsewhere, on the strongest r, for
    r of each share of the canaries in ``shares``.

    Ties in strength keep the canaries' order, which is fixed before the coins."""
    evidence, coins = np.asarray(evidence), np.asarray(coins, dtype=bool)
    m = len(evidence)
    counts = guess_counts(m, shares)
    each = 1 - (1 - confidence) / len(counts)
    strongest_first = np.argsort(-np.abs(evidence), kind="stable")
    right = (evidence > 0) == coins
    results = []
    for r in counts:
        correct = int(right[strongest_first[:r]].sum())
        results.append((one_run_lower_bound(m, r, correct, delta, each), r, correct))
    bound, guesses, correct = max(results)  # on a tie, the most guesses
    return OneRunBound(bound, confidence, m, guesses, correct,
                       max(saturation(m, r, delta, each) for r in counts))
