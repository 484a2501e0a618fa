"""Self-supervised image features for label-DP priors (Ghazi et al. 2021, Algorithm 4).

A SimCLR encoder (Chen et al. 2020): two augmented views of every image, a backbone and
an MLP projection head, and the NT-Xent loss that pulls the views of one image together
and pushes those of the other images in the batch apart. Under label-DP the inputs are
public, so the encoder may see every training image; nothing here takes a label.

Training is done once per (training inputs, seed, settings): the
backbone's weights and the training features are cached in
<data_dir>/cache/encoders/<key>.npz, written atomically and checked against a stored
digest on every read. Features of other inputs (the test split) come from the restored
backbone on each call. Every random draw is seeded: equal seeds give equal features.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from benchmarks.atomic import atomic_write
from benchmarks.tf_runtime import numerics
from methods.cache_entries import content_digest as _digest, read_checked
from methods.nn import models, training

# Part of every cache key: raise it whenever training, augmentation or the stored format
# changes, so that features of the old code are never reused.
ENCODER_VERSION = 1

# For 28x28 grey images on a CPU: the project's small CNN and a few epochs. Measured by
# k-means purity on MNIST and Fashion-MNIST: brightness and contrast jitter helped most
# (how dark a stroke or a garment is says nothing about its class); batches of 128 beat
# 512 at equal epochs (more steps); mild crops and rotations suit both datasets, where
# strong ones helped MNIST a little and hurt Fashion-MNIST a lot (they cut silhouettes).
DEFAULT_SETTINGS: dict[str, Any] = {
    "backbone": "cnn",  # a models.BUILDERS name; its final Dense layer is dropped
    "norm": "batch",
    "projection_dim": 64,
    "epochs": 5,
    "batch_size": 128,
    "learning_rate": 3e-3,
    "warmup": 0.1,
    "weight_decay": 1e-4,
    "temperature": 0.2,
    "crop_scale": [0.8, 1.0],  # area fraction kept by the random resized crop
    "max_rotation": 5.0,  # degrees
    "max_shift": 0.1,  # fraction of the side
    "flip": False,  # digits and letters are not mirror-symmetric
    "colour_jitter": 0.5,  # brightness and contrast; saturation too on colour images
    "noise_std": 0.05,
    "erase_probability": 0.25,
    "erase_max_side": 0.4,  # fraction of the side
}

# For 32x32 colour images (CIFAR) on a GPU: ResNet18-v2 and SimCLR's CIFAR augmentations.
RESNET_SETTINGS: dict[str, Any] = {
    **DEFAULT_SETTINGS,
    "backbone": "resnet18_v2", "projection_dim": 128, "epochs": 200, "batch_size": 512,
    "learning_rate": 1e-3, "temperature": 0.5, "crop_scale": [0.2, 1.0], "max_rotation": 0.0,
    "max_shift": 0.0, "flip": True, "colour_jitter": 0.4, "noise_std": 0.0,
    "erase_probability": 0.0,
}

_ASPECT_RANGE = (3 / 4, 4 / 3)  # of the random resized crop, as in SimCLR
_GREY_PROBABILITY = 0.2  # of turning a colour view grey, as in SimCLR
_ENCODE_BATCH = 1024


@dataclasses.dataclass(frozen=True)
class EncodedFeatures:
    """Features of the training inputs and (if given) the test inputs.

    fingerprint: sha256 of the cache key (training inputs, seed, settings,
        ENCODER_VERSION) and of the saved content (training features, weights).
    train_seconds: how long training took when the entry was made.
    cached: whether this call loaded the entry instead of training.
    backbone: the trained encoder, for features of further inputs.
    """

    train: np.ndarray
    test: np.ndarray | None
    fingerprint: str
    settings: dict[str, Any]
    train_seconds: float
    cached: bool
    backbone: tf.keras.Model


def resolve_settings(settings: dict[str, Any] | None) -> dict[str, Any]:
    """DEFAULT_SETTINGS overridden by ``settings``, each value cast to its default's type,
    so that equal settings always give the same cache key."""
    given = dict(settings or {})
    unknown = sorted(set(given) - set(DEFAULT_SETTINGS))
    if unknown:
        raise ValueError(f"unknown encoder settings {unknown}; known: {sorted(DEFAULT_SETTINGS)}")
    resolved = {}
    for name, default in DEFAULT_SETTINGS.items():
        value = given.get(name, default)
        resolved[name] = ([float(v) for v in value] if isinstance(default, list)
                          else type(default)(value))
    if resolved["backbone"] not in models.BUILDERS:
        raise ValueError(f"unknown backbone {resolved['backbone']!r}; "
                         f"known: {', '.join(models.BUILDERS)}")
    return resolved


# --- augmentation ----------------------------------------------------------------------

def _uniform(key: tf.Tensor, n: tf.Tensor, low: float, high: float) -> tf.Tensor:
    return tf.random.stateless_uniform([n], seed=key, minval=low, maxval=high)


def _affine(images: tf.Tensor, key: tf.Tensor, s: dict[str, Any]) -> tf.Tensor:
    """Random resized crop, rotation, shift and (optionally) mirror in one bilinear
    resampling per image. Each output pixel p is read at c + R D (p - c) + t: D scales by
    the crop's side fractions (negative for a mirror), R rotates, t moves the centre."""
    n, h, w = tf.shape(images)[0], images.shape[1], images.shape[2]
    keys = tf.random.experimental.stateless_split(key, num=6)
    area = _uniform(keys[0], n, *s["crop_scale"])
    aspect = tf.exp(_uniform(keys[1], n, *(math.log(r) for r in _ASPECT_RANGE)))
    # An aspect in [area, 1 / area] keeps both sides of the crop inside the image.
    aspect = tf.clip_by_value(aspect, area, 1 / area)
    fx, fy = tf.sqrt(area * aspect), tf.sqrt(area / aspect)
    if s["flip"]:
        fx = tf.where(_uniform(keys[2], n, 0.0, 1.0) < 0.5, -fx, fx)
    angle = _uniform(keys[3], n, -1.0, 1.0) * s["max_rotation"] * math.pi / 180
    # The crop may sit anywhere inside the image, then move by up to max_shift.
    room = tf.stack([(1 - tf.abs(fx)) / 2 * w, (1 - fy) / 2 * h], axis=1)
    shift = tf.constant([w, h], tf.float32) * s["max_shift"]
    t = (tf.random.stateless_uniform([n, 2], seed=keys[4], minval=-1.0, maxval=1.0) * room
         + tf.random.stateless_uniform([n, 2], seed=keys[5], minval=-1.0, maxval=1.0) * shift)
    cos, sin = tf.cos(angle), tf.sin(angle)
    a0, a1, b0, b1 = cos * fx, -sin * fy, sin * fx, cos * fy
    cx, cy = (w - 1) / 2, (h - 1) / 2  # pixel centres sit on integer coordinates
    a2 = cx + t[:, 0] - a0 * cx - a1 * cy
    b2 = cy + t[:, 1] - b0 * cx - b1 * cy
    zeros = tf.zeros_like(a0)
    transforms = tf.stack([a0, a1, a2, b0, b1, b2, zeros, zeros], axis=1)
    return tf.raw_ops.ImageProjectiveTransformV3(
        images=images, transforms=transforms, output_shape=[h, w], fill_value=0.0,
        interpolation="BILINEAR", fill_mode="CONSTANT")


