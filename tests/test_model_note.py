"""The model of each row of ours and, beside a difference with the paper, both models
with their non-private numbers when ours is not the paper's: ours from the records only,
the paper's from baselines/published.csv (Ghazi et al. 2021, Table 4: Fashion-MNIST with
the simplified Inception, 94.28% non-private)."""
import json
from pathlib import Path

import pytest

import reports
from benchmarks import catalogue
from baselines import load_published
from reports.load import load_records
from reports.rows import compute_rows, metric_by_dataset, model_note
from tests.leaderboard_inputs import catalogued, rehashed

GOLDEN = Path(__file__).parent / "golden" / "records"
NOTE = "CPU CNN (91.20% non-private) vs the paper's Inception (94.28%)"
# Each test configuration's label, by the identity its settings hash to.
LABELS: dict[str, str] = {}


def _record(results: Path, template: str, config: str, seed: int, accuracy: float,
            hparams: dict | None = None, **fields) -> None:
    """A Fashion-MNIST record made from a golden one (an LP-1ST run at epsilon 1, or the
    non-private reference), with its own settings (labelled ``config``), seed and
    accuracy."""
    record = json.loads((GOLDEN / template).read_text())
    record.update({"dataset": "fashion-mnist", "seed": seed, "suite": "quick",
                   "metrics": {"accuracy_pct": accuracy},
                   "hparams": {"epochs": 5, **(hparams or {})}, **fields})
    record = rehashed(record)
    LABELS[record["config_id"]] = config
    results.mkdir(exist_ok=True)
    (results / f"{record['cell_id']}.json").write_text(json.dumps(record))


def _page(label: str) -> str:
    """The configuration page of the test configuration labelled ``label``."""
    return "cells/" + {name: config for config, name in LABELS.items()}[label] + ".html"


def _lp_1st(results: Path, config: str = "lp-cnn", **hparams) -> None:
    _record(results, "mnist-lp1st-e1-s0.json", config, 0, 80.0, hparams)


def _non_private(results: Path, config: str, accuracies: list[float], suite: str = "quick",
                 **hparams) -> None:
    for seed, accuracy in enumerate(accuracies):
        _record(results, "mnist-nonprivate-s0.json", config, seed, accuracy, hparams,
                suite=suite)


def _records(results: Path):
    """The records of ``results``, their models named by the methods' current defaults."""
    defaults = {name: facts["defaults"] for name, facts in catalogue.current()["methods"].items()}
    return load_records(results, metric_by_dataset(load_published()), defaults_of=defaults)


def _notes(results: Path) -> dict[str, str]:
    """Per configuration of ours, the note beside its difference with the paper."""
    rows = compute_rows(_records(results), load_published(), 1.0)
    return {LABELS[row.cell]: model_note(row) for row in rows[rows.cell != ""].itertuples()}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """LP-1ST with the CPU CNN and with Inception, and the non-private reference with
    each: the CNN's ceiling is the mean of 91.0 and 91.4, Inception's 93.0."""
    results = tmp_path_factory.mktemp("model-note") / "results"
    _lp_1st(results)
    _lp_1st(results, "lp-inception", model="inception")
    _non_private(results, "np-cnn", [91.0, 91.4])
    _non_private(results, "np-inception", [93.0], model="inception")
    return results


def test_a_cnn_row_names_both_models_with_the_ceiling_of_its_own_model(results):
    notes = _notes(results)
    assert notes["lp-cnn"] == NOTE
    assert notes["np-cnn"] == NOTE  # the reference's own row against the paper's e = inf


def test_a_row_with_the_papers_model_has_no_note(results):
    notes = _notes(results)
    assert notes["lp-inception"] == "" and notes["np-inception"] == ""


def test_without_a_non_private_record_of_the_model_no_number_of_ours(tmp_path):
    _lp_1st(tmp_path)
    _non_private(tmp_path, "np-inception", [93.0], model="inception")
    assert _notes(tmp_path)["lp-cnn"] == "CPU CNN vs the paper's Inception (94.28%)"


def test_the_ceiling_comes_from_the_rows_suite_when_it_has_one(tmp_path):
    _lp_1st(tmp_path)
    _non_private(tmp_path, "np-cnn-other", [88.0], suite="other", epochs=6)
    assert _notes(tmp_path)["lp-cnn"].startswith("CPU CNN (88.00% non-private) vs")
    _non_private(tmp_path, "np-cnn", [91.0, 91.4])
    assert _notes(tmp_path)["lp-cnn"] == NOTE


def test_the_model_comes_from_the_settings_or_the_methods_defaults(tmp_path):
    _lp_1st(tmp_path, "lp-resnet", model="resnet18_v2")
    _lp_1st(tmp_path, "lp-cnn")
    _record(tmp_path, "mnist-lp1st-e1-s0.json", "pate", 0, 80.0,
            {"teacher_model": "pate_deep_cnn"}, method="pate-lnmax")
    _record(tmp_path, "adult-objective-e1-s0.json", "dp-erm", 0, 80.0)
    records = _records(tmp_path)
    models = {LABELS[config]: model for config, model in zip(records.config_id, records.model)}
    assert models == {"lp-resnet": "ResNet18-v2", "lp-cnn": "CPU CNN", "pate": "PATE deep CNN",
                      "dp-erm": ""}


def test_pages_and_exports_show_the_model_and_the_note(results, tmp_path):
    site = tmp_path / "site"
    reports.build(catalogued(results, tmp_path / "results"), site, archive=None)
    escaped = NOTE.replace("'", "&#39;")
    pages = {"tables.html": 2, "methods/lp-1st.html": 1, "methods/non-private.html": 1,
             "datasets/fashion-mnist.html": 2, _page("lp-cnn"): 1}
    for page, count in pages.items():
        assert (site / page).read_text().count(escaped) == count, page
    assert escaped not in (site / _page("lp-inception")).read_text()
    assert "<td>CPU CNN</td>" in (site / "tables.html").read_text()
    assert "model <strong>Inception</strong>" in (site / _page("lp-inception")).read_text()
    assert f"| {NOTE} |" in (site / "rows.md").read_text()
    assert "CPU CNN (91.20\\% non-private)" in (site / "rows.tex").read_text()
