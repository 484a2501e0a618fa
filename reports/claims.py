"""Checks the papers' qualitative claims ("A beats B at every epsilon") on our records."""
from __future__ import annotations

import math

import pandas as pd

from benchmarks.metrics import metric

TRUE, FALSE, NOT_ENOUGH = "TRUE", "FALSE", "not enough runs"
_KEYS = ["suite", "epsilon", "delta"]


def check_claims(claims: pd.DataFrame, records: pd.DataFrame) -> list[dict]:
    """Each claim with a verdict and its per-budget comparison.

    A claim is compared at every finite (suite, epsilon, delta) where both methods have
    ok records, using each method's best configuration there (the papers compare their
    best settings). TRUE only if the better method wins at every such budget. Superseded
    records do not count.
    """
    ok = records[(records["status"] == "ok") & records["epsilon"].map(math.isfinite)
                 & ~records["superseded"]]
    checked = []
    for claim in claims.to_dict("records"):
        lower = not metric(claim["metric"]).higher_is_better
        on_dataset = ok[(ok["dataset"] == claim["dataset"]) & (ok["metric"] == claim["metric"])]
        better = _best_variant(on_dataset[on_dataset["method"] == claim["better_method"]], lower)
        worse = _best_variant(on_dataset[on_dataset["method"] == claim["worse_method"]], lower)
        both = better.merge(worse, on=_KEYS, suffixes=("_better", "_worse"))
        wins = (both["mean_better"] < both["mean_worse"]) if lower else (
            both["mean_better"] > both["mean_worse"])
        both["holds"] = wins
        verdict = NOT_ENOUGH if both.empty else (TRUE if wins.all() else FALSE)
        checked.append({**claim, "verdict": verdict,
                        "comparisons": both.sort_values(_KEYS).to_dict("records")})
    return checked


def _best_variant(records: pd.DataFrame, lower_is_better: bool) -> pd.DataFrame:
    """Per budget, the configuration with the best mean over seeds (with its n and
    variant label)."""
    means = records.groupby([*_KEYS, "config_id"]).agg(
        mean=("value", "mean"), n=("value", "count"), variant=("variant", "first"))
    means = means.reset_index().sort_values("mean", ascending=lower_is_better)
    return means.drop_duplicates(_KEYS)[[*_KEYS, "variant", "mean", "n"]]
