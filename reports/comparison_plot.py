"""The figure of one family of a comparison (reports.comparison): a line per method on
the suite's model, our means ± std over seeds, the papers' cells beside ours (hollow
markers, dashed), the non-private reference as a band, each line labelled with its
audited epsilons."""
from __future__ import annotations

import textwrap
from pathlib import Path

from reports.plots import epsilon_axis, plt, save_with_legend  # plt: with its file-only backend


def plot_comparison(family: dict, reference: list[dict], ylabel: str, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(10, 4.5))
    handles, drawn = [], []
    for index, line in enumerate(family["lines"]):
        colour = f"C{index % 10}"
        points = line["points"]
        audits = f" (audit: {'; '.join(line['audits'])})" if line["audits"] else ""
        handles.append(ax.errorbar(
            [point["epsilon"] for point in points], [point["mean"] for point in points],
            yerr=[point["std"] or 0.0 for point in points], fmt="o-", capsize=3,
            color=colour, label=_wrap(f"ours: {_title(line)}{audits}")))
        drawn += [point["epsilon"] for point in points]
        for source in dict.fromkeys(cell["source"] for cell in line["paper"]):
            cells = [cell for cell in line["paper"] if cell["source"] == source]
            handles += ax.plot([cell["epsilon"] for cell in cells],
                               [cell["value"] for cell in cells], "s--", mfc="none",
                               color=colour, alpha=0.8,
                               label=_wrap(f"paper ({source}): {_title(line)}"))
            drawn += [cell["epsilon"] for cell in cells]
    for point in reference:
        spread = point["std"] or 0.0
        ax.axhspan(point["mean"] - spread, point["mean"] + spread, color="grey", alpha=0.2)
        handles.append(ax.axhline(point["mean"], color="grey", linestyle=":", label=_wrap(
            f"ours: non-private{_model(point['model'])} (ε = inf)")))
    epsilon_axis(ax, drawn)
    ax.set_xlabel("epsilon (log scale)")
    save_with_legend(fig, ax, ylabel, path, handles)


def _title(line: dict) -> str:
    return line["name"] + _model(line["model"])


def _model(model: str) -> str:
    return f" · {model}" if model else ""


def _wrap(text: str) -> str:
    return textwrap.fill(text, 48, subsequent_indent="  ")
