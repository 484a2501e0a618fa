"""The privacy layer's releases with the signatures of the bare mechanisms, each charged
to a fresh ledger (the training set's rows: one per released row), for tests of their
output distributions."""
from __future__ import annotations

import numpy as np

from benchmarks.privacy import Ledger
from benchmarks.privacy import aggregators, randomizers


def _rows(labels) -> np.ndarray:
    return np.arange(len(np.atleast_1d(labels)))


def rr_with_prior(labels, priors, epsilon, rng):
    return randomizers.rr_with_prior(Ledger(), labels, priors, epsilon, rng,
                                     examples=_rows(labels))


def rr_top_k(labels, priors, k, epsilon, rng):
    return randomizers.rr_top_k(Ledger(), labels, priors, k, epsilon, rng,
                                examples=_rows(labels))


def randomized_response(labels, num_classes, epsilon, rng):
    return randomizers.randomized_response(Ledger(), labels, num_classes, epsilon, rng,
                                           examples=_rows(labels))


def noisy_cluster_priors(labels, clusters, num_clusters, num_classes, epsilon, rng):
    return randomizers.noisy_cluster_priors(Ledger(), labels, clusters, num_clusters,
                                            num_classes, epsilon, rng, examples=_rows(labels))


def lnmax(votes, gamma, rng):
    return aggregators.lnmax(Ledger(), votes, gamma, rng)


def gnmax(votes, sigma, rng):
    return aggregators.gnmax(Ledger(), votes, sigma, rng)


def confident_gnmax(votes, threshold, sigma1, sigma2, rng):
    """(answered, labels), as the bare mechanism returns them."""
    answered, labels, _ = aggregators.confident_gnmax(Ledger(), votes, threshold, sigma1,
                                                      sigma2, rng)
    return answered, labels
