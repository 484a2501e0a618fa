"""The non-private reference: the LP methods' model and training (mixup included) on
the true labels, so that only the privacy machinery differs."""
from __future__ import annotations

from typing import Any, ClassVar

from benchmarks.contract import Split
from benchmarks.privacy import NON_PRIVATE, Unprotected, labels
from methods.keras_classifier import TRAINING_DEFAULTS, KerasClassifier


class NonPrivate(KerasClassifier):
    name = "non-private"
    paper = "reference: no privacy (the e=inf columns of the label-DP paper's tables)"
    notion = NON_PRIVATE
    defaults: ClassVar[dict[str, Any]] = {**TRAINING_DEFAULTS, "mixup_alpha": 4.0}

    def fit(self, train: Split, num_classes: int) -> "NonPrivate":
        self.ctx.ledger.charge("training on the true labels", labels(),
                               Unprotected("the non-private reference"))
        self._build(train, num_classes)
        self._train(train.x, train.y, self.hparams["mixup_alpha"], label="")
        return self
