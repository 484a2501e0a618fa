"""The generated tables of the README and of docs/results.md, from the archive alone.

The README's headline is the ``table4-cpu`` suite laid out as the label-DP paper's Table 4:
a row per dataset and method with its short notion, a column per epsilon, our mean ± std
(n) and the difference to the paper. Above it, the README names the best configuration of
each track of settings at each epsilon of the site's ranking of MNIST and Fashion-MNIST,
per dataset and family.
docs/results.md holds per suite how many cells it has, how long they trained here and
how to run it again, and every leaderboard row that holds a number of ours (the rows.md
export, cut to those rows).

``python -m reports.readme_tables`` rewrites them between their markers; the tests check
that the files hold what this module generates.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

from benchmarks import archive as archive_store
from reports.presentation import ordered_datasets, short_notion
from reports.rows import NOT_RANKED, format_epsilon, format_number
from reports.suite_tables import suite_tables

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
RESULTS = ROOT / "docs" / "results.md"
START, END = "<!-- archive-tables:start -->", "<!-- archive-tables:end -->"
HEADLINE_START, HEADLINE_END = "<!-- headline-table:start -->", "<!-- headline-table:end -->"
HEADLINE_SUITE = "table4-cpu"
BEST_START, BEST_END = "<!-- best-table:start -->", "<!-- best-table:end -->"
# The datasets of the README's best table: the site ranks every dataset.
BEST_DATASETS = ("mnist", "fashion-mnist")


def archive_rows(archive: Path = archive_store.ARCHIVE) -> pd.DataFrame:
    """The leaderboard's rows of the archive alone, which every generated table reads."""
    import reports

    return reports.load_rows(results=None, archive=archive)


def section(rows: pd.DataFrame, archive: Path = archive_store.ARCHIVE) -> str:
    """The generated text between the markers of docs/results.md."""
    return "\n".join(["", _suite_times(archive), "", _headline_rows(rows), ""])


def headline(rows: pd.DataFrame, suite: str = HEADLINE_SUITE) -> str:
    """The generated text between the README's markers: ``suite`` as the paper's table."""
    table = next(table for table in suite_tables(rows) if table["suite"] == suite)
    notions = {(line.dataset, line.method, line.variant):
               short_notion(line.protects, line.neighbours, line.kind)
               for line in rows[rows["suite"] == suite].itertuples(index=False)}
    header = ["dataset", "method", "privacy"] + [f"ε = {format_epsilon(e)}"
                                                 for e in table["epsilons"]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    order = ordered_datasets({line["dataset"] for line in table["lines"]})
    for line in sorted(table["lines"], key=lambda line: order.index(line["dataset"])):
        name = line["method"] + (f" ({line['variant']})" if line["variant"] else "")
        cells = [_cell(cell, line["metric"]) for cell in line["cells"]]
        notion = notions[line["dataset"], line["method"], line["variant"]]
        lines.append("| " + " | ".join([line["dataset"], name, notion, *cells]) + " |")
    return "\n".join(["", *lines, ""])


def best(rows: pd.DataFrame) -> str:
    """The generated text between the README's best-table markers: the site's ranking
    (reports.ranking) of ``BEST_DATASETS`` in short, a line per dataset and privacy
    family, a column per epsilon of its cards, each cell the card's best configuration of
    each track of settings, as the card names it."""
    from reports.ranking import epsilon_text

    cards = best_cards(rows)
    epsilons = sorted({epsilon for *_, epsilon, _, _ in cards})
    table: dict[tuple[str, str], dict[float, str]] = {}
    for dataset, family, epsilon, tops, metric in cards:
        table.setdefault((dataset, family), {})[epsilon] = "; ".join(
            f"{top['track']}: {_best_of_track(top['line'], metric)}" for top in tops)
    header = ["dataset", "privacy"] + [f"ε = {epsilon_text(e)}" for e in epsilons]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join([dataset, family, *(cells.get(e, "") for e in epsilons)]) + " |"
              for (dataset, family), cells in table.items()]
    return "\n".join(["", *lines, ""])


