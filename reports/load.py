"""Reads the run records into one flat table, refusing a malformed record with one line.

The records are those of the archive (our committed results) and of a local results
folder. A cell recorded in both counts once: the archived record, marked as found in
both. Each row carries its configuration identity; a record whose configuration is in no
current suite is marked superseded (its settings or method version have changed since),
and so is an audited twin of an earlier audit protocol than its method's now.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterator, Mapping, Sequence

import pandas as pd

from benchmarks.errors import PrivboardError
from benchmarks.metrics import DEFAULT_METRIC
from benchmarks.records import RecordError, RunRecord, read_records
from benchmarks.settings_chosen import Chosen
from reports.presentation import MODEL_NAMES

NOTION_FIELDS = ("protects", "neighbours", "kind", "accountant")
# The setting that names a method's network: the Keras classifiers' model, PATE's teachers'.
MODEL_HPARAMS = ("model", "teacher_model")
RECORD_COLUMNS = ("path", "status", "suite", "dataset", "method", "variant", "model",
                  "config_id", "seed", "epsilon", "delta", "spent_epsilon", "metric", "value",
                  *NOTION_FIELDS, "chosen", "chosen_detail", "superseded", "audit",
                  "record_kind", "source", "wall_time_s", "no_proven_bound", "record")
# Where a record was found.
ARCHIVED, LOCAL, BOTH, THIRD_PARTY = "archived", "this machine", "both", "third-party"


class ReportError(PrivboardError):
    """Bad input to the leaderboard (missing results, malformed record); one line."""


def load_records(results: Path | Sequence[Path] | None, metric_of: Mapping[str, str],
                 current_configs: set[str] | None = None,
                 archived: list[RunRecord] = (),
                 defaults_of: Mapping[str, dict] | None = None,
                 submitted: list[RunRecord] = (),
                 audit_protocol_of: Mapping[str, int] | None = None,
                 chosen_of: Mapping[str, dict] | None = None) -> pd.DataFrame:
    """One row per record of the archive (``archived``), of the local folders
    ``results`` (one, several or None; a cell in several counts once) and of checked
    submissions (``submitted``: third-party); ``value`` is the dataset's headline metric
    (NaN if failed or not a run).
    With ``current_configs``, records of any other configuration are superseded.
    ``defaults_of`` (the catalogue's method defaults) names the model of a record whose
    settings left it at the method's default. ``audit_protocol_of`` (the catalogue's
    methods' audit protocols) supersedes the audited twins of earlier protocols;
    ``chosen_of`` (the catalogue's declarations) says how a configuration's settings were
    chosen; a record's own declaration counts only where the catalogue has none: a suite's
    declaration may be reviewed and corrected, its records are never edited."""
    local: list[RunRecord] = []
    for folder in folders_of(results):  # a cell in several folders counts once: the first's
        seen = {record.cell_id for record in local}
        local += [record for record in _whole_records(folder) if record.cell_id not in seen]
    here = {record.cell_id for record in local}
    kept = {record.cell_id for record in archived}
    found = [(record, BOTH if record.cell_id in here else ARCHIVED) for record in archived]
    found += [(record, LOCAL) for record in local if record.cell_id not in kept]
    found += [(record, THIRD_PARTY) for record in submitted]
    rows = [_flatten(record, metric_of, current_configs, defaults_of or {},
                     audit_protocol_of or {}, chosen_of or {}, source)
            for record, source in found]
    records = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
    return records.astype({"epsilon": float, "delta": float, "spent_epsilon": float,
                           "value": float, "superseded": bool, "audit": bool,
                           "wall_time_s": float, "no_proven_bound": bool})


def folders_of(results: Path | str | Sequence[Path | str] | None) -> list[Path]:
    """One folder of records, several, or None: as a list."""
    if results is None:
        return []
    return [Path(results)] if isinstance(results, (str, Path)) else [Path(r) for r in results]


def _whole_records(results: Path) -> Iterator[RunRecord]:
    if not results.exists():
        raise ReportError(f"results directory {results} does not exist")
    if not results.is_dir():
        raise ReportError(f"results path {results} is not a directory")
    try:
        yield from read_records(results)
    except RecordError as error:
        raise ReportError(str(error)) from None


def _flatten(record: RunRecord, metric_of: Mapping[str, str],
             current_configs: set[str] | None, defaults_of: Mapping[str, dict],
             audit_protocol_of: Mapping[str, int], chosen_of: Mapping[str, dict],
             source: str) -> dict:
    metric = metric_of.get(record.dataset, DEFAULT_METRIC)
    value = math.nan
    if record.ok and record.kind == "run":  # audits and re-runs count elsewhere
        if metric not in record.metrics:
            raise ReportError(f"record {record.path}: metrics.{metric} is missing, and it is "
                              f"the headline metric of {record.dataset}")
        value = float(record.metrics[metric])
    notion = record.privacy.notion.as_dict()
    chosen = Chosen.from_dict(chosen_of.get(record.config_id) or record.settings_chosen)
    spent = record.privacy.epsilon
    return {"path": str(record.path), "status": record.status, "suite": record.suite,
            "dataset": record.dataset, "method": record.method, "variant": record.variant,
            "model": model_name(record, defaults_of), "config_id": record.config_id,
            "seed": record.seed, "epsilon": record.epsilon, "delta": record.delta,
            "spent_epsilon": math.nan if spent is None else spent,
            "metric": metric, "value": value, **{f: notion[f] for f in NOTION_FIELDS},
            "chosen": chosen.how, "chosen_detail": chosen.detail,
            "superseded": (current_configs is not None and record.config_id not in current_configs)
            or (record.audits and record.audit_protocol < audit_protocol_of.get(record.method, 1)),
            "audit": record.is_audit, "record_kind": record.kind, "source": source,
            "wall_time_s": record.wall_time_s, "no_proven_bound": record.no_proven_bound,
            "record": record}


def model_name(record: RunRecord, defaults_of: Mapping[str, dict]) -> str:
    """The network a record trained, by its site name; "" for a method without one. A
    record keeps the settings it ran with; a method's catalogued defaults fill in."""
    hparams = {**defaults_of.get(record.method, {}), **record.hparams}
    model = next((hparams[key] for key in MODEL_HPARAMS if key in hparams), "")
    return MODEL_NAMES.get(model, model)
