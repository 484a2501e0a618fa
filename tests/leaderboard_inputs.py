"""Inputs of the leaderboard for the tests: records with the identities their contents
hash to, and records folders with the current catalogue beside them."""
from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

from benchmarks import catalogue
from benchmarks.records import CATALOGUE, cell_identity, config_identity, decode_epsilon


def rehashed(record: dict) -> dict:
    """``record`` (a JSON object) with the configuration and cell identities its
    contents hash to."""
    config = config_identity(record["method"], record.get("method_version", 1),
                             record["dataset"], record.get("dataset_fingerprint", ""),
                             decode_epsilon(record["epsilon"]), float(record["delta"]),
                             record.get("hparams") or {}, record.get("search") or None)
    return {**record, "config_id": config,
            "cell_id": cell_identity(config, record["seed"], record.get("kind") == "audit",
                                     record.get("audit_protocol", 1))}


@functools.lru_cache(maxsize=None)
def _current() -> str:
    return json.dumps(catalogue.current())


def catalogued(records: Path, folder: Path) -> Path:
    """``folder``: a copy of the records in ``records`` (a folder, or None for none) and
    the current catalogue, under which every copied record's configuration is current."""
    if records is not None:
        shutil.copytree(records, folder, dirs_exist_ok=True)
    folder.mkdir(parents=True, exist_ok=True)
    data = json.loads(_current())
    for path in folder.glob("*.json"):
        if path.name != CATALOGUE:
            data["configurations"].setdefault(json.loads(path.read_text())["config_id"],
                                              ["test"])
    (folder / CATALOGUE).write_text(json.dumps(data))
    return folder
