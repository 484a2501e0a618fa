"""The registered DP-ERM methods: preconditions, what they train, what they record."""
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.special import expit
from sklearn.datasets import load_breast_cancer

from benchmarks.contract import Budget, Split
from benchmarks.privacy import NON_PRIVATE, Kind, Neighbours, Protects, PureEpsilon
from benchmarks.registry import get_method
from methods import dp_erm
from benchmarks.privacy import erm_noise
from benchmarks.privacy.erm_noise import objective_calibration
from methods.dp_erm import DpErmObjective, DpErmOutput
from methods.random_features import draw_rbf_features

BOTH = [DpErmOutput, DpErmObjective]


@pytest.fixture(scope="module")
def data() -> tuple[Split, Split]:
    x, y = load_breast_cancer(return_X_y=True)
    x = (x - x.mean(0)) / x.std(0)
    x /= np.linalg.norm(x, axis=1).max()
    order = np.random.default_rng(0).permutation(len(y))
    train, test = order[:200], order[200:300]
    return (Split(x[train].astype(np.float32), y[train]),
            Split(x[test].astype(np.float32), y[test]))


def _fit(cls, data, epsilon=1.0, seed=0, **hparams):
    return cls(Budget(epsilon), seed=seed, **hparams).fit(data[0], 2)


def _gradient_of_j(weights, split, regularization):
    """grad of J = (1/n) sum softplus(-y f.x) + (Lambda/2)||f||^2, by hand in numpy."""
    x = split.x.astype(np.float64)
    signs = np.where(split.y == 1, 1.0, -1.0)
    first = -expit(-signs * (x @ weights))  # l'(z) of the logistic loss
    return (first * signs) @ x / len(x) + regularization * weights


def test_both_methods_are_registered_with_a_pure_substitution_notion():
    for name, cls in [("dp-erm-output", DpErmOutput), ("dp-erm-objective", DpErmObjective)]:
        assert get_method(name) is cls
        assert cls.tasks == ("tabular",) and not cls.needs_delta
        assert (cls.notion.protects, cls.notion.neighbours, cls.notion.kind) == (
            Protects.RECORDS, Neighbours.SUBSTITUTION, Kind.PURE)


def test_importing_the_module_does_not_import_tensorflow():
    code = "import sys, methods.dp_erm; sys.exit('tensorflow' in sys.modules)"
    root = Path(__file__).resolve().parents[1]
    assert subprocess.run([sys.executable, "-c", code], cwd=root).returncode == 0


@pytest.mark.parametrize("cls", BOTH)
def test_predictions_are_probabilities_and_seeded(cls, data):
    a = _fit(cls, data, seed=3).predict_proba(data[1].x)
    b = _fit(cls, data, seed=3).predict_proba(data[1].x)
    c = _fit(cls, data, seed=4).predict_proba(data[1].x)
    assert a.shape == (len(data[1]), 2)
    np.testing.assert_allclose(a.sum(1), 1.0)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_infinite_epsilon_is_the_same_non_private_optimum_for_both(data):
    out = _fit(DpErmOutput, data, math.inf)
    obj = _fit(DpErmObjective, data, math.inf)
    np.testing.assert_allclose(out.weights, obj.weights, atol=1e-6)
    assert np.linalg.norm(_gradient_of_j(out.weights, data[0], 1e-3)) < 1e-7
    for m in (out, obj):
        assert m.notion_for(m.budget, m.hparams) == NON_PRIVATE
        assert m.spent().epsilon == math.inf and m.spent().delta == 0
        assert "beta" not in m.privacy_details()
    accuracy = np.mean(out.predict_proba(data[1].x).argmax(1) == data[1].y)
    assert accuracy > 0.9


def test_output_perturbation_adds_the_calibrated_noise_to_the_exact_minimiser(data):
    m = _fit(DpErmOutput, data, 0.5, regularization=0.01)
    fit = m._result.released
    spent = m.spent()
    n = len(data[0])
    assert spent.epsilon == 0.5 and spent.delta == 0
    assert m.privacy_details()["beta"] == pytest.approx(n * 0.01 * 0.5 / 2)
    assert "noise_norm" not in json.dumps(m.privacy_details())  # private: diagnostics only
    assert m.ctx.diagnostics["noise_norms"] == [pytest.approx(np.linalg.norm(fit.noise))]
    exact = _fit(DpErmOutput, data, math.inf, regularization=0.01).weights
    np.testing.assert_allclose(m.weights - fit.noise, exact, atol=1e-6)


