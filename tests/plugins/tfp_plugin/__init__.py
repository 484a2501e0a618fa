"""Methods trained with tensorflow-privacy, registered by a package of their own
(tests/plugins/installed.py puts it on the path). With the Keras DP optimizer in Keras'
fit: honest (on shuffled batches), at a quarter of the noise multiplier it charges,
with the noise the optimizer draws set to 0, and with a second epoch by a vectorized
optimizer that the watch does not see. Honest with the optimizer stepped by a loop of
its own (minimize on a tape) and with DPSequential (without XLA, and with its default
XLA, which is not deterministic for a seed). Two broken on purpose that publish what
their honest, charged fit did not release: a last epoch with a plain optimizer, and a
fit stopped early on the private training loss. It needs no PyTorch."""
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
    # The optimizer's per-example losses; DPModel takes a reduced loss.
    reduction: ClassVar[str] = "none"

    def fit(self, train: Split, num_classes: int) -> "KerasDPSGD":
        import tensorflow as tf

        h, n = self.hparams, len(train)
        tf.keras.utils.set_random_seed(self.ctx.seed_for("keras"))
        batch = min(h["batch_size"], n)
        rate, steps = batch / n, h["epochs"] * -(-n // batch)
        sigma = noise_multiplier_for(self.budget.epsilon, self.budget.delta, rate, steps)
        self.ctx.ledger.charge("DP-SGD (tensorflow-privacy)", records(),
                               SampledGaussian(sigma, rate, steps))
        self.model = self.network(num_classes, sigma)
        self.train(train.x.reshape(n, -1).astype(np.float32), train.y, batch,
                   self.optimizer(sigma))
        return self

    def network(self, num_classes: int, sigma: float) -> Any:
        import tensorflow as tf

        return tf.keras.Sequential(self.layers(num_classes))

    def layers(self, num_classes: int) -> list:
        import tensorflow as tf

        return [tf.keras.layers.Dense(self.hparams["hidden"], "relu"),
                tf.keras.layers.Dense(num_classes)]

    def optimizer(self, sigma: float) -> Any:
        from tensorflow_privacy import DPKerasSGDOptimizer

        return DPKerasSGDOptimizer(l2_norm_clip=self.hparams["clip_norm"],
                                   noise_multiplier=self.noise_share * sigma,
                                   learning_rate=self.hparams["learning_rate"])

    def train(self, x: np.ndarray, y: np.ndarray, batch: int, optimizer: Any) -> None:
        self.fit_with(optimizer, x, y, batch, self.hparams["epochs"])

    def fit_with(self, optimizer: Any, x: np.ndarray, y: np.ndarray, batch: int,
                 epochs: int, callbacks: tuple = ()) -> None:
        import tensorflow as tf

        self.model.compile(optimizer=optimizer, loss=tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=self.reduction))
        self.model.fit(x, y, batch_size=batch, epochs=epochs, verbose=0,
                       callbacks=list(callbacks))

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
    step) with a plain SGD optimizer in Keras' fit, made with use_xla=False."""

    name = "tfp-dp-sequential-mlp"
    use_xla: ClassVar[bool] = False
    reduction = "auto"

    def network(self, num_classes: int, sigma: float) -> Any:
        from tensorflow_privacy import DPSequential

        return DPSequential(l2_norm_clip=self.hparams["clip_norm"],
                            noise_multiplier=self.noise_share * sigma,
                            layers=self.layers(num_classes),
                            **({} if self.use_xla else {"use_xla": False}))

    def optimizer(self, sigma: float) -> Any:
        import tensorflow as tf

        return tf.keras.optimizers.SGD(learning_rate=self.hparams["learning_rate"])


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

        self.fit_with(optimizer, x, y, batch, self.hparams["epochs"], (StopBelow(),))
