"""Writes the site: the index (one sortable table and plot per dataset), a page per
method, per dataset (with the comparison of a suite run on one model, where it ran) and
per configuration, the published copies of the records, the exports, and the stylesheet
and script it uses. Every link is relative, so the folder works from the file system
and from any static host.

Only the public part of a record reaches the site: its private diagnostics are never
rendered, and the raw JSON copies are written from ``RunRecord.public_dict``.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import jinja2
import pandas as pd

from benchmarks.audit import levels
from benchmarks.records import RunRecord
from reports.catalogue import dataset_facts, method_facts
from reports.comparison import comparisons
from reports.comparison_plot import plot_comparison
from reports.configurations import configurations
from reports.exports import write_exports
from reports.index_table import EPSILON_COLUMNS, dataset_tables, notion_filter
from reports.suite_tables import suite_tables
from reports.tuning_costs import plot_tuning_costs, tuning_costs
from reports.load import NOTION_FIELDS
from reports.label_noise import label_noise_points, plot_label_noise
from reports.plots import plot_dataset
from reports.ranking import family_tabs, rankings
from reports.presentation import (SCOPES, describe, describe_notion, json_text, ledger_entry,
                                  presentation, settings_badge, slug, sort_key,
                                  without_nan)
from reports.rows import (DISPLAY_KEYS, QUICK_SUITE, format_delta, format_epsilon,
                          format_number, metric_tolerance, model_note)

STATIC = Path(__file__).with_name("static")
UNKNOWN = "unknown"

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
_env.filters["eps"] = format_epsilon
_env.filters["num"] = format_number
_env.filters["delta"] = format_delta
_env.filters["slug"] = slug
_env.filters["sortkey"] = sort_key


def write_site(site: Path, rows: pd.DataFrame, records: pd.DataFrame,
               published: pd.DataFrame, claims: list[dict], notes: dict[str, str],
               tolerance: float, sources: list[str], notice: dict,
               catalogue: dict, submissions: dict[str, dict] | None = None) -> None:
    """``submissions``: per submitted method, the facts of the third-party bundle whose
    records are among ``records`` (reports.submission_facts), said beside its rows."""
    submissions = submissions or {}
    for folder in ("cells", "methods", "datasets", "records", "plots"):
        (site / folder).mkdir(parents=True)
    shutil.copytree(STATIC, site / "assets")
    write_exports(site, rows)
    for record in records["record"]:
        (site / "records" / Path(record.path).name).write_text(
            json.dumps(record.public_dict(), indent=1, sort_keys=True))
    for dataset, dataset_rows in rows.groupby("dataset", sort=True):
        plot_dataset(dataset_rows, site / "plots" / f"{slug(dataset)}.png")
    runs = records[records["record_kind"] == "run"]
    noise = label_noise_points(runs)
    for dataset, points in noise.groupby("dataset"):
        plot_label_noise(points, site / "plots" / f"{slug(dataset)}-label-noise.png")

    methods, datasets = method_facts(catalogue), dataset_facts(catalogue)
    configs = configurations(rows, runs,
                             {name: facts["defaults"] for name, facts in methods.items()})
    method_names = sorted({*methods, *rows["method"]})
    dataset_names = sorted({*datasets, *rows["dataset"]})
    for name in method_names:
        _render(site / "methods" / f"{slug(name)}.html", "method.html", name=name,
                facts=methods.get(name), configs=[c for c in configs if c["method"] == name],
                published=_published(published[published["method"] == name]),
                record_notions=_record_notions(records[records["method"] == name]),
                submission=submissions.get(name))
    compared = _compared(site, rows, published)
    costs = _tuning_costs(site, rows, runs)
    for name in dataset_names:
        _render(site / "datasets" / f"{slug(name)}.html", "dataset.html", name=name,
                facts=datasets.get(name), note=notes.get(name, ""),
                configs=[c for c in configs if c["dataset"] == name],
                on_leaderboard=name in set(rows["dataset"]),
                comparisons=[c for c in compared if c["dataset"] == name],
                tuning=[t for t in costs if t["dataset"] == name])
    for cell, cell_rows in rows[rows["cell"] != ""].groupby("cell"):
        _write_cell_page(site, cell_rows, records[records["config_id"] == cell],
                         submissions.get(cell_rows["method"].iloc[0]))
    tables = dataset_tables(rows, notes)
    ranked = rankings(rows)
    shared = {"tolerance": tolerance, "submissions": submissions}
    _render(site / "index.html", "index.html", root="", rankings=ranked, comparisons=compared,
            tuning={t["dataset"] for t in costs},
            families=family_tabs(ranked),
            unranked=[table for table in tables
                      if table["name"] not in {dataset["name"] for dataset in ranked}],
            claims=claims, sources=sources,
            counts=records["status"].value_counts().to_dict(),
            superseded=notice, **shared,
            methods=[(name, methods.get(name)) for name in method_names],
            dataset_list=[(name, datasets.get(name)) for name in dataset_names])
    _render(site / "tables.html", "tables.html", root="", datasets=tables,
            filters=notion_filter(rows), label_noise=set(noise["dataset"]),
            suite_tables=suite_tables(rows), epsilon_columns=EPSILON_COLUMNS, **shared)
    _render(site / "how-to-read.html", "how-to-read.html", root="",
            rmse_tolerance=metric_tolerance("rmse", tolerance),
            notions=list(SCOPES.values()), **shared)


def _compared(site: Path, rows: pd.DataFrame, published: pd.DataFrame) -> list[dict]:
    """The comparisons of the suites run on one model, each family's figure written."""
    compared = comparisons(rows, published)
    for c in compared:
        for family in c["families"]:
            family["plot"] = f"{slug(c['dataset'])}-{slug(c['suite'])}-{family['key']}.png"
            plot_comparison(family, c["reference"], c["label"], site / "plots" / family["plot"])
    return compared


