"""DP-SGD's release (Abadi et al. 2016): per step, a Poisson sample of the training set,
each sampled example's gradient clipped to norm C, the sum noised with N(0, sigma^2 C^2)
and divided by the expected batch size, which must not depend on the realised batch, or
the batch size itself would leak.

One object owns the sampling rate, C, sigma, the step count and the random generator
(sampling and noise), and charges the ledger with them when it is made: the clipping, the
noise and the sampling a run uses are the ones it is charged for, by construction, and
it refuses to run more steps than it charged. The caller computes each example's gradient
norm and weighs its gradient by ``clip_weights``; the gradient-norm machinery for Keras
models is methods.nn.fast_clipping.

TensorFlow is imported by this module alone in the layer: importing it loads TensorFlow.
"""
from __future__ import annotations

import tensorflow as tf

from benchmarks.privacy.ledger import Ledger, SampledGaussian, records


class NoisyClippedSum:
    """The Poisson-sampled Gaussian mechanism of ``steps`` DP-SGD steps on ``dataset_size``
    examples. All randomness comes from one generator seeded with ``seed``: equal seeds give
    equal runs (the guarantee assumes the seed is not known to an adversary)."""

    def __init__(self, ledger: Ledger, *, dataset_size: int, sampling_rate: float,
                 noise_multiplier: float, clip_norm: float, steps: int, seed: int) -> None:
        ledger = Ledger.of(ledger, "DP-SGD")
        self.dataset_size, self.steps = int(dataset_size), int(steps)
        self.sampling_rate = float(sampling_rate)
        self.expected_batch = self.sampling_rate * self.dataset_size
        self.clip_norm = float(clip_norm)
        self.noise_std = float(noise_multiplier) * self.clip_norm
        self.generator = tf.random.Generator.from_seed(seed)
        self.taken = tf.Variable(0, dtype=tf.int64, trainable=False)
        ledger.charge("DP-SGD (Poisson-sampled Gaussian)", records(),
                      SampledGaussian(self.noise_std / self.clip_norm, self.sampling_rate,
                                      self.steps),
                      clip_norm=self.clip_norm, dataset_size=self.dataset_size)

    def batch(self) -> tf.Tensor:
        """Indices of the examples that this step's independent coin flips include. The
        coins are float64: a float32 uniform would round the rate up slightly."""
        taken = self.taken.assign_add(1)
        with tf.control_dependencies([tf.debugging.assert_less_equal(
                taken, tf.constant(self.steps, tf.int64),
                message="DP-SGD ran more steps than its ledger charge")]):
            coins = self.generator.uniform([self.dataset_size], dtype=tf.float64)
        return tf.reshape(tf.where(coins < self.sampling_rate), [-1])

    def clip_weights(self, norms: tf.Tensor) -> tf.Tensor:
        """Per example, min(1, C / norm): its gradient times this has norm at most C."""
        return self.clip_norm / tf.math.maximum(self.clip_norm, norms)

    def noisy_mean(self, clipped_sums: list[tf.Tensor]) -> list[tf.Tensor]:
        """The released step: each clipped gradient sum plus N(0, sigma^2 C^2), over the
        expected batch size."""
        return [(g + self.generator.normal(tf.shape(g), stddev=self.noise_std))
                / self.expected_batch for g in clipped_sums]
