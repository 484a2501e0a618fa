"""Audited epsilons beside the claimed ones: each configuration's audited twin (trained
once with canaries, benchmarks.audit.training) gives two 95% lower bounds: at the release
(what the privacy layer's mechanisms released for the canaries) and from the model (its
predictions on them). A Gaussian release's twin also tests its claimed trade-off curve
(benchmarks.audit.claim_audit): the verdict, and the empirical epsilon of the claim's
family at the run's delta. A configuration is flagged when either bound exceeds its
claim, the claimed curve is rejected, or a noise check fails. Audits never count towards
the accuracy columns; they add columns."""
from __future__ import annotations

import pandas as pd

AUDIT_COLUMNS = ["audited_epsilon", "audit_ceiling", "audit_flagged", "audit_canaries",
                 "audit_guesses", "audit_correct", "release_epsilon", "release_ceiling",
                 "release_guesses", "release_correct", "release_where", "release_canaries",
                 "release_observed", "claim_rejected", "claim_epsilon", "empirical_epsilon",
                 "claim_canaries", "claim_guesses", "claim_correct", "claim_confidence",
                 "claim_text", "noise_checked", "noise_failed", "audit_seconds",
                 "audit_overhead"]


def attach_audits(rows: pd.DataFrame, audits: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The rows with each configuration's audit, if it has one: the largest lower bound
    over its ok audited twins, its ceiling (the bound had every guess been right),
    whether it exceeds the claimed epsilon, and the audit's time over the mean time of
    the configuration's own ok runs (the audit's overhead), each counted cold."""
    ok = audits[audits["status"] == "ok"]
    found = pd.DataFrame([{
        "cell": record.config_id, "audited_epsilon": record.audit["epsilon_lower_bound"],
        "audit_ceiling": record.audit["ceiling"], "audit_flagged": record.audit["flagged"],
        "audit_canaries": record.audit["canaries"], "audit_guesses": record.audit["guesses"],
        "audit_correct": record.audit["correct"], **_release(record.audit),
        **_noise_checks(record.audit),
        "audit_seconds": record.cold_wall_time_s}
        for record in ok["record"]], columns=["cell", *AUDIT_COLUMNS[:-1]])
    strongest = found[["audited_epsilon", "release_epsilon"]].max(axis=1)
    found = found.loc[strongest.sort_values().index].drop_duplicates("cell", keep="last")
    ok_runs = runs[runs["status"] == "ok"]
    own_time = (ok_runs["record"].map(lambda record: record.cold_wall_time_s)
                .groupby(ok_runs["config_id"]).mean())
    found["audit_overhead"] = found["audit_seconds"] / found["cell"].map(own_time)
    merged = rows.drop(columns=AUDIT_COLUMNS, errors="ignore").merge(found, on="cell",
                                                                     how="left")
    merged["audit_flagged"] = merged["audit_flagged"].fillna(False).astype(bool)
    return merged


def _noise_checks(audit: dict) -> dict:
    """The mechanisms whose noise was checked at the cell's setting, and those that failed."""
    checks = audit.get("noise_checks") or []
    if not checks:
        return {}
    return {"noise_checked": ", ".join(c["mechanism"] for c in checks),
            "noise_failed": "; ".join(f"{c['mechanism']}: {c['measured']} "
                                      f"(p = {c['p_value']:.2g})"
                                      for c in checks if c["flagged"])}


def _release(audit: dict) -> dict:
    release = audit.get("release")
    if release is None:
        return {}
    # Audits recorded before the release audit of DP-SGD observed labels of the canaries.
    return {**_claim_test(release.get("claim_test")),
            "release_epsilon": release["epsilon_lower_bound"],
            "release_ceiling": release["ceiling"], "release_guesses": release["guesses"],
            "release_correct": release["correct"], "release_where": ", ".join(release["where"]),
            "release_canaries": release.get("canaries", audit["canaries"]),
            "release_observed": release.get("observed",
                                            "the label each canary was released with")}


def _claim_test(tested: dict | None) -> dict:
    """The test of a Gaussian release's claimed curve, if its twin ran one."""
    if tested is None:
        return {}
    return {"claim_rejected": tested["rejected"], "claim_epsilon": tested["claimed_epsilon"],
            "empirical_epsilon": tested["empirical_epsilon"],
            "claim_canaries": tested["canaries"],
            "claim_guesses": ", ".join(map(str, tested["guesses"])),
            "claim_correct": ", ".join(map(str, tested["correct"])),
            "claim_confidence": tested["confidence"], "claim_text": tested["claim"]}
