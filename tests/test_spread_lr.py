"""Spread-divergence logistic regression and its two baselines."""
import json
import math

import numpy as np
import pytest
from sklearn.datasets import load_digits

from benchmarks.contract import Budget, Split, _REGISTRY
from benchmarks.privacy import NON_PRIVATE, Accountant, Field, Kind, Neighbours, Protects
from benchmarks.privacy import local_randomizers as corruption
from methods import spread_lr
from methods.spread_lr import (LogisticRegressionClean, LogisticRegressionNoisy,
                               SpreadLogisticRegression)

FAST = {"samples": 4, "em_iterations": 10, "mstep_steps": 10}


@pytest.fixture(scope="module")
def sevens_and_nines():
    """sklearn's 8x8 digits 7 (label 0) and 9 (label 1), on the 256-state pixel grid."""
    digits = load_digits()
    keep = np.isin(digits.target, (7, 9))
    x = (np.rint(digits.images[keep] / 16 * 255) / 255)[..., None].astype(np.float32)
    y = (digits.target[keep] == 9).astype(np.int64)
    return Split(x[:150], y[:150]), Split(x[150:], y[150:])


def accuracy(method, test: Split) -> float:
    return 100 * float(np.mean(method.predict_proba(test.x).argmax(axis=1) == test.y))


def test_methods_register_with_their_notions():
    assert _REGISTRY["lr-clean"] is LogisticRegressionClean
    assert LogisticRegressionClean.notion == NON_PRIVATE
    for cls in (LogisticRegressionNoisy, SpreadLogisticRegression):
        assert _REGISTRY[cls.name] is cls
        notion = cls.notion_for(Budget(1.0), cls.defaults)
        assert notion.protects is Protects.LOCAL_LABELS_AND_PIXELS
        assert notion.accountant is Accountant.LOCAL
        assert (notion.kind, notion.neighbours) == (Kind.PURE, Neighbours.SUBSTITUTION)
        gaussian = cls.notion_for(Budget(1.0), {**cls.defaults, "input_noise": "gaussian"})
        assert gaussian.protects is Protects.LOCAL_LABELS_GAUSSIAN_PIXELS
        assert cls.notion_for(Budget(math.inf), cls.defaults) == NON_PRIVATE


def test_the_true_prior_oracle_says_the_pixels_are_not_protected(sevens_and_nines):
    hparams = {**SpreadLogisticRegression.defaults, "prior": "true"}
    notion = SpreadLogisticRegression.notion_for(Budget(1.0), hparams)
    assert notion.protects is Protects.LOCAL_LABELS_CLEAN_PIXELS
    assert "NOT protected" in notion.protects.value
    m = SpreadLogisticRegression(Budget(1.0), seed=0, prior="true",
                                 **SpreadLogisticRegression.tiny_hparams)
    m.fit(sevens_and_nines[0], 2)
    oracle = [c for c in m.ctx.ledger.charges if c.mechanism == "true-prior oracle"]
    assert len(oracle) == 1 and oracle[0].touches.field is Field.INPUTS


def test_pixel_posterior_sampler_matches_the_exact_posterior():
    # Two pixels with different priors, seen as different states: the sampled states must
    # follow T(k|j) pi_d(j) / Z built from the exact transition matrix.
    rng = np.random.default_rng(3)
    p_f, n = 0.3, 40_000
    prior = rng.dirichlet(np.full(256, 0.3), size=2)
    prior[1, 200:] = 0  # states the prior rules out must never be drawn
    prior /= prior.sum(axis=1, keepdims=True)
    seen = np.array([[17, 250]], dtype=np.uint8)
    draws = spread_lr.sample_pixel_posterior(np.repeat(seen, n, axis=0), prior, p_f, 1, rng)
    t = corruption.pixel_rr_matrix(p_f)
    for d in range(2):
        exact = t[seen[0, d]] * prior[d]
        exact /= exact.sum()
        freq = np.bincount(draws[:, 0, d], minlength=256) / n
        assert 0.5 * np.abs(freq - exact).sum() < 0.03  # total variation
        assert freq[exact == 0].sum() == 0


def test_gaussian_posterior_sampler_matches_a_numerical_posterior():
    rng = np.random.default_rng(4)
    noisy, mean, var, noise_var = 0.8, 0.1, 0.5, 0.2
    grid = np.linspace(-5, 5, 20001)
    density = np.exp(-(noisy - grid) ** 2 / (2 * noise_var) - (grid - mean) ** 2 / (2 * var))
    density /= density.sum()
    exact_mean = (grid * density).sum()
    exact_var = ((grid - exact_mean) ** 2 * density).sum()
    draws = spread_lr.sample_gaussian_posterior(np.array([[noisy]]), np.array([mean]),
                                                np.array([var]), noise_var, 100_000, rng)
    assert draws.mean() == pytest.approx(exact_mean, abs=0.01)
    assert draws.var() == pytest.approx(exact_var, rel=0.02)


