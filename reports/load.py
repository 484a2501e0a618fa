"""Reads the run records into one flat table, refusing a malformed record with one line."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator, Mapping

import pandas as pd

from benchmarks.records import SCHEMA, RecordError, decode_epsilon, read_records

DEFAULT_METRIC = "accuracy_pct"
NOTION_FIELDS = ("protects", "neighbours", "kind", "accountant")
RECORD_COLUMNS = ("path", "status", "suite", "dataset", "method", "variant", "seed",
                  "epsilon", "delta", "metric", "value", *NOTION_FIELDS, "record")
_REQUIRED = ("cell_id", "suite", "status", "method", "dataset", "seed", "epsilon", "delta")
UNKNOWN = "unknown"


class ReportError(ValueError):
    """Bad input to the leaderboard (missing results, malformed record); one line."""


def load_records(results: Path, metric_of: Mapping[str, str]) -> pd.DataFrame:
    """One row per record; ``value`` is the dataset's headline metric (NaN if failed)."""
    if not results.exists():
        raise ReportError(f"results directory {results} does not exist")
    if not results.is_dir():
        raise ReportError(f"results path {results} is not a directory")
    rows = [_flatten(record, metric_of) for record in _whole_records(results)]
    records = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
    records = records.astype({"epsilon": float, "delta": float, "value": float})
    return _fill_failed_notions(records)


def _whole_records(results: Path) -> Iterator[dict[str, Any]]:
    try:
        yield from read_records(results)
    except RecordError as error:
        raise ReportError(str(error)) from None


def _fill_failed_notions(records: pd.DataFrame) -> pd.DataFrame:
    """A run that failed early records no privacy notion: it has the notion of the
    method's ok runs (private or not, as its epsilon), else it is shown as unknown."""
    private = records["epsilon"].map(math.isfinite)
    known = records[records["protects"] != ""]
    notion = known.groupby([known["method"], private[known.index]])[list(NOTION_FIELDS)].first()
    for index in records.index[records["protects"] == ""]:
        key = (records.at[index, "method"], private[index])
        for field in NOTION_FIELDS:
            records.at[index, field] = notion.at[key, field] if key in notion.index else UNKNOWN
    return records


def _flatten(record: dict[str, Any], metric_of: Mapping[str, str]) -> dict[str, Any]:
    path = record["_path"]

    def bad(problem: str) -> ReportError:
        return ReportError(f"malformed record {path}: {problem}")

    if record.get("schema") != SCHEMA:
        raise bad(f"schema {record.get('schema')!r}, expected {SCHEMA}")
    missing = [field for field in _REQUIRED if field not in record]
    if missing:
        raise bad(f"missing {', '.join(missing)}")
    if record["status"] == "ok" and "variant" not in record:
        raise bad("missing variant")
    if record["status"] not in ("ok", "failed"):
        raise bad(f"status {record['status']!r} is neither 'ok' nor 'failed'")
    try:
        epsilon = decode_epsilon(record["epsilon"])
        delta = float(record["delta"])
    except (TypeError, ValueError):
        raise bad(f"epsilon {record['epsilon']!r} / delta {record['delta']!r} "
                  "are not numbers") from None
    if math.isnan(epsilon) or epsilon <= 0 or not 0 <= delta < 1:
        raise bad(f"epsilon {epsilon} must be > 0 and delta {delta} in [0, 1)")

    ok = record["status"] == "ok"
    privacy = record.get("privacy")
    if not isinstance(privacy, dict):
        if ok:
            raise bad("missing privacy")
        privacy = {}  # a failed run may not know its notion: see _fill_failed_notions
    notion = {field: str(privacy.get(field, "")) for field in NOTION_FIELDS}
    if ok and not all(notion.values()):
        raise bad(f"privacy needs {', '.join(NOTION_FIELDS)}")

    metric = metric_of.get(record["dataset"], DEFAULT_METRIC)
    value = math.nan
    if ok:
        value = (record.get("metrics") or {}).get(metric)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad(f"metrics.{metric} is {value!r}, not a number")
    return {"path": path, "status": record["status"], "suite": str(record["suite"]),
            "dataset": str(record["dataset"]), "method": str(record["method"]),
            "variant": str(record.get("variant", "")), "seed": record["seed"], "epsilon": epsilon,
            "delta": delta, "metric": metric, "value": float(value), **notion,
            "record": record}
