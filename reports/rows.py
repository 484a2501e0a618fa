"""The leaderboard rows: our records grouped per configuration, side by side with the
paper cells.

Seeds are grouped by configuration identity (everything that changes a result but the
seed), so runs of two settings never average into one number; the variant is only a
label. One row per (our configuration, matching paper cell) pair, plus our
configurations without a paper number ("ours only") and paper cells without records of
ours ("paper only").
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from benchmarks.metrics import DEFAULT_METRIC, metric
from benchmarks.privacy import Protects
from benchmarks.records import SHUFFLED_BATCHES
from reports.load import BOTH, NOTION_FIELDS

# The suite whose CPU-sized runs the site labels as such.
QUICK_SUITE = "quick"
# Suites archived for the tests of `privboard verify`: their tiny cells' numbers mean
# nothing, so they are in the full tables but never ranked nor headlined.
NOT_RANKED = ("smoke",)
# What a configuration is shown as; constant within a configuration.
DISPLAY_KEYS = ["dataset", "method", "variant", "suite", "epsilon", "delta"]
PAPER_FIELDS = ["paper", "table", "column", "column_inferred", "paper_value", "note",
                "paper_model"]
ROW_COLUMNS = [
    "dataset", "metric", "section", "method", "variant", "model", "suite", "epsilon", "delta",
    *NOTION_FIELDS, "chosen", "chosen_detail", "n", "failed", "mean", "std", "source",
    "no_proven_bound", "charged_clip_norms", "spent_epsilon", "paper_variant",
    *PAPER_FIELDS, "diff", "beyond_tolerance", "model_non_private", "paper_non_private",
    "superseded", "cell"]
STANDARD_PROTECTS = (Protects.LABELS.value, Protects.RECORDS.value, Protects.NOTHING.value)


def metric_by_dataset(published: pd.DataFrame) -> dict[str, str]:
    """The headline metric of each dataset is the one its paper cells report."""
    return published.groupby("dataset")["metric"].first().to_dict()


def metric_tolerance(name: str, tolerance: float) -> float:
    """The tolerance is in accuracy points, converted to the metric's own scale."""
    return tolerance * metric(name).tolerance_scale


def group_records(records: pd.DataFrame) -> pd.DataFrame:
    """One row per configuration: mean, sample std and n over ok seeds; failed runs only
    counted; where its records came from; whether a run's DP-SGD steps took shuffled
    batches accounted as Poisson (no proven bound). ``cell`` names the configuration's
    page."""
    ok = records[records["status"] == "ok"]
    grouped = records.groupby("config_id", sort=True)
    cells = grouped.agg(metric=("metric", "first"), superseded=("superseded", "first"),
                        model=("model", "first"), source=("source", _source),
                        chosen=("chosen", "first"), chosen_detail=("chosen_detail", "first"),
                        failed=("status", lambda status: int((status == "failed").sum())),
                        no_proven_bound=("no_proven_bound", "any"),
                        charged_clip_norms=("charged_clip_norms", "max"),
                        **{key: (key, "first") for key in DISPLAY_KEYS})
    for field in NOTION_FIELDS:
        cells[field] = grouped[field].agg(_distinct)
    stats = ok.groupby("config_id").agg(n=("value", "count"), mean=("value", "mean"),
                                        std=("value", "std"),
                                        spent_epsilon=("spent_epsilon", "mean"))
    cells = cells.join(stats).reset_index().rename(columns={"config_id": "cell"})
    cells["n"] = cells["n"].fillna(0).astype(int)
    return cells


def compute_rows(records: pd.DataFrame, published: pd.DataFrame,
                 tolerance: float) -> pd.DataFrame:
    """A cell of ours is compared with the paper cells of the same dataset, method and
    epsilon (and delta, for approximate DP) that report its exact variant; failing
    those, with the paper's headline cells for the method (published variant empty)."""
    cells = group_records(records).assign(
        epsilon_key=lambda frame: _epsilon_key(frame["epsilon"]))
    paper = published.rename(columns={
        "value": "paper_value", "delta": "paper_delta", "variant": "paper_variant",
        "model": "paper_model"}).assign(
        paper_id=published.index, epsilon_key=_epsilon_key(published["epsilon"]))
    exact = _pairs(cells, paper, same_variant=True)
    headline = _pairs(cells[~cells["cell"].isin(exact["cell"])],
                      paper[paper["paper_variant"] == ""], same_variant=False)
    pairs = pd.concat([exact, headline])
    ours_only = cells[~cells["cell"].isin(pairs["cell"])]
    paper_only = paper[~paper["paper_id"].isin(pairs["paper_id"])].assign(
        variant=lambda frame: frame["paper_variant"], delta=lambda frame: frame["paper_delta"],
        model="", suite="", chosen="", chosen_detail="", n=0, failed=0, mean=math.nan,
        std=math.nan, source="", no_proven_bound=False, charged_clip_norms=math.nan,
        spent_epsilon=math.nan,
        superseded=False, cell="")
    rows = pd.concat([frame for frame in (pairs, ours_only, paper_only) if not frame.empty],
                     ignore_index=True)
    rows = rows.reindex(columns=[c for c in ROW_COLUMNS if c != "section"])
    rows["column_inferred"] = rows["column_inferred"].astype("boolean")
    rows["superseded"] = rows["superseded"].astype(bool)
    rows["no_proven_bound"] = rows["no_proven_bound"].astype(bool)
    rows["metric"] = rows["metric"].fillna(DEFAULT_METRIC)
    rows["diff"] = rows["mean"] - rows["paper_value"]
    limit = rows["metric"].map(lambda metric: metric_tolerance(metric, tolerance))
    rows["beyond_tolerance"] = rows["diff"].abs() > limit
    rows["paper_model"] = rows["paper_model"].fillna("")
    rows["model_non_private"] = _our_non_private(rows, records)
    rows["paper_non_private"] = _paper_non_private(rows, paper)
    rows["section"] = _sections(rows)
    rows = rows.sort_values(["dataset", "section", "method", "variant", "suite", "epsilon",
                             "delta", "paper", "table", "column"], na_position="first")
    return rows[ROW_COLUMNS].reset_index(drop=True)