def test_importance_weights_are_normalised_model_likelihoods():
    logits = np.array([[2.0, -1.0, 0.5], [-30.0, 30.0, 0.0]])
    labels = np.array([[1, 0, 1], [1, 1, 0]])
    likelihood = 1 / (1 + np.exp(-(2 * labels - 1) * logits))
    expected = likelihood / likelihood.sum(axis=1, keepdims=True)
    assert np.allclose(spread_lr.importance_weights(logits, labels), expected)


def test_pixel_histogram_is_eq_65():
    states = np.array([[0, 5], [0, 7], [3, 5]], dtype=np.uint8)
    weights = np.array([0.5, 1.0, 2.0])
    hist = spread_lr.pixel_histogram(states, weights)
    assert hist.shape == (2, 256)
    assert hist[0, 0] == pytest.approx(1.5 / 3.5) and hist[0, 3] == pytest.approx(2 / 3.5)
    assert hist[1, 5] == pytest.approx(2.5 / 3.5) and hist[1, 7] == pytest.approx(1 / 3.5)
    assert np.allclose(hist.sum(axis=1), 1)


def test_noisy_and_spread_methods_see_the_same_release(sevens_and_nines):
    train, _ = sevens_and_nines
    for noise in ("rr", "gaussian"):
        a, b, c = (cls(Budget(1.0), seed=seed, input_noise=noise).corrupted_release(train)
                   for cls, seed in ((LogisticRegressionNoisy, 5), (SpreadLogisticRegression, 5),
                                     (SpreadLogisticRegression, 6)))
        assert all(np.array_equal(u, v) for u, v in zip(a, b))
        assert not np.array_equal(a[0], c[0])


def test_without_noise_spread_lr_reduces_to_plain_lr(sevens_and_nines):
    # p_f = 0: every sample is the data itself with weight 1/S, so EM is plain gradient
    # ascent with em_iterations * mstep_steps steps.
    train, test = sevens_and_nines
    spread = SpreadLogisticRegression(Budget(math.inf), seed=0, samples=3, em_iterations=4,
                                      mstep_steps=5).fit(train, 2)
    clean = LogisticRegressionClean(Budget(math.inf), seed=0, steps=20).fit(train, 2)
    assert np.allclose(spread.predict_proba(test.x), clean.predict_proba(test.x), atol=1e-5)


def test_spread_lr_beats_lr_on_noisy_data_at_high_noise(sevens_and_nines):
    train, test = sevens_and_nines
    budget = Budget(math.log(0.7 / 0.3))  # p_f = 0.3 for labels and pixels
    spread = [accuracy(SpreadLogisticRegression(budget, seed=s, **FAST).fit(train, 2), test)
              for s in range(5)]
    noisy = [accuracy(LogisticRegressionNoisy(budget, seed=s).fit(train, 2), test)
             for s in range(5)]
    assert np.mean(spread) > np.mean(noisy) + 3


def test_learned_prior_moves_towards_the_clean_marginals(sevens_and_nines):
    train, _ = sevens_and_nines
    truth = spread_lr.pixel_histogram(corruption.to_states(train.x.reshape(len(train), -1)))
    learned = SpreadLogisticRegression(Budget(math.log(0.8 / 0.2)), seed=0, prior="learned",
                                       **FAST).fit(train, 2).input_prior
    flat = np.full_like(truth, 1 / 256)

    def mean_total_variation(p):
        return 0.5 * np.abs(p - truth).sum(axis=1).mean()

    assert mean_total_variation(learned) < 0.5 * mean_total_variation(flat)


@pytest.mark.parametrize("epsilon", [0.5, 2.0, math.inf])
def test_spent_reports_label_epsilon_and_pixel_epsilon(sevens_and_nines, epsilon):
    train, _ = sevens_and_nines
    m = SpreadLogisticRegression(Budget(epsilon), seed=0, **SpreadLogisticRegression.tiny_hparams)
    spent = m.fit(train, 2).spent()
    p_f = 1 / (1 + math.exp(epsilon))
    # The headline epsilon is the label flip's: the pixels' charge is on the inputs.
    assert m.budget.covers(spent) and spent.epsilon == pytest.approx(epsilon)
    assert m.privacy_details()["flip_probability"] == pytest.approx(p_f)
    label, pixels = m.ctx.ledger.charges
    assert (label.touches.field, pixels.touches.field) == (Field.LABELS, Field.INPUTS)
    if math.isfinite(epsilon):
        pixel = math.log(255 * (1 - p_f) / p_f)
        assert pixels.details["pixel_epsilon"] == pytest.approx(pixel)
        assert pixels.cost.epsilon == pytest.approx(64 * pixel)
    json.dumps(m.ctx.ledger.entries(0.0), allow_nan=False)  # the record store refuses NaN


