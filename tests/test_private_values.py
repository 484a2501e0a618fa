"""Statistics of the private training data never reach anything public: one cell of each
method family (the smoke suite) runs, and every value its run keeps as a private
diagnostic (PATE's data-dependent epsilon, a function of the teachers' votes; DP-ERM's
solver trace and noise norms) is searched for in the public part of each record, in
every file of the site, raw record copies and exports included."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from benchmarks.records import read_records
from benchmarks.registry import all_methods
from tests.leaderboard_inputs import catalogued

# Renderings of a private number that a page or a record could carry.
FORMATS = ("{!r}", "{:.6g}", "{:.5g}", "{:.4g}")


def renderings(value) -> set[str]:
    """The texts of a private value: floats with at least 4 significant digits, whole
    numbers of at least 4 digits (shorter ones occur everywhere by chance)."""
    if isinstance(value, dict):
        return set().union(*(renderings(v) for v in value.values()), set())
    if isinstance(value, (list, tuple)):
        return set().union(*(renderings(v) for v in value), set())
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return set()
    if isinstance(value, int) or float(value).is_integer():
        return {str(int(value))} if abs(value) >= 1000 else set()
    return {form.format(value) for form in FORMATS
            if len(form.format(value).lstrip("-0.").replace(".", "").split("e")[0]) >= 4}


def data_independent(record) -> set[str]:
    """The renderings of the record's data-independent bounds: a data-dependent epsilon
    capped at one of them (PATE's, with few teachers) equals it and reveals nothing."""
    return renderings({key: value for key, value in record.privacy.details.items()
                       if "data_independent" in key})


@pytest.mark.integration
def test_no_private_diagnostic_of_any_family_is_published(smoke_results, tmp_path):
    from benchmarks.cli import main

    records = list(read_records(smoke_results))
    secrets = {text: record.method for record in records
               for text in renderings(record.diagnostics) - data_independent(record)}
    families = {all_methods()[r.method].__module__ for r in records if r.diagnostics}
    assert {"methods.pate", "methods.dp_erm"} <= families  # the planted values exist
    assert any(r.diagnostics.get("epsilon_data_dependent") for r in records)

    for record in records:
        public = json.dumps(record.public_dict())
        leaked = {text for text in secrets if text in public}
        assert not leaked, (record.method, leaked)

    site = tmp_path / "site"
    results = catalogued(smoke_results, tmp_path / "results")
    assert main(["report", "--results", str(results), "--no-archive", "--out", str(site)]) == 0
    published = [p for p in site.rglob("*") if p.is_file() and p.suffix != ".png"]
    assert any(p.name == "rows.csv" for p in published)
    for path in published:
        text = path.read_text()
        leaked = {(text_, secrets[text_]) for text_ in secrets if text_ in text}
        assert not leaked, (path.relative_to(site), leaked)


@pytest.mark.parametrize("method", [
    "pate-gnmax", pytest.param("pate-lnmax", marks=pytest.mark.integration)])  # 6 s more
def test_planted_votes_leave_no_trace_of_their_data_dependent_epsilon(method, monkeypatch,
                                                                      tmp_path):
    """Teachers that mostly agree (planted votes) make PATE's data-dependent epsilon, a
    function of the private votes, far smaller than the data-independent bound: it is a
    private diagnostic, absent from the public record and the site."""
    from benchmarks import datasets
    from benchmarks.cli import main
    from benchmarks.context import RunContext
    from benchmarks.records import write_record
    from benchmarks.runner import run_cell
    from benchmarks.suites import Cell
    from methods import pate

    class Unanimous:
        """Teachers that mostly vote class 3; a student that predicts it."""

        def votes(self, x):
            # Wide gaps, varying by query: the data-dependent bound falls well below.
            votes = np.zeros((len(x), 10), dtype=np.int64)
            votes[:, 3] = 160 + np.arange(len(x)) % 40
            votes[:, 5] = 250 - votes[:, 3]
            return votes

        def predict_proba(self, x):
            return np.eye(10)[np.full(len(x), 3)]

    monkeypatch.setattr(pate.Pate, "_teachers", lambda self, train, num_classes: Unanimous())
    monkeypatch.setattr(pate.Pate, "_train_student", lambda self, *args: Unanimous())
    cell = Cell("test", "digits", method, 4.0, 1e-5, 0,
                {"teachers": 250, "public_size": 300, "queries": 100})
    record = run_cell(cell, datasets.load("digits"), RunContext(seed=0))
    secret = record.diagnostics["epsilon_data_dependent"]
    assert record.ok and secret < 0.5 * record.privacy.epsilon
    texts = renderings(secret)
    assert texts and not {t for t in texts if t in json.dumps(record.public_dict())}
    results = tmp_path / "results"
    write_record(results, record)
    site = tmp_path / "site"
    assert main(["report", "--results", str(catalogued(None, results)), "--no-archive",
                 "--out", str(site)]) == 0
    for path in (p for p in site.rglob("*") if p.is_file() and p.suffix != ".png"):
        assert not {t for t in texts if t in path.read_text()}, path
