"""The index's first screen: per dataset and privacy family, our configurations ranked at
each epsilon they were run at, the best of each track of settings on top.

It is generic over the rows: any configuration of ours with an ok run (but those of the
suites kept for tests alone) takes its place in the ranking of its dataset, family and
epsilon, whatever its method or model. Non-private configurations (e = inf) are ranked
apart, as the reference every family of the dataset is read against.
"""
from __future__ import annotations

import math

import pandas as pd

from benchmarks.metrics import metric
from benchmarks.settings_chosen import HONEST_TRACK, TEST_TUNED_TRACK, TRACKS
from reports.index_table import audit_of
from reports.load import THIRD_PARTY
from reports.presentation import (KIND_WORDS, SCOPES, dataset_title, family_of,
                                  ordered_datasets, presentation, settings_badge,
                                  short_notion, slug, variant_beyond_model)
from reports.rows import NOT_RANKED, format_delta, format_epsilon, unproven

# The families a reader picks from, as (css class of the notion, tab title).
FAMILIES = (("label-dp", "label-DP"), ("full-dp", "full DP"), ("other-notion", "local"),
            ("unknown-notion", "unknown notion"))
REFERENCE = "non-private"
# What a reader must know before comparing a family's epsilons with another's.
WARNINGS = {"other-notion": SCOPES["local randomised response"][2]}
# Under its two bests, a ranking shows this many entries; the others fold under it.
SHOWN = 4
# Why a track has no best at an epsilon, as its card says it in one line.
NO_BEST = {HONEST_TRACK: "all here are test-tuned", TEST_TUNED_TRACK: "all here are honest"}
NOT_RANKABLE = "each refuted or unproven"


def rankings(rows: pd.DataFrame) -> list[dict]:
    """Per dataset with a private configuration of ours (in reading order): its families,
    each with a ranking per epsilon, and the non-private reference ranking."""
    entries = ranked_entries(rows)
    datasets = []
    for dataset in ordered_datasets(entries["dataset"].unique()):
        mine = entries[entries["dataset"] == dataset]
        higher = metric(mine["metric"].iloc[0]).higher_is_better
        families = [{"key": key, "title": title, "warning": WARNINGS.get(key, ""),
                     "rankings": _by_epsilon(mine[mine["family"] == key], higher)}
                    for key, title in FAMILIES if (mine["family"] == key).any()]
        if not families:
            continue
        datasets.append({"name": dataset, "title": dataset_title(dataset), "page": slug(dataset),
                         "metric": mine["metric"].iloc[0], "families": families,
                         "label": metric(mine["metric"].iloc[0]).label,
                         "reference": _by_epsilon(mine[mine["family"] == REFERENCE], higher,
                                                  mark_best=False)})
    return datasets


def family_tabs(datasets: list[dict]) -> list[tuple[str, str]]:
    """The families that some dataset of the rankings has, in FAMILIES' order."""
    present = {family["key"] for dataset in datasets for family in dataset["families"]}
    return [(key, title) for key, title in FAMILIES if key in present]


def ranked_entries(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration of ours that the rankings show, with its family: the
    row beside its paper cell of the same variant when it has several."""
    ours = rows[(rows["n"] > 0) & ~rows["superseded"] & ~rows["suite"].isin(NOT_RANKED)]
    exact = ours["paper_variant"].fillna("") == ours["variant"]
    preference = ours["paper_value"].notna().astype(int) + exact.astype(int)
    ours = ours.assign(preference=preference).sort_values("preference", ascending=False,
                                                         kind="stable")
    ours = ours.drop_duplicates("cell").drop(columns="preference")
    return ours.assign(family=[family_of(p) for p in ours["protects"]])


def _by_epsilon(entries: pd.DataFrame, higher_is_better: bool,
                mark_best: bool = True) -> list[dict]:
    rankings = []
    for epsilon, at in entries.groupby("epsilon", sort=True):
        at = at.sort_values("mean", ascending=not higher_is_better, kind="stable")
        lines = [{**_entry(row), "rank": rank}
                 for rank, row in enumerate(at.itertuples(index=False), 1)]
        tops = best_per_track(lines) if mark_best else []
        rest = [line for line in lines if not line["best"]]
        deltas = " / ".join(format_delta(delta)
                            for delta in sorted({line["delta"] for line in lines}) if delta)
        badges = sorted({(line["css"], line["badge"], line["notion"]) for line in lines})
        budget = f"ε = {epsilon_text(epsilon)}" + (f", δ = {deltas}" if deltas else "")
        rankings.append({"epsilon": epsilon, "budget": budget, "badges": badges,
                         "lines": lines, "tops": tops, "shown": rest[:SHOWN],
                         "folded": rest[SHOWN:],
                         "id": f"{slug(at['dataset'].iloc[0])}-{lines[0]['family']}-"
                               f"{'inf' if math.isinf(epsilon) else f'{epsilon:g}'}"})
    return rankings


def epsilon_text(epsilon: float) -> str:
    """A card's epsilon to three significant digits (the local notion's are logs)."""
    return format_epsilon(float(f"{epsilon:.3g}"))


def best_per_track(lines: list[dict]) -> list[dict]:
    """In each track (settings_chosen.track_of), the best is the first line, best first,
    whose audit does not refute its claim and whose bound is proven: its ``best`` names
    the track. Per track, in TRACKS' order: its best line, or why it has none."""
    tops = []
    for track in TRACKS:
        mine = [line for line in lines if line["track"] == track]
        best = next((line for line in mine if not (line["refuted"] or line["unproven"])), None)
        if best is not None:
            best["best"] = track
        tops.append({"track": track, "line": best,
                     "missing": "" if best else NOT_RANKABLE if mine else NO_BEST[track]})
    return tops


def _entry(row) -> dict:
    css, title, explanation = presentation(row.protects, row.neighbours)
    audit = audit_of(row)
    return {"method": row.method, "method_page": slug(row.method), "model": row.model,
            "variant": variant_beyond_model(row.variant, row.model), "suite": row.suite,
            "third_party": row.source == THIRD_PARTY,
            "family": row.family, "css": css,
            "badge": short_notion(row.protects, row.neighbours, row.kind),
            "notion": f"{title}: {explanation} {KIND_WORDS.get(row.kind, row.kind)}; "
                      f"{row.accountant}.",
            "mean": row.mean, "std": None if pd.isna(row.std) else row.std, "n": int(row.n),
            "cell": row.cell, "page": slug(row.cell), "delta": float(row.delta), "audit": audit,
            "refuted": bool(audit and audit["flagged"]),
            **settings_badge(row.chosen, row.chosen_detail),
            "unproven": unproven(row),
            "paper": None if pd.isna(row.paper_value) else {
                "value": row.paper_value, "diff": row.diff, "beyond": bool(row.beyond_tolerance),
                "citation": f"{row.paper}, {row.table}, {row.column}"},
            "best": ""}

