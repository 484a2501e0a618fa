"""Released-label noise and student accuracy against epsilon (PATE++'s Figure 4): for
the methods that release labels for public inputs (the PATE family), from the records.
The noisy-label rate is the released labels' error on the public part of the test set,
which the runner scores (benchmarks.runner.released_label_metrics)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from reports.plots import plt

RELEASED = "released_label_accuracy_pct"


def label_noise_points(runs: pd.DataFrame) -> pd.DataFrame:
    """Per configuration with released labels: its spent epsilon, the student's accuracy
    (mean, std over seeds) and the released labels' error rate (mean)."""
    ok = runs[(runs["status"] == "ok")
              & runs["record"].map(lambda record: RELEASED in record.metrics)]
    frame = ok.assign(noisy=100.0 - ok["record"].map(lambda record: record.metrics[RELEASED]))
    return frame.groupby(["dataset", "method", "variant", "suite", "config_id"]).agg(
        epsilon=("spent_epsilon", "mean"), accuracy=("value", "mean"),
        accuracy_std=("value", "std"), noisy=("noisy", "mean"),
        n=("value", "count")).reset_index()


def plot_label_noise(points: pd.DataFrame, path: Path) -> None:
    """Two panels over epsilon: the noisy-label rate, and the student's accuracy; one
    line per (method, variant, suite)."""
    lines = points.groupby(["method", "variant", "suite"])
    fig, (noise_ax, accuracy_ax) = plt.subplots(1, 2, figsize=(11, 4 + 0.25 * len(lines)))
    for i, ((method, variant, suite), line) in enumerate(lines):
        line = line.sort_values("epsilon")
        label = f"{method}" + (f" ({variant})" if variant else "") + f", {suite} suite"
        noise_ax.plot(line["epsilon"], line["noisy"], "o-", color=f"C{i % 10}", label=label)
        accuracy_ax.errorbar(line["epsilon"], line["accuracy"],
                             yerr=line["accuracy_std"].fillna(0), fmt="o-", capsize=3,
                             color=f"C{i % 10}", label=label)
    noise_ax.set_ylabel("noisy-label rate (%): released labels' error")
    accuracy_ax.set_ylabel("student's test accuracy (%)")
    for ax in (noise_ax, accuracy_ax):
        ax.set_xlabel("epsilon spent")
        ax.grid(alpha=0.3)
    # Below both panels: the labels are long, the panels narrow.
    fig.legend(*accuracy_ax.get_legend_handles_labels(), loc="lower center", fontsize=7,
               frameon=False)
    fig.tight_layout(rect=(0, 0.06 * len(lines) + 0.02, 1, 1))
    fig.savefig(path, dpi=90)
    plt.close(fig)
