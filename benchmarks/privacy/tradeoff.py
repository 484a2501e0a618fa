"""Trade-off curves (f-DP, Dong, Roth and Su 2022) from privacy profiles.

A mechanism whose neighbouring output laws P and Q satisfy P(S) <= e^eps Q(S) + delta(eps)
for every event S and epsilon >= 0, in both directions (its privacy profile, what an
accountant reports as the delta of each epsilon), is f-DP for

    f(a) = max(0, sup_eps max(1 - delta(eps) - e^eps a, e^-eps (1 - delta(eps) - a))),

the least type II error of any test of P against Q at type I error a. Over finitely many
epsilons the supremum is smaller: a weaker claim than the profile's, never a stronger one.
The curve is the upper envelope of those lines (convex, decreasing, and symmetric: f is
its own inverse, as the profile bounds both directions), kept as its corners, so that it
is evaluated exactly: interpolating a convex function between samples would overstate it.

numpy only.
"""
from __future__ import annotations

import bisect

import numpy as np


class TradeOff:
    """The trade-off curve of the privacy profile delta(epsilons[i]) = deltas[i]."""

    def __init__(self, epsilons, deltas) -> None:
        epsilons = np.asarray(epsilons, dtype=np.float64)
        deltas = np.clip(np.asarray(deltas, dtype=np.float64), 0.0, 1.0)
        if epsilons.shape != deltas.shape or epsilons.ndim != 1 or not len(epsilons) \
                or np.any(epsilons < 0) or not np.all(np.isfinite(epsilons)):
            raise ValueError("a privacy profile needs finite epsilons >= 0, one delta each")
        # Each line as (slope, intercept); the floor y = 0 is one of them.
        slopes = np.concatenate([-np.exp(epsilons), -np.exp(-epsilons), [0.0]])
        intercepts = np.concatenate([1 - deltas, (1 - deltas) * np.exp(-epsilons), [0.0]])
        self.x, self.y = _upper_envelope(slopes, intercepts)
        self._x, self._y = self.x.tolist(), self.y.tolist()  # fast scalar look-ups

    def __call__(self, alpha: float) -> float:
        """f(alpha) for alpha in [0, 1]."""
        xs, ys = self._x, self._y
        j = min(max(bisect.bisect_right(xs, alpha) - 1, 0), len(xs) - 2)
        t = (alpha - xs[j]) / (xs[j + 1] - xs[j])
        return ys[j] + t * (ys[j + 1] - ys[j])


def _upper_envelope(slopes: np.ndarray, intercepts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The corners on [0, 1] of x -> max_k slopes[k] x + intercepts[k]."""
    hull: list[tuple[float, float]] = []  # the lines on the envelope, by rising slope
    for k in np.lexsort((intercepts, slopes)):
        s, b = float(slopes[k]), float(intercepts[k])
        if hull and hull[-1][0] == s:
            hull.pop()  # the same slope with a smaller intercept (sorted after it)
        # The last line is off the envelope when the new one overtakes the one before
        # it no later than the last does.
        while len(hull) >= 2 and (b - hull[-2][1]) * (hull[-1][0] - hull[-2][0]) \
                >= (hull[-1][1] - hull[-2][1]) * (s - hull[-2][0]):
            hull.pop()
        hull.append((s, b))
    changes = [(b1 - b2) / (s2 - s1) for (s1, b1), (s2, b2) in zip(hull, hull[1:])]
    xs = [0.0] + [x for x in changes if 0.0 < x < 1.0] + [1.0]
    ys = [max(s * x + b for s, b in hull) for x in xs]
    return np.asarray(xs), np.asarray(ys)