def best_cards(rows: pd.DataFrame) -> list[tuple[str, str, float, list[dict], str]]:
    """(dataset title, family title, epsilon, the bests of both tracks, metric) of every
    card of the site's ranking of ``BEST_DATASETS``, in its order."""
    from reports.ranking import rankings

    return [(dataset["title"], family["title"], ranking["epsilon"], ranking["tops"],
             dataset["metric"])
            for dataset in rankings(rows) if dataset["name"] in BEST_DATASETS
            for family in dataset["families"] for ranking in family["rankings"]]


def _best_of_track(line: dict | None, metric: str) -> str:
    if line is None:
        return "none"
    model = f" · {line['model']}" if line["model"] else ""
    spread = "" if line["std"] is None else f" ± {format_number(line['std'], metric)}"
    return (f"**{line['method']}**{model} {format_number(line['mean'], metric)}{spread} "
            f"(n={line['n']}, _{line['chosen']}_, {line['suite']})")


def _cell(cell: dict | None, metric: str) -> str:
    if cell is None:
        return ""
    spread = "" if cell["std"] is None else f" ± {format_number(cell['std'], metric)}"
    diff = "" if cell["diff"] is None else (
        f" ({format_number(cell['diff'], metric, signed=True)})")
    return f"{format_number(cell['mean'], metric)}{spread} (n={cell['n']}){diff}"


def _suite_times(archive: Path) -> str:
    lines = ["| suite | records | seeds | summed training time | machine | command |",
             "|---|---|---|---|---|---|"]
    for name in archive_store.suites(archive):
        manifest = archive_store.read_manifest(archive / name)
        entries = list(manifest["records"].values())
        seeds = sorted({entry["seed"] for entry in entries})
        seconds = sum(entry["wall_time_s"] or 0.0 for entry in entries)
        machines = sorted({f"{m['cpu']}, {m['cores']} cores, {m['threads']} thread(s) a cell, "
                           f"TensorFlow {m['tensorflow']} on {m['device']}"
                           for m in (entry["machine"] for entry in entries)})
        lines.append(f"| {name} | {len(entries)} | {', '.join(map(str, seeds))} | "
                     f"{_duration(seconds)} | {'; '.join(machines)} | `{manifest['command']}` |")
    return "\n".join(lines)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds < 3600 else f"{seconds / 3600:.1f} h"


def _headline_rows(archive_rows: pd.DataFrame) -> str:
    """The lines of the rows.md export of the archive alone that hold our numbers (but
    those of the suites kept for tests)."""
    from reports.exports import markdown

    header, rule, *rows = markdown(archive_rows).splitlines()
    names = [cell.strip() for cell in header.split("|")]
    ours, suite = names.index("ours"), names.index("suite")
    kept = [row for row in rows if row.split("|")[ours].strip()
            and row.split("|")[suite].strip() not in NOT_RANKED]
    return "\n".join([header, rule, *kept])


def between(text: str, start: str, end: str) -> str:
    """The text between two markers."""
    return text.split(start, 1)[1].split(end, 1)[0]


def _rewrite(path: Path, start: str, end: str, generated: str) -> bool:
    """Put ``generated`` between the markers of ``path``; whether it changed."""
    text = path.read_text()
    if start not in text or end not in text:
        raise SystemExit(f"{path} has no {start} ... {end} markers")
    head, rest = text.split(start, 1)
    new = head + start + generated + end + rest.split(end, 1)[1]
    path.write_text(new)
    return new != text


def rewrite(readme: Path = README, results: Path = RESULTS,
            archive: Path = archive_store.ARCHIVE) -> list[Path]:
    """Rewrite both files' generated tables; the files that changed."""
    rows = archive_rows(archive)
    readme_changed = [_rewrite(readme, BEST_START, BEST_END, best(rows)),
                      _rewrite(readme, HEADLINE_START, HEADLINE_END, headline(rows))]
    results_changed = _rewrite(results, START, END, section(rows, archive))
    return [path for path, was in ((readme, any(readme_changed)), (results, results_changed))
            if was]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m reports.readme_tables",
        description="Rewrite the generated tables of README.md and docs/results.md from "
                    "the archive.")
    parser.add_argument("--readme", type=Path, default=README)
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help="the page of every archived result (default: docs/results.md)")
    args = parser.parse_args(argv)
    changed = rewrite(args.readme, args.results)
    for path in (args.readme, args.results):
        print(f"{path}: {'updated' if path in changed else 'already current'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
