"""What honest tuning costs: each configuration whose settings a private selection chose
(benchmarks.tuning), beside the same method on the same dataset, model and total epsilon
in the test-tuned track: its settings picked on the test split, uncharged, by us or by a
paper for that dataset; the difference is what a user who has no test labels to tune on,
and pays for tuning in epsilon, gets less (or more).

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
from reports.rows import format_epsilon

ORDER = {key: index for index, (key, _) in enumerate(FAMILIES)}
# A privately tuned configuration's partner, by preference: settings we picked on the
# test split, else a paper's for the dataset. Undeclared settings pair with nothing.
PARTNERS = (TEST, PUBLISHED)


def tuning_costs(rows: pd.DataFrame, records: pd.DataFrame) -> list[dict]:
    """Per dataset with a privately tuned configuration that has a partner in the
    test-tuned track (in reading order): the pairs, in family, method and epsilon order."""
    ours = rows[(rows["n"] > 0) & ~rows["superseded"]].drop_duplicates("cell")
    ours = ours.fillna({"model": ""})
    tested = ours[ours["chosen"].isin(PARTNERS)].sort_values(
        "chosen", key=lambda chosen: chosen.map(PARTNERS.index), kind="stable")
    pairs = []
    for tuned in ours[ours["chosen"] == PRIVATE].itertuples(index=False):
        partner = tested[(tested["dataset"] == tuned.dataset)
                         & (tested["method"] == tuned.method)
                         & (tested["model"] == tuned.model)
                         & np.isclose(tested["epsilon"], tuned.epsilon)]
        if not partner.empty:
            pairs.append(_pair(tuned, next(partner.itertuples(index=False)), records))
    found = []
    for dataset in ordered_datasets({pair["dataset"] for pair in pairs}):
        mine = sorted((pair for pair in pairs if pair["dataset"] == dataset),
                      key=lambda pair: (ORDER[pair["family"]], pair["method"],
                                        pair["epsilon"]))
        measure = metric(mine[0]["metric"])
        found.append({"dataset": dataset, "title": dataset_title(dataset),
                      "metric": measure.name, "label": measure.label, "pairs": mine})
    return found


def _pair(tuned, test, records: pd.DataFrame) -> dict:
    tuned_point, test_point = point(tuned), point(test)
    runs = records[(records["config_id"] == tuned.cell) & (records["record_kind"] == "run")
                   & (records["status"] == "ok")]
    return {"dataset": tuned.dataset, "metric": tuned.metric, "method": tuned.method,
            "model": tuned.model, "epsilon": float(tuned.epsilon),
            "family": family_of(tuned.protects), "tuned": tuned_point, "test": test_point,
            "tuned_suite": tuned.suite, "test_suite": test.suite,
            "cost": tuned_point["mean"] - test_point["mean"],
            "selections": _selections(runs)}


def _selections(runs: pd.DataFrame) -> list[dict]:
    """Per seed, what the selection released: its settings, and the candidates' budget."""
    return [{"seed": record.seed, "settings": record.privacy.details.get("selected_hparams", {}),
             "candidate_epsilon": record.privacy.details.get("candidate_epsilon")}
            for record in sorted(runs["record"], key=lambda record: record.seed)]


def plot_tuning_costs(costs: dict, path: Path) -> None:
    """One row per pair: the test-tuned mean ± std and the privately tuned one, joined,
    so the cost reads as the length of the join."""
    from reports.plots import plt  # with its file-only backend

    pairs = costs["pairs"]
    fig, ax = plt.subplots(figsize=(10, max(2.5, 0.45 * len(pairs) + 1)))
    rows = np.arange(len(pairs))[::-1]
    for y, pair in zip(rows, pairs):
        ax.plot([pair["test"]["mean"], pair["tuned"]["mean"]], [y, y], color="grey", lw=1)
    for key, label, colour in (("test", "settings test-tuned, uncharged", "C7"),
                               ("tuned", "settings tuned privately, charged", "C2")):
        ax.errorbar([pair[key]["mean"] for pair in pairs], rows,
                    xerr=[pair[key]["std"] or 0.0 for pair in pairs], fmt="o", capsize=3,
                    color=colour, label=label)
    ax.set_yticks(rows, [f"{pair['method']}, ε = {format_epsilon(pair['epsilon'])}"
                         for pair in pairs])
    ax.set_xlabel(f"{costs['label']} (mean ± std over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left", frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
