"""A row's charge in clipping norms comes from its records' ledgers, and the site marks
a row charged at more than one (DP-SGD under label substitution, LabelDP-Pro: 2C)."""
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.records import RunRecord
from reports.load import charged_clip_norms
from reports.rows import charge

ARCHIVE = Path(__file__).resolve().parent.parent / "reports" / "archive" / "label-dp-small"


def archived(method: str) -> RunRecord:
    """An archived ok record of ``method`` in label-dp-small."""
    for path in sorted(ARCHIVE.glob("*.json")):
        data = json.loads(path.read_text())
        if data.get("method") == method and data.get("status") == "ok":
            return RunRecord.from_dict(data, path)
    raise LookupError(method)


@pytest.mark.parametrize("method, factor", [
    ("dp-sgd", 1.0), ("dp-sgd-label-dp", 2.0), ("labeldp-pro", 2.0), ("lp-1st", math.nan)])
def test_the_charge_is_the_ledgers_sensitivity_over_its_clipping_norm(method, factor):
    found = charged_clip_norms(archived(method))
    assert found == factor or (math.isnan(factor) and math.isnan(found))


def test_only_a_charge_beyond_one_clipping_norm_is_marked():
    assert charge(SimpleNamespace(charged_clip_norms=2.0)) == "charged at sensitivity 2C"
    assert charge(SimpleNamespace(charged_clip_norms=1.0)) == ""
    assert charge(SimpleNamespace(charged_clip_norms=math.nan)) == ""
