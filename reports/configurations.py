"""Our configurations as the method and dataset pages list them: the result, the paper
cells it is compared with, the settings, where the budget went and how the test split
was used, all from the run records."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pandas as pd

from benchmarks.records import RunRecord
from reports.index_table import paper_of, verified_of
from reports.presentation import json_text, ledger_entry, slug
from reports.rows import QUICK_SUITE


def configurations(rows: pd.DataFrame, records: pd.DataFrame,
                   defaults_of: dict[str, dict[str, Any]]) -> list[dict]:
    """One entry per configuration of ours in ``rows``. ``defaults_of`` maps a registered
    method to its default hyperparameters: a configuration lists only what it changed."""
    runs = {config: list(group) for config, group in records.groupby("config_id")["record"]}
    ours = rows[rows["cell"] != ""]
    return [_configuration(config_rows, runs[config],
                           defaults_of.get(config_rows["method"].iloc[0]))
            for config, config_rows in ours.groupby("cell", sort=False)]


def _configuration(rows: pd.DataFrame, records: list[RunRecord],
                   defaults: dict[str, Any] | None) -> dict:
    first = rows.iloc[0]
    hparams = records[0].hparams
    changed = hparams if defaults is None else {
        name: value for name, value in hparams.items()
        if name not in defaults or defaults[name] != value}
    return {
        "cell": first["cell"], "page": slug(first["cell"]), "dataset": first["dataset"],
        "dataset_page": slug(first["dataset"]), "method": first["method"],
        "method_page": slug(first["method"]), "variant": first["variant"],
        "model": first["model"],
        "suite": first["suite"], "quick": first["suite"] == QUICK_SUITE,
        "epsilon": first["epsilon"], "delta": first["delta"], "metric": first["metric"],
        "n": int(first["n"]), "failed": int(first["failed"]),
        "mean": None if first["n"] == 0 else first["mean"],
        "std": None if pd.isna(first["std"]) else first["std"],
        "spent": None if pd.isna(first["spent_epsilon"]) else first["spent_epsilon"],
        "superseded": bool(first["superseded"]), "source": first["source"],
        "verified": verified_of(first),
        "settings": ", ".join(f"{name}={json.dumps(value)}"
                              for name, value in sorted(changed.items())),
        "all_defaults": defaults is not None and not changed,
        "papers": [paper for paper in map(paper_of, rows.itertuples(index=False)) if paper],
        "ledger": budget_ledger(records),
        "test_splits": _distinct(records, lambda record: record.test_split),
        "fingerprints": _distinct(records, lambda record: record.dataset_fingerprint)}


def budget_ledger(records: list[RunRecord]) -> list[dict]:
    """The ledger entries of a configuration's records; an entry that is the same in
    several seeds is listed once, with those seeds."""
    entries: dict[str, dict] = {}
    for record in sorted(records, key=lambda record: record.seed):
        for entry in map(ledger_entry, record.privacy.ledger):
            key = json_text(entry)
            entries.setdefault(key, {**entry, "seeds": []})["seeds"].append(record.seed)
    return list(entries.values())


def _distinct(records: list[RunRecord],
              field: Callable[[RunRecord], Any]) -> list[tuple[Any, list[int]]]:
    """(value, seeds) per distinct value of a record field."""
    seen: dict[str, tuple[Any, list[int]]] = {}
    for record in sorted(records, key=lambda record: record.seed):
        value = field(record)
        seen.setdefault(json_text(value) or "-", (value, []))[1].append(record.seed)
    return list(seen.values())
