"""PATE's noisy-argmax aggregators of teacher votes (Papernot et al. 2017, 2018).

``votes`` is a (queries, classes) matrix of non-negative integer counts: for each query,
how many teachers voted for each class. Every aggregator is vectorised over the queries:
one noise draw per (query, class) from the Generator's own samplers. Bad input raises
InputError (a ValueError) with one line. Their privacy analysis is benchmarks.privacy.pate.
"""
from __future__ import annotations

import numpy as np

from benchmarks.errors import InputError
from benchmarks.privacy.pate import (
    as_generator,
    as_positive,
    as_threshold_step,
    as_votes,
)


def lnmax(votes, gamma: float, rng: np.random.Generator) -> np.ndarray:
    """LNMax (2017): per query, argmax_j n_j + Laplace(scale 1 / gamma). Returns the labels."""
    v = as_votes(votes)
    scale = 1.0 / as_positive(gamma, "gamma")
    return np.argmax(v + as_generator(rng).laplace(0.0, scale, size=v.shape), axis=1)


def gnmax(votes, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """GNMax (2018): per query, argmax_j n_j + N(0, sigma^2). Returns the labels."""
    v = as_votes(votes)
    sigma = as_positive(sigma, "sigma")
    return np.argmax(v + as_generator(rng).normal(0.0, sigma, size=v.shape), axis=1)


def confident_gnmax(votes, threshold: float, sigma1: float, sigma2: float,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Confident-GNMax (2018): a query is answered only if max_j n_j + N(0, sigma1^2) >=
    threshold; an answered one gets GNMax with sigma2.

    Returns (answered, labels): a boolean mask over the queries, and the labels with -1 on
    the unanswered queries. The threshold noise is drawn for every query first, then the
    GNMax noise for the answered ones only.
    """
    v = as_votes(votes)
    threshold, sigma1 = as_threshold_step(threshold, sigma1)
    if threshold is None:
        raise InputError("Confident-GNMax needs a threshold and sigma1")
    sigma2 = as_positive(sigma2, "sigma2")
    rng = as_generator(rng)
    answered = v.max(axis=1) + rng.normal(0.0, sigma1, size=len(v)) >= threshold
    labels = np.full(len(v), -1, dtype=np.intp)
    labels[answered] = gnmax(v[answered], sigma2, rng)
    return answered, labels
