"""Reads the run records into one flat table, refusing a malformed record with one line.

Each row carries its configuration identity; a record whose configuration is in no
current suite is marked superseded (its settings or method version have changed since).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterator, Mapping

import pandas as pd

from benchmarks.errors import PrivboardError
from benchmarks.metrics import DEFAULT_METRIC
from benchmarks.records import RecordError, RunRecord, read_records
from benchmarks.registry import all_methods
from reports.presentation import MODEL_NAMES

NOTION_FIELDS = ("protects", "neighbours", "kind", "accountant")
# The setting that names a method's network: the Keras classifiers' model, PATE's teachers'.
MODEL_HPARAMS = ("model", "teacher_model")
RECORD_COLUMNS = ("path", "status", "suite", "dataset", "method", "variant", "model",
                  "config_id", "seed", "epsilon", "delta", "spent_epsilon", "metric", "value",
                  *NOTION_FIELDS, "superseded", "audit", "wall_time_s", "record")


class ReportError(PrivboardError):
    """Bad input to the leaderboard (missing results, malformed record); one line."""


def load_records(results: Path, metric_of: Mapping[str, str],
                 current_configs: set[str] | None = None) -> pd.DataFrame:
    """One row per record; ``value`` is the dataset's headline metric (NaN if failed).
    With ``current_configs``, records of any other configuration are superseded."""
    if not results.exists():
        raise ReportError(f"results directory {results} does not exist")
    if not results.is_dir():
        raise ReportError(f"results path {results} is not a directory")
    rows = [_flatten(record, metric_of, current_configs) for record in _whole_records(results)]
    records = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
    return records.astype({"epsilon": float, "delta": float, "spent_epsilon": float,
                           "value": float, "superseded": bool, "audit": bool,
                           "wall_time_s": float})


def _whole_records(results: Path) -> Iterator[RunRecord]:
    try:
        yield from read_records(results)
    except RecordError as error:
        raise ReportError(str(error)) from None


def _flatten(record: RunRecord, metric_of: Mapping[str, str],
             current_configs: set[str] | None) -> dict:
    metric = metric_of.get(record.dataset, DEFAULT_METRIC)
    value = math.nan
    if record.ok and not record.is_audit:  # an audited twin has no accuracy of its own
        if metric not in record.metrics:
            raise ReportError(f"record {record.path}: metrics.{metric} is missing, and it is "
                              f"the headline metric of {record.dataset}")
        value = float(record.metrics[metric])
    notion = record.privacy.notion.as_dict()
    spent = record.privacy.epsilon
    return {"path": str(record.path), "status": record.status, "suite": record.suite,
            "dataset": record.dataset, "method": record.method, "variant": record.variant,
            "model": model_name(record), "config_id": record.config_id, "seed": record.seed,
            "epsilon": record.epsilon, "delta": record.delta, "spent_epsilon": math.nan if spent is None else spent,
            "metric": metric, "value": value, **{f: notion[f] for f in NOTION_FIELDS},
            "superseded": current_configs is not None and record.config_id not in current_configs,
            "audit": record.is_audit, "wall_time_s": record.wall_time_s, "record": record}


def model_name(record: RunRecord) -> str:
    """The network a record trained, by its site name; "" for a method without one. A
    record keeps only the settings its suite gave, so the method's defaults fill in."""
    method = all_methods().get(record.method)
    hparams = {**(method.defaults if method else {}), **record.hparams}
    model = next((hparams[key] for key in MODEL_HPARAMS if key in hparams), "")
    return MODEL_NAMES.get(model, model)
