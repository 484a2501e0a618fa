"""The noise of DP-ERM: a random vector b in R^d with density proportional to
exp(-beta ||b||) (Chaudhuri, Monteleoni, Sarwate 2011, eq. 4).

In polar coordinates that density factors into a radius with density proportional to
r^(d-1) exp(-beta r), which is Gamma(shape d, scale 1/beta), times a direction uniform
on the unit sphere; a normalised standard Gaussian vector is such a direction.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats


def sample_norm_exponential_noise(dim: int, beta: float, rng: np.random.Generator) -> np.ndarray:
    """One draw of b (shape (dim,), float64) with density proportional to exp(-beta ||b||)."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"noise dimension must be a positive integer, got {dim!r}")
    if not (math.isfinite(beta) and beta > 0):
        raise ValueError(f"noise rate beta must be finite and > 0, got {beta!r}")
    radius = stats.gamma(a=dim, scale=1.0 / beta).rvs(random_state=rng)
    direction = rng.standard_normal(dim)
    return radius * direction / np.linalg.norm(direction)
