"""The shared Keras training loop: seeded, deterministic, with mixup and the label-DP
paper's learning-rate schedule (linear warm-up, then linear decay to zero)."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import tensorflow as tf


def seed_everything(seed: int) -> None:
    """Same seed, same model: seeds Python, numpy and TF, and asks TF for deterministic ops."""
    tf.keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()


class WarmupLinearDecay(tf.keras.optimizers.schedules.LearningRateSchedule):
    """Linear from 0 to ``peak`` over the first ``warmup`` fraction of steps, then
    linear to 0 at ``total_steps``."""

    def __init__(self, peak: float, total_steps: int, warmup: float) -> None:
        self.peak = float(peak)
        self.total_steps = int(total_steps)
        self.warmup_steps = max(1, round(warmup * total_steps))

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        step = tf.cast(step, tf.float32)
        up = self.peak * step / self.warmup_steps
        down = self.peak * (self.total_steps - step) / max(1, self.total_steps - self.warmup_steps)
        return tf.maximum(0.0, tf.where(step < self.warmup_steps, up, down))

    def get_config(self) -> dict:
        return {"peak": self.peak, "total_steps": self.total_steps,
                "warmup": self.warmup_steps / max(1, self.total_steps)}


def _beta(alpha: float, seed: tf.Tensor) -> tf.Tensor:
    """One Beta(alpha, alpha) draw from two stateless Gamma draws."""
    g = tf.random.stateless_gamma([2], seed=seed, alpha=alpha)
    return g[0] / (g[0] + g[1])


def batches(x: np.ndarray, targets: np.ndarray, *, batch_size: int, epochs: int,
            mixup_alpha: float, seed: int) -> tf.data.Dataset:
    """Shuffled batches for ``epochs`` epochs. With mixup each batch is mixed with a
    permutation of itself, one Beta(alpha, alpha) draw per batch; every random draw is
    keyed by (seed, batch index) so a run is reproducible."""
    ds = tf.data.Dataset.from_tensor_slices((x, targets))
    ds = ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size).repeat(epochs)
    if mixup_alpha > 0:
        def mix(step: tf.Tensor, batch: tuple[tf.Tensor, tf.Tensor]):
            xb, yb = batch
            key = tf.stack([tf.cast(seed, tf.int64), step])
            lam = _beta(mixup_alpha, key)
            perm = tf.argsort(tf.random.stateless_uniform([tf.shape(xb)[0]], seed=key + 1))
            return (lam * xb + (1 - lam) * tf.gather(xb, perm),
                    lam * yb + (1 - lam) * tf.gather(yb, perm))
        ds = ds.enumerate().map(mix, num_parallel_calls=tf.data.AUTOTUNE)
    return ds.prefetch(tf.data.AUTOTUNE)


class _Progress(tf.keras.callbacks.Callback):
    def __init__(self, report: Callable[[str], None], epochs: int, label: str) -> None:
        super().__init__()
        self.report, self.epochs, self.label = report, epochs, label

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        loss = (logs or {}).get("loss", float("nan"))
        self.report(f"{self.label}epoch {epoch + 1}/{self.epochs} loss {loss:.3f}")


def fit(model: tf.keras.Model, x: np.ndarray, labels: np.ndarray, num_classes: int, *,
        epochs: int, batch_size: int, peak_lr: float, warmup: float, momentum: float,
        weight_decay: float, mixup_alpha: float, seed: int,
        progress: Callable[[str], None] = lambda message: None, label: str = "") -> None:
    """Train ``model`` (logits out) on integer labels with cross-entropy, SGD with
    momentum and decoupled weight decay, and the warm-up/decay schedule."""
    targets = tf.one_hot(labels, num_classes).numpy()
    steps_per_epoch = math.ceil(len(x) / batch_size)
    schedule = WarmupLinearDecay(peak_lr, epochs * steps_per_epoch, warmup)
    model.compile(
        optimizer=tf.keras.optimizers.SGD(schedule, momentum=momentum, weight_decay=weight_decay),
        loss=tf.keras.losses.CategoricalCrossentropy(from_logits=True))
    data = batches(x, targets, batch_size=batch_size, epochs=epochs,
                   mixup_alpha=mixup_alpha, seed=seed)
    model.fit(data, epochs=epochs, steps_per_epoch=steps_per_epoch, verbose=0,
              callbacks=[_Progress(progress, epochs, label)])


def predict_logits(model: tf.keras.Model, x: np.ndarray, batch_size: int = 1024) -> np.ndarray:
    return model.predict(x, batch_size=batch_size, verbose=0)


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = logits / temperature
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)
