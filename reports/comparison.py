"""The comparison of a suite that runs every method on one model: per dataset and privacy
family, which method is best at each epsilon of our runs, each method's mean ± std
beside the papers' re-run numbers on the same model, and its audited epsilon.

It is generic over the rows: any configuration of a compared suite with an ok run takes
its place, whatever its method; the paper numbers are those of ``baselines/`` for the
same dataset, method and model. Nothing here reads a record's private diagnostics.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from benchmarks.metrics import metric
from benchmarks.settings_chosen import TRACKS
from reports.index_table import audit_of
from reports.presentation import (dataset_title, family_of, ordered_datasets,
                                  settings_badge, slug, variant_beyond_model)
from reports.ranking import FAMILIES, REFERENCE
from reports.rows import format_epsilon, unproven

# The suites run to compare methods on one model, each shown as a section of the pages
# of its datasets.
COMPARED_SUITES = ("label-dp-small", "label-dp-small-tuned")
PAPER_KEYS = ["paper", "table", "column", "value", "epsilon", "note", "accountant", "model"]


def comparisons(rows: pd.DataFrame, published: pd.DataFrame) -> list[dict]:
    """Per compared suite and dataset it ran (in reading order): its families (label-DP,
    full DP, ...), each with its lines, table and best method per epsilon, and the
    non-private reference on the same model."""
    ours = rows[(rows["n"] > 0) & ~rows["superseded"]]
    ours = ours.drop_duplicates("cell").fillna({"model": "", "variant": ""})
    ours = ours.assign(family=[family_of(p) for p in ours["protects"]])
    found = []
    for suite in COMPARED_SUITES:
        of_suite = ours[ours["suite"] == suite]
        for dataset in ordered_datasets(of_suite["dataset"].unique()):
            mine = of_suite[of_suite["dataset"] == dataset]
            measure = metric(mine["metric"].iloc[0])
            papers = published[published["dataset"] == dataset]
            families = [_family(key, title, mine[mine["family"] == key], papers, measure)
                        for key, title in FAMILIES if (mine["family"] == key).any()]
            reference = mine[mine["family"] == REFERENCE]
            found.append({
                "suite": suite, "dataset": dataset, "title": dataset_title(dataset),
                "anchor": f"comparison-{slug(suite)}", "metric": measure.name,
                "label": measure.label, "families": families,
                "models": sorted(set(mine["model"]) - {""}),
                "reference": [point(row) for row in reference.itertuples(index=False)]})
    return found


def _family(key: str, title: str, entries: pd.DataFrame, papers: pd.DataFrame,
            measure) -> dict:
    lines = [_line(line, papers) for _, line in
             entries.groupby(["method", "model", "variant"], sort=True)]
    epsilons = sorted(entries["epsilon"].unique())
    return {"key": key, "title": title, "lines": lines,
            "by_epsilon": [_at(epsilon, lines, measure) for epsilon in epsilons],
            "notes": _paper_notes(lines)}


def _paper_notes(lines: list[dict]) -> list[dict]:
    """Per line, the distinct notes of its paper cells (how the paper ran or accounted
    them), shown under the table: a difference with the paper reads with them."""
    found = []
    for line in lines:
        notes = list(dict.fromkeys(cell["note"] for cell in line["paper"] if cell["note"]))
        if notes:
            found.append({"name": line["name"], "notes": notes})
    return found


def _line(entries: pd.DataFrame, papers: pd.DataFrame) -> dict:
    """One method on one model: our points per epsilon, the papers' matching cells and
    the audited epsilons of its audited twins."""
    first = entries.iloc[0]
    # The section names its model: a line's name keeps only what else sets it apart.
    detail = variant_beyond_model(first["variant"], first["model"])
    name = first["method"] + (f" · {detail}" if detail else "")
    points = [point(row) for row in entries.sort_values("epsilon").itertuples(index=False)]
    audits = [audit_words(point["audit"], point["epsilon"]) for point in points if point["audit"]]
    return {"name": name, "method": first["method"], "model": first["model"],
            "points": points, "audits": audits,
            "paper": _paper_cells(papers, first["method"], first["model"], first["variant"])}


def audit_words(audit: dict, epsilon: float) -> str:
    """An audit in a few words: a tested claim's empirical epsilon and verdict, else the
    strongest lower bound."""
    claim = f"at claim {format_epsilon(epsilon)}"
    if audit["claim"]:
        verdict = "rejected" if audit["claim"]["rejected"] else "not rejected"
        empirical = audit["claim"]["empirical"]
        figure = "no empirical ε" if empirical is None else f"empirical ε {empirical:.2f}"
        return f"{figure} {claim} (curve {verdict}, level {100 * audit['level']:.3g}%)"
    return f"ε ≥ {audit['strongest']:.2f} {claim}"


def _paper_cells(papers: pd.DataFrame, method: str, model: str, variant: str) -> list[dict]:
    """The papers' private cells a line compares with: the method's on the line's model;
    for a method that names no model (its network is its own), its headline cells."""
    cells = papers[(papers["method"] == method) & papers["variant"].isin(["", variant])
                   & np.isfinite(papers["epsilon"])]
    if model:
        cells = cells[cells["model"] == model]
    cells = cells.sort_values(["paper", "table", "epsilon"])
    return [{**{key: cell[key] for key in PAPER_KEYS},
             "source": f"{cell['paper']}, {cell['table']}"} for _, cell in cells.iterrows()]


def point(row) -> dict:
    """One configuration of ours: its mean, spread and seeds, audit and settings' track."""
    audit = audit_of(row)
    return {"epsilon": float(row.epsilon), "mean": float(row.mean),
            "std": None if pd.isna(row.std) else float(row.std), "n": int(row.n),
            "page": slug(row.cell), "audit": audit, "refuted": bool(audit and audit["flagged"]),
            "model": row.model, "unproven": unproven(row),
            **settings_badge(row.chosen, row.chosen_detail)}


def _at(epsilon: float, lines: list[dict], measure) -> dict:
    """Every line's point at one epsilon beside its paper cells there, and the best of
    each track of settings (settings_chosen.track_of): the best mean among its points
    whose audit does not refute their claim and whose bound is proven, with the others of
    the track within one of its standard deviations."""
    entries = []
    for line in lines:
        point = next((p for p in line["points"] if p["epsilon"] == epsilon), None)
        if point is None:
            continue
        papers = [cell for cell in line["paper"] if abs(cell["epsilon"] - epsilon) < 1e-9]
        entries.append({"line": line, "point": point, "paper": [
            {**cell, "diff": point["mean"] - cell["value"]} for cell in papers]})
    entries.sort(key=lambda entry: entry["point"]["mean"], reverse=measure.higher_is_better)
    def rankable(entry: dict) -> bool:
        return not (entry["point"]["refuted"] or entry["point"]["unproven"])

    best = []
    for track in TRACKS:
        mine = [entry for entry in entries if entry["point"]["track"] == track]
        top = next(filter(rankable, mine), None)
        spread = (top["point"]["std"] or 0.0) if top else 0.0
        for entry in mine:
            entry["best"] = track if entry is top else ""
            entry["tied"] = (top is not None and entry is not top and rankable(entry)
                             and abs(entry["point"]["mean"] - top["point"]["mean"]) <= spread)
        if mine:
            best.append({"track": track, "name": top["line"]["name"] if top else None,
                         "point": top["point"] if top else None,
                         "tied": [entry["line"]["name"] for entry in mine if entry["tied"]]})
    return {"epsilon": epsilon, "entries": entries, "best": best}
