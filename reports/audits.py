"""Audited epsilons beside the claimed ones: each configuration's audited twin (trained
once with canaries, benchmarks.audit.training) gives two lower bounds: at the release
(what the privacy layer's mechanisms released for the canaries) and from the model (its
predictions on them). A Gaussian release's twin also tests its claimed trade-off curve
(benchmarks.audit.claim_audit): the verdict, and the empirical epsilon of the claim's
family at the run's delta. A configuration is flagged when either bound exceeds its
claim, the claimed curve is rejected, or a noise check fails, each test at its share of
the verdict's family-wise level: every record is judged here from its counts and
p-values (benchmarks.audit.levels.judge), those audited before the levels were split
too. Audits never count towards the accuracy columns; they add columns."""
from __future__ import annotations

import pandas as pd

from benchmarks.audit import levels

AUDIT_COLUMNS = ["audited_epsilon", "audit_ceiling", "audit_flagged", "audit_level",
                 "audit_confidence", "audit_canaries", "audit_guesses", "audit_correct",
                 "release_epsilon", "release_ceiling", "release_confidence",
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
    found = pd.DataFrame([{"cell": record.config_id, **judged(record.audit),
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


def judged(audit: dict) -> dict:
    """The columns of one audited twin's record, its tests judged at their levels."""
    verdict = levels.judge(audit)
    model = verdict.of(levels.MODEL)
    # Where the release is the model (DP-ERM's weights), its bound is the model's.
    release = verdict.of(levels.RELEASE) or (model if audit.get("release") else None)
    noise = verdict.all_of(levels.NOISE)
    return {"audited_epsilon": model.bound, "audit_ceiling": model.ceiling,
            "audit_flagged": verdict.flagged, "audit_level": verdict.family_wise,
            "audit_confidence": 1 - model.level, "audit_canaries": audit["canaries"],
            "audit_guesses": audit["guesses"], "audit_correct": audit["correct"],
            **_release(audit, release), **_claim_test(audit, verdict.of(levels.CLAIM)),
            **({"noise_checked": ", ".join(test.detail for test in noise),
                "noise_failed": "; ".join(
                    f"{check['mechanism']}: {check['measured']} (p = {check['p_value']:.2g} "
                    f"at level {100 * test.level:.2g}%)"
                    for check, test in zip(audit["noise_checks"], noise) if test.rejects)}
               if noise else {})}


def _release(audit: dict, bound: levels.Judged | None) -> dict:
    release = audit.get("release")
    if release is None:
        return {}
    # Audits recorded before the release audit of DP-SGD observed labels of the canaries.
    return {"release_epsilon": bound.bound, "release_ceiling": bound.ceiling,
            "release_confidence": 1 - bound.level, "release_guesses": release["guesses"],
            "release_correct": release["correct"], "release_where": ", ".join(release["where"]),
            "release_canaries": release.get("canaries", audit["canaries"]),
            "release_observed": release.get("observed",
                                            "the label each canary was released with")}


def _claim_test(audit: dict, test: levels.Judged | None) -> dict:
    """The test of a Gaussian release's claimed curve, if its twin ran one; its empirical
    epsilon is left out (NaN) when the run rejects no curve of the claim's family."""
    if test is None:
        return {}
    tested = audit["release"]["claim_test"]
    return {"claim_rejected": test.rejects, "claim_epsilon": tested["claimed_epsilon"],
            "empirical_epsilon": (float("nan") if tested["empirical_noise_scale"] is None
                                  else tested["empirical_epsilon"]),
            "claim_canaries": tested["canaries"],
            "claim_guesses": ", ".join(map(str, tested["guesses"])),
            "claim_correct": ", ".join(map(str, tested["correct"])),
            "claim_confidence": 1 - test.level, "claim_text": tested["claim"]}
