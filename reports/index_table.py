"""The index's leaderboard: one sortable table per dataset with one line per leaderboard
row (a configuration of ours beside a paper cell, ours only, or paper only)."""
from __future__ import annotations

import pandas as pd

from benchmarks.privacy import Protects
from reports.presentation import (SCOPES, UNKNOWN_NOTION, dataset_title, ordered_datasets,
                                  presentation, settings_badge, short_notion, slug)
from reports.rows import QUICK_SUITE, charge, model_note, unproven

# The epsilons a line shows, as (rows column, header, tooltip). An audited epsilon (an
# empirical lower bound on what a run leaks) becomes one more column of the rows: add it
# here and every table shows it, sortable like the others.
EPSILON_COLUMNS = (
    ("epsilon", "ε budget", "the cell's privacy budget (inf: non-private)"),
    ("spent_epsilon", "ε spent",
     "what the privacy ledger of our runs composed to (mean over seeds)"),
)
# The order of the notion groups in a table, by the protected part of a row's section
# ("other": local notions); a method's e = inf line stays in its private group.
GROUPS = (Protects.LABELS.value, Protects.RECORDS.value, "other", Protects.NOTHING.value)


def dataset_tables(rows: pd.DataFrame, notes: dict[str, str]) -> list[dict]:
    """Per dataset (in reading order), the table of its rows of ours and, apart, the
    table of its paper-only rows; each table names the columns that have a value."""
    tables = []
    for dataset in ordered_datasets(rows["dataset"].unique()):
        dataset_rows = rows[rows["dataset"] == dataset]
        lines = sorted(map(table_line, dataset_rows.itertuples(index=False)), key=_line_order)
        tables.append({"name": dataset, "title": dataset_title(dataset), "page": slug(dataset),
                       "note": notes.get(dataset, ""), "metric": dataset_rows["metric"].iloc[0],
                       "notions": _legend(dataset_rows),
                       "ours": _table([line for line in lines if not line["paper_only"]]),
                       "paper_only": _table([line for line in lines if line["paper_only"]])})
    return tables


def _table(lines: list[dict]) -> dict:
    """The lines and the columns that have a value in at least one of them."""
    values = {"variant": lambda line: line["variant"], "model": lambda line: line["model"],
              "suite": lambda line: not line["paper_only"],
              "audited": lambda line: line["audit"], "ours": lambda line: line["ours"],
              "paper": lambda line: line["paper"],
              "diff": lambda line: line["paper"] and line["paper"]["diff"] is not None,
              "delta": lambda line: line["delta"] != 0.0,
              **{column: _has(index) for index, (column, _, _) in enumerate(EPSILON_COLUMNS)}}
    return {"lines": lines,
            "columns": {column for column, has in values.items() if any(map(has, lines))}}


def _has(index: int):
    return lambda line: line["epsilons"][index][1] is not None


def notion_filter(rows: pd.DataFrame) -> list[tuple[str, str]]:
    """(css class, title) of every notion scope, and of "unknown" if a row has it."""
    scopes = [(css, title) for css, title, _ in SCOPES.values()]
    known = {protects.value for protects in Protects}
    if not rows["protects"].isin(known).all():
        scopes.append(UNKNOWN_NOTION[:2])
    return scopes


def table_line(row) -> dict:
    css, title, explanation = presentation(row.protects, row.neighbours)
    return {
        "method": row.method, "method_page": slug(row.method), "variant": row.variant,
        "model": row.model,
        "suite": row.suite, "quick": row.suite == QUICK_SUITE, "paper_only": not row.cell,
        "scope": css, "badge": title, "explanation": explanation,
        "short": short_notion(row.protects, row.neighbours, row.kind),
        "notion": "" if css == "non-private" else (
            f"{row.neighbours} neighbours, {row.kind}; {row.accountant}"),
        "local_warning": css == "other-notion",
        "protects": row.protects,
        "epsilons": [(column, _number(getattr(row, column))) for column, _, _ in EPSILON_COLUMNS],
        "delta": _number(row.delta),
        "ours": ours_of(row), "paper": paper_of(row), "audit": audit_of(row),
        "settings": settings_badge(row.chosen, row.chosen_detail) if row.cell else None,
        "unproven": unproven(row), "charge": charge(row), "group": _group(row.section)}