def _tuning_costs(site: Path, rows: pd.DataFrame, runs: pd.DataFrame) -> list[dict]:
    """What honest tuning costs per dataset, each dataset's figure written."""
    costs = tuning_costs(rows, runs)
    for t in costs:
        t["plot"] = f"{slug(t['dataset'])}-tuning-cost.png"
        plot_tuning_costs(t, site / "plots" / t["plot"])
    return costs


def _render(path: Path, template: str, root: str = "../", **context) -> None:
    """Pages below the site's top folder reach its assets and other pages through root."""
    path.write_text(_env.get_template(template).render(root=root, **context))


def _published(cells: pd.DataFrame) -> list[dict]:
    """A method's paper cells, each with its notion in words."""
    ordered = cells.sort_values(["dataset", "paper", "table", "epsilon"])
    return [{**without_nan(cell), "notion": describe(*(cell[f] for f in NOTION_FIELDS))}
            for cell in ordered.to_dict("records")]


def _record_notions(records: pd.DataFrame) -> list[dict]:
    """The distinct notions a method's records carry (settings may change a notion)."""
    notions = {record.privacy.notion for record in records["record"]}
    return [describe_notion(notion) for notion in sorted(notions, key=lambda n: n.short)]


def _write_cell_page(site: Path, rows: pd.DataFrame, records: pd.DataFrame,
                     submission: dict | None) -> None:
    first = rows.iloc[0]
    key = {name: first[name] for name in DISPLAY_KEYS}
    runs = [_run(record, source) for record, source in
            sorted(zip(records["record"], records["source"]),
                   key=lambda pair: (pair[0].kind, pair[0].status, pair[0].seed,
                                     pair[0].started_at))]
    papers = [{**without_nan(paper._asdict()), "model_note": model_note(paper)}
              for paper in rows[rows["paper_value"].notna()].itertuples(index=False)]
    css, title, explanation = presentation(first["protects"], first["neighbours"])
    _render(site / "cells" / f"{slug(first['cell'])}.html", "cell.html",
            key=key, config_id=first["cell"], row=without_nan(first.to_dict()), runs=runs,
            papers=papers, notion_css=css, notion_title=title, notion_explanation=explanation,
            chosen=settings_badge(first["chosen"], first["chosen_detail"]),
            quick=first["suite"] == QUICK_SUITE, submission=submission)


def verdict_of(audit: dict) -> dict:
    """An audited twin's tests judged at their levels (benchmarks.audit.levels), for its
    cell's page; where the release is the model (DP-ERM's weights), the release's bound
    is the model's."""
    verdict = levels.judge(audit)
    model = verdict.of(levels.MODEL)
    release = verdict.of(levels.RELEASE) or (model if audit.get("release") else None)
    claim = verdict.of(levels.CLAIM)
    return {"level": verdict.family_wise, "flagged": verdict.flagged,
            "model": model.as_dict(), "release": release and release.as_dict(),
            "claim": claim and claim.as_dict(),
            "noise": [test.as_dict() for test in verdict.all_of(levels.NOISE)]}


def _run(record: RunRecord, source: str) -> dict:
    provenance = record.provenance
    privacy = record.privacy
    spent = "" if privacy.epsilon is None else (
        f"epsilon={format_epsilon(privacy.epsilon)}, delta={privacy.delta:g} "
        f"({privacy.composition} composition)")
    return {
        # what privboard verify takes: a re-run's is the cell it re-ran
        "cell_id": (record.verification or {}).get("cell_id", record.cell_id),
        "seed": record.seed, "status": record.status, "error": record.error,
        "source": source, "verification": record.verification or None,
        "threads": provenance.get("threads"), "cpu": provenance.get("cpu", ""),
        "metrics": json_text(record.metrics), "wall_time_s": record.wall_time_s,
        "started_at": record.started_at,
        "git_commit": provenance.get("git_commit", UNKNOWN),
        "git_dirty": provenance.get("git_dirty"),
        "device": provenance.get("device", ""), "python": provenance.get("python", ""),
        "fingerprint": record.dataset_fingerprint or UNKNOWN,
        "datasets_used": json_text(record.datasets_used),
        "test_split": record.test_split,
        "method_version": record.method_version, "spent": spent,
        "ledger": [ledger_entry(entry) for entry in privacy.ledger],
        "privacy_details": json_text(privacy.details),
        "hparams": json_text(record.hparams), "packages": json_text(provenance.get("packages")),
        "audit": record.audit if record.is_audit else None,
        "verdict": verdict_of(record.audit) if record.is_audit and record.ok else None,
        "raw": f"../records/{Path(record.path).name}"}