def test_gaussian_noise_has_no_pixel_epsilon(sevens_and_nines):
    train, _ = sevens_and_nines
    m = LogisticRegressionNoisy(Budget(1.0), seed=0, input_noise="gaussian", steps=5)
    spent = m.fit(train, 2).spent()
    assert spent.epsilon == pytest.approx(1.0)
    [pixels] = [c for c in m.ctx.ledger.charges if c.touches.field is Field.INPUTS]
    assert pixels.cost.as_dict()["type"] == "unprotected"
    assert pixels.details["input_variance"] == 0.1


def test_variants_name_the_oracle_and_the_noise():
    oracle = SpreadLogisticRegression(Budget(1.0), prior="true").variant()
    assert "non-private oracle" in oracle
    assert "oracle" not in SpreadLogisticRegression(Budget(1.0), prior="learned").variant()
    assert "var=0.5" in LogisticRegressionNoisy(Budget(1.0), input_noise="gaussian",
                                                input_variance=0.5).variant()


def test_clean_reference_only_runs_without_a_budget():
    assert LogisticRegressionClean.skip_reason("image", Budget(1.0)) is not None
    assert LogisticRegressionClean.skip_reason("image", Budget(math.inf)) is None
    assert SpreadLogisticRegression.skip_reason("tabular", Budget(1.0)) is not None


@pytest.mark.parametrize("make, message", [
    (lambda: SpreadLogisticRegression(Budget(1.0), prior="empirical"), "prior must be one of"),
    (lambda: SpreadLogisticRegression(Budget(1.0), input_noise="blur"), "input_noise must be"),
    (lambda: SpreadLogisticRegression(Budget(1.0), samples=0), "samples must be > 0"),
    (lambda: LogisticRegressionNoisy(Budget(1.0), input_variance=-1.0), "input_variance"),
    (lambda: LogisticRegressionClean(Budget(math.inf), samples=3), "unknown hyperparameter"),
])
def test_bad_hyperparameters_raise_value_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_bad_data_raises_value_error(sevens_and_nines):
    train, test = sevens_and_nines
    three = Split(train.x, np.arange(len(train)) % 3)
    with pytest.raises(ValueError, match="2 classes"):
        LogisticRegressionNoisy(Budget(1.0)).fit(three, 3)
    with pytest.raises(ValueError, match="call fit"):
        LogisticRegressionNoisy(Budget(1.0)).predict_proba(test.x)
    fitted = LogisticRegressionNoisy(Budget(1.0), steps=2).fit(train, 2)
    with pytest.raises(ValueError, match="fitted on 64"):
        fitted.predict_proba(np.zeros((2, 5, 5, 1), dtype=np.float32))


@pytest.mark.parametrize("brightness", [0.0, 0.5])
def test_weighted_fit_is_stable_on_bright_noisy_inputs(brightness):
    # Uniform-noise pixels on a bright background: uncentred, the step size 0.2 oscillates
    # along the mean image and the model collapses to one class.
    rng = np.random.default_rng(0)
    x = (brightness + (1 - brightness) * rng.random((400, 784))).astype(np.float32)
    direction = rng.standard_normal(784)
    y = ((x - x.mean(axis=0)) @ direction > 0).astype(np.int64)
    model = spread_lr.WeightedLogistic(x.mean(axis=0), learning_rate=0.2)
    model.fit(x, y, np.ones(len(y)), steps=50)
    assert np.mean((model.logits(x) > 0) == y) > 0.95


def test_learned_gaussian_prior_moves_towards_the_clean_means(sevens_and_nines):
    train, _ = sevens_and_nines
    clean_mean, _ = spread_lr.gaussian_moments(train.x.reshape(len(train), -1))
    learned_mean, learned_variance = SpreadLogisticRegression(
        Budget(math.log(4)), seed=0, prior="learned", input_noise="gaussian",
        **FAST).fit(train, 2).input_prior
    flat_error = np.abs(clean_mean - 0.0).mean()  # the broad prior's mean is 0
    assert np.abs(learned_mean - clean_mean).mean() < 0.5 * flat_error
    assert learned_variance.max() < 10  # far tighter than the broad N(0, 10) start
