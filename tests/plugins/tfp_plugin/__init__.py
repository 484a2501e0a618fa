"""A method trained with tensorflow-privacy's Keras DP optimizer, registered by a package
of its own (tests/plugins/installed.py puts it on the path): honest (on shuffled
batches), at a quarter of the noise multiplier it charges, with the noise the optimizer
draws set to 0, and with a second epoch by a vectorized optimizer that the watch does
not see. It needs no PyTorch."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from benchmarks.contract import Method, Split
from benchmarks.privacy import (Accountant, Kind, Neighbours, PrivacyNotion, Protects,
                                SampledGaussian, records)
from benchmarks.privacy.dp_sgd import noise_multiplier_for


class KerasDPSGD(Method):
    """A network with one hidden layer, trained by tensorflow-privacy's
    DPKerasSGDOptimizer in Keras' fit on shuffled batches: charged as a Poisson sample at
    rate batch/N, as tensorflow-privacy's own accountant does."""

    name = "tfp-keras-mlp"
    paper = "test plugin: DP-SGD with tensorflow-privacy's Keras optimizer"
    notion = PrivacyNotion(Protects.RECORDS, Neighbours.ADD_REMOVE, Kind.APPROXIMATE,
                           Accountant.RDP)
    needs_delta = True
    tasks: ClassVar[tuple[str, ...]] = ("image",)
    defaults: ClassVar[dict[str, Any]] = {"hidden": 32, "batch_size": 64, "epochs": 4,
                                          "clip_norm": 1.0, "learning_rate": 0.5}
    tiny_hparams: ClassVar[dict[str, Any]] = {"epochs": 1}
    noise_share: ClassVar[float] = 1.0  # of the charged noise multiplier

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
                 epochs: int) -> None:
        import tensorflow as tf

        self.model.compile(optimizer=optimizer, loss=tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE))
        self.model.fit(x, y, batch_size=batch, epochs=epochs, verbose=0)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        import tensorflow as tf

        logits = self.model(x.reshape(len(x), -1).astype(np.float32), training=False)
        return tf.nn.softmax(tf.cast(logits, tf.float64)).numpy()


class KerasDPSGDAtAQuarter(KerasDPSGD):
    name = "tfp-keras-quarter-mlp"
    noise_share = 0.25


class KerasDPSGDNoiseless(KerasDPSGD):
    """Its optimizer's state set to draw noise of standard deviation 0, while the query
    it was made with still says sigma."""

    name = "tfp-keras-noiseless-mlp"

    def train(self, x: np.ndarray, y: np.ndarray, batch: int, optimizer: Any) -> None:
        import tensorflow as tf

        optimizer._global_state = optimizer._global_state._replace(stddev=tf.constant(0.0))
        super().train(x, y, batch, optimizer)


class KerasDPSGDThenVectorized(KerasDPSGD):
    """Its first epoch with DPKerasSGDOptimizer, the others with tensorflow-privacy's
    VectorizedDPKerasSGDOptimizer at a quarter of the noise multiplier it charges."""

    name = "tfp-then-vectorized-mlp"
    tiny_hparams: ClassVar[dict[str, Any]] = {"epochs": 2}

    def train(self, x: np.ndarray, y: np.ndarray, batch: int, optimizer: Any) -> None:
        from tensorflow_privacy import VectorizedDPKerasSGDOptimizer

        self.fit_with(optimizer, x, y, batch, 1)
        clip, std = optimizer._dp_sum_query._l2_norm_clip, optimizer._dp_sum_query._stddev
        self.fit_with(VectorizedDPKerasSGDOptimizer(
            l2_norm_clip=clip, noise_multiplier=std / clip / 4,
            learning_rate=self.hparams["learning_rate"]), x, y, batch, self.hparams["epochs"] - 1)
