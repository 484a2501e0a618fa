"""Priors from clusters of label-free features (Ghazi et al. 2021, Algorithm 4) and their
quality on the test split (the study of the paper's Figure 2).

The clusters are a function of the inputs' features alone. Training labels enter in one
place only, release_cluster_priors, and only through mechanisms.noisy_cluster_priors,
the epsilon_p-label-DP release. The quality figures read test labels, which belong to
the public evaluation split.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from benchmarks.privacy import Ledger
from benchmarks.privacy.randomizers import noisy_cluster_priors

NUM_CLUSTERS = 100  # the paper's C for BYOL features


@dataclasses.dataclass(frozen=True)
class Clusters:
    centres: np.ndarray  # (C, D)
    train: np.ndarray  # (N,) the cluster of each training example

    def assign(self, features: np.ndarray) -> np.ndarray:
        """The nearest centre of each row of ``features`` (M, D)."""
        from sklearn.metrics import pairwise_distances_argmin

        return pairwise_distances_argmin(features, self.centres)


def fit_clusters(train_features: np.ndarray, num_clusters: int = NUM_CLUSTERS, *,
                 seed: int, n_init: int = 1) -> Clusters:
    """k-means (k-means++ starts, the best of ``n_init``) on the training features."""
    from sklearn.cluster import KMeans  # imported here: the registry imports this module

    kmeans = KMeans(n_clusters=num_clusters, n_init=n_init, random_state=seed)
    train = kmeans.fit_predict(train_features)
    return Clusters(kmeans.cluster_centers_, train)


def release_cluster_priors(ledger: Ledger, train_labels: np.ndarray,
                           train_clusters: np.ndarray, num_clusters: int, num_classes: int,
                           epsilon_p: float, rng: np.random.Generator) -> np.ndarray:
    """The (C, K) table of noisy cluster priors, epsilon_p-label-DP, charged to every
    training label.

    noisy_cluster_priors gives each training example its cluster's prior; the table is
    read back from those rows (post-processing). A cluster with no training example has
    nothing released and gets the uniform prior.
    """
    per_example = noisy_cluster_priors(ledger, train_labels, train_clusters, num_clusters,
                                       num_classes, epsilon_p, rng,
                                       examples=np.arange(len(train_labels)),
                                       group="all examples")
    table = np.full((num_clusters, num_classes), 1.0 / num_classes)
    present, first = np.unique(train_clusters, return_index=True)
    table[present] = per_example[first]
    return table
