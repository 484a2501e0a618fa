"""MovieLens-1M as a 5-class task: predict the rating (1-5 stars) of a (user, movie) pair."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from benchmarks.contract import Split
from benchmarks.datasets.core import DataError, DatasetSpec, register, zip_member
from benchmarks.datasets.splits import fixed_split

ARCHIVE = "ml-1m.zip"


def parse_ratings(text: bytes) -> np.ndarray:
    """ratings.dat lines ``UserID::MovieID::Rating::Timestamp`` as an int64 (N, 4) array."""
    values = np.array(text.replace(b"::", b" ").split(), dtype=np.int64)
    if values.size % 4:
        raise ValueError("ratings.dat lines must have 4 fields")
    return values.reshape(-1, 4)


def read_movielens(spec: DatasetSpec, root: Path) -> tuple[Split, Split]:
    path, archive = spec.read_verified(root, ARCHIVE)
    try:
        ratings = parse_ratings(zip_member(spec, root, archive, path, "ml-1m/ratings.dat"))
    except ValueError as error:
        raise DataError(path, f"ml-1m/ratings.dat is malformed ({error})",
                        spec.expected(ARCHIVE), spec.where(root)) from error
    # Users and movies become dense indices 0..n-1 (sorted by id) over all ratings, so
    # an embedding sized max(index)+1 over train and test covers every pair.
    users = np.unique(ratings[:, 0], return_inverse=True)[1]
    movies = np.unique(ratings[:, 1], return_inverse=True)[1]
    x = np.stack([users, movies], axis=1).astype(np.int64)
    y = ratings[:, 2] - 1
    if y.min() < 0 or y.max() > 4:
        raise DataError(path, "ratings outside 1..5", spec.expected(ARCHIVE), spec.where(root))
    train, test = fixed_split(len(y))
    return Split(x[train], y[train]), Split(x[test], y[test])


register(DatasetSpec(
    name="movielens-1m", task="ratings", num_classes=5,
    citation="Harper, Konstan. The MovieLens datasets: history and context. ACM TiiS 5(4), 2015.",
    # md5 of the GroupLens archive, the value registered by many loaders (e.g. PaddlePaddle's
    # dataset cache script and recbole-style configs) for files.grouplens.org ml-1m.zip.
    checksums=((ARCHIVE, "md5:c4d9eecfca2ab87c1945afe126590906"),),
    reader=read_movielens, obtain="https://grouplens.org/datasets/movielens/1m/",
    licence=("GroupLens usage licence (the archive's README): research use; no "
             "commercial use and no redistribution without permission; cite the paper"),
))
