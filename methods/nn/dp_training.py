"""The DP-SGD training loop (Abadi et al. 2016) with the sampling its accountant assumes.

Every step includes each training example independently with probability q = L/N
(Poisson sampling, so the batch size varies), clips each example's gradient to norm C,
adds N(0, sigma^2 C^2) noise to the sum and divides by the expected batch size L: the
divisor must not depend on the realised batch, or the batch size itself would leak.
That is exactly the Poisson-sampled Gaussian mechanism that
benchmarks.privacy.dp_sgd calibrates, and ``fit`` charges the run's ledger with the
sampling rate, noise multiplier and step count it actually runs. Momentum and the
learning-rate schedule act on the noised gradients only, so they are post-processing.

All randomness (sampling and noise) comes from a generator seeded with the run's seed,
so runs are reproducible; the guarantee assumes the seed is not known to an adversary.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import tensorflow as tf

from benchmarks.privacy import Ledger, SampledGaussian, records
from methods.nn import fast_clipping
from methods.nn.training import WarmupSchedule


class DPSGDStep:
    """One DP-SGD step, compiled once (``step()``); all randomness comes from one seeded
    generator, so equal seeds give equal runs."""

    def __init__(self, model: tf.keras.Model, x: np.ndarray, labels: np.ndarray, *,
                 sampling_rate: float, noise_multiplier: float, clip_norm: float,
                 optimizer: tf.keras.optimizers.Optimizer, seed: int) -> None:
        self.registry = fast_clipping.make_registry()
        fast_clipping.check_model(model, self.registry)
        self.model, self.optimizer = model, optimizer
        self.x = tf.constant(x)
        self.labels = tf.constant(labels, tf.int32)
        self.sampling_rate = float(sampling_rate)
        self.expected_batch = self.sampling_rate * len(labels)
        self.noise_std = float(noise_multiplier) * float(clip_norm)
        self.clip_norm = float(clip_norm)
        self.generator = tf.random.Generator.from_seed(seed)
        self.step = tf.function(self._step, autograph=False)  # no tensor-dependent Python flow

    def poisson_batch(self) -> tf.Tensor:
        """Indices of the examples that this step's independent coin flips include.
        The coins are float64: a float32 uniform would round the rate up slightly."""
        coins = self.generator.uniform(tf.shape(self.labels), dtype=tf.float64)
        return tf.reshape(tf.where(coins < self.sampling_rate), [-1])

    def noisy_mean_gradient(self, index: tf.Tensor) -> tuple[list[tf.Tensor], tf.Tensor]:
        grads, _, losses = fast_clipping.clipped_gradient_sum(
            self.model, self.registry, tf.gather(self.x, index),
            tf.gather(self.labels, index), self.clip_norm)
        noisy = [(g + self.generator.normal(tf.shape(g), stddev=self.noise_std))
                 / self.expected_batch for g in grads]
        return noisy, tf.reduce_sum(losses)

    def _step(self) -> tuple[tf.Tensor, tf.Tensor]:
        """Returns the batch size and the summed (unclipped) loss: progress text for the
        operator only, never part of the released model or record."""
        index = self.poisson_batch()
        grads, loss_sum = self.noisy_mean_gradient(index)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return tf.size(index), loss_sum


def fit(model: tf.keras.Model, x: np.ndarray, labels: np.ndarray, *, steps: int,
        sampling_rate: float, noise_multiplier: float, clip_norm: float, peak_lr: float,
        warmup: float, momentum: float, seed: int, ledger: Ledger,
        progress: Callable[[str], None] = lambda message: None, label: str = "") -> None:
    """Train ``model`` (logits out) with DP-SGD for ``steps`` Poisson-sampled steps,
    charged to ``ledger`` before the first step."""
    optimizer = tf.keras.optimizers.SGD(WarmupSchedule(peak_lr, steps, warmup),
                                        momentum=momentum)
    step = DPSGDStep(model, x, labels, sampling_rate=sampling_rate,
                     noise_multiplier=noise_multiplier, clip_norm=clip_norm,
                     optimizer=optimizer, seed=seed)
    ledger.charge("DP-SGD (Poisson-sampled Gaussian)", records(),
                  SampledGaussian(step.noise_std / step.clip_norm, step.sampling_rate, steps),
                  clip_norm=step.clip_norm, dataset_size=len(labels))
    per_epoch = max(1, round(1 / sampling_rate))
    seen, loss_sum = 0, 0.0
    for i in range(1, steps + 1):
        size, loss = step.step()
        seen, loss_sum = seen + int(size), loss_sum + float(loss)
        if i % per_epoch == 0 or i == steps:
            progress(f"{label}DP-SGD step {i}/{steps} (epoch {i / per_epoch:.1f}) "
                     f"loss {loss_sum / max(seen, 1):.3f}")
            seen, loss_sum = 0, 0.0
