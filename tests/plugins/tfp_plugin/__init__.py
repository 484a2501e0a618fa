"""Variants of the example tensorflow-privacy method (examples/tfp-keras-plugin),
registered by a package of their own (tests/plugins/installed.py puts it on the path): at
a quarter of the noise multiplier it charges, with the noise the optimizer draws set to
0, and with a second epoch by a vectorized optimizer that the watch does not see. They
need no PyTorch."""
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
