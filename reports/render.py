"""Writes the site: index.html, one provenance page per cell, plots, raw records, exports."""
from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import jinja2
import pandas as pd

from reports.load import UNKNOWN
from reports.plots import plot_dataset
from reports.rows import (GROUP_KEYS, format_delta, format_epsilon, format_number, markdown,
                          metric_tolerance, section_of)

QUICK_SUITE = "quick"
# How each kind of privacy notion is presented: (badge css class, title, explanation).
_LABEL_DP = ("label-dp", "Label-DP",
             "protects the labels only; neighbouring datasets differ in one label "
             "(substitution). Not comparable with full DP at the same epsilon.")
_FULL_DP = ("full-dp", "Full DP",
            "protects inputs and labels; neighbouring datasets differ by adding or "
            "removing one example.")
_NON_PRIVATE = ("non-private", "Non-private", "no privacy: references trained on clean data.")
_UNKNOWN = ("unknown-notion", "Unknown notion",
            "these runs failed before recording their privacy notion.")
_OTHER = ("other-notion", "Other notion",
          "the epsilon is NOT an overall model epsilon: it covers only the mechanism named "
          "here (for example local randomised response of labels), not the trained model.")

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_env.filters["eps"] = format_epsilon


def write_site(site: Path, rows: pd.DataFrame, records: pd.DataFrame, claims: list[dict],
               notes: dict[str, str], tolerance: float, results: Path) -> None:
    (site / "cells").mkdir(parents=True)
    (site / "records").mkdir()
    (site / "plots").mkdir()
    rows.to_csv(site / "rows.csv", index=False, float_format="%.10g")
    (site / "rows.md").write_text(markdown(rows))
    for path in records["path"]:
        shutil.copyfile(path, site / "records" / Path(path).name)
    datasets = []
    for dataset, dataset_rows in rows.groupby("dataset", sort=True):
        plot = f"plots/{dataset}.png"
        plot_dataset(dataset_rows, site / plot)
        datasets.append({"name": dataset, "plot": plot, "note": notes.get(dataset, ""),
                         "metric": dataset_rows["metric"].iloc[0],
                         "sections": _sections(dataset_rows)})
    for cell, cell_rows in rows[rows["cell"] != ""].groupby("cell"):
        _write_cell_page(site / "cells" / f"{cell}.html", cell_rows, records)
    (site / "index.html").write_text(_env.get_template("index.html").render(
        datasets=datasets, claims=claims, results=str(results),
        tolerance=tolerance, rmse_tolerance=metric_tolerance("rmse", tolerance),
        counts=records["status"].value_counts().to_dict(), notions=_legend()))


def presentation(protects: str) -> tuple[str, str, str]:
    return {"labels": _LABEL_DP, "inputs and labels": _FULL_DP, "nothing": _NON_PRIVATE,
            UNKNOWN: _UNKNOWN}.get(protects, _OTHER)


def _legend() -> list[tuple[str, str, str]]:
    return [_LABEL_DP, _FULL_DP, _OTHER, _NON_PRIVATE, _UNKNOWN]


def _sections(rows: pd.DataFrame) -> list[dict]:
    """Per privacy notion, a table: one line per (method, variant, suite), one column
    per budget."""
    order = [notion[0] for notion in _legend()]
    sections = []
    for section, section_rows in rows.groupby("section"):
        # Some row always has the section's own notion: a non-private row only ever
        # joins the section of a private row of the same method.
        own = [section_of(p, n) == section
               for p, n in zip(section_rows["protects"], section_rows["neighbours"])]
        protects, neighbours = section_rows.loc[own, ["protects", "neighbours"]].iloc[0]
        css, title, explanation = presentation(protects)
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
    cells = {label: {"ours": None, "papers": []} for label in budgets}
    for row in rows.itertuples():
        cell = cells[_budget(row, with_delta)[1]]
        if row.cell and cell["ours"] is None:
            cell["ours"] = {"n": row.n, "failed": row.failed, "mean": row.mean,
                            "std": None if pd.isna(row.std) else row.std,
                            "link": f"cells/{row.cell}.html"}
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
            "notions": [{"badge": presentation(n.protects)[1], "css": presentation(n.protects)[0],
                         **n._asdict()} for n in notions.itertuples(index=False)],
            "cells": [cells[label] for label in budgets]}


def _write_cell_page(path: Path, rows: pd.DataFrame, records: pd.DataFrame) -> None:
    first = rows.iloc[0]
    key = {name: first[name] for name in GROUP_KEYS}
    mine = records
    for name, value in key.items():
        mine = mine[mine[name] == value]
    runs = [_run(record) for record in mine.sort_values(["status", "seed"])["record"]]
    papers = [_without_nan(paper) for paper in rows[rows["paper_value"].notna()].to_dict("records")]
    css, title, explanation = presentation(first["protects"])
    path.write_text(_env.get_template("cell.html").render(
        key=key, row=_without_nan(first.to_dict()), runs=runs, papers=papers, notion_css=css,
        notion_title=title, notion_explanation=explanation,
        quick=first["suite"] == QUICK_SUITE))


def _run(record: dict) -> dict:
    provenance = record.get("provenance") or {}
    privacy = record.get("privacy") or {}
    return {
        "seed": record.get("seed"), "status": record.get("status"),
        "error": record.get("error", ""), "metrics": _json(record.get("metrics")),
        "wall_time_s": record.get("wall_time_s"),
        "started_at": record.get("started_at", ""),
        "git_commit": provenance.get("git_commit", "unknown"),
        "git_dirty": provenance.get("git_dirty"),
        "device": provenance.get("device", ""), "python": provenance.get("python", ""),
        "fingerprint": record.get("dataset_fingerprint", "unknown"),
        "method_version": record.get("method_version", ""),
        "spent": privacy and f"epsilon={privacy.get('epsilon')}, delta={privacy.get('delta')}",
        "privacy_details": _json(privacy.get("details")),
        "hparams": _json(record.get("hparams")), "packages": _json(provenance.get("packages")),
        "raw": f"../records/{Path(record['_path']).name}"}


def _without_nan(row: dict) -> dict:
    return {name: None if isinstance(value, float) and math.isnan(value) else value
            for name, value in row.items()}


def _json(value) -> str:
    return json.dumps(value, indent=1, sort_keys=True, default=str) if value else ""


_env.filters["num"] = format_number
_env.filters["delta"] = format_delta
