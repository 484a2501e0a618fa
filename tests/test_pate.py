"""The PATE methods: the split they use, what they charge, teachers trained once per cell,
and no student ever reading a public label."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks import datasets
from benchmarks.context import RunContext
from benchmarks.contract import _REGISTRY, Budget, Dataset, Split
from benchmarks.privacy import RdpCurve, rdp
from benchmarks.privacy import pate as analysis
from benchmarks.registry import get_method
from benchmarks.runner import run_cell
from benchmarks.suites import Cell
from methods import pate
from methods.nn import ensemble

TINY = {"teachers": 5, "teacher_epochs": 3, "teacher_batch_size": 16, "public_size": 200,
        "queries": 80, "student_epochs": 1, "student_width": "small", "threshold": 3.0,
        "sigma1": 30.0}
BUDGET = Budget(4.0, 1e-5)


@pytest.fixture(scope="module")
def digits():
    return datasets.load("digits")


def cell(method: str, **hparams) -> Cell:
    cls = get_method(method)
    return Cell("test", "digits", method, BUDGET.epsilon, BUDGET.delta, 0,
                {**cls.defaults, **TINY, **hparams})


def run(digits, method: str, data_dir, **hparams):
    return run_cell(cell(method, **hparams), digits, RunContext(seed=0, data_dir=data_dir))


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A data folder whose teacher cache the module's runs share."""
    return tmp_path_factory.mktemp("data")


@pytest.fixture(scope="module")
def honest_runs(digits, cache):
    """Each method's run on the true labels, made once for the module on demand."""
    runs = {}

    def honest_run(method: str):
        if method not in runs:
            runs[method] = run(digits, method, cache)
        return runs[method]
    return honest_run


@pytest.fixture(scope="module")
def honest(honest_runs):
    return honest_runs("pate-confident-gnmax")


def test_the_public_part_is_inputs_only_and_left_out_of_the_evaluation(digits, honest):
    record = honest
    assert record.ok, record.error
    assert record.test_split == {"public_inputs": 200, "evaluated": len(digits.test) - 200}
    details = record.privacy.details
    assert record.metrics["released_labels"] == details["answered"] <= details["queries_asked"]
    assert 0 <= record.metrics["released_label_accuracy_pct"] <= 100


def test_confident_gnmax_charges_the_check_on_every_asked_query_gnmax_on_answered(
        digits, cache):
    method = get_method("pate-confident-gnmax")(BUDGET, context=RunContext(data_dir=cache),
                                               **TINY, answered_target=20)
    method.fit(digits.train, 10, public_x=digits.test.x[:200])
    check, answer, release = method.ctx.ledger.charges
    asked, answered = method.details["queries_asked"], method.details["answered"]
    assert answered == 20 and asked <= 80  # stopped once 20 were answered
    sigma1, sigma2 = TINY["sigma1"], method.details["sigma2"]
    np.testing.assert_allclose(check.cost.curve(), asked * analysis.threshold_rdp(sigma1))
    np.testing.assert_allclose(answer.cost.curve(), answered * analysis.gnmax_rdp(sigma2))
    assert isinstance(release.cost, RdpCurve) and release.mechanism.startswith("smooth")
    assert BUDGET.covers(method.spent())
    indices, labels = method.released_public_labels()
    assert len(indices) == 20 and indices.max() < asked and (labels >= 0).all()


def test_the_noise_meets_a_target_epsilon_in_the_worst_case(digits, cache):
    """Calibrated without looking at the votes: every query asked and answered would
    still spend no more than the budget."""
    method = get_method("pate-gnmax")(BUDGET, context=RunContext(data_dir=cache), **{
        key: value for key, value in TINY.items() if key not in ("threshold", "sigma1")})
    method.fit(digits.train, 10, public_x=digits.test.x[:200])
    worst = (80 * analysis.gnmax_rdp(method.details["sigma2"])
             + method._release_curve())
    assert rdp.epsilon_from_rdp(worst, BUDGET.delta)[0] <= BUDGET.epsilon * (1 + 1e-9)
    assert rdp.epsilon_from_rdp(worst * 1.01, BUDGET.delta)[0] > BUDGET.epsilon * 0.999


@pytest.mark.integration  # three cells trained
def test_the_teachers_are_trained_once_per_cell_and_the_cache_changes_nothing(
        digits, honest, cache, tmp_path, monkeypatch):
    trained = []
    real = ensemble.train_teachers
    monkeypatch.setattr(ensemble, "train_teachers",
                        lambda *a, **k: trained.append(1) or real(*a, **k))
    again = run(digits, "pate-confident-gnmax", cache)
    student = run(digits, "pate-plus", cache, beta=0.2)
    assert trained == [] and again.ok and student.ok
    assert again.metrics == honest.metrics
    assert again.privacy.as_dict() == honest.privacy.as_dict()
    fresh = run(digits, "pate-confident-gnmax", tmp_path)
    assert trained == [1] and fresh.metrics == honest.metrics


def garbled(digits: Dataset) -> Dataset:
    """The same data with every public test label replaced by a wrong one."""
    y = digits.test.y.copy()
    y[:200] = (y[:200] + 1 + np.arange(200) % 9) % 10
    return Dataset(digits.name, digits.task, digits.num_classes, digits.train,
                   Split(digits.test.x, y), digits.fingerprint)


def check_no_public_label_is_read(method: str, digits, honest_runs, cache,
                                  monkeypatch) -> None:
    """Run with the true public labels and with garbage in their place (served by every
    way a method could reach the dataset): the student must not change."""
    honest = honest_runs(method)
    bad = garbled(digits)
    monkeypatch.setattr(datasets, "load", lambda name, data_dir=None: bad)
    swapped = run_cell(cell(method), bad, RunContext(seed=0, data_dir=cache))
    assert honest.ok and swapped.ok
    assert swapped.metrics["accuracy_pct"] == honest.metrics["accuracy_pct"], (
        f"{method}: a public label reached the student")


@pytest.mark.parametrize("method", [
    "pate-confident-gnmax",
    pytest.param("pate-plus-plus", marks=pytest.mark.integration),  # two SSGAN students
])
def test_no_student_reads_a_public_label(method, digits, honest_runs, cache, monkeypatch):
    check_no_public_label_is_read(method, digits, honest_runs, cache, monkeypatch)


class PeekingStudent(pate.PateConfidentGnmax):
    """Broken on purpose: trains its student on the true labels of the public part."""

    def _train_student(self, x_labelled, y_labelled, x_unlabelled, num_classes):
        truth = datasets.load("digits").test.y[:200]
        return super()._train_student(self.public_x, truth, x_unlabelled[:0], num_classes)

    def fit(self, train, num_classes, public_x=None):
        self.public_x = public_x
        return super().fit(train, num_classes, public_x)


def test_the_label_check_catches_a_student_given_the_true_labels(digits, honest_runs, cache,
                                                                 monkeypatch):
    monkeypatch.setitem(_REGISTRY, "peeking-student", PeekingStudent)
    monkeypatch.setattr(PeekingStudent, "name", "peeking-student", raising=False)
    with pytest.raises(AssertionError, match="a public label reached the student"):
        check_no_public_label_is_read("peeking-student", digits, honest_runs, cache,
                                      monkeypatch)