def _colour_jitter(images: tf.Tensor, key: tf.Tensor, strength: float) -> tf.Tensor:
    """Per-image brightness and contrast factors in [1 - s, 1 + s]; for colour images also
    saturation, then a grey view with probability 0.2."""
    n = tf.shape(images)[0]
    keys = tf.random.experimental.stateless_split(key, num=4)

    def factor(k: tf.Tensor) -> tf.Tensor:
        return tf.reshape(_uniform(k, n, 1 - strength, 1 + strength), [-1, 1, 1, 1])

    x = images * factor(keys[0])
    mean = tf.reduce_mean(x, axis=[1, 2, 3], keepdims=True)
    x = mean + (x - mean) * factor(keys[1])
    if images.shape[-1] != 3:
        return x
    grey = tf.image.rgb_to_grayscale(tf.clip_by_value(x, 0.0, 1.0))
    x = grey + (x - grey) * factor(keys[2])
    to_grey = tf.reshape(_uniform(keys[3], n, 0.0, 1.0) < _GREY_PROBABILITY, [-1, 1, 1, 1])
    return tf.where(to_grey, tf.image.rgb_to_grayscale(tf.clip_by_value(x, 0.0, 1.0)), x)


def _erase(images: tf.Tensor, key: tf.Tensor, probability: float,
           max_side: float) -> tf.Tensor:
    """Zero a random rectangle (sides up to max_side of the image's) in a share of images."""
    n, h, w = tf.shape(images)[0], images.shape[1], images.shape[2]
    keys = tf.random.experimental.stateless_split(key, num=3)
    size = tf.random.stateless_uniform([n, 2], seed=keys[0], minval=0.1, maxval=max_side)
    size = size * tf.constant([h, w], tf.float32)
    start = tf.random.stateless_uniform([n, 2], seed=keys[1]) * (
        tf.constant([h, w], tf.float32) - size)
    rows = tf.range(h, dtype=tf.float32)[None, :, None]
    cols = tf.range(w, dtype=tf.float32)[None, None, :]
    inside = ((rows >= start[:, 0, None, None]) & (rows < (start + size)[:, 0, None, None])
              & (cols >= start[:, 1, None, None]) & (cols < (start + size)[:, 1, None, None]))
    chosen = (_uniform(keys[2], n, 0.0, 1.0) < probability)[:, None, None]
    return tf.where((inside & chosen)[..., None], 0.0, images)


