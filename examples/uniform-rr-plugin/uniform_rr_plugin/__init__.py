"""An example privboard method in a package of its own: randomized response on every
training label (RRWithPrior with a uniform prior, as LP-1ST's one stage), then k nearest
neighbours on the released labels instead of LP-1ST's network.

Each label is released once by the privacy layer's randomized response, which charges
the epsilon it runs at to that label on the run's ledger: the method is epsilon-label-DP
by parallel composition, charged by construction. The classifier reads the inputs (public
under label-DP) and the released labels only, so it is post-processing.
"""
from __future__ import annotations

import numbers
from typing import Any, ClassVar

import numpy as np
from sklearn.neighbors import KNeighborsClassifier

from benchmarks.contract import Budget, Method, Split
from benchmarks.errors import InputError
from benchmarks.privacy import LABEL_DP_PURE
from benchmarks.privacy.randomizers import randomized_response


class UniformRRNeighbours(Method):
    name = "uniform-rr-knn"
    paper = ("example plugin: randomized response with a uniform prior (Ghazi et al. 2021, "
             "LP-1ST's first stage), then k nearest neighbours on the released labels")
    notion = LABEL_DP_PURE  # label-DP, substitution neighbours, pure epsilon
    tasks: ClassVar[tuple[str, ...]] = ("image", "tabular")
    defaults: ClassVar[dict[str, Any]] = {"neighbours": 25}

    def __init__(self, budget: Budget, seed: int = 0, **hparams: Any) -> None:
        super().__init__(budget, seed, **hparams)
        k = self.hparams["neighbours"]
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise InputError(f"{self.name}: neighbours must be an integer >= 1, got {k!r}")

    def release(self, train: Split, num_classes: int) -> np.ndarray:
        """Every training label once through the layer's randomized response, which
        charges the budget's epsilon to each label it releases."""
        return randomized_response(self.ctx.ledger, train.y, num_classes, self.budget.epsilon,
                                   self.ctx.rng("randomized response"),
                                   examples=np.arange(len(train)))

    def fit(self, train: Split, num_classes: int) -> "UniformRRNeighbours":
        released = self.release(train, num_classes)
        # A statistic of the private labels: for debugging only, never published.
        self.ctx.diagnose(kept_label_share=float(np.mean(released == train.y)))
        return self.fit_released(train.x, released, num_classes)

    def fit_released(self, x: np.ndarray, labels: np.ndarray,
                     num_classes: int) -> "UniformRRNeighbours":
        # Distance-weighted: a training input is predicted as its own released label.
        self.model = KNeighborsClassifier(min(self.hparams["neighbours"], len(x)),
                                          weights="distance").fit(_flat(x), labels)
        self.num_classes = num_classes
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        proba = np.zeros((len(x), self.num_classes))
        proba[:, self.model.classes_] = self.model.predict_proba(_flat(x))
        return proba


def _flat(x: np.ndarray) -> np.ndarray:
    return x.reshape(len(x), -1)