@pytest.mark.parametrize("epsilon, regularization, delta_positive", [
    (2.0, 0.05, False),  # epsilon' = 2 - 2 log(1 + 0.25/10) > 0
    (0.1, 1e-3, True),  # epsilon' = 0.1 - 2 log(1 + 0.25/0.2) < 0
])
def test_objective_perturbation_solves_the_calibrated_perturbed_objective(
        data, epsilon, regularization, delta_positive):
    n = len(data[0])
    m = _fit(DpErmObjective, data, epsilon, regularization=regularization)
    details, b = m.privacy_details(), m._result.released.noise
    cal = objective_calibration(epsilon, n, regularization, 0.25)
    assert (details["Delta"] > 0) == delta_positive
    if delta_positive:
        assert details["Delta"] == pytest.approx(
            0.25 / (n * (math.exp(epsilon / 4) - 1)) - regularization)
        assert details["epsilon_prime"] == epsilon / 2
    assert (details["epsilon_prime"], details["beta"], details["Delta"]) == (
        cal.epsilon_prime, cal.beta, cal.extra_regularization)
    assert details["c"] == 0.25 and details["n"] == n and details["Lambda"] == regularization
    # Optimality of argmin J(f) + (1/n) b.f + (Delta/2)||f||^2, with the recorded Delta and b.
    residual = (_gradient_of_j(m.weights, data[0], regularization) + b / n
                + details["Delta"] * m.weights)
    assert np.linalg.norm(residual) <= 1e-10 * max(1.0, np.linalg.norm(b) / n)


def test_huber_variant_uses_its_curvature_bound(data):
    m = _fit(DpErmObjective, data, 1.0, loss="huber", huber_h=0.25)
    assert m.privacy_details()["c"] == 2.0
    assert m.variant() == "huber h=0.25, Lambda=0.001"


@pytest.mark.parametrize("cls", BOTH)
def test_rbf_features_keep_rows_in_the_unit_ball(cls, data):
    m = _fit(cls, data, 1.0, kernel="rbf", rff_dim=40, rff_gamma=0.5)
    assert m.weights.shape == (40,)
    assert m.variant() == "rbf D=40 gamma=0.5, logistic, Lambda=0.001"
    assert m.predict_proba(data[1].x).shape == (len(data[1]), 2)


def test_random_features_approximate_the_rbf_kernel_with_unit_norm():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(30, 4))
    x /= 2 * np.linalg.norm(x, axis=1, keepdims=True)
    v = draw_rbf_features(4, 20_000, 2.0, rng).transform(x)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-12)
    exact = np.exp(-2.0 * ((x[:, None] - x[None]) ** 2).sum(-1))
    assert np.abs(v @ v.T - exact).max() < 0.03
    wrong_gamma = np.exp(-4.0 * ((x[:, None] - x[None]) ** 2).sum(-1))
    assert np.abs(v @ v.T - wrong_gamma).max() > 0.1


@pytest.mark.parametrize("cls", BOTH)
def test_private_tuning_records_its_parallel_accounting(cls, data):
    lambdas = [1e-3, 1e-2, 1e-1]
    m = _fit(cls, data, 0.5, seed=2, tune_lambdas=lambdas)
    spent, details = m.spent(), m.privacy_details()
    tuning = details["tuning"]
    assert spent.epsilon == 0.5 and spent.delta == 0 and spent.composition == "pure"
    assert tuning["lambdas"] == lambdas and sum(tuning["part_sizes"]) == len(data[0])
    assert len(tuning["part_sizes"]) == len(lambdas) + 1
    # One charge per model on its part and one for the choice on the held-out part:
    # disjoint parts, so they compose in parallel to epsilon, not (m + 1) epsilon.
    charges = m.ctx.ledger.charges
    assert len(charges) == len(lambdas) + 1
    assert all(c.cost == PureEpsilon(0.5) for c in charges)
    touched = np.concatenate([c.touches.examples for c in charges])
    np.testing.assert_array_equal(np.sort(touched), np.arange(len(data[0])))
    chosen = tuning["chosen"]
    assert details["Lambda"] == lambdas[chosen] == tuning["chosen_lambda"]
    assert details["n"] == tuning["part_sizes"][chosen]
    np.testing.assert_array_equal(m.weights, m._result.fits[chosen].weights)
    assert m.variant().endswith("+ private tuning")


def test_tuning_without_noise_picks_the_fewest_held_out_mistakes(data):
    m = _fit(DpErmObjective, data, math.inf, tune_lambdas=[1e-4, 1.0, 30.0])
    tuning = m.privacy_details()["tuning"]
    # Records are strict JSON: no infinities in what the runner stores.
    json.dumps([m.privacy_details(), m.ctx.diagnostics], allow_nan=False)
    mistakes = m.ctx.diagnostics["held_out_mistakes"]
    assert "held_out_mistakes" not in tuning  # statistics of private rows stay private
    assert tuning["chosen"] == int(np.argmin(mistakes))
    assert len(set(mistakes)) > 1


