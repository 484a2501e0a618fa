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
    (mean, std over seeds) and the released labels' error rate (mean). A configuration
    that two suites ran is one point: lines run across suites."""
    ok = runs[(runs["status"] == "ok")
              & runs["record"].map(lambda record: RELEASED in record.metrics)]
    frame = ok.assign(noisy=100.0 - ok["record"].map(lambda record: record.metrics[RELEASED]))
    return frame.groupby(["dataset", "method", "variant", "config_id"]).agg(
        epsilon=("spent_epsilon", "mean"), accuracy=("value", "mean"),
        accuracy_std=("value", "std"), noisy=("noisy", "mean"),
        n=("value", "count")).reset_index()


def plot_label_noise(points: pd.DataFrame, path: Path) -> None:
    """Two panels over epsilon: the noisy-label rate, and the student's accuracy; one
    line per (method, variant), the legend to the right (its labels are long)."""
    lines = points.groupby(["method", "variant"])
    fig, (noise_ax, accuracy_ax) = plt.subplots(1, 2, figsize=(11, 4.5))
    for i, ((method, variant), line) in enumerate(lines):
        line = line.sort_values("epsilon")
        # Past ten lines the marker changes, so no two lines look alike.
        style = {"color": f"C{i % 10}", "marker": "os^D"[i // 10 % 4]}
        label = method + (f" ({variant})" if variant else "")
        noise_ax.plot(line["epsilon"], line["noisy"], "-", label=label, **style)
        accuracy_ax.errorbar(line["epsilon"], line["accuracy"],
                             yerr=line["accuracy_std"].fillna(0), fmt="-", capsize=3,
                             label=label, **style)
    noise_ax.set_ylabel("noisy-label rate (%): released labels' error")
    accuracy_ax.set_ylabel("student's test accuracy (%)")
    for ax in (noise_ax, accuracy_ax):
        ax.set_xlabel("epsilon spent")
        ax.grid(alpha=0.3)
    fig.legend(*accuracy_ax.get_legend_handles_labels(), loc="center left",
               bbox_to_anchor=(1.0, 0.5), fontsize=7, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)
