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


class WarmupSchedule(tf.keras.optimizers.schedules.LearningRateSchedule):
    """The label-DP paper's schedules: linear from 0 to ``peak`` over the first
    ``warmup`` fraction of steps, then either linear to 0 at the end ("linear", MNIST)
    or constant with a 10x decay at 30%, 60% and 90% of the steps ("piecewise", CIFAR);
    or ``peak`` throughout after the warm-up ("constant", Tramer and Boneh's DP-SGD)."""

    def __init__(self, peak: float, total_steps: int, warmup: float,
                 decay: str = "linear") -> None:
        if decay not in ("linear", "piecewise", "constant"):
            raise ValueError(f"unknown schedule {decay!r}; use linear, piecewise or constant")
        self.peak = float(peak)
        self.total_steps = int(total_steps)
        self.warmup = float(warmup)
        self.warmup_steps = max(1, round(warmup * total_steps))
        self.decay = decay

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        step = tf.cast(step, tf.float32)
        up = self.peak * step / self.warmup_steps
        if self.decay == "linear":
            after = self.peak * (self.total_steps - step) / max(
                1, self.total_steps - self.warmup_steps)
        elif self.decay == "constant":
            after = tf.constant(self.peak)
        else:
            passed = sum(tf.cast(step >= f * self.total_steps, tf.float32)
                         for f in (0.3, 0.6, 0.9))
            after = self.peak * tf.pow(0.1, passed)
        return tf.maximum(0.0, tf.where(step < self.warmup_steps, up, after))

    def get_config(self) -> dict:
        return {"peak": self.peak, "total_steps": self.total_steps,
                "warmup": self.warmup, "decay": self.decay}


def _beta(alpha: float, seed: tf.Tensor) -> tf.Tensor:
    """One Beta(alpha, alpha) draw from two stateless Gamma draws."""
    g = tf.random.stateless_gamma([2], seed=seed, alpha=alpha)
    return g[0] / (g[0] + g[1])


def _crop_flip(xb: tf.Tensor, key: tf.Tensor) -> tf.Tensor:
    """CIFAR's standard augmentation: pad 4 pixels, crop back at a random offset,
    flip left-right with probability 1/2; one draw per image, keyed like mixup."""
    h, w, c = xb.shape[1], xb.shape[2], xb.shape[3]
    padded = tf.pad(xb, [[0, 0], [4, 4], [4, 4], [0, 0]], mode="REFLECT")
    n = tf.shape(xb)[0]
    seeds = tf.random.experimental.stateless_split(key + 2, num=n)
    crops = tf.map_fn(lambda a: tf.image.stateless_random_crop(a[0], [h, w, c], a[1]),
                      (padded, seeds), fn_output_signature=xb.dtype)
    flip = tf.random.stateless_uniform([n, 1, 1, 1], seed=key + 3) < 0.5
    return tf.where(flip, tf.reverse(crops, axis=[2]), crops)


def batches(x: np.ndarray, targets: np.ndarray, *, batch_size: int, epochs: int,
            mixup_alpha: float, seed: int, augment: bool = False) -> tf.data.Dataset:
    """Shuffled batches for ``epochs`` epochs, optionally crop-and-flip augmented. With
    mixup each batch is mixed with a permutation of itself, one Beta(alpha, alpha) draw
    per batch. Every random draw is keyed by (seed, batch index): runs are reproducible."""
    ds = tf.data.Dataset.from_tensor_slices((x, targets))
    ds = ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size).repeat(epochs)
    if mixup_alpha <= 0 and not augment:
        return ds.prefetch(tf.data.AUTOTUNE)

    def transform(step: tf.Tensor, batch: tuple[tf.Tensor, tf.Tensor]):
        xb, yb = batch
        key = tf.stack([tf.cast(seed, tf.int64), step])
        if augment:
            xb = _crop_flip(xb, key)
        if mixup_alpha > 0:
            lam = _beta(mixup_alpha, key)
            perm = tf.argsort(tf.random.stateless_uniform([tf.shape(xb)[0]], seed=key + 1))
            xb = lam * xb + (1 - lam) * tf.gather(xb, perm)
            yb = lam * yb + (1 - lam) * tf.gather(yb, perm)
        return xb, yb

    ds = ds.enumerate().map(transform, num_parallel_calls=tf.data.AUTOTUNE)
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
        weight_decay: float, mixup_alpha: float, seed: int, schedule: str = "linear",
        augment: bool = False,
        progress: Callable[[str], None] = lambda message: None, label: str = "") -> None:
    """Train ``model`` (logits out) on integer labels with cross-entropy, SGD with
    momentum and decoupled weight decay, and a warm-up schedule."""
    fit_targets(model, x, tf.one_hot(labels, num_classes).numpy(),
                tf.keras.losses.CategoricalCrossentropy(from_logits=True), epochs=epochs,
                batch_size=batch_size, peak_lr=peak_lr, warmup=warmup, momentum=momentum,
                weight_decay=weight_decay, mixup_alpha=mixup_alpha, seed=seed,
                schedule=schedule, augment=augment, progress=progress, label=label)


def fit_targets(model: tf.keras.Model, x: np.ndarray, targets: np.ndarray,
                loss: Callable | tf.keras.losses.Loss, *, epochs: int, batch_size: int,
                peak_lr: float, warmup: float, momentum: float, weight_decay: float,
                mixup_alpha: float, seed: int, schedule: str = "linear",
                augment: bool = False,
                progress: Callable[[str], None] = lambda message: None,
                label: str = "") -> None:
    """``fit`` with a row of ``targets`` per example and ``loss(targets, logits)``,
    inside the compiled train step."""
    if mixup_alpha > 0 and not np.issubdtype(x.dtype, np.floating):
        raise ValueError("mixup blends inputs and needs real-valued ones; set mixup_alpha "
                         "(and later_mixup_alpha) to 0 for index inputs such as ratings")
    steps_per_epoch = math.ceil(len(x) / batch_size)
    lr = WarmupSchedule(peak_lr, epochs * steps_per_epoch, warmup, schedule)
    model.compile(
        optimizer=tf.keras.optimizers.SGD(lr, momentum=momentum, weight_decay=weight_decay),
        loss=loss)
    # Its slots made now: a first step that creates variables is traced twice.
    model.optimizer.build(model.trainable_variables)
    data = batches(x, targets, batch_size=batch_size, epochs=epochs,
                   mixup_alpha=mixup_alpha, seed=seed, augment=augment)
    model.fit(data, epochs=epochs, steps_per_epoch=steps_per_epoch, verbose=0,
              callbacks=[_Progress(progress, epochs, label)])


def predict_logits(model: tf.keras.Model, x: np.ndarray, batch_size: int = 1024) -> np.ndarray:
    return model.predict(x, batch_size=batch_size, verbose=0)


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = logits / temperature
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)
