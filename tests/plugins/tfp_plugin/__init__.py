"""Variants of the example tensorflow-privacy method (examples/tfp-keras-plugin),
registered by a package of their own (tests/plugins/installed.py puts it on the path): at
a quarter of the noise multiplier it charges, with the noise the optimizer draws set to
0, and with a second epoch by a vectorized optimizer that the watch does not see. Honest
with the optimizer stepped by a loop of its own (minimize on a tape) and with
DPSequential (without XLA, and with its default XLA, which is not deterministic for a
seed). Two broken on purpose that publish what their honest, charged fit did not
release: a last epoch with a plain optimizer, and a fit stopped early on the private
training loss. They need no PyTorch."""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from tfp_keras_plugin import KerasDPSGD


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


class KerasDPSGDTapeLoop(KerasDPSGD):
    """Honest: DPKerasSGDOptimizer stepped by a loop of its own, ``minimize`` on each
    shuffled batch's per-example losses with a GradientTape, in a tf.function."""

    name = "tfp-tape-loop-mlp"

    def train(self, x: np.ndarray, y: np.ndarray, batch: int, optimizer: Any) -> None:
        import tensorflow as tf

        loss = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE)

        @tf.function(input_signature=[tf.TensorSpec([None, x.shape[1]], tf.float32),
                                      tf.TensorSpec([None], tf.int64)])
        def step(xb, yb):
            with tf.GradientTape() as tape:
                losses = loss(yb, self.model(xb, training=True))
            optimizer.minimize(losses, self.model.trainable_variables, tape=tape)

        rng = np.random.default_rng(self.ctx.seed_for("batches"))
        for _ in range(self.hparams["epochs"]):
            order = rng.permutation(len(x))
            for start in range(0, len(x), batch):
                step(x[order[start:start + batch]], y[order[start:start + batch]])


class DPSequentialMLP(KerasDPSGD):
    """Honest: tensorflow-privacy's DPSequential (its own clipping and noise in its train
    step) with a plain SGD optimizer and the mean loss in Keras' fit, made with the
    example's layers, clipping norm and noise multiplier and use_xla=False."""

    name = "tfp-dp-sequential-mlp"
    use_xla: ClassVar[bool] = False

    def train(self, x: np.ndarray, y: np.ndarray, batch: int, optimizer: Any) -> None:
        import tensorflow as tf
        from tensorflow_privacy import DPSequential

        clip = self.hparams["clip_norm"]
        self.model = DPSequential(l2_norm_clip=clip,
                                  noise_multiplier=optimizer._dp_sum_query._stddev / clip,
                                  layers=self.model.layers,
                                  **({} if self.use_xla else {"use_xla": False}))
        self.model.compile(optimizer=tf.keras.optimizers.SGD(self.hparams["learning_rate"]),
                           loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        self.model.fit(x, y, batch_size=batch, epochs=self.hparams["epochs"], verbose=0)


class DPSequentialXLA(DPSequentialMLP):
    """Honest, but DPSequential with its default use_xla=True: its noise under XLA is not
    reproducible for a seed."""

    name = "tfp-dp-sequential-xla-mlp"
    use_xla = True


class KerasThenAPlainEpoch(KerasDPSGD):
    """Broken on purpose: the charged DPKerasSGDOptimizer fit, then one more epoch of
    Keras' fit with a plain SGD optimizer on the same records."""

    name = "tfp-then-plain-epoch-mlp"

    def train(self, x: np.ndarray, y: np.ndarray, batch: int, optimizer: Any) -> None:
        import tensorflow as tf

        super().train(x, y, batch, optimizer)
        self.fit_with(tf.keras.optimizers.SGD(learning_rate=self.hparams["learning_rate"]),
                      x, y, batch, 1)


class KerasStoppedEarly(KerasDPSGD):
    """Broken on purpose: charged for all its epochs, but stops Keras' fit at the first
    epoch whose loss on the private training records is below ``STOP_BELOW``."""

    name = "tfp-early-stopping-mlp"
    tiny_hparams: ClassVar[dict[str, Any]] = {"epochs": 4}
    STOP_BELOW: ClassVar[float] = 2.35

    def train(self, x: np.ndarray, y: np.ndarray, batch: int, optimizer: Any) -> None:
        import tensorflow as tf

        class StopBelow(tf.keras.callbacks.Callback):
            def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
                if (logs or {}).get("loss", np.inf) < KerasStoppedEarly.STOP_BELOW:
                    self.model.stop_training = True

        self.fit_with(optimizer, x, y, batch, self.hparams["epochs"], callbacks=[StopBelow()])
