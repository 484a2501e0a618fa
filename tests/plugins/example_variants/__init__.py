"""Variants of the example plugin, registered by a package of their own through the
privboard.methods entry point (tests/plugins/installed.py puts it on the path): an honest
self-accounted one, and methods broken on purpose that ``privboard submit`` must refuse
with their reason."""
from __future__ import annotations

import numpy as np

from benchmarks.contract import Split
from benchmarks.submission.contract_checks import TINY_TRAIN
from benchmarks.privacy import Ledger, PureEpsilon, Total, labels
from benchmarks.privacy.randomizers import randomized_response
from uniform_rr_plugin import UniformRRNeighbours


class TrainsOnTrueLabels(UniformRRNeighbours):
    """Releases every label through the layer (charged, and honest at the release), then
    trains on the true labels."""

    name = "true-labels-knn"

    def fit(self, train: Split, num_classes: int) -> "TrainsOnTrueLabels":
        self.release(train, num_classes)
        return self.fit_released(train.x, train.y, num_classes)


class OwnRR(UniformRRNeighbours):
    """Honest and self-accounted: randomized response of its own, outside the layer, at
    ``multiple`` times the epsilon it charges itself."""

    name = "own-rr-knn"
    multiple = 1

    def fit(self, train: Split, num_classes: int) -> "OwnRR":
        epsilon = self.budget.epsilon
        self.ctx.ledger.charge("my randomized response", labels(), PureEpsilon(epsilon))
        run_at = self.multiple * epsilon
        keep = np.exp(run_at) / (np.exp(run_at) + num_classes - 1)
        rng = self.ctx.rng("my randomized response")
        other = (train.y + rng.integers(1, num_classes, len(train))) % num_classes
        released = np.where(rng.random(len(train)) < keep, train.y, other)
        return self.fit_released(train.x, released, num_classes)


class OwnRRAtThreeTimesEpsilon(OwnRR):
    """Self-accounted, and its leak is only a multiple of its claim."""

    name = "own-rr-3x-knn"
    multiple = 3


class ClaimsLessThanItsLedger(UniformRRNeighbours):
    """Reports half of what its ledger composes as its spent epsilon."""

    name = "under-claimed-knn"

    def spent(self) -> Total:
        total = super().spent()
        return Total(total.epsilon / 2, total.delta, total.composition, total.details)


class ReleasesWithoutALedger(UniformRRNeighbours):
    """Calls the layer's randomized response with no ledger to charge."""

    name = "no-ledger-knn"

    def fit(self, train: Split, num_classes: int) -> "ReleasesWithoutALedger":
        released = randomized_response(None, train.y, num_classes, self.budget.epsilon,
                                       self.ctx.rng("rr"), examples=np.arange(len(train)))
        return self.fit_released(train.x, released, num_classes)


class ReleasesOnAScratchLedger(UniformRRNeighbours):
    """Releases through the layer at ten times its epsilon on a ledger of its own, and
    charges the run's ledger its claim itself, so that every label looks covered."""

    name = "scratch-ledger-knn"

    def fit(self, train: Split, num_classes: int) -> "ReleasesOnAScratchLedger":
        self.ctx.ledger.charge("randomized response", labels(), PureEpsilon(self.budget.epsilon))
        released = randomized_response(Ledger(), train.y, num_classes, 10 * self.budget.epsilon,
                                       self.ctx.rng("rr"), examples=np.arange(len(train)))
        return self.fit_released(train.x, released, num_classes)


class RaisesMidFit(UniformRRNeighbours):
    """Fits the contract's tiny data, and fails halfway through a real one."""

    name = "raises-mid-fit-knn"

    def fit(self, train: Split, num_classes: int) -> "RaisesMidFit":
        released = self.release(train, num_classes)
        if len(train) > TINY_TRAIN:
            raise RuntimeError(f"out of memory after the release of {released[:5]}")
        return self.fit_released(train.x, released, num_classes)


class SecondModelOnTrueLabels(UniformRRNeighbours):
    """Fits on its released labels as the example does, then averages in a second model
    trained on the true labels."""

    name = "second-model-knn"

    def fit(self, train: Split, num_classes: int) -> "SecondModelOnTrueLabels":
        super().fit(train, num_classes)
        self.second = UniformRRNeighbours(self.budget, self.seed, **self.hparams).fit_released(
            train.x, train.y, num_classes)
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return (super().predict_proba(x) + self.second.predict_proba(x)) / 2