def augment(images: tf.Tensor, key: tf.Tensor, settings: dict[str, Any]) -> tf.Tensor:
    """One random view of each image in a batch (N, H, W, C) in [0, 1]; same shape and
    range out. ``key`` is a stateless seed (shape [2]): equal keys give equal views."""
    s = settings
    keys = tf.random.experimental.stateless_split(key, num=4)
    x = _affine(images, keys[0], s)
    if s["colour_jitter"] > 0:
        x = _colour_jitter(x, keys[1], s["colour_jitter"])
    if s["noise_std"] > 0:
        x = x + tf.random.stateless_normal(tf.shape(x), seed=keys[2], stddev=s["noise_std"])
    if s["erase_probability"] > 0:
        x = _erase(x, keys[3], s["erase_probability"], s["erase_max_side"])
    return tf.clip_by_value(x, 0.0, 1.0)


# --- model and loss ----------------------------------------------------------------------

def nt_xent_loss(z1: tf.Tensor, z2: tf.Tensor, temperature: float) -> tf.Tensor:
    """SimCLR's NT-Xent: for each of the 2N views, cross-entropy of picking its partner
    among the other 2N - 1 views by cosine similarity / temperature; the mean over views."""
    z = tf.math.l2_normalize(tf.concat([z1, z2], axis=0), axis=1)
    n = tf.shape(z1)[0]
    logits = tf.matmul(z, z, transpose_b=True) / temperature
    logits -= tf.eye(2 * n) * 1e9  # a view is never its own partner
    partners = tf.concat([tf.range(n, 2 * n), tf.range(n)], axis=0)
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=partners, logits=logits))


def build_backbone(input_shape: tuple[int, ...], settings: dict[str, Any]) -> tf.keras.Model:
    """A models.py classifier without its final Dense layer (the logits)."""
    s = resolve_settings(settings)
    classifier = models.build(s["backbone"], input_shape, num_classes=1, norm=s["norm"])
    return tf.keras.Model(classifier.inputs, classifier.layers[-2].output, name="backbone")


def _projection_head(width: int, s: dict[str, Any]) -> tf.keras.Sequential:
    """SimCLR's two-layer MLP: the loss acts on its output, the features are its input."""
    layers = tf.keras.layers
    return tf.keras.Sequential([
        tf.keras.Input((width,)), layers.Dense(width, use_bias=False),
        layers.BatchNormalization(), layers.ReLU(), layers.Dense(s["projection_dim"])])


def train_encoder(x_train: np.ndarray, *, settings: dict[str, Any], seed: int,
                  progress: Callable[[str], None] = lambda message: None) -> tf.keras.Model:
    """Train a backbone with NT-Xent on the inputs (N, H, W, C) alone; return it.

    Each epoch visits a seeded permutation in full batches; the views of a batch are keyed
    by (seed, step), so the run is reproducible.
    """
    s = resolve_settings(settings)
    training.seed_everything(seed)
    backbone = build_backbone(x_train.shape[1:], s)
    head = _projection_head(backbone.output_shape[-1], s)
    batch = min(s["batch_size"], len(x_train))
    steps_per_epoch = len(x_train) // batch
    total = s["epochs"] * steps_per_epoch
    optimizer = tf.keras.optimizers.Adam(
        training.WarmupSchedule(s["learning_rate"], total, s["warmup"]),
        weight_decay=s["weight_decay"])
    variables = backbone.trainable_variables + head.trainable_variables
    optimizer.build(variables)  # a first call that creates variables is traced twice

    @tf.function
    def step(images: tf.Tensor, key: tf.Tensor) -> tf.Tensor:
        views = tf.concat([augment(images, tf.random.experimental.stateless_fold_in(key, v), s)
                           for v in (1, 2)], axis=0)
        with tf.GradientTape() as tape:
            z = head(backbone(views, training=True), training=True)
            loss = nt_xent_loss(z[:batch], z[batch:], s["temperature"])
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    order = np.random.default_rng(seed)
    for epoch in range(s["epochs"]):
        permutation = order.permutation(len(x_train))
        losses = []
        for i in range(steps_per_epoch):
            rows = np.sort(permutation[i * batch:(i + 1) * batch])  # sorted: faster gather
            key = tf.constant([seed, epoch * steps_per_epoch + i], tf.int64)
            losses.append(float(step(tf.constant(x_train[rows]), key)))
        progress(f"ssl encoder: epoch {epoch + 1}/{s['epochs']} loss {np.mean(losses):.3f}")
    return backbone


