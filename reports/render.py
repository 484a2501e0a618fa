"""Writes the site: index.html, one provenance page per configuration, plots, the
published copies of the records, and exports.

Only the public part of a record reaches the site: its private diagnostics are never
rendered, and the raw JSON copies are written from ``RunRecord.public_dict``.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import jinja2
import pandas as pd

from benchmarks.privacy import Accountant, Kind, Neighbours, PrivacyNotion, Protects
from benchmarks.records import RunRecord
from reports.plots import plot_dataset
from reports.rows import (DISPLAY_KEYS, format_delta, format_epsilon, format_number,
                          markdown, metric_tolerance, section_of)

QUICK_SUITE = "quick"
UNKNOWN = "unknown"
# How each scope of privacy notion is presented: (badge css class, title, what it covers).
_SCOPES = {
    "label-DP": ("label-dp", "Label-DP", "protects the labels only (the inputs are public). "
                 "Not comparable with full DP at the same epsilon."),
    "full DP": ("full-dp", "Full DP", "protects inputs and labels."),
    "local randomised response": ("other-notion", "Other notion",
              "the epsilon is NOT an overall model epsilon: it covers only the mechanism "
              "named here (local randomised response of each label), not the trained model."),
    "non-private": ("non-private", "Non-private",
                    "no privacy: references trained on clean data."),
}

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_env.filters["eps"] = format_epsilon
_env.filters["num"] = format_number
_env.filters["delta"] = format_delta


def write_site(site: Path, rows: pd.DataFrame, records: pd.DataFrame, claims: list[dict],
               notes: dict[str, str], tolerance: float, results: Path, notice: dict) -> None:
    (site / "cells").mkdir(parents=True)
    (site / "records").mkdir()
    (site / "plots").mkdir()
    rows.to_csv(site / "rows.csv", index=False, float_format="%.10g")
    (site / "rows.md").write_text(markdown(rows))
    for record in records["record"]:
        (site / "records" / Path(record.path).name).write_text(
            json.dumps(record.public_dict(), indent=1, sort_keys=True))
    datasets = []
    for dataset, dataset_rows in rows.groupby("dataset", sort=True):
        plot = f"plots/{dataset}.png"
        plot_dataset(dataset_rows, site / plot)
        datasets.append({"name": dataset, "plot": plot, "note": notes.get(dataset, ""),
                         "metric": dataset_rows["metric"].iloc[0],
                         "sections": _sections(dataset_rows)})
    for cell, cell_rows in rows[rows["cell"] != ""].groupby("cell"):
        _write_cell_page(site / "cells" / f"{cell}.html", cell_rows,
                         records[records["config_id"] == cell])
    (site / "index.html").write_text(_env.get_template("index.html").render(
        datasets=datasets, claims=claims, results=str(results),
        tolerance=tolerance, rmse_tolerance=metric_tolerance("rmse", tolerance),
        counts=records["status"].value_counts().to_dict(), notions=_legend(),
        superseded=notice))


def presentation(protects: str, neighbours: str) -> tuple[str, str, str]:
    """(badge css class, title, explanation) of a section; the explanation names the
    neighbour relation of the guarantee shown below it."""
    try:
        scope = Protects(protects).scope
    except ValueError:
        return ("unknown-notion", "Unknown notion", "the notion of these runs is not known.")
    css, title, covers = _SCOPES[scope]
    if scope == "non-private":
        return css, title, covers
    relation = PrivacyNotion(Protects(protects), Neighbours(neighbours), Kind.PURE,
                             Accountant.NONE).neighbour_words
    return css, title, f"{covers} {relation[0].upper()}{relation[1:]}."


def _legend() -> list[tuple[str, str, str]]:
    return list(_SCOPES.values())


def _sections(rows: pd.DataFrame) -> list[dict]:
    """Per privacy notion, a table: one line per configuration family (method, variant,
    suite), one column per budget."""
    order = [css for css, _, _ in _legend()] + ["unknown-notion"]
    sections = []
    for section, section_rows in rows.groupby("section"):
        # Some row always has the section's own notion: a non-private row only ever
        # joins the section of a private row of the same method.
        own = [section_of(p, n) == section
               for p, n in zip(section_rows["protects"], section_rows["neighbours"])]
        protects, neighbours = section_rows.loc[own, ["protects", "neighbours"]].iloc[0]
        css, title, explanation = presentation(protects, neighbours)
        private = section_rows[section_rows["epsilon"].map(math.isfinite)]
        deltas = set(private["delta"].map(format_delta))
        # One shared delta goes in the heading instead of in every column.
        shared_delta = deltas.pop() if len(deltas) == 1 else None
        budgets = sorted({_budget(row, shared_delta is None)
                          for row in section_rows.itertuples()})
        labels = [label for _, label in budgets]
        lines = [_line(key, line_rows, labels, shared_delta is None)
                 for key, line_rows in section_rows.groupby(["method", "variant", "suite"])]
        lines.sort(key=lambda line: (line["method"], line["variant"], line["paper_only"]))
        sections.append({"css": css, "title": title, "explanation": explanation,
                         "protects": protects, "neighbours": neighbours,
                         "shared_delta": shared_delta, "budgets": labels, "lines": lines})
    return sorted(sections, key=lambda section: order.index(section["css"]))


def _budget(row, with_delta: bool) -> tuple[tuple[float, float], str]:
    """(sort key, column label) of a row's (epsilon, delta)."""
    label = "e=" + format_epsilon(row.epsilon)
    if with_delta and math.isfinite(row.epsilon) and not row.delta == 0:
        label += ", δ=" + format_delta(row.delta)
    return (row.epsilon, -1 if pd.isna(row.delta) else row.delta), label


