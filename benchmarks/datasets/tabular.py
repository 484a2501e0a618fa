"""Feature encoding for tabular data used by DP-ERM.

DP-ERM's privacy proof assumes every row has ||x||_2 <= 1. Each column group is mapped
into [0, 1] (a continuous column to one value, a categorical column to a one-hot block)
and the row is divided by sqrt(number of groups), the largest norm such a row can have.

Every scale is a fixed public constant (a documented range, clipped), never a statistic
of the data: preprocessing that looked at the private rows would itself leak them, and
fixed constants keep train and test on the same scale.
"""
from __future__ import annotations

import dataclasses
import io
import math
from typing import Sequence

import numpy as np
import pandas as pd


@dataclasses.dataclass(frozen=True)
class Linear:
    """(v - low) / (high - low), clipped to [0, 1]."""

    low: float
    high: float

    def encode(self, values: pd.Series) -> np.ndarray:
        v = numeric(values)
        return ((v - self.low) / (self.high - self.low)).clip(0, 1)[:, None]


@dataclasses.dataclass(frozen=True)
class Log:
    """log(1 + v) / log(1 + high), clipped to [0, 1]: for heavy-tailed counts and amounts,
    where a linear scale would squash almost every row to 0."""

    high: float

    def encode(self, values: pd.Series) -> np.ndarray:
        v = numeric(values).clip(0, None)
        return (np.log1p(v) / math.log1p(self.high)).clip(0, 1)[:, None]


@dataclasses.dataclass(frozen=True)
class OneHot:
    """A one-hot block over a fixed list of categories (from the data description)."""

    categories: tuple[str, ...]

    def encode(self, values: pd.Series) -> np.ndarray:
        index = {category: i for i, category in enumerate(self.categories)}
        codes = values.map(index)
        if codes.isna().any():
            strange = sorted(set(values[codes.isna()]))[:3]
            raise ValueError(f"unknown categories {strange}; known: {list(self.categories)}")
        return np.eye(len(self.categories))[codes.to_numpy(dtype=np.int64)]


Encoder = Linear | Log | OneHot


def numeric(values: pd.Series) -> np.ndarray:
    converted = pd.to_numeric(values, errors="coerce")
    if converted.isna().any():
        raise ValueError(f"non-numeric values such as {values[converted.isna()].iloc[0]!r}")
    return converted.to_numpy(dtype=np.float64)


def read_rows(data: bytes, columns: int, skip: int = 0) -> pd.DataFrame:
    """Comma-separated rows (spaces after commas dropped, blank lines skipped); pandas
    parses numeric columns in C, which is what keeps the 494k-row KDD file fast."""
    frame = pd.read_csv(io.BytesIO(data), header=None, skiprows=skip, skipinitialspace=True)
    if frame.shape[1] != columns:
        raise ValueError(f"expected {columns} columns per row, found {frame.shape[1]}")
    if frame.isna().any().any():
        raise ValueError("some rows have empty fields")
    return frame


def encode(frame: pd.DataFrame, schema: Sequence[Encoder]) -> np.ndarray:
    """float32 (N, D) rows with ||x||_2 <= 1, columns encoded in order by ``schema``."""
    blocks = [encoder.encode(frame[i]) for i, encoder in enumerate(schema)]
    return (np.hstack(blocks) / math.sqrt(len(schema))).astype(np.float32)
