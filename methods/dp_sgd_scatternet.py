"""DP-SGD on ScatterNet features (Tramer and Boneh, ICLR 2021, "Differentially Private
Learning Needs Better Features (or Much More Data)"): a fixed 2-D scattering transform
of the images (Oyallon and Mallat's ScatterNet, J = 2 scales, L = 8 angles; kymatio's
numpy front end), normalised, then a linear classifier trained with the project's DP-SGD
(methods.dp_sgd: the same calibration, Poisson sampling, clipping and noisy sum).

The transform reads no data, so its features are computed once per set of images and
cached in <data_dir>/cache/scatternet/<key>.npz, 4,096 images an entry, so that an
audited twin's training set (the cell's, then its canaries) computes only its last
entries (each built under a lock, so that two processes never compute one entry at
once: the second waits and loads it; written atomically, checked against a stored
digest on every read).

The normalisations of the paper, per channel of the 81 (per colour) scattering channels:
- "group": group normalisation of each example alone (the paper's Fashion-MNIST setting,
  27 groups, no affine parameters); it reads no other example, so it costs nothing.
- "data": standardisation by the training set's channel means and variances (the
  paper's MNIST setting). Both are released once by the Gaussian mechanism on clipped
  per-example vectors (benchmarks.privacy.noisy_clipped_mean), each example's vector
  clipped to ``norm_clip``, noise multiplier ``norm_noise_multiplier`` (the paper's 8);
  the two releases are charged and compose with DP-SGD under RDP, and DP-SGD's noise
  is calibrated to what they leave of the budget. The paper's code clips at the median
  norm of the private vectors, a release it does not count; here the clip is fixed: 1,
  the norm of both statistics of the brightest image (all ones) in [0, 1].
- "none".

Defaults: the paper's ScatterNet + linear settings for MNIST at (3, 1e-5) (its
ftramer/Handcrafted-DP README: batch 4096, learning rate 8, data normalisation at noise
multiplier 8; its code: clip 0.1, momentum 0.9, a constant learning rate; 40 epochs, the
count for which its noise multiplier 3.04 spends epsilon 3). Fashion-MNIST's: batch
8192, learning rate 16, group normalisation with 27 groups.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import numbers
import time
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np

from benchmarks.atomic import atomic_write, building
from benchmarks.contract import Budget, Split
from benchmarks.errors import InputError
from benchmarks.privacy import noisy_clipped_mean
from methods.cache_entries import content_digest as _digest, read_checked
from methods.dp_sgd import DP_SGD_NOTION, DPSGD

PAPER = ("Tramer & Boneh, Differentially Private Learning Needs Better Features "
         "(or Much More Data) (ICLR 2021); defaults: its MNIST ScatterNet + linear setting")

SCALES, ANGLES = 2, 8  # J and L of the paper's ScatterNet
NORMS = ("data", "group", "none")
# Part of every cache key: raise it whenever the features or the stored format change.
FEATURES_VERSION = 2
_BATCH = 1024  # images per call of the transform
# Images per cache entry, a whole number of calls: a set that extends another (a training
# set with an audit's canaries after it) finds all but its last entries cached.
_CHUNK = 4 * _BATCH


# --- the features and their cache ----------------------------------------------------

def scatter(images: np.ndarray) -> np.ndarray:
    """The scattering transform of images (N, H, W, C) in [0, 1]: (N, H/4, W/4, 81 C)
    float32, channel c * 81 + k the k-th coefficient of colour c."""
    from kymatio.scattering2d.frontend.numpy_frontend import ScatteringNumPy2D

    n, h, w, colours = images.shape
    transform = ScatteringNumPy2D(J=SCALES, shape=(h, w), L=ANGLES)
    out = []
    for start in range(0, n, _BATCH):
        batch = np.moveaxis(images[start:start + _BATCH], -1, 1)  # (b, C, H, W)
        coefficients = transform(np.ascontiguousarray(batch, dtype=np.float32))
        b, _, k, hh, ww = coefficients.shape
        out.append(np.moveaxis(coefficients.reshape(b, colours * k, hh, ww), 1, -1))
    return np.concatenate(out).astype(np.float32, copy=False)


def cache_folder(data_dir: Path | str) -> Path:
    return Path(data_dir) / "cache" / "scatternet"


def _cache_key(images: np.ndarray) -> str:
    """Everything the features depend on: the images (by digest), the transform's
    settings and kymatio's version."""
    from importlib.metadata import version

    return json.dumps({"version": FEATURES_VERSION, "kymatio": version("kymatio"),
                       "J": SCALES, "L": ANGLES, "images": _digest(images)}, sort_keys=True)