def _pairs(cells: pd.DataFrame, paper: pd.DataFrame, same_variant: bool) -> pd.DataFrame:
    keys = ["dataset", "method", "epsilon_key"]
    if same_variant:
        cells = cells.assign(paper_variant=cells["variant"])
        keys.append("paper_variant")
    columns = dict.fromkeys([*keys, "paper_variant", "paper_delta", "paper_id", *PAPER_FIELDS])
    pairs = cells.merge(paper[list(columns)], on=keys)
    # An (e, delta) cell of ours compares only with a paper cell at the same delta.
    return pairs[(pairs["delta"] == 0) | np.isclose(pairs["delta"], pairs["paper_delta"])]


def _our_non_private(rows: pd.DataFrame, records: pd.DataFrame) -> np.ndarray:
    """Per row, the mean over seeds of our non-private records of its dataset and model:
    those of its own suite when there are any, else those of every suite."""
    ours = records[(records["method"] == "non-private") & records["value"].notna()]
    same_suite = _lookup(rows, ours, ["dataset", "model", "suite"])
    return np.where(np.isnan(same_suite), _lookup(rows, ours, ["dataset", "model"]), same_suite)


def _paper_non_private(rows: pd.DataFrame, paper: pd.DataFrame) -> np.ndarray:
    """Per row, the paper's own non-private cell with its model: same paper, dataset,
    variant and model (baselines holds at most one)."""
    ceilings = paper[(paper["protects"] == Protects.NOTHING.value)
                     & (paper["paper_model"] != "")]
    return _lookup(rows, ceilings.rename(columns={"paper_value": "value"}),
                   ["paper", "dataset", "paper_variant", "paper_model"])


def _lookup(rows: pd.DataFrame, values: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """The mean ``value`` of ``values`` that share a row's keys, per row (NaN if none)."""
    means = values.groupby(keys)["value"].mean().rename("found").reset_index()
    return rows[keys].merge(means, on=keys, how="left")["found"].to_numpy(dtype=float)


def section_of(protects: str, neighbours: str) -> str:
    """Label-DP, full DP and non-private rows each share a section; every other notion
    (local randomisation, unknown) is grouped as "other" and names itself per row."""
    scope = protects if protects in STANDARD_PROTECTS else "other"
    return f"{scope} / {neighbours}"


def _sections(rows: pd.DataFrame) -> pd.Series:
    """The privacy notion a row is shown under. A method's non-private (e = inf) cells
    stay in its private section so that a table row reads across all of its budgets."""
    own = pd.Series([section_of(p, n) for p, n in zip(rows["protects"], rows["neighbours"])],
                    index=rows.index)
    private = own[rows["protects"] != "nothing"]
    family = rows[["dataset", "method", "variant"]].astype(str).agg("|".join, axis=1)
    private_of_family = private.groupby(family[private.index]).first()
    adopted = family.map(private_of_family)
    return adopted.where((rows["protects"] == "nothing") & adopted.notna(), own)


def _epsilon_key(epsilon: pd.Series) -> pd.Series:
    return epsilon.astype(float).round(6)


def _source(sources: pd.Series) -> str:
    """The records of a configuration: all archived, all of this machine, or both."""
    found = set(sources)
    return found.pop() if len(found) == 1 else BOTH


def _distinct(values: pd.Series) -> str:
    return " | ".join(sorted({value for value in values if value}))


def unproven(row) -> str:
    """The mark of a row whose DP-SGD steps took shuffled batches accounted as Poisson
    samples (never marked best), or ""."""
    return SHUFFLED_BATCHES if row.no_proven_bound else ""


def charge(row) -> str:
    """The mark of a row whose clipped gradient steps were charged at more than one
    clipping norm (2C under label substitution), or ""."""
    factor = row.charged_clip_norms
    return f"charged at sensitivity {factor:g}C" if pd.notna(factor) and factor != 1 else ""


def format_epsilon(epsilon: float) -> str:
    return "inf" if math.isinf(epsilon) else f"{epsilon:g}"


def format_delta(delta: float) -> str:
    if pd.isna(delta):
        return "not stated"
    return f"{delta:g}".replace("e-0", "e-")


def format_number(value: float, name: str, signed: bool = False) -> str:
    return metric(name).format(value, signed)


def model_note(row) -> str:
    """Beside a difference with the paper, when our model is not the paper's: each model
    with its non-private number, so that a reader can tell the model's gap from the
    method's. A number only where the records (ours) or the baselines (the paper's)
    have one; "" when the models are the same or one is not known."""
    if pd.isna(row.diff) or not (row.model and row.paper_model) or row.model == row.paper_model:
        return ""
    ours = ("" if pd.isna(row.model_non_private)
            else f" ({_with_unit(row.model_non_private, row.metric)} non-private)")
    paper = ("" if pd.isna(row.paper_non_private)
             else f" ({_with_unit(row.paper_non_private, row.metric)})")
    return f"{row.model}{ours} vs the paper's {row.paper_model}{paper}"


def _with_unit(value: float, name: str) -> str:
    return format_number(value, name) + ("%" if name == "accuracy_pct" else f" {name.upper()}")
