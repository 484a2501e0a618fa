"""The leaderboard rows as files: rows.csv (every column), leaderboard.json (the same
rows with their short notion, for programs), and rows.md and rows.tex, Markdown and LaTeX
(booktabs) tables of the same rows with the same cell texts."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from benchmarks.settings_chosen import track_of
from reports.presentation import short_notion
from reports.rows import format_delta, format_epsilon, format_number, model_note

HEADER = ["dataset", "privacy", "method", "variant", "model", "suite", "epsilon", "delta",
          "ours", "failed", "paper", "citation", "diff"]
# LaTeX column types: the long texts wrap, the numbers align right, the rest is "l".
_LATEX_COLUMNS = {"privacy": "p{4cm}", "variant": "p{2cm}", "model": "p{3cm}",
                  "citation": "p{4cm}", "epsilon": "r", "delta": "r", "failed": "r", "paper": "r"}
# Every character LaTeX treats as markup, and the one non-ASCII character of the cells.
_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
          "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
          "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}",
          "|": r"\textbar{}", "±": r"\ensuremath{\pm}"}


# The version of leaderboard.json's layout: a program reading it checks this first.
LEADERBOARD_VERSION = 1


def write_exports(site: Path, rows: pd.DataFrame) -> None:
    rows.to_csv(site / "rows.csv", index=False, float_format="%.10g")
    (site / "leaderboard.json").write_text(leaderboard_json(rows))
    (site / "rows.md").write_text(markdown(rows))
    (site / "rows.tex").write_text(latex(rows))


def leaderboard_json(rows: pd.DataFrame) -> str:
    """The rows as JSON: {"version", "columns", "rows"}, each row an object of every column
    of rows.csv, its short notion ("notion"), the track of its settings ("track": "honest"
    or "test-tuned", null for a paper's row) and, where the ranking names its configuration
    the best of its track at its epsilon, that track ("best", else null). A missing value
    is null; an infinite epsilon (non-private) is the string "inf", as in rows.csv."""
    from reports.ranking import rankings

    best = {line["cell"]: line["best"] for dataset in rankings(rows)
            for family in dataset["families"] for ranking in family["rankings"]
            for line in ranking["lines"] if line["best"]}
    records = [{name: _json_value(value) for name, value in row.items()}
               | {"notion": short_notion(row["protects"], row["neighbours"], row["kind"]),
                  "track": track_of(row["chosen"]) if row["cell"] else None,
                  "best": best.get(row["cell"])}
               for row in rows.to_dict("records")]
    return json.dumps({"version": LEADERBOARD_VERSION,
                       "columns": [*rows.columns, "notion", "track", "best"],
                       "rows": records}, indent=1)


def _json_value(value):
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return value.item() if hasattr(value, "item") else value


def markdown(rows: pd.DataFrame) -> str:
    """The rows as a Markdown table (pipes in text escaped)."""
    lines = [_markdown_line(HEADER), "|" + "---|" * len(HEADER)]
    lines += [_markdown_line(cells) for cells in table_cells(rows)]
    return "\n".join(lines) + "\n"


def _markdown_line(cells: list[str]) -> str:
    return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"


def latex(rows: pd.DataFrame) -> str:
    """The rows as a booktabs longtable that compiles as it is (every special character
    escaped), for ``\\input`` in a document that loads booktabs and longtable."""
    header = _latex_line(HEADER)
    lines = [r"% privboard leaderboard rows: needs \usepackage{booktabs,longtable}",
             r"\begin{longtable}{" + "".join(_LATEX_COLUMNS.get(name, "l") for name in HEADER) + "}",
             r"\toprule", header, r"\midrule", r"\endfirsthead",
             r"\toprule", header, r"\midrule", r"\endhead",
             r"\bottomrule", r"\endfoot"]
    lines += [_latex_line(cells) for cells in table_cells(rows)]
    lines.append(r"\end{longtable}")
    return "\n".join(lines) + "\n"


def _latex_line(cells: list[str]) -> str:
    return " & ".join(latex_escape(str(cell)) for cell in cells) + r" \\"


def latex_escape(text: str) -> str:
    return "".join(_LATEX.get(character, character) for character in text)


def table_cells(rows: pd.DataFrame) -> list[list[str]]:
    """Per row, the texts under ``HEADER``; a model other than the paper's is named with
    the paper's, as on the site."""
    return [[row.dataset, _notion_text(row), row.method, row.variant,
             model_note(row) or row.model, row.suite or "paper only",
             format_epsilon(row.epsilon), format_delta(row.delta), _ours_text(row),
             str(row.failed or ""),
             "" if pd.isna(row.paper_value) else format_number(row.paper_value, row.metric),
             _citation_text(row), _diff_text(row)]
            for row in rows.itertuples(index=False)]


def _notion_text(row) -> str:
    if row.protects == "nothing":
        return "non-private"
    return f"{row.protects}, {row.neighbours}, {row.kind}, {row.accountant}"


def _ours_text(row) -> str:
    if row.n == 0:
        return ""
    spread = "" if pd.isna(row.std) else f" ± {format_number(row.std, row.metric)}"
    return f"{format_number(row.mean, row.metric)}{spread} (n={row.n})"


def _citation_text(row) -> str:
    if pd.isna(row.paper_value):
        return ""
    marks = [mark for mark, present in (
        ("inferred column", bool(row.column_inferred)),
        ("paper's headline setting", bool(row.cell) and row.paper_variant != row.variant))
        if present]
    return f"{row.paper}, {row.table}, {row.column}" + (f" ({'; '.join(marks)})" if marks else "")


def _diff_text(row) -> str:
    if pd.isna(row.diff):
        return ""
    beyond = " (beyond tolerance)" if row.beyond_tolerance else ""
    return format_number(row.diff, row.metric, signed=True) + beyond
