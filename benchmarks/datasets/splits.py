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


# For datasets published without a train/test split. The seed is part of the dataset's
# definition: changing it changes every result, so raise the spec's version with it.
SPLIT_SEED = 20240101
TEST_FRACTION = 0.2


def fixed_split(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted train and test indices of the fixed random 80/20 split of n examples."""
    order = np.random.default_rng(SPLIT_SEED).permutation(n)
    n_test = int(round(n * TEST_FRACTION))
    return np.sort(order[n_test:]), np.sort(order[:n_test])


def check_splits(name: str, task: str, num_classes: int, *splits: Split) -> None:
    """Refuse arrays that break the contract, before they are cached or used.

    Images: float32 (N, H, W, C) in [0, 1]. Tabular: float32 (N, D) with ||x||_2 <= 1,
    which DP-ERM's guarantee relies on. Ratings: int64 (N, 2) of user and item indices.
    Labels: int64 (N,) in [0, num_classes).
    """
    for split in splits:
        x, y = split.x, split.y
        problems = []
        if y.dtype != np.int64 or y.shape != (len(x),):
            problems.append(f"labels must be int64 of shape ({len(x)},), got {y.dtype} {y.shape}")
        elif len(y) and (y.min() < 0 or y.max() >= num_classes):
            problems.append(f"labels must lie in [0, {num_classes})")
        if task == "image" and (x.dtype != np.float32 or x.ndim != 4):
            problems.append(f"images must be float32 (N, H, W, C), got {x.dtype} {x.shape}")
        elif task == "image" and len(x) and (x.min() < 0 or x.max() > 1):
            problems.append("pixels must lie in [0, 1]")
        if task == "tabular" and (x.dtype != np.float32 or x.ndim != 2):
            problems.append(f"features must be float32 (N, D), got {x.dtype} {x.shape}")
        elif task == "tabular" and len(x) and np.linalg.norm(x, axis=1).max() > 1 + 1e-6:
            problems.append("every row must have L2 norm <= 1")
        if task == "ratings" and (x.dtype != np.int64 or x.ndim != 2 or x.shape[1] != 2):
            problems.append(f"ratings inputs must be int64 (N, 2), got {x.dtype} {x.shape}")
        if problems:
            raise ValueError(f"dataset {name!r}: {'; '.join(problems)}")