def encode(backbone: tf.keras.Model, x: np.ndarray) -> np.ndarray:
    """L2-normalised backbone features (N, D) float32. NT-Xent compares features by
    cosine similarity, so unit length makes k-means' Euclidean distance agree with it."""
    features = backbone.predict(x, batch_size=_ENCODE_BATCH, verbose=0)
    norms = np.linalg.norm(features, axis=1, keepdims=True)
    return (features / np.maximum(norms, 1e-12)).astype(np.float32)


# --- the cache ---------------------------------------------------------------------------

def cache_folder(data_dir: Path | str) -> Path:
    return Path(data_dir) / "cache" / "encoders"


def _cache_key(x_train: np.ndarray, seed: int, settings: dict[str, Any]) -> str:
    """The canonical JSON of everything the training depends on. The dataset's
    fingerprint is the digest of its training inputs (the encoder sees nothing else), so
    a subset or a transformed copy of a dataset never reuses the full set's entry. The
    thread count and oneDNN are part of it: the trained weights depend on them bit for bit."""
    return json.dumps({"version": ENCODER_VERSION, "seed": int(seed), "settings": settings,
                       "train_inputs": _digest(x_train), **numerics()},
                      sort_keys=True)


@dataclasses.dataclass(frozen=True)
class _Entry:
    train: np.ndarray
    weights: list[np.ndarray]
    train_seconds: float
    fingerprint: str


def _fingerprint(key: str, train: np.ndarray, weights: list[np.ndarray]) -> str:
    return _digest(key, train, *weights)


def _write_entry(path: Path, key: str, entry: _Entry) -> None:
    weights = {f"weight_{i}": w for i, w in enumerate(entry.weights)}
    with atomic_write(path, "wb") as f:
        np.savez(f, key=np.array(key), train=entry.train,
                 train_seconds=np.array(entry.train_seconds),
                 fingerprint=np.array(entry.fingerprint), **weights)


def _read_entry(path: Path, key: str) -> _Entry | None:
    """The cached entry, or None if there is none or it fails its stored fingerprint."""
    def read(stored) -> _Entry:
        count = sum(name.startswith("weight_") for name in stored.files)
        weights = [stored[f"weight_{i}"] for i in range(count)]
        return _Entry(stored["train"], weights, float(stored["train_seconds"]),
                      str(stored["fingerprint"]))

    def intact(stored, entry: _Entry) -> bool:
        return (str(stored["key"]) == key
                and entry.fingerprint == _fingerprint(key, entry.train, entry.weights))

    return read_checked(path, read, intact, what="encoder cache", check="fingerprint",
                        otherwise="training anew")


def encoder_features(x_train: np.ndarray, x_test: np.ndarray | None, *,
                     data_dir: Path | str,
                     settings: dict[str, Any] | None, seed: int,
                     progress: Callable[[str], None] = lambda message: None
                     ) -> EncodedFeatures:
    """Features of ``x_train`` (and of ``x_test`` unless None) from an encoder trained
    on ``x_train`` alone, loaded from the cache when it holds an intact entry."""
    s = resolve_settings(settings)
    key = _cache_key(x_train, seed, s)
    path = cache_folder(data_dir) / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.npz"
    entry = _read_entry(path, key)
    cached = entry is not None
    if cached:
        progress(f"ssl encoder: loaded {path}")
        backbone = build_backbone(x_train.shape[1:], s)
        backbone.set_weights(entry.weights)
    else:
        start = time.perf_counter()
        backbone = train_encoder(x_train, settings=s, seed=seed, progress=progress)
        train = encode(backbone, x_train)
        weights = backbone.get_weights()
        entry = _Entry(train, weights, time.perf_counter() - start,
                       _fingerprint(key, train, weights))
        _write_entry(path, key, entry)
    test = None if x_test is None else encode(backbone, x_test)
    return EncodedFeatures(train=entry.train, test=test, fingerprint=entry.fingerprint,
                           settings=s, train_seconds=entry.train_seconds, cached=cached,
                           backbone=backbone)
