"""Published numbers (one row per paper cell) and qualitative claims, kept as CSV data.

This module only loads and validates the files, so a typo in the data fails loudly
with its file and line instead of silently dropping a comparison from the leaderboard.
"""
from __future__ import annotations

import difflib
import math
from pathlib import Path

import pandas as pd

from benchmarks.errors import PrivboardError
from benchmarks.metrics import METRICS as METRIC_SPECS
from benchmarks.privacy import Kind, Neighbours, Protects

PUBLISHED_CSV = Path(__file__).with_name("published.csv")
CLAIMS_CSV = Path(__file__).with_name("claims.csv")
DATASET_NOTES_CSV = Path(__file__).with_name("dataset_notes.csv")

DATASETS = frozenset({
    "mnist", "fashion-mnist", "kmnist", "cifar10", "cifar100", "svhn", "movielens-1m",
    "adult", "kddcup99", "mnist-7v9", "diabetes"})
METHODS = frozenset({
    "lp-1st", "lp-2st", "lp-3st", "dp-sgd", "dp-sgd-gdp", "tempered-sigmoid", "pate-lnmax",
    "pate-plus", "pate-plus-plus", "pate-co-teaching", "pate-confident-gnmax", "spread-lr",
    "lr-clean", "lr-noisy", "dp-erm-objective", "dp-erm-output", "non-private",
    "yu-et-al", "scatternet-cnn", "feldman-zrnic", "dp-sgd-scatternet", "alibi"})
METRICS = frozenset(METRIC_SPECS)
PROTECTS = frozenset(p.value for p in Protects)
NEIGHBOURS = frozenset(n.value for n in Neighbours)
KINDS = frozenset(k.value for k in Kind)

PUBLISHED_COLUMNS = (
    "paper", "table", "column", "column_inferred", "dataset", "method", "variant", "model",
    "epsilon", "delta", "metric", "value", "protects", "neighbours", "kind", "accountant",
    "note")
CLAIMS_COLUMNS = (
    "claim_id", "paper", "source", "dataset", "better_method", "worse_method", "metric",
    "statement")


class BaselinesError(PrivboardError):
    """A malformed baselines file; the message is one line naming the file and line."""


def load_published(path: Path = PUBLISHED_CSV) -> pd.DataFrame:
    """The published numbers, typed: epsilon/value floats (epsilon may be inf), delta a
    float (NaN where the paper does not state it), column_inferred a bool. ``model`` is
    the network the paper trained, empty where its source does not name it."""
    optional = {"variant", "model", "delta", "note"}
    table = _read(path, PUBLISHED_COLUMNS,
                  required=tuple(c for c in PUBLISHED_COLUMNS if c not in optional))
    where = _Where(path)
    for column, allowed in (("dataset", DATASETS), ("method", METHODS), ("metric", METRICS),
                            ("protects", PROTECTS), ("neighbours", NEIGHBOURS), ("kind", KINDS),
                            ("column_inferred", {"true", "false"})):
        _check_allowed(table, column, allowed, where)
    table["column_inferred"] = table["column_inferred"] == "true"
    for column in ("epsilon", "value"):
        table[column] = _floats(table[column], column, where)
    table["delta"] = _floats(table["delta"].replace("", "nan"), "delta", where)
    for line, row in table.iterrows():
        problem = _notion_problem(row)
        if problem:
            raise BaselinesError(f"{where(line)}: {problem}")
    # The leaderboard reads a model's non-private accuracy from this cell: one per setting.
    ceilings = table[(table["protects"] == Protects.NOTHING.value) & (table["model"] != "")]
    twice = ceilings.duplicated(["paper", "dataset", "variant", "model"])
    if twice.any():
        raise BaselinesError(f"{where(twice.idxmax())}: a second non-private cell of the "
                             "same paper, dataset, variant and model")
    return table


def load_claims(path: Path = CLAIMS_CSV) -> pd.DataFrame:
    table = _read(path, CLAIMS_COLUMNS, required=CLAIMS_COLUMNS)
    where = _Where(path)
    _check_allowed(table, "dataset", DATASETS, where)
    _check_allowed(table, "better_method", METHODS, where)
    _check_allowed(table, "worse_method", METHODS, where)
    _check_allowed(table, "metric", METRICS, where)
    _check_unique(table, "claim_id", where)
    return table


def load_dataset_notes(path: Path = DATASET_NOTES_CSV) -> dict[str, str]:
    """dataset -> what the leaderboard should say about its published references."""
    table = _read(path, ("dataset", "note"), required=("dataset", "note"))
    where = _Where(path)
    _check_allowed(table, "dataset", DATASETS, where)
    _check_unique(table, "dataset", where)
    return dict(zip(table["dataset"], table["note"]))


class _Where:
    """Names a data row as "file line N" (line 1 is the header)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, index: int) -> str:
        return f"{self.path} line {index + 2}"


def _read(path: Path, columns: tuple[str, ...], required: tuple[str, ...]) -> pd.DataFrame:
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise BaselinesError(f"{path}: file not found") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        raise BaselinesError(f"{path}: not a readable CSV ({str(error).strip()})") from None
    missing = [column for column in columns if column not in table.columns]
    if missing:
        raise BaselinesError(f"{path}: missing column(s) {', '.join(missing)}")
    for column in required:
        empty = table[column].str.strip() == ""
        if empty.any():
            raise BaselinesError(f"{_Where(path)(empty.idxmax())}: empty {column}")
    return table[list(columns)]


def _check_allowed(table: pd.DataFrame, column: str, allowed, where: _Where) -> None:
    bad = ~table[column].isin(allowed)
    if bad.any():
        line = bad.idxmax()
        value = table.at[line, column]
        close = difflib.get_close_matches(value, sorted(allowed), n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(sorted(allowed))}"
        raise BaselinesError(f"{where(line)}: unknown {column} {value!r}{hint}")


def _check_unique(table: pd.DataFrame, column: str, where: _Where) -> None:
    duplicated = table[column].duplicated()
    if duplicated.any():
        line = duplicated.idxmax()
        raise BaselinesError(f"{where(line)}: duplicate {column} {table.at[line, column]!r}")


def _floats(values: pd.Series, column: str, where: _Where) -> pd.Series:
    parsed = pd.to_numeric(values, errors="coerce")
    bad = parsed.isna() & (values.str.lower() != "nan")
    if bad.any():
        line = bad.idxmax()
        raise BaselinesError(f"{where(line)}: {column} {values[line]!r} is not a number")
    return parsed.astype(float)


def _notion_problem(row: pd.Series) -> str | None:
    """Why a row's privacy notion contradicts its budget, or None."""
    eps, delta = row["epsilon"], row["delta"]
    if not eps > 0:
        return f"epsilon must be > 0 (inf for non-private), got {eps}"
    if math.isinf(eps) != (row["protects"] == Protects.NOTHING.value):
        return "epsilon inf goes with protects 'nothing', and only it"
    if row["kind"] == Kind.PURE.value and delta != 0:
        return f"a pure notion needs delta 0, got {delta}"
    if row["kind"] == Kind.APPROXIMATE.value and delta == 0:
        return "an approximate notion needs delta > 0 (leave it empty if not stated)"
    return None