@dataclasses.dataclass(frozen=True)
class Features:
    """The features of a set of images, how long computing them took when the entry
    was made, and whether this call loaded them."""

    values: np.ndarray
    seconds: float
    cached: bool


def _read(path: Path, key: str) -> Features | None:
    """The cached features, or None if there are none or they fail their digest."""
    def read(stored) -> Features:
        return Features(stored["features"], float(stored["seconds"]), cached=True)

    def intact(stored, entry: Features) -> bool:
        return str(stored["key"]) == key and str(stored["digest"]) == _digest(key, entry.values)

    return read_checked(path, read, intact, what="ScatterNet cache", check="digest",
                        otherwise="computing anew")


def features(images: np.ndarray, *, data_dir: Path | str,
             progress: Callable[[str], None] = lambda message: None) -> Features:
    """The scattering features of ``images``, each _CHUNK of them from the cache when it
    holds an intact entry, else computed and cached."""
    parts = [_chunk_features(images[start:start + _CHUNK], data_dir, progress)
             for start in range(0, len(images), _CHUNK)]
    return Features(np.concatenate([part.values for part in parts]),
                    sum(part.seconds for part in parts), all(part.cached for part in parts))


def _chunk_features(images: np.ndarray, data_dir: Path | str,
                    progress: Callable[[str], None]) -> Features:
    key = _cache_key(images)
    path = cache_folder(data_dir) / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.npz"
    with building(path):  # cells side by side compute the same features once
        found = _read(path, key)
        if found is not None:
            progress(f"scatternet: loaded {len(images)} images' features from {path}")
            return found
        progress(f"scatternet: computing the features of {len(images)} images")
        start = time.perf_counter()
        values = scatter(images)
        seconds = time.perf_counter() - start
        with atomic_write(path, "wb") as f:
            np.savez(f, key=np.array(key), features=values, seconds=np.array(seconds),
                     digest=np.array(_digest(key, values)))
        return Features(values, seconds, cached=False)


# --- normalisation -----------------------------------------------------------------

