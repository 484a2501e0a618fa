"""Two small real datasets that ship with scikit-learn, for fast tests and smoke runs.

Their "source" is the arrays scikit-learn returns; the expected sha256 of those arrays
was computed once and is written below, so a changed copy is caught like a bad file.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from benchmarks.contract import Split
from benchmarks.datasets.core import UCI_LICENCE, DatasetSpec, register
from benchmarks.datasets.splits import fixed_split, image_split
from benchmarks.datasets.tabular import Linear, Log, encode

SOURCE = "sklearn arrays"
OBTAIN = "reinstall scikit-learn"

# Public ranges from what each feature measures (the dataset's wdbc.names), never from
# the data: sizes are in pixels of the 640x480 digitised image, so a nucleus' radius is
# below 240 and its perimeter and area below those of that circle; texture is the
# standard deviation of 8-bit grey levels (below 127.5); the six shape features are
# dimensionless ratios near [0, 1], taken on [0, 2] and clipped. Sizes span decades,
# hence their log scale. The ten features come as means, standard errors and "worst"
# values (means of the three largest), each bounded like the feature itself.
_RADIUS = 240.0
_FEATURE_RANGES = (Log(_RADIUS), Log(127.5), Log(2 * math.pi * _RADIUS),
                   Log(math.pi * _RADIUS ** 2), *(Linear(0, 2) for _ in range(6)))
BREAST_CANCER_SCHEMA = _FEATURE_RANGES * 3


def _verified_arrays(spec: DatasetSpec, root: Path,
                     loader: Callable) -> tuple[np.ndarray, np.ndarray]:
    bunch = loader()
    x, y = np.ascontiguousarray(bunch.data), np.ascontiguousarray(bunch.target)
    spec.verify(root, SOURCE, x.tobytes() + y.tobytes(), f"sklearn.datasets.{loader.__name__}()")
    return x, y


def read_digits(spec: DatasetSpec, root: Path) -> tuple[Split, Split]:
    from sklearn.datasets import load_digits

    x, y = _verified_arrays(spec, root, load_digits)
    train, test = fixed_split(len(y))
    images = x.reshape(-1, 8, 8)  # grey levels 0..16
    return (image_split(images[train], y[train], max_value=16),
            image_split(images[test], y[test], max_value=16))


def read_breast_cancer(spec: DatasetSpec, root: Path) -> tuple[Split, Split]:
    from sklearn.datasets import load_breast_cancer

    x, y = _verified_arrays(spec, root, load_breast_cancer)
    features = encode(pd.DataFrame(x), BREAST_CANCER_SCHEMA)
    train, test = fixed_split(len(y))
    return (Split(features[train], y[train].astype(np.int64)),
            Split(features[test], y[test].astype(np.int64)))


register(DatasetSpec(
    name="digits", task="image", num_classes=10,
    citation="Alpaydin, Kaynak. Optical recognition of handwritten digits. UCI Machine "
             "Learning Repository, 1998, doi:10.24432/C50P49 (scikit-learn's load_digits).",
    checksums=((SOURCE, "sha256:f6d9e39f37dc45d327f6db33428ee58970ccceabb2535a5c179de35886b70443"),),
    reader=read_digits, files=(), offline=True, obtain=OBTAIN, licence=UCI_LICENCE,
))

register(DatasetSpec(
    name="breast-cancer", task="tabular", num_classes=2,
    citation="Wolberg, Street, Mangasarian. Breast Cancer Wisconsin (Diagnostic). UCI "
             "Machine Learning Repository, 1995, doi:10.24432/C5DW2B (scikit-learn's "
             "load_breast_cancer; label 1 = benign).",
    checksums=((SOURCE, "sha256:25e2eb7b7a8745b1bde5ba18bc4969983d2e2f403291ecd5bde4a29ef30c3859"),),
    reader=read_breast_cancer, files=(), offline=True, obtain=OBTAIN, version=2,
    licence=UCI_LICENCE,
))
