"""The DP-SGD training loop (Abadi et al. 2016) with the sampling its accountant assumes.

The release, every step, is the privacy layer's NoisyClippedSum: a Poisson sample (each
training example included independently with probability q = L/N, so the batch size
varies), each example's gradient clipped to norm C, N(0, sigma^2 C^2) noise on the sum,
divided by the expected batch size L. That object charges the run's ledger with the
sampling rate, noise multiplier, clip norm and step count it runs with, and clips the
per-example gradients itself: this module hands it the model and the batch, and applies
the released gradients; momentum and the learning-rate schedule act on the noised gradients
only, so they are post-processing.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import tensorflow as tf

from benchmarks.privacy import Ledger
from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum
from methods.nn.training import WarmupSchedule


class DPSGDStep:
    """One DP-SGD step, compiled once (``step()``), on the release of ``mechanism``."""

    def __init__(self, model: tf.keras.Model, x: np.ndarray, labels: np.ndarray, *,
                 mechanism: NoisyClippedSum, optimizer: tf.keras.optimizers.Optimizer) -> None:
        mechanism.check_model(model)
        self.model, self.optimizer, self.mechanism = model, optimizer, mechanism
        # Its slots made now: a first call that creates variables is traced twice.
        optimizer.build(model.trainable_variables)
        self.x = tf.constant(x)
        self.labels = tf.constant(labels, tf.int32)
        self.step = tf.function(self._step, autograph=False)  # no tensor-dependent Python flow

    def noisy_mean_gradient(self, index: tf.Tensor) -> tuple[list[tf.Tensor], tf.Tensor]:
        grads, losses = self.mechanism.noisy_mean_gradient(
            self.model, tf.gather(self.x, index), tf.gather(self.labels, index))
        return grads, tf.reduce_sum(losses)

    def _step(self) -> tuple[tf.Tensor, tf.Tensor]:
        """Returns the batch size and the summed (unclipped) loss: progress text for the
        operator only, never part of the released model or record."""
        index = self.mechanism.batch()
        grads, loss_sum = self.noisy_mean_gradient(index)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return tf.size(index), loss_sum


def fit(model: tf.keras.Model, x: np.ndarray, labels: np.ndarray, *, steps: int,
        sampling_rate: float, noise_multiplier: float, clip_norm: float, peak_lr: float,
        warmup: float, momentum: float, seed: int, ledger: Ledger,
        progress: Callable[[str], None] = lambda message: None, label: str = "",
        schedule: str = "linear", sensitivity: float = 1.0) -> None:
    """Train ``model`` (logits out) with DP-SGD for ``steps`` Poisson-sampled steps,
    charged to ``ledger`` before the first step; the learning rate follows ``schedule``
    (a WarmupSchedule decay) after the warm-up. ``sensitivity``: how far one neighbour
    moves the clipped sum, in clip norms (2 under label substitution)."""
    optimizer = tf.keras.optimizers.SGD(WarmupSchedule(peak_lr, steps, warmup, schedule),
                                        momentum=momentum)
    mechanism = NoisyClippedSum(ledger, dataset_size=len(labels), sampling_rate=sampling_rate,
                                noise_multiplier=noise_multiplier, clip_norm=clip_norm,
                                steps=steps, seed=seed, sensitivity=sensitivity)
    step = DPSGDStep(model, x, labels, mechanism=mechanism, optimizer=optimizer)
    per_epoch = max(1, round(1 / sampling_rate))
    seen, loss_sum = 0, 0.0
    for i in range(1, steps + 1):
        size, loss = step.step()
        seen, loss_sum = seen + int(size), loss_sum + float(loss)
        if i % per_epoch == 0 or i == steps:
            progress(f"{label}DP-SGD step {i}/{steps} (epoch {i / per_epoch:.1f}) "
                     f"loss {loss_sum / max(seen, 1):.3f}")
            seen, loss_sum = 0, 0.0
