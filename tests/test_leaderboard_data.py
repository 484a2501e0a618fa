"""The leaderboard for programs: leaderboard.json and privboard.load_rows() hold the
rows of rows.csv, value for value."""
import json
import math
import numbers

import numpy as np
import pandas as pd
import pytest

import privboard
import reports
from reports.exports import LEADERBOARD_VERSION
from tests.leaderboard_inputs import catalogued
from tests.test_report import GOLDEN, _read_rows


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    records = catalogued(GOLDEN / "records", folder / "records")
    reports.build(records, folder / "site")
    return records, folder / "site"


def _as_csv(rows: pd.DataFrame) -> str:
    return rows.to_csv(index=False, float_format="%.10g")


def _text(value) -> str | None:
    """A cell as text, numbers to nine digits; CSV writes an empty text and a missing
    value alike."""
    if value is None or value == "" or (not isinstance(value, str) and pd.isna(value)):
        return None
    if isinstance(value, numbers.Number) and not isinstance(value, (bool, np.bool_)):
        return f"{float(value):.9g}"
    return str(value)


def test_load_rows_returns_the_rows_of_rows_csv(built):
    records, site = built
    rows = privboard.load_rows(results=records, archive=None)
    assert len(rows) > 10 and (rows["n"] > 0).any()
    assert _as_csv(rows) == (site / "rows.csv").read_text()


def test_leaderboard_json_holds_the_rows_of_rows_csv_with_their_notion(built):
    _, site = built
    data = json.loads((site / "leaderboard.json").read_text())
    assert data["version"] == LEADERBOARD_VERSION
    expected = _read_rows(site / "rows.csv")
    assert data["columns"] == [*expected.columns, "notion", "track", "best"]
    shown = pd.DataFrame(data["rows"], columns=data["columns"]).replace({"inf": math.inf})
    assert len(shown) == len(expected)
    for column in expected.columns:
        assert list(map(_text, shown[column])) == list(map(_text, expected[column])), column
    lp = shown[(shown.method == "lp-1st") & (shown.n > 0)].iloc[0]
    assert lp.notion == "label-DP · sub · pure"
    assert set(shown[shown.protects == "nothing"].notion) == {"non-private"}
    # The golden records declare nothing: all in the test-tuned track, a paper's row in
    # none; the ranking's best of each card is marked so.
    tracks = {(row["cell"] != "", row["track"], row["best"]) for row in data["rows"]}
    assert tracks == {(True, "test-tuned", "test-tuned"), (True, "test-tuned", None),
                      (False, None, None)}


def test_load_rows_without_any_records_is_one_clear_error(tmp_path):
    with pytest.raises(reports.ReportError, match="no records"):
        privboard.load_rows(results=tmp_path / "none", archive=None)