def audit_of(row) -> dict | None:
    """The audit of a row's configuration (reports.audits), or None: its lower bounds,
    and for a Gaussian release the test of its claimed curve (``claim``), whose
    empirical epsilon is then the audit's ``shown`` number, else the strongest bound."""
    if pd.isna(row.audited_epsilon):
        return None
    claim = None if pd.isna(row.claim_rejected) else {
        "rejected": bool(row.claim_rejected),
        # None where the run rejects no curve of the claim's family: no figure, not 0
        "empirical": None if pd.isna(row.empirical_epsilon) else float(row.empirical_epsilon),
        "claimed": float(row.claim_epsilon), "canaries": int(row.claim_canaries),
        "guesses": row.claim_guesses, "correct": row.claim_correct,
        "confidence": float(row.claim_confidence), "text": row.claim_text}
    release = None if pd.isna(row.release_epsilon) else {
        "bound": float(row.release_epsilon), "ceiling": float(row.release_ceiling),
        "guesses": int(row.release_guesses), "correct": int(row.release_correct),
        "where": row.release_where, "canaries": int(row.release_canaries),
        "observed": row.release_observed, "confidence": float(row.release_confidence),
        "flagged": float(row.release_epsilon) > row.epsilon}
    strongest = max(float(row.audited_epsilon), release["bound"] if release else 0.0)
    return {"bound": float(row.audited_epsilon), "ceiling": float(row.audit_ceiling),
            "flagged": bool(row.audit_flagged), "level": float(row.audit_level),
            "confidence": float(row.audit_confidence),
            "model_flagged": float(row.audited_epsilon) > row.epsilon,
            "canaries": int(row.audit_canaries),
            "guesses": int(row.audit_guesses), "correct": int(row.audit_correct),
            "release": release,
            "noise": None if pd.isna(row.noise_checked) else {
                "checked": row.noise_checked,
                "failed": "" if pd.isna(row.noise_failed) else row.noise_failed},
            "strongest": strongest, "claim": claim,
            "shown": claim["empirical"] if claim and claim["empirical"] is not None
            else strongest,
            "overhead": None if pd.isna(row.audit_overhead) else float(row.audit_overhead)}


def ours_of(row) -> dict | None:
    """Our number of a row's configuration, or None for a paper-only row."""
    if not row.cell:
        return None
    return {"cell": row.cell, "page": slug(row.cell), "n": row.n, "failed": row.failed,
            "mean": None if row.n == 0 else row.mean,
            "std": None if pd.isna(row.std) else row.std, "superseded": bool(row.superseded),
            "source": row.source, "verified": verified_of(row)}


def verified_of(row) -> dict | None:
    """The latest re-run of a row's configuration (reports.verifications), or None."""
    if pd.isna(row.verified_on):
        return None
    return {"on": row.verified_on, "verdict": row.verified_verdict}


def paper_of(row) -> dict | None:
    """The paper cell of a row with its citation and our difference, or None."""
    if pd.isna(row.paper_value):
        return None
    return {"value": row.paper_value, "paper": row.paper, "table": row.table,
            "column": row.column, "inferred": bool(row.column_inferred), "note": row.note,
            "headline": bool(row.cell) and row.paper_variant != row.variant,
            "diff": None if pd.isna(row.diff) else row.diff,
            "beyond": bool(row.beyond_tolerance), "model_note": model_note(row)}


def _legend(rows: pd.DataFrame) -> list[tuple[str, str, str]]:
    """The notions of a dataset's rows, each with its neighbour relation in words."""
    pairs = rows[["protects", "neighbours"]].drop_duplicates().itertuples(index=False)
    notions = {presentation(protects, neighbours) for protects, neighbours in pairs}
    order = [css for css, _, _ in SCOPES.values()]
    return sorted(notions, key=lambda notion: (
        order.index(notion[0]) if notion[0] in order else len(order), notion[2]))


def _number(value: float) -> float | None:
    """None for NaN (nothing spent yet, a delta not stated), which templates leave blank."""
    return None if pd.isna(value) else float(value)


def _group(section: str) -> int:
    scope = section.partition(" / ")[0]
    return GROUPS.index(scope) if scope in GROUPS else len(GROUPS)


def _line_order(line: dict) -> tuple[int, bool]:
    """Notion groups in order, our lines before the paper-only ones; otherwise the
    rows' own order (the sort is stable)."""
    return line["group"], line["paper_only"]
