"""DP-SGD's release (Abadi et al. 2016): per step, a Poisson sample of the training set,
each sampled example's gradient clipped to norm C, the sum noised with N(0, sigma^2 C^2)
and divided by the expected batch size, which must not depend on the realised batch, or
the batch size itself would leak.

One object owns the sampling rate, C, sigma, the step count and the random generator
(sampling and noise), and charges the ledger with them when it is made: the clipping, the
noise and the sampling a run uses are the ones it is charged for, by construction, and
it refuses to run more steps than it charged. It also owns the gradients' clipping: the
caller hands it the model and the batch (``noisy_mean_gradient``), and the per-example
norms (benchmarks.privacy.fast_clipping), the clip weights and the weighted sum that
reach the noise are its own, so no caller can clip at another norm than the charged one.

Under add/remove neighbours one example moves the sum by at most C. Under label
substitution (label-DP) one example's clipped gradient moves within the C-ball, by up
to 2C: ``sensitivity`` (in clip norms) says which, and the noise and the charge are at
sensitivity x C, while the gradients are clipped to C.

An audit's phantom canaries (benchmarks.privacy.phantom_canaries) planted on the ledger
are sampled by the same coins, clipped by the same ``clip_weights`` and noised by the
same draw as the real examples, on coordinates of their own, and their release is
observed there. What a phantom's coin changes is the neighbouring relation's (in the set
or not; its vector +v or -v), never ``sensitivity``: a sensitivity set below the
relation's is seen. The noise added to the real coordinates is handed to the phantoms
too, whose audit checks it against theirs.

TensorFlow is imported by this module alone in the layer: importing it loads TensorFlow.
"""
from __future__ import annotations

import tensorflow as tf

from benchmarks.privacy import fast_clipping, phantom_canaries
from benchmarks.privacy.ledger import Ledger, SampledGaussian, records

MECHANISM = "DP-SGD (Poisson-sampled Gaussian)"