def test_tuning_counts_mistakes_on_the_held_out_rows_only(data, monkeypatch):
    """The exponential mechanism's scores have sensitivity 1 only if they count the
    held-out rows alone: recompute them from the fitted models on exactly the rows the
    selection charge names (counting all rows would fail here)."""
    scored = []
    real = erm_noise.exponential_mechanism_probabilities

    def recording(mistakes, epsilon):
        scored.append(np.array(mistakes))
        return real(mistakes, epsilon)

    monkeypatch.setattr(erm_noise, "exponential_mechanism_probabilities", recording)
    m = _fit(DpErmOutput, data, 1.0, seed=1, tune_lambdas=[1e-3, 1e-2, 1e-1])
    selection = m.ctx.ledger.charges[-1]
    assert selection.mechanism.startswith("exponential mechanism")
    held_out = selection.touches.examples
    x = data[0].x.astype(np.float64)[held_out]
    x /= np.maximum(np.linalg.norm(x, axis=1), 1.0)[:, None]
    signs = np.where(data[0].y[held_out] == 1, 1.0, -1.0)
    expected = [int(np.sum(np.where(x @ fit.weights > 0, 1.0, -1.0) != signs))
                for fit in m._result.fits]
    np.testing.assert_array_equal(scored[0], expected)


def test_train_size_subsamples_deterministically(data):
    a = _fit(DpErmOutput, data, 1.0, seed=5, train_size=50)
    b = _fit(DpErmOutput, data, 1.0, seed=5, train_size=50)
    assert a.privacy_details()["n"] == 50
    assert a.privacy_details()["beta"] == pytest.approx(50 * 1e-3 * 1.0 / 2)
    [charge] = a.ctx.ledger.charges  # exactly the 50 rows used are charged
    assert len(np.unique(charge.touches.examples)) == 50
    np.testing.assert_array_equal(a.weights, b.weights)
    assert a.variant() == "logistic, Lambda=0.001, n=50"
    with pytest.raises(ValueError, match="train_size 201 exceeds"):
        _fit(DpErmOutput, data, 1.0, train_size=201)


def test_rows_just_above_norm_one_by_rounding_are_accepted(data):
    x = data[0].x.astype(np.float64)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    x *= 1 + 1e-7
    m = DpErmObjective(Budget(1.0)).fit(Split(x, data[0].y), 2)
    assert np.all(np.isfinite(m.weights))


@pytest.mark.parametrize("cls", BOTH)
def test_bad_data_raises_and_keeps_the_previous_fit(cls, data):
    m = _fit(cls, data, 1.0)
    before = m.predict_proba(data[1].x)
    x, y = data[0].x, data[0].y
    bad = [
        (Split(x * 1.5 / np.linalg.norm(x, axis=1).max(), y), 2, "norm <= 1"),
        (Split(x, np.where(y == 1, 2, 0)), 2, "labels in"),
        (Split(x, y), 3, "binary"),
        (Split(x[:, :, None], y), 2, "features"),
        (Split(np.where(np.arange(x.size).reshape(x.shape) == 0, np.nan, x), y), 2, "NaN"),
    ]
    for split, num_classes, message in bad:
        with pytest.raises(ValueError, match=message):
            m.fit(split, num_classes)
    np.testing.assert_array_equal(m.predict_proba(data[1].x), before)


@pytest.mark.parametrize("hparams, message", [
    ({"loss": "hinge"}, "loss must be"),
    ({"huber_h": 0}, "huber_h"),
    ({"regularization": 0.0}, "regularization"),
    ({"regularization": -1.0}, "regularization"),
    ({"kernel": "poly"}, "kernel"),
    ({"kernel": "rbf", "rff_dim": 7}, "rff_dim"),
    ({"kernel": "rbf", "rff_gamma": 0}, "rff_gamma"),
    ({"tune_lambdas": [1e-3, -1]}, "tune_lambdas"),
    ({"tune_lambdas": "0.1"}, "tune_lambdas"),
    ({"train_size": 0}, "train_size"),
    ({"gradient_tolerance": 0}, "gradient_tolerance"),
    ({"lambda": 0.1}, "unknown hyperparameter"),
])
def test_bad_hyperparameters_raise(hparams, message):
    with pytest.raises(ValueError, match=message):
        DpErmObjective(Budget(1.0), **hparams)


def test_predict_before_fit_raises():
    with pytest.raises(ValueError, match="call fit"):
        DpErmOutput(Budget(1.0)).predict_proba(np.zeros((1, 3)))