def group_normalise(x: np.ndarray, groups: int, epsilon: float = 1e-5) -> np.ndarray:
    """Each example's channels (last axis) in ``groups`` consecutive groups, each group
    standardised over its channels and positions (biased variance, as torch's
    GroupNorm without affine parameters)."""
    n, channels = x.shape[0], x.shape[-1]
    grouped = x.reshape(n, -1, groups, channels // groups)
    mean = grouped.mean(axis=(1, 3), keepdims=True, dtype=np.float64)
    var = grouped.var(axis=(1, 3), keepdims=True, dtype=np.float64)
    scale = (1 / np.sqrt(var + epsilon)).astype(np.float32)
    return ((grouped - mean.astype(np.float32)) * scale).reshape(x.shape)


def standardise(x: np.ndarray, mean: np.ndarray, var: np.ndarray,
                epsilon: float = 1e-5) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) per channel; a channel whose released variance is 0
    is zeroed (its statistics carry nothing once noised)."""
    scale = np.where(var > 0, 1 / np.sqrt(var + epsilon), 0.0)
    return ((x - mean) * scale).astype(np.float32)


# --- the method --------------------------------------------------------------------

class DPSGDScatterNet(DPSGD):
    """DP-SGD (methods.dp_sgd) on normalised ScatterNet features, a linear model."""

    name = "dp-sgd-scatternet"
    paper = PAPER
    notion = DP_SGD_NOTION
    version = 1
    defaults: ClassVar[dict[str, Any]] = {
        "epochs": 40.0,
        "batch_size": 4096,
        "clip_norm": 0.1,
        "peak_lr": 8.0,
        "warmup": 0.0,
        "momentum": 0.9,
        "norm": "data",  # Fashion-MNIST: "group" with 27 groups
        "groups": 27,
        "norm_noise_multiplier": 8.0,
        "norm_clip": 1.0,
    }
    tiny_hparams: ClassVar[dict[str, Any]] = {"epochs": 2.0, "batch_size": 64, "peak_lr": 1.0}
    schedule = "constant"

    def __init__(self, budget: Budget, seed: int = 0, **hparams: Any) -> None:
        super().__init__(budget, seed, **hparams)
        self._statistics: tuple[np.ndarray, np.ndarray] | None = None

    def _check_model_settings(self) -> None:
        h = self.hparams
        if h["norm"] not in NORMS:
            raise InputError(f"{self.name}: norm must be one of {NORMS}, got {h['norm']!r}")
        if isinstance(h["groups"], bool) or not isinstance(h["groups"], int) or h["groups"] < 1:
            raise InputError(f"{self.name}: groups must be a positive integer, "
                             f"got {h['groups']!r}")
        for key in ("norm_noise_multiplier", "norm_clip"):
            if not isinstance(h[key], numbers.Real) or isinstance(h[key], bool) or not h[key] > 0:
                raise InputError(f"{self.name}: {key} must be a number > 0, got {h[key]!r}")

    def released_besides(self) -> np.ndarray | None:
        """The RDP of the two released statistics; None when nothing is released."""
        if self.hparams["norm"] != "data":
            return None
        return noisy_clipped_mean.rdp_curve(self.hparams["norm_noise_multiplier"], releases=2)

    def _scattered(self, x: np.ndarray) -> np.ndarray:
        return features(x, data_dir=self.ctx.data_root(), progress=self.progress).values

    def training_inputs(self, train: Split) -> np.ndarray:
        h = self.hparams
        x = self._scattered(train.x)
        channels = x.shape[-1]
        if h["norm"] == "group" and channels % h["groups"]:
            raise InputError(f"{self.name}: {channels} scattering channels do not split "
                             f"into {h['groups']} groups")
        self.release_statistics(x)
        return self._normalised(x)

    def release_statistics(self, x: np.ndarray) -> None:
        """With data normalisation, each channel's mean and variance over the training
        set, from the noisy means of every example's channel averages and channel
        averages of squares."""
        h = self.hparams
        if h["norm"] != "data":
            return
        rng = self.ctx.rng("normalisation statistics noise")
        released = []
        for what, values in (("channel means", x), ("channel means of squares", x * x)):
            mechanism = noisy_clipped_mean.NoisyClippedMean(
                self.ctx.ledger, dataset_size=len(x), clip_norm=h["norm_clip"],
                noise_multiplier=h["norm_noise_multiplier"], rng=rng, what=what)
            released.append(mechanism.release(values.mean(axis=(1, 2))))
        mean, square = released
        self._statistics = mean, np.maximum(square - mean ** 2, 0.0)

    def _normalised(self, x: np.ndarray) -> np.ndarray:
        h = self.hparams
        if h["norm"] == "group":
            x = group_normalise(x, h["groups"])
        elif h["norm"] == "data":
            x = standardise(x, *self._statistics)
        return x.reshape(len(x), -1)

    def model_inputs(self, x: np.ndarray) -> np.ndarray:
        return self._normalised(self._scattered(x))

    def build_model(self, input_shape: tuple[int, ...], num_classes: int):
        import tensorflow as tf

        inputs = tf.keras.Input(input_shape)
        return tf.keras.Model(inputs, tf.keras.layers.Dense(num_classes)(inputs),
                              name="scatternet_linear")

    def privacy_details(self) -> dict[str, Any]:
        h = self.hparams
        details = {**self.training_details(), "features": f"ScatterNet J={SCALES} L={ANGLES}, "
                   "fixed (reads no data)", "normalisation": h["norm"]}
        if h["norm"] == "data":
            details["normalisation_release"] = (
                f"channel means and means of squares, each a Gaussian mean of vectors "
                f"clipped to {h['norm_clip']:g}, noise multiplier "
                f"{h['norm_noise_multiplier']:g}, composed with DP-SGD under RDP")
        return details

    def variant(self) -> str:
        h = self.hparams
        norm = {"data": "data normalisation", "group": f"group norm ({h['groups']})",
                "none": "no normalisation"}[h["norm"]]
        return f"ScatterNet + linear, {norm}"
