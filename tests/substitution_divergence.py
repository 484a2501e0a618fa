"""The exact Renyi divergences of one Poisson-sampled Gaussian step between an example's
clipped gradient under its label and under another label (label substitution), over all
outputs on a fine grid: the check of every DP-SGD release charged under label-DP."""
from __future__ import annotations

import numpy as np
from scipy import special, stats

ORDERS = np.array([1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32])

# The clipped gradients of one example under its two labels: antipodal (the worst, 2C
# apart), at an angle, one of them zero, the same point.
PAIRS_1D = [(1.0, -1.0), (1.0, 0.0), (0.4, -0.9), (0.7, 0.7)]
PAIRS_2D = [((1.0, 0.0), (np.cos(a), np.sin(a))) for a in (np.pi / 3, 2 * np.pi / 3)]
PAIRS = PAIRS_1D + PAIRS_2D


def _renyi(log_p: np.ndarray, log_q: np.ndarray, order: float, cell: float) -> float:
    """D_order(P || Q) from log densities on a grid of cells of volume ``cell``."""
    return float(special.logsumexp(order * log_p + (1 - order) * log_q + np.log(cell))
                 / (order - 1))


def substitution_divergences(a, b, q: float, sigma: float) -> np.ndarray:
    """Per order, the larger Renyi divergence, either way, between one step's release
    when an example's clipped gradient is ``a`` and when it is ``b`` (its label
    replaced): the Poisson coin includes it with probability q either way, the rest of
    the batch is common (a shift), noise N(0, sigma^2) per coordinate. Exact up to the
    grid: the pair lives in the plane of 0, a and b; every output is on the grid."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    # Wide enough for the tilted densities: N(a)^alpha N(b)^(1 - alpha) centres on
    # b + alpha (a - b).
    extent = 1 + ORDERS.max() * np.linalg.norm(a - b) + 12 * sigma
    line = np.linspace(-extent, extent, 4001 if a.size == 1 else 1201)
    cell = line[1] - line[0]
    if a.size == 1:
        points, volume = line[:, None], cell
    else:
        grid = np.meshgrid(line, line, indexing="ij")
        points, volume = np.stack([g.ravel() for g in grid], 1), cell * cell

    def log_mix(v):
        log_n = lambda mean: stats.norm.logpdf(points - mean, scale=sigma).sum(1)
        with np.errstate(divide="ignore"):  # q = 1: no "left out" component
            return np.logaddexp(np.log1p(-q) + log_n(0 * v), np.log(q) + log_n(v))

    p, r = log_mix(a), log_mix(b)
    return np.array([max(_renyi(p, r, o, volume), _renyi(r, p, o, volume)) for o in ORDERS])
