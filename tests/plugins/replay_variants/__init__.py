"""Methods of a package of their own for the replay check of ``privboard submit``
(tests/test_submit_replay.py; tests/plugins/installed.py puts the package on the path):
a full-DP method built on the layer's Gaussian mean, and variants broken on purpose that
read private data beside the layer where a loose replay would not look: the last
records of the training set, the rows of a release that cannot be replayed, a second
release the fit makes only on some data, a charge described by the private labels.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from benchmarks.contract import Method, Split
from benchmarks.privacy import (Accountant, Kind, Neighbours, PrivacyNotion, Protects,
                                labels)
from benchmarks.privacy.dp_sgd import noise_multiplier_for
from benchmarks.privacy.erm_noise import objective_perturbation_noise
from benchmarks.privacy.noisy_clipped_mean import NoisyClippedMean
from benchmarks.privacy.randomizers import randomized_response
from uniform_rr_plugin import UniformRRNeighbours

FULL_DP = PrivacyNotion(Protects.RECORDS, Neighbours.ADD_REMOVE, Kind.APPROXIMATE,
                        Accountant.RDP)
# A validation split's size, taken from the end of the training set by the broken variant.
VALIDATION = 20


class NoisyCentroids(Method):
    """Honest: every class's sum of inputs and count from one release of the layer's
    Gaussian mean of clipped vectors (each record's input and a one in its label's block,
    clipped to norm 1), then the nearest noisy centroid, softened by a temperature."""

    name = "noisy-centroids"
    paper = "test plugin: class centroids from one Gaussian mean of clipped vectors"
    notion = FULL_DP
    tasks: ClassVar[tuple[str, ...]] = ("image", "tabular")
    needs_delta = True
    defaults: ClassVar[dict[str, Any]] = {"temperature": 1.0}

    def fit(self, train: Split, num_classes: int) -> "NoisyCentroids":
        flat = train.x.reshape(len(train), -1)
        blocks = np.zeros((len(train), num_classes, flat.shape[1] + 1))
        blocks[np.arange(len(train)), train.y] = np.c_[flat, np.ones(len(train))]
        sigma = noise_multiplier_for(self.budget.epsilon, self.budget.delta, 1.0, 1)
        mean = NoisyClippedMean(self.ctx.ledger, dataset_size=len(train), clip_norm=1.0,
                                noise_multiplier=sigma, rng=self.ctx.rng("noise"),
                                what=self.described(train, num_classes))
        sums = mean.release(blocks.reshape(len(train), -1)).reshape(num_classes, -1)
        self.centroids = sums[:, :-1] / np.maximum(sums[:, -1:], 1 / len(train))
        return self

    def described(self, train: Split, num_classes: int) -> str:
        return f"class sums of {num_classes} classes"

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        distances = ((x.reshape(len(x), 1, -1) - self.centroids[None]) ** 2).sum(-1)
        scores = np.exp(-(distances - distances.min(1, keepdims=True))
                        / self.hparams["temperature"])
        return scores / scores.sum(1, keepdims=True)


class ValidatedOnTheLastRecords(NoisyCentroids):
    """Corrects its probabilities towards the class frequencies of a validation split
    taken from the end of the training set: records it reads beside the layer."""

    name = "noisy-centroids-validated"

    def fit(self, train: Split, num_classes: int) -> "ValidatedOnTheLastRecords":
        super().fit(train, num_classes)
        self.frequencies = np.bincount(train.y[-VALIDATION:], minlength=num_classes) / VALIDATION
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return (super().predict_proba(x) + self.frequencies) / 2


class DescribedByTheLabels(NoisyCentroids):
    """Describes its charge, which every record publishes, with the count of each class
    of the private labels."""

    name = "noisy-centroids-described"

    def described(self, train: Split, num_classes: int) -> str:
        return f"class sums, {np.bincount(train.y, minlength=num_classes).tolist()} per class"


class OneRowNotReplayed(UniformRRNeighbours):
    """The first label goes to objective perturbation's noise, whose minimiser the
    method computes itself (a release that cannot be replayed), and every other label to
    randomized response; k nearest neighbours on the others' released labels. Broken on
    purpose when ``leaks``: the number of neighbours is chosen by how often the released
    labels agree with the true ones."""

    name = "one-row-not-replayed-knn"
    leaks = True

    def fit(self, train: Split, num_classes: int) -> "OneRowNotReplayed":
        objective_perturbation_noise(self.ctx.ledger, 1, epsilon=self.budget.epsilon,
                                     regularization=1.0, curvature_bound=0.25,
                                     rng=self.ctx.rng("first row"),
                                     touches=labels(np.array([0])))
        rest = np.arange(1, len(train))
        released = randomized_response(self.ctx.ledger, train.y[rest], num_classes,
                                       self.budget.epsilon, self.ctx.rng("randomized response"),
                                       examples=rest)
        if self.leaks and np.mean(released == train.y[rest]) > 0.15:
            self.hparams = {**self.hparams, "neighbours": 5}
        return self.fit_released(train.x[rest], released, num_classes)


class OneRowNotReplayedHonest(OneRowNotReplayed):
    name = "one-row-not-replayed-honest-knn"
    leaks = False


class SecondReleaseWhenOdd(UniformRRNeighbours):
    """Releases the first label once more when it is odd, which its record's epsilon
    would then show, and carries on if the layer refuses the release."""

    name = "second-release-knn"

    def fit(self, train: Split, num_classes: int) -> "SecondReleaseWhenOdd":
        super().fit(train, num_classes)
        if train.y[0] % 2:
            try:
                randomized_response(self.ctx.ledger, train.y[:1], num_classes,
                                    self.budget.epsilon, self.ctx.rng("again"),
                                    examples=np.array([0]))
            except Exception:  # noqa: BLE001 (whatever the layer says, go on)
                pass
        return self
