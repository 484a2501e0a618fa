"""An example privboard method in Keras: a network with one hidden layer trained by
tensorflow-privacy's ``DPKerasSGDOptimizer`` (per-example clipping, Gaussian noise) in
Keras' ``fit``, full DP under add/remove neighbours.

The noise is tensorflow-privacy's, outside privboard's privacy layer, so the method
charges the run's ledger itself: ``SampledGaussian`` at the noise multiplier, the rate
batch / N and the number of steps, as tensorflow-privacy's own accountant does.
``privboard submit`` watches the optimizer while the method trains and composes the steps
it ran against that charge. Keras' ``fit`` shuffles the training set into fixed-size
batches, which is not Poisson sampling: the run is accounted as if it were, as the
library's accountant does, and is marked "no proven bound" (docs/submission.md).
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from benchmarks.contract import Method, Split
from benchmarks.privacy import (Accountant, Kind, Neighbours, PrivacyNotion, Protects,
                                SampledGaussian, records)
from benchmarks.privacy.dp_sgd import noise_multiplier_for


class KerasDPSGD(Method):
    name = "tfp-keras-mlp"
    paper = ("example plugin: DP-SGD (Abadi et al. 2016) with tensorflow-privacy's Keras "
             "optimizer on a network with one hidden layer")
    notion = PrivacyNotion(Protects.RECORDS, Neighbours.ADD_REMOVE, Kind.APPROXIMATE,
                           Accountant.RDP)
    needs_delta = True
    tasks: ClassVar[tuple[str, ...]] = ("image",)
    defaults: ClassVar[dict[str, Any]] = {"hidden": 32, "batch_size": 64, "epochs": 4,
                                          "clip_norm": 1.0, "learning_rate": 0.5}
    tiny_hparams: ClassVar[dict[str, Any]] = {"epochs": 1}
    # The share of the charged noise multiplier handed to the optimizer: 1 for an honest
    # method (tests/plugins/tfp_plugin holds variants that hand it less).
    noise_share: ClassVar[float] = 1.0

    def fit(self, train: Split, num_classes: int) -> "KerasDPSGD":
        import tensorflow as tf
        from tensorflow_privacy import DPKerasSGDOptimizer

        h, n = self.hparams, len(train)
        tf.keras.utils.set_random_seed(self.ctx.seed_for("keras"))
        batch = min(h["batch_size"], n)
        rate, steps = batch / n, h["epochs"] * -(-n // batch)
        sigma = noise_multiplier_for(self.budget.epsilon, self.budget.delta, rate, steps)
        self.ctx.ledger.charge("DP-SGD (tensorflow-privacy)", records(),
                               SampledGaussian(sigma, rate, steps))
        self.model = tf.keras.Sequential([tf.keras.layers.Dense(h["hidden"], "relu"),
                                          tf.keras.layers.Dense(num_classes)])
        self.train(train.x.reshape(n, -1).astype(np.float32), train.y, batch,
                   DPKerasSGDOptimizer(l2_norm_clip=h["clip_norm"],
                                       noise_multiplier=self.noise_share * sigma,
                                       learning_rate=h["learning_rate"]))
        return self

    def train(self, x: np.ndarray, y: np.ndarray, batch: int, optimizer: Any) -> None:
        self.fit_with(optimizer, x, y, batch, self.hparams["epochs"])

    def fit_with(self, optimizer: Any, x: np.ndarray, y: np.ndarray, batch: int,
                 epochs: int, **fit_args: Any) -> None:
        """Keras' fit (with ``fit_args``), on the per-example losses tensorflow-privacy's
        optimizer clips."""
        import tensorflow as tf

        self.model.compile(optimizer=optimizer, loss=tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE))
        self.model.fit(x, y, batch_size=batch, epochs=epochs, verbose=0, **fit_args)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        import tensorflow as tf

        logits = self.model(x.reshape(len(x), -1).astype(np.float32), training=False)
        return tf.nn.softmax(tf.cast(logits, tf.float64)).numpy()