class NoisyClippedSum:
    """The Poisson-sampled Gaussian mechanism of ``steps`` DP-SGD steps on ``dataset_size``
    examples. All randomness comes from one generator seeded with ``seed``: equal seeds give
    equal runs (the guarantee assumes the seed is not known to an adversary)."""

    def __init__(self, ledger: Ledger, *, dataset_size: int, sampling_rate: float,
                 noise_multiplier: float, clip_norm: float, steps: int, seed: int,
                 sensitivity: float = 1.0) -> None:
        ledger = Ledger.of(ledger, "DP-SGD")
        self.dataset_size, self.steps = int(dataset_size), int(steps)
        self.sampling_rate = float(sampling_rate)
        self.expected_batch = self.sampling_rate * self.dataset_size
        self.clip_norm = float(clip_norm)
        self.sensitivity = float(sensitivity) * self.clip_norm
        self.noise_std = float(noise_multiplier) * self.sensitivity
        self.generator = tf.random.Generator.from_seed(seed)
        self.taken = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.phantoms = ledger.phantoms
        if self.phantoms is not None:
            self._rows = tf.constant(self.phantoms.rows[:, None], tf.int64)
            self._signs = tf.constant(self.phantoms.signs)
            self._sampled = tf.Variable(tf.zeros([len(self._rows)], tf.bool), trainable=False)
        self.ledger = ledger
        self.registry = fast_clipping.make_registry()
        ledger.charge(MECHANISM, records(),
                      SampledGaussian(self.noise_std / self.sensitivity, self.sampling_rate,
                                      self.steps),
                      clip_norm=self.clip_norm, sensitivity=self.sensitivity,
                      dataset_size=self.dataset_size)

    def batch(self) -> tf.Tensor:
        """Indices of the examples that this step's independent coin flips include. The
        coins are float64: a float32 uniform would round the rate up slightly."""
        taken = self.taken.assign_add(1)
        with tf.control_dependencies([tf.debugging.assert_less_equal(
                taken, tf.constant(self.steps, tf.int64),
                message="DP-SGD ran more steps than its ledger charge")]):
            coins = self.generator.uniform(
                [self.dataset_size + (0 if self.phantoms is None else len(self._rows))],
                dtype=tf.float64)
        if self.phantoms is not None:  # the phantoms' coins follow the real examples'
            self._sampled.assign(coins[self.dataset_size:] < self.sampling_rate)
            coins = coins[:self.dataset_size]
        return tf.reshape(tf.where(coins < self.sampling_rate), [-1])

    def check_model(self, model: tf.keras.Model) -> None:
        """Raise ValueError, before training, for a model whose per-example gradients the
        mechanism cannot clip."""
        fast_clipping.check_model(model, self.registry)

    def noisy_mean_gradient(self, model: tf.keras.Model, x: tf.Tensor, labels: tf.Tensor
                            ) -> tuple[list[tf.Tensor], tf.Tensor]:
        """The released step on the batch (x, labels) of ``model``'s cross-entropy: every
        example's gradient clipped to C by ``clip_weights`` of its norm, summed, noised,
        over the expected batch size. Returns the released gradients (one per trainable
        variable) and the per-example losses (progress text for the operator only). Graph
        mode only: call it inside a tf.function."""
        sums, _, losses = fast_clipping.clipped_gradient_sum(model, self.registry, x, labels,
                                                             self.clip_weights)
        return self._noisy_mean(sums), losses

    def noisy_mean_of_zeros(self, coordinates: int) -> list[tf.Tensor]:
        """A step on which no real example has a gradient, of ``coordinates`` real
        coordinates: the release audit of the mechanism alone."""
        return self._noisy_mean([tf.zeros([coordinates])])

    def clip_weights(self, norms: tf.Tensor) -> tf.Tensor:
        """Per example, min(1, C / norm): its gradient times this has norm at most C."""
        return self.clip_norm / tf.math.maximum(self.clip_norm, norms)

    def _noisy_mean(self, clipped_sums: list[tf.Tensor]) -> list[tf.Tensor]:
        """The released step: each clipped gradient sum plus N(0, sigma^2 S^2), S the
        sensitivity, over the expected batch size. The phantoms' coordinates are noised
        after the real ones, by the same generator."""
        noisy = [self._noised(g) for g in clipped_sums]
        if self.phantoms is not None:
            with tf.control_dependencies([self._observed(clipped_sums, noisy)]):
                noisy = [tf.identity(g) for g in noisy]
        released = [g / self.expected_batch for g in noisy]
        return released if Ledger.tape is None else self._replayed(released)

    def _noised(self, g: tf.Tensor) -> tf.Tensor:
        return g + self.generator.normal(tf.shape(g), stddev=self.noise_std)

    def _replayed(self, released: list[tf.Tensor]) -> list[tf.Tensor]:
        """The step through the replay check's tape (benchmarks.privacy.replay)."""
        replayed = tf.numpy_function(
            lambda *grads: self.ledger.released(
                MECHANISM, list(grads), clip_norm=self.clip_norm, noise_std=self.noise_std,
                sampling_rate=self.sampling_rate, dataset_size=self.dataset_size),
            released, [g.dtype for g in released], stateful=True)
        for g, shaped in zip(replayed, released):
            g.set_shape(shaped.shape)
        return list(replayed)

    def _observed(self, clipped_sums: list[tf.Tensor], noisy: list[tf.Tensor]) -> tf.Tensor:
        """The phantoms' coordinates released and handed to them, with the noise that
        ``noisy`` added to the real ones (its sum of squares)."""
        released = self._noised(self._phantom_sum())
        squares = tf.add_n([tf.constant(0.0, tf.float64)] + [
            tf.reduce_sum(tf.square(tf.cast(n - g, tf.float64)))
            for n, g in zip(noisy, clipped_sums)])
        values = tf.add_n([tf.constant(0, tf.int64)] + [tf.size(g, out_type=tf.int64)
                                                         for g in clipped_sums])
        return tf.numpy_function(self._observe, [released, squares, values], tf.bool,
                                 stateful=True)

    def _phantom_sum(self) -> tf.Tensor:
        """The sampled phantoms' clipped gradients, each on its own coordinate, in the
        direction its coin gives it (benchmarks.privacy.phantom_canaries)."""
        norms = tf.fill(tf.shape(self._sampled), phantom_canaries.GRADIENT_NORM * self.clip_norm)
        clipped = self.clip_weights(norms) * norms * tf.cast(self._sampled, norms.dtype)
        return tf.scatter_nd(self._rows, clipped * self._signs, [self.phantoms.size])

    def _observe(self, released, squares, values):
        self.phantoms.observe("DP-SGD noisy clipped sum", released, self.sampling_rate,
                              self.clip_norm, self.noise_std, float(squares), int(values))
        return True
