"""Turning raw arrays into the contract's Splits (dtypes and ranges in one place)."""
from __future__ import annotations

import numpy as np

from benchmarks.contract import Split


def image_split(pixels: np.ndarray, labels: np.ndarray, max_value: float = 255.0) -> Split:
    """Images (N, H, W, C) scaled to float32 in [0, 1]; labels int64."""
    if pixels.ndim == 3:
        pixels = pixels[..., np.newaxis]
    return Split(x=(pixels.astype(np.float32) / np.float32(max_value)),
                 y=np.asarray(labels, dtype=np.int64).reshape(-1))


def shuffled_halves(n: int, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of a fixed random train/test split (the seed is part of the dataset)."""
    order = np.random.default_rng(seed).permutation(n)
    n_test = int(round(n * test_fraction))
    return np.sort(order[n_test:]), np.sort(order[:n_test])
