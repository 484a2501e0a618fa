"""The result store: one JSON file per finished cell, written atomically and last.

A record is the source of truth for every table, page and plot. Schema (version 1):

    schema           1
    cell_id          hash of what changes the result (see benchmarks.suites.cell_id)
    suite            the suite that produced it
    status           "ok" or "failed"
    method, method_version, dataset, dataset_fingerprint, seed
    variant          short text from the method that tells apart settings shown as
                     separate leaderboard rows (e.g. "huber h=0.5"), often ""
    epsilon          float, or the string "inf" (JSON has no infinity)
    delta            float
    hparams          the full hyperparameters used
    metrics          {"accuracy_pct": ...} (test accuracy in %), method extras
    privacy          {"epsilon", "delta", "protects", "neighbours", "kind",
                      "accountant", "short", "details": {...}}
    wall_time_s, started_at, finished_at
    provenance       {"git_commit", "git_dirty", "packages", "python", "device"}
    error            (failed records only) one line
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

from benchmarks.atomic import atomic_write

SCHEMA = 1


class RecordError(ValueError):
    """A file in a results folder that is not a whole record."""


def encode_epsilon(eps: float) -> float | str:
    return "inf" if math.isinf(eps) else float(eps)


def decode_epsilon(value: float | str) -> float:
    return math.inf if value == "inf" else float(value)


def record_path(results: Path, cell_id: str, status: str) -> Path:
    suffix = ".json" if status == "ok" else ".failed.json"
    return results / f"{cell_id}{suffix}"


def write_record(results: Path, record: dict[str, Any]) -> Path:
    """Write atomically, so a kill at any moment leaves either no record or a whole one.
    A successful record replaces an earlier failure of the same cell."""
    path = record_path(results, record["cell_id"], record["status"])
    with atomic_write(path) as f:
        json.dump(record, f, indent=1, sort_keys=True, allow_nan=False)
    if record["status"] == "ok":
        record_path(results, record["cell_id"], "failed").unlink(missing_ok=True)
    return path


def read_records(results: Path) -> Iterator[dict[str, Any]]:
    """Every whole record under ``results`` (temp files of interrupted writes are ignored)."""
    if not results.is_dir():
        return
    for path in sorted(results.glob("*.json")):
        if path.name.startswith(".tmp-"):
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise RecordError(f"record {path} is not a JSON object ({err})") from None
        if not isinstance(record, dict):
            raise RecordError(f"record {path} is not a JSON object")
        record["_path"] = str(path)
        yield record


def done_cells(results: Path) -> dict[str, str]:
    """cell_id -> status of every recorded cell; "ok" wins over "failed"."""
    status: dict[str, str] = {}
    for path in results.glob("*.json") if results.is_dir() else ():
        if path.name.startswith(".tmp-"):
            continue
        cell, _, rest = path.name.partition(".")
        if rest == "json" or cell not in status:
            status[cell] = "ok" if rest == "json" else "failed"
    return status
