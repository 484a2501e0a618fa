"""Re-runs beside the configurations they checked: each configuration's latest
verification (privboard verify), its date and its verdict. Like audits, re-runs never
count towards the accuracy columns."""
from __future__ import annotations

import pandas as pd

VERIFICATION_COLUMNS = ["verified_on", "verified_verdict"]


def attach_verifications(rows: pd.DataFrame, verifications: pd.DataFrame) -> pd.DataFrame:
    """The rows with the date (UTC) and verdict of their configuration's latest ok
    re-run; NaN where it has none."""
    latest = pd.DataFrame([{"cell": record.config_id, "at": record.started_at,
                            "verified_on": record.started_at[:10],
                            "verified_verdict": record.verification["verdict"]}
                           for record in verifications["record"] if record.ok],
                          columns=["cell", "at", *VERIFICATION_COLUMNS])
    latest = latest.sort_values("at").drop_duplicates("cell", keep="last").drop(columns="at")
    return rows.drop(columns=VERIFICATION_COLUMNS, errors="ignore").merge(
        latest, on="cell", how="left")
