"""The shared base of the Keras image classifiers: build a model from methods.nn,
train it with the shared loop, predict probabilities."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from benchmarks.contract import Method, Split

TRAINING_DEFAULTS: dict[str, Any] = {
    "model": "cnn", "epochs": 8, "batch_size": 256, "peak_lr": 0.05, "warmup": 0.15,
    "schedule": "linear", "momentum": 0.9, "weight_decay": 1e-4, "augment": False,
}


class KerasClassifier(Method):
    """Shared by the Keras classifiers of images and of ratings (model "ncf"): build,
    train, predict."""

    tasks = ("image", "ratings")
    tiny_hparams: ClassVar[dict[str, Any]] = {"epochs": 1, "batch_size": 64}

    def _build(self, train: Split, num_classes: int):
        from methods.nn import models, training

        training.seed_everything(self.seed)
        self.model = models.build(self.hparams["model"], train.x.shape[1:], num_classes)
        self.num_classes = num_classes
        return self.model

    def _train(self, x: np.ndarray, labels: np.ndarray, mixup_alpha: float, label: str) -> None:
        from methods.nn import training

        h = self.hparams
        training.fit(self.model, x, labels, self.num_classes, epochs=h["epochs"],
                     batch_size=h["batch_size"], peak_lr=h["peak_lr"], warmup=h["warmup"],
                     schedule=h["schedule"], augment=h["augment"],
                     momentum=h["momentum"], weight_decay=h["weight_decay"],
                     mixup_alpha=mixup_alpha, seed=self.seed, progress=self.progress,
                     label=label)

    def _logits(self, x: np.ndarray) -> np.ndarray:
        from methods.nn import training

        return training.predict_logits(self.model, x)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        from methods.nn import training

        return training.softmax(self._logits(x))

    def variant(self) -> str:
        return "" if self.hparams["model"] == "cnn" else self.hparams["model"]