def _line(key: tuple[str, str, str], rows: pd.DataFrame, budgets: list[str],
          with_delta: bool) -> dict:
    method, variant, suite = key
    cells = {label: {"ours": [], "papers": []} for label in budgets}
    for row in rows.itertuples():
        cell = cells[_budget(row, with_delta)[1]]
        if row.cell and row.cell not in [ours["cell"] for ours in cell["ours"]]:
            cell["ours"].append({
                "cell": row.cell, "n": row.n, "failed": row.failed, "mean": row.mean,
                "std": None if pd.isna(row.std) else row.std, "superseded": row.superseded,
                "link": f"cells/{row.cell}.html"})
        if pd.notna(row.paper_value):
            cell["papers"].append({
                "value": row.paper_value, "paper": row.paper, "table": row.table,
                "column": row.column, "inferred": bool(row.column_inferred), "note": row.note,
                "headline": bool(row.cell) and row.paper_variant != row.variant,
                "diff": None if pd.isna(row.diff) else row.diff,
                "beyond": bool(row.beyond_tolerance)})
    notions = rows[["protects", "neighbours", "kind", "accountant"]].drop_duplicates()
    return {"method": method, "variant": variant, "suite": suite,
            "quick": suite == QUICK_SUITE, "paper_only": suite == "",
            "notions": [{"badge": presentation(n.protects, n.neighbours)[1],
                         "css": presentation(n.protects, n.neighbours)[0], **n._asdict()}
                        for n in notions.itertuples(index=False)],
            "cells": [cells[label] for label in budgets]}


def _write_cell_page(path: Path, rows: pd.DataFrame, records: pd.DataFrame) -> None:
    first = rows.iloc[0]
    key = {name: first[name] for name in DISPLAY_KEYS}
    runs = [_run(record) for record in
            sorted(records["record"], key=lambda r: (r.status, r.seed))]
    papers = [_without_nan(paper) for paper in rows[rows["paper_value"].notna()].to_dict("records")]
    css, title, explanation = presentation(first["protects"], first["neighbours"])
    path.write_text(_env.get_template("cell.html").render(
        key=key, config_id=first["cell"], row=_without_nan(first.to_dict()), runs=runs,
        papers=papers, notion_css=css, notion_title=title, notion_explanation=explanation,
        quick=first["suite"] == QUICK_SUITE))


def _run(record: RunRecord) -> dict:
    provenance = record.provenance
    privacy = record.privacy
    spent = "" if privacy.epsilon is None else (
        f"epsilon={format_epsilon(privacy.epsilon)}, delta={privacy.delta:g} "
        f"({privacy.composition} composition)")
    return {
        "seed": record.seed, "status": record.status, "error": record.error,
        "metrics": _json(record.metrics), "wall_time_s": record.wall_time_s,
        "started_at": record.started_at,
        "git_commit": provenance.get("git_commit", UNKNOWN),
        "git_dirty": provenance.get("git_dirty"),
        "device": provenance.get("device", ""), "python": provenance.get("python", ""),
        "fingerprint": record.dataset_fingerprint or UNKNOWN,
        "datasets_used": _json(record.datasets_used),
        "method_version": record.method_version, "spent": spent,
        "ledger": [_ledger_entry(entry) for entry in privacy.ledger],
        "privacy_details": _json(privacy.details),
        "hparams": _json(record.hparams), "packages": _json(provenance.get("packages")),
        "raw": f"../records/{Path(record.path).name}"}


def _ledger_entry(entry: dict) -> dict:
    touches = entry.get("touches", {})
    cost = dict(entry.get("cost", {}))
    cost.pop("orders", None)  # a curve's orders are the same for every charge
    return {"mechanism": entry.get("mechanism", ""), "field": touches.get("field", ""),
            "examples": touches.get("examples", ""), "group": touches.get("group", ""),
            "epsilon_alone": entry.get("epsilon_alone", ""),
            "cost": cost.get("type", ""), "details": _json(entry.get("details"))}


def _without_nan(row: dict) -> dict:
    return {name: None if isinstance(value, float) and math.isnan(value) else value
            for name, value in row.items()}


def _json(value) -> str:
    return json.dumps(value, indent=1, sort_keys=True, default=str) if value else ""
