"""The shared base of the Keras image classifiers: build a model from methods.nn,
train it with the shared loop, predict probabilities."""
from __future__ import annotations

import numbers
from typing import Any, ClassVar

import numpy as np

from benchmarks.contract import Budget, Method, Split
from benchmarks.errors import InputError

# The builders of methods.nn.models, named here so that settings are checked without
# importing TensorFlow (a test keeps the two lists equal).
MODELS = ("cnn", "inception", "resnet18_v2", "ncf", "small-cnn", "teacher_cnn",
          "pate_mnist_cnn", "pate_deep_cnn", "teacher_mlp")
SCHEDULES = ("linear", "piecewise")
PRETRAIN_SOURCES = ("", "cifar100")
TRAINING_DEFAULTS: dict[str, Any] = {
    "model": "cnn", "epochs": 8, "batch_size": 256, "peak_lr": 0.05, "warmup": 0.15,
    "schedule": "linear", "momentum": 0.9, "weight_decay": 1e-4, "augment": False,
    # "cifar100": non-private pre-training on the public CIFAR-100 first (Table 1's "pt")
    "pretrain": "", "pretrain_epochs": 200, "pretrain_peak_lr": 0.1,
}


class KerasClassifier(Method):
    """Shared by the Keras classifiers of images and of ratings (model "ncf"): build,
    train, predict."""

    tasks = ("image", "ratings")
    tiny_hparams: ClassVar[dict[str, Any]] = {"epochs": 1, "batch_size": 64}

    def __init__(self, budget: Budget, seed: int = 0, **hparams: Any) -> None:
        super().__init__(budget, seed, **hparams)
        h = self.hparams
        if h["model"] not in MODELS:
            raise InputError(f"{self.name}: unknown model {h['model']!r}; known: {', '.join(MODELS)}")
        if h["pretrain"] not in PRETRAIN_SOURCES:
            raise InputError(f"{self.name}: pretrain must be one of {PRETRAIN_SOURCES}, "
                             f"got {h['pretrain']!r}")
        if h["schedule"] not in SCHEDULES:
            raise InputError(f"{self.name}: schedule must be one of {SCHEDULES}, got {h['schedule']!r}")
        for key in ("epochs", "batch_size", "pretrain_epochs"):
            if not _positive_int(h[key]):
                raise InputError(f"{self.name}: {key} must be a positive integer, got {h[key]!r}")
        for key in ("peak_lr", "momentum", "weight_decay", "warmup", "pretrain_peak_lr"):
            if not isinstance(h[key], numbers.Real) or h[key] < 0:
                raise InputError(f"{self.name}: {key} must be a number >= 0, got {h[key]!r}")

    def _build(self, train: Split, num_classes: int):
        from methods.nn import models, pretraining, training

        h = self.hparams
        training.seed_everything(self.ctx.seed_for("model initialisation"))
        if h["pretrain"]:
            self.model = pretraining.pretrained(
                self.ctx, h["pretrain"], h["model"], train.x.shape[1:], num_classes,
                norm=None, epochs=h["pretrain_epochs"], batch_size=h["batch_size"],
                peak_lr=h["pretrain_peak_lr"], augment=h["augment"], progress=self.progress)
        else:
            self.model = models.build(h["model"], train.x.shape[1:], num_classes)
        self.num_classes = num_classes
        return self.model

    def _train(self, x: np.ndarray, labels: np.ndarray, mixup_alpha: float, label: str) -> None:
        from methods.nn import training

        h = self.hparams
        training.fit(self.model, x, labels, self.num_classes, epochs=h["epochs"],
                     batch_size=h["batch_size"], peak_lr=h["peak_lr"], warmup=h["warmup"],
                     schedule=h["schedule"], augment=h["augment"],
                     momentum=h["momentum"], weight_decay=h["weight_decay"],
                     mixup_alpha=mixup_alpha, seed=self.ctx.seed_for(f"training {label}"),
                     progress=self.progress, label=label)

    def _logits(self, x: np.ndarray) -> np.ndarray:
        from methods.nn import training

        return training.predict_logits(self.model, x)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        from methods.nn import training

        return training.softmax(self._logits(x))

    def variant(self) -> str:
        """The paper's own label for its pre-trained rows (Table 1's "pt"), so that they
        pair with ours; otherwise the model when it is not the CPU CNN."""
        h = self.hparams
        if h["pretrain"]:
            return f"pre-trained on {h['pretrain'].upper().replace('CIFAR', 'CIFAR-')}"
        return "" if h["model"] == "cnn" else h["model"]


def _positive_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value > 0
