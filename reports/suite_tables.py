"""Each suite of ours as the papers print their tables: a line per (dataset, method,
variant), a column per epsilon, and in each cell our mean ± std over seeds (n) with the
difference to the paper's number for that cell."""
from __future__ import annotations

import math

import pandas as pd

from reports.presentation import slug


def suite_tables(rows: pd.DataFrame) -> list[dict]:
    ours = rows[rows["cell"] != ""].sort_values(["paper", "table", "column"],
                                                na_position="last")
    tables = []
    for suite, suite_rows in ours.groupby("suite", sort=True):
        epsilons = sorted(set(suite_rows["epsilon"]), key=lambda e: (math.isinf(e), e))
        lines = []
        keys = ["dataset", "method", "variant"]
        for (dataset, method, variant), line_rows in suite_rows.groupby(keys, sort=True):
            # A configuration may sit beside several paper cells: the first citation.
            first = line_rows.drop_duplicates("epsilon").set_index("epsilon")
            lines.append({"dataset": dataset, "method": method, "variant": variant,
                          "metric": line_rows["metric"].iloc[0],
                          "cells": [_cell(first.loc[e]) if e in first.index else None
                                    for e in epsilons]})
        tables.append({"suite": suite, "epsilons": epsilons, "lines": lines})
    return tables


def _cell(row: pd.Series) -> dict | None:
    if row["n"] == 0:
        return None
    return {"page": slug(row["cell"]), "mean": row["mean"], "n": int(row["n"]),
            "std": None if pd.isna(row["std"]) else row["std"],
            "diff": None if pd.isna(row["diff"]) else row["diff"],
            "paper": row["paper_value"], "beyond": bool(row["beyond_tolerance"])}
