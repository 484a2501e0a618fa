"""What honest tuning costs: each configuration whose settings a private selection chose
(benchmarks.tuning), beside the same method on the same dataset, model and total epsilon
in the test-tuned track: its settings picked on the test split, uncharged, by us or by a
paper for that dataset; the difference is what a user who has no test labels to tune on,
and pays for tuning in epsilon, gets less (or more). Its figure draws each tuned method's
test-tuned line across epsilon with its privately tuned points on it.

It is generic over the rows: any method with a privately tuned configuration takes its
place, in its privacy family, whatever its method or model.

Only public figures: the rows' test accuracies, and the candidate budget and selected
settings that the selection's records publish (its released output); nothing of the
candidates that were not selected.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.metrics import metric
from benchmarks.settings_chosen import PRIVATE, PUBLISHED, TEST
from reports.comparison import point
from reports.presentation import dataset_title, family_of, ordered_datasets
from reports.ranking import FAMILIES

ORDER = {key: index for index, (key, _) in enumerate(FAMILIES)}
TITLES = dict(FAMILIES)
# A privately tuned configuration's partner, by preference: settings we picked on the
# test split, else a paper's for the dataset. Undeclared settings pair with nothing.
PARTNERS = (TEST, PUBLISHED)


def tuning_costs(rows: pd.DataFrame, records: pd.DataFrame) -> list[dict]:
    """Per dataset with a privately tuned configuration (in reading order): each one in
    family, method and epsilon order, with its partner of the test-tuned track at the
    same epsilon where there is one; and per family, per tuned method, the points of both
    tracks across epsilon, for the figure."""
    ours = rows[(rows["n"] > 0) & ~rows["superseded"]].drop_duplicates("cell")
    ours = ours.fillna({"model": ""}).assign(family=lambda frame: frame["protects"].map(family_of))
    tested = ours[ours["chosen"].isin(PARTNERS)].sort_values(
        "chosen", key=lambda chosen: chosen.map(PARTNERS.index), kind="stable")
    tuned = ours[ours["chosen"] == PRIVATE]
    found = []
    for dataset in ordered_datasets(tuned["dataset"].unique()):
        mine = tuned[tuned["dataset"] == dataset].sort_values(
            ["family", "method", "model", "epsilon"],
            key=lambda column: column.map(ORDER) if column.name == "family" else column)
        partners = tested[tested["dataset"] == dataset]
        measure = metric(mine["metric"].iloc[0])
        found.append({"dataset": dataset, "title": dataset_title(dataset),
                      "metric": measure.name, "label": measure.label,
                      "pairs": [_pair(row, _partner(row, partners), records)
                                for row in mine.itertuples(index=False)],
                      "families": _families(mine, partners)})
    return found


def _same_line(frame: pd.DataFrame, row) -> pd.DataFrame:
    """The configurations of ``frame`` of ``row``'s method and model."""
    return frame[(frame["method"] == row.method) & (frame["model"] == row.model)]


def _partner(tuned, partners: pd.DataFrame):
    same = _same_line(partners, tuned)
    return next(same[np.isclose(same["epsilon"], tuned.epsilon)].itertuples(index=False), None)


def _pair(tuned, test, records: pd.DataFrame) -> dict:
    tuned_point = point(tuned)
    test_point = None if test is None else point(test)
    runs = records[(records["config_id"] == tuned.cell) & (records["record_kind"] == "run")
                   & (records["status"] == "ok")]
    return {"dataset": tuned.dataset, "metric": tuned.metric, "method": tuned.method,
            "model": tuned.model, "epsilon": float(tuned.epsilon), "family": tuned.family,
            "tuned": tuned_point, "test": test_point, "tuned_suite": tuned.suite,
            "test_suite": None if test is None else test.suite,
            "cost": None if test is None else tuned_point["mean"] - test_point["mean"],
            "selections": _selections(runs)}


def _families(tuned: pd.DataFrame, partners: pd.DataFrame) -> list[dict]:
    """Per family of the tuned configurations: per method and model, its privately tuned
    points and its test-tuned track's points at every epsilon it was run at."""
    families = []
    for key in dict.fromkeys(tuned["family"]):
        lines = []
        for (method, model), mine in tuned[tuned["family"] == key].groupby(
                ["method", "model"], sort=True):
            track = _same_line(partners, mine.iloc[0]).drop_duplicates("epsilon")
            lines.append({"method": method, "model": model,
                          "tuned": [point(row) for row in mine.itertuples(index=False)],
                          "test": [point(row) for row in
                                   track.sort_values("epsilon").itertuples(index=False)]})
        families.append({"key": key, "title": TITLES.get(key, key), "lines": lines})
    return families


def _selections(runs: pd.DataFrame) -> list[dict]:
    """Per seed, what the selection released: its settings, and the candidates' budget."""
    return [{"seed": record.seed, "settings": record.privacy.details.get("selected_hparams", {}),
             "candidate_epsilon": record.privacy.details.get("candidate_epsilon")}
            for record in sorted(runs["record"], key=lambda record: record.seed)]


def plot_tuning_costs(costs: dict, path: Path) -> None:
    """One panel per privacy family: per tuned method (a colour), its test-tuned line
    across epsilon (solid) and its privately tuned points (squares, dashed), mean ± std
    over seeds; a dotted stroke joins a tuned point to its partner at the same epsilon,
    so the cost reads as its length (the table beside gives it)."""
    from reports.plots import epsilon_axis, plt  # plt: with its file-only backend

    families = costs["families"]
    methods = list(dict.fromkeys(line["method"] for family in families
                                 for line in family["lines"]))
    fig, axes = plt.subplots(1, len(families), figsize=(5.2 * len(families) + 2.2, 4.2),
                             squeeze=False, sharey=True)
    for ax, family in zip(axes[0], families):
        drawn = []
        for line in family["lines"]:
            colour = f"C{methods.index(line['method']) % 10}"
            name = line["method"] + (f" · {line['model']}" if line["model"] else "")
            for points, style in ((line["test"], "o-"), (line["tuned"], "s--")):
                if points:
                    ax.errorbar([p["epsilon"] for p in points], [p["mean"] for p in points],
                                yerr=[p["std"] or 0.0 for p in points], fmt=style, capsize=3,
                                color=colour, markersize=6 if style == "s--" else 4,
                                label=None if style == "s--" and line["test"] else name)
                    drawn += [p["epsilon"] for p in points]
            for tuned in line["tuned"]:
                partner = next((p for p in line["test"]
                                if np.isclose(p["epsilon"], tuned["epsilon"])), None)
                if partner is not None:
                    ax.plot([tuned["epsilon"]] * 2, [tuned["mean"], partner["mean"]], ":",
                            color=colour, lw=2, alpha=0.7)
        for style, what in (("o-", "test-tuned track"), ("s--", "tuned privately")):
            ax.plot([], [], style, color="grey", label=what)
        epsilon_axis(ax, drawn)
        ax.set_title(family["title"], fontsize=10)
        ax.set_xlabel("total epsilon (log scale)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right", frameon=False)
    axes[0][0].set_ylabel(f"{costs['label']} (mean ± std over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)

