"""One accuracy-vs-epsilon figure per dataset: our means +- std and the paper's points."""
from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on a build machine
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.metrics import metric  # noqa: E402
from reports.rows import format_epsilon  # noqa: E402

# Where our points sit on the epsilon axis, as (rows column, legend suffix, marker): at
# the epsilon the runs spent (the ledger's total; a PATE run with a given noise spends
# what its queries cost), and again at the audited epsilons, the empirical lower bounds
# from the model and at the release.
OUR_EPSILONS = (("spent_epsilon", "", "o"),
                ("audited_epsilon", " at its ε lower bound from the model", "|"),
                ("release_epsilon", " at its ε lower bound at the release", "_"))


def plot_dataset(rows: pd.DataFrame, path: Path) -> None:
    """rows: the leaderboard rows of one dataset."""
    finite = rows.loc[rows["epsilon"].map(math.isfinite), "epsilon"]
    top = finite.max() if not finite.empty else 1.0
    inf_x = top * 4  # e = inf is drawn one step right of the largest finite budget

    def x_of(epsilon: pd.Series) -> list[float]:
        return [inf_x if math.isinf(e) else e for e in epsilon]

    lines = sorted(set(zip(rows["method"], rows["variant"])))
    # Ten distinct colours; past ten lines the paper's marker changes instead.
    colours = {line: f"C{i % 10}" for i, line in enumerate(lines)}
    markers = {line: "x+1*"[i // 10 % 4] for i, line in enumerate(lines)}
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ours = rows[rows["n"] > 0].drop_duplicates("cell").fillna({"model": ""})
    for (method, model, variant, suite), line in ours.groupby(
            ["method", "model", "variant", "suite"]):
        style = "--" if (line["protects"] == "inputs and labels").any() else "-"
        for column, suffix, marker in OUR_EPSILONS:
            at = line.dropna(subset=[column])
            # A bound of 0 has no place on a log axis (the table shows it); no point, no
            # legend entry.
            at = at[at[column] > 0].sort_values(column)
            if at.empty:
                continue
            ax.errorbar(x_of(at[column]), at["mean"], yerr=at["std"].fillna(0),
                        fmt=marker + style, capsize=3, color=colours[method, variant],
                        label=_label("ours", method, variant, suite, model)
                        + (suffix or _audited(line)))
    paper = rows[rows["paper_value"].notna()].drop_duplicates(
        ["method", "variant", "epsilon", "paper_value"])
    for (method, variant), points in paper.groupby(["method", "variant"]):
        ax.scatter(x_of(points["epsilon"]), points["paper_value"], marker=markers[method, variant], s=50,
                   color=colours[method, variant], label=_label("paper", method, variant, ""))
    has_inf = rows["epsilon"].map(math.isinf).any()
    epsilon_axis(ax, finite, inf_x if has_inf else None)
    ax.set_xlabel("epsilon (log scale; inf = non-private, at the right edge)")
    save_with_legend(fig, ax, metric(rows["metric"].iloc[0]).label, path)


def epsilon_axis(ax, finite, inf_x: float | None = None) -> None:
    """A log epsilon axis ticked at the budgets drawn, and at ``inf_x`` as "inf"."""
    ax.set_xscale("log")
    ticks = _spaced(sorted(set(finite)))
    if inf_x is not None:
        ticks.append(inf_x)
    ax.set_xticks(ticks)
    ax.set_xticklabels(["inf" if t == inf_x else format_epsilon(t) for t in ticks],
                       fontsize=8)
    ax.minorticks_off()


def save_with_legend(fig, ax, ylabel: str, path: Path, handles: list | None = None) -> None:
    """The figure with its legend on the right (``handles`` in their order, else every
    labelled artist), tall enough for every entry, written."""
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    legend = ax.legend(handles=handles, fontsize=7, loc="center left",
                       bbox_to_anchor=(1.01, 0.5), frameon=False)
    # A wrapped label takes a line per row of text.
    legend_rows = sum(text.get_text().count("\n") + 1 for text in legend.get_texts())
    fig.set_size_inches(10, max(4.5, 0.13 * legend_rows + 0.5))
    fig.subplots_adjust(left=0.08, right=0.64, bottom=0.13, top=0.96)
    fig.savefig(path, dpi=90, bbox_inches="tight")
    plt.close(fig)


def _label(source: str, method: str, variant: str, suite: str, model: str = "") -> str:
    details = ", ".join(part for part in (variant, f"{suite} suite" if suite else "") if part)
    name = f"{method} · {model}" if model else method
    return textwrap.fill(f"{source}: {name}" + (f" ({details})" if details else ""), 48,
                         subsequent_indent="  ")


def _audited(line: pd.DataFrame) -> str:
    """A line's audits per budget, for its legend entry: a tested claim's empirical
    epsilon (the claim's family fitted to the run, not an estimate of epsilon), else the
    strongest lower bound (≥)."""
    bounds = line[["audited_epsilon", "release_epsilon"]].max(axis=1)
    audited = []
    for epsilon, bound, tested, empirical in zip(line["epsilon"], bounds, line["claim_rejected"],
                                                 line["empirical_epsilon"]):
        at = f"at {format_epsilon(epsilon)}"
        if pd.notna(tested):
            audited.append(f"no emp. ε {at}" if pd.isna(empirical)
                           else f"emp. ε {empirical:.2f} {at}")
        elif pd.notna(bound):
            audited.append(f"ε≥{bound:.2f} {at}")
    return textwrap.fill("; audits: " + ", ".join(audited), 48,
                         subsequent_indent="  ") if audited else ""


def _spaced(ticks: list[float]) -> list[float]:
    """Drop a tick that would print over the previous one on the log axis."""
    kept: list[float] = []
    for tick in ticks:
        if not kept or tick / kept[-1] > 1.25:
            kept.append(tick)
    return kept
