"""DP-ERM's guarantees, checked numerically on the quantities the proofs bound.

- Losses: |l'| <= 1 and 0 <= l'' <= c, the theorems' preconditions.
- Output perturbation: the L2 sensitivity of the exact minimiser is <= 2/(n Lambda), which
  is what beta = n Lambda epsilon / 2 is calibrated to; the bound is attained.
- Objective perturbation: for a released f, the noise that produces f is
  b(f; D) = -n grad J(f; D) - n Delta f (the optimality condition), a bijection with
  Jacobian -A(f; D), A = sum_i l''(z_i) x_i x_i^T + n (Lambda + Delta) I. So the density
  of f is exactly p(f | D) proportional to exp(-beta ||b(f; D)||) det A(f; D), and the
  privacy loss log p(f | D) - log p(f | D') is computed exactly for any f and neighbour.
- Private tuning's exponential mechanism: exact probability ratios over all neighbours.
"""
import itertools
import math

import numpy as np
import pytest

from benchmarks.privacy.erm_noise import (exponential_mechanism_probabilities,
                                          objective_calibration, output_noise_rate)
from benchmarks.errors import PrivateFailure
from methods.erm_solver import MarginLoss, minimise_erm

LOSSES = [MarginLoss("logistic"), MarginLoss("huber", 0.5), MarginLoss("huber", 0.1)]


def _derivatives(loss: MarginLoss, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """l'(z) and l''(z) of the loss the solver minimises, by automatic differentiation."""
    import tensorflow as tf

    z = tf.constant(z, tf.float64)
    with tf.GradientTape() as outer:
        outer.watch(z)
        with tf.GradientTape() as inner:
            inner.watch(z)
            value = tf.reduce_sum(loss(z))
        first = inner.gradient(value, z)
    return first.numpy(), outer.gradient(first, z).numpy()


def _unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    """Rows of norm at most 1, some exactly 1 (the extreme case)."""
    x = rng.normal(size=(n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x * np.where(rng.random(n) < 0.5, 1.0, rng.random(n))[:, None]


# ------------------------------------------------------------------------------ losses

@pytest.mark.parametrize("loss", LOSSES, ids=lambda l: f"{l.name}-{l.huber_h}")
def test_loss_meets_the_theorems_preconditions(loss):
    z = np.linspace(-30, 30, 60001)
    first, second = _derivatives(loss, z)
    assert np.all(np.abs(first) <= 1 + 1e-12)
    assert np.all(second >= -1e-12)
    assert np.all(second <= loss.curvature_bound + 1e-12)
    assert second.max() >= loss.curvature_bound * (1 - 1e-6)  # c is the tight bound


@pytest.mark.parametrize("h", [0.5, 0.1])
def test_huber_is_the_papers_piecewise_loss(h):
    import tensorflow as tf

    z = np.linspace(-3, 4, 7001)
    expected = np.where(z > 1 + h, 0.0,
                        np.where(z < 1 - h, 1 - z, (1 + h - z) ** 2 / (4 * h)))
    got = MarginLoss("huber", h)(tf.constant(z, tf.float64)).numpy()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    # Continuous where the pieces meet.
    edges = np.array([1 - h, 1 + h])
    for side in (-1e-9, 1e-9):
        inner = MarginLoss("huber", h)(tf.constant(edges + side, tf.float64)).numpy()
        np.testing.assert_allclose(inner, [h, 0.0], atol=1e-8)


# --------------------------------------------------------------------- output perturbation

def _minimiser(x, signs, loss, lam):
    return minimise_erm(x, signs, loss, lam, None, 1e-12).weights


def test_output_calibration_is_epsilon_over_sensitivity():
    for eps, n, lam in [(0.1, 1000, 1e-3), (2.0, 17, 0.5)]:
        assert output_noise_rate(eps, n, lam) * (2 / (n * lam)) == pytest.approx(eps, rel=1e-12)


@pytest.mark.parametrize("loss", LOSSES[:2], ids=["logistic", "huber"])
def test_minimiser_moves_at_most_2_over_n_lambda_under_substitution(loss):
    rng = np.random.default_rng(5)
    n, dim, lam = 12, 3, 0.05
    x, signs = _unit_rows(rng, n, dim), rng.choice([-1.0, 1.0], n)
    base = _minimiser(x, signs, loss, lam)
    ratios = []
    for _ in range(8):
        i = rng.integers(n)
        x2, s2 = x.copy(), signs.copy()
        x2[i], s2[i] = _unit_rows(rng, 1, dim)[0], rng.choice([-1.0, 1.0])
        moved = np.linalg.norm(_minimiser(x2, s2, loss, lam) - base)
        ratios.append(moved / (2 / (n * lam)))
    assert max(ratios) <= 1 + 1e-6
    assert max(ratios) > 0.05  # the substitutions really move the minimiser


def test_sensitivity_bound_is_attained():
    # Huber with margins all in its linear piece: f* = (1/(n Lambda)) sum y_i x_i, so
    # flipping one label of a unit row moves f* by exactly 2/(n Lambda).
    rng = np.random.default_rng(8)
    n, dim, lam = 10, 4, 4.0  # ||f*|| <= 1/Lambda keeps every margin below 1 - h
    loss = MarginLoss("huber", 0.5)
    x, signs = _unit_rows(rng, n, dim), rng.choice([-1.0, 1.0], n)
    x[0] /= np.linalg.norm(x[0])
    flipped = signs.copy()
    flipped[0] = -flipped[0]
    moved = np.linalg.norm(_minimiser(x, flipped, loss, lam) - _minimiser(x, signs, loss, lam))
    assert moved == pytest.approx(2 / (n * lam), rel=1e-9)


# ------------------------------------------------------------------ objective perturbation

def test_calibration_matches_the_papers_formulas_in_both_branches():
    c = 0.25
    # Large n Lambda: epsilon' > 0, no extra regularisation.
    eps, n, lam = 1.0, 10_000, 0.01
    cal = objective_calibration(eps, n, lam, c)
    expected = eps - math.log(1 + 2 * c / (n * lam) + c ** 2 / (n ** 2 * lam ** 2))
    assert cal.epsilon_prime == pytest.approx(expected, rel=1e-12)
    assert cal.extra_regularization == 0.0 and cal.beta == pytest.approx(expected / 2)
    # Small n Lambda: epsilon' <= 0, so Delta > 0 and epsilon' = epsilon / 2.
    eps, n, lam = 0.1, 100, 1e-3
    assert eps - math.log(1 + 2 * c / (n * lam) + c ** 2 / (n ** 2 * lam ** 2)) <= 0
    cal = objective_calibration(eps, n, lam, c)
    assert cal.extra_regularization == pytest.approx(c / (n * (math.exp(eps / 4) - 1)) - lam,
                                                     rel=1e-12)
    assert cal.extra_regularization > 0
    assert cal.epsilon_prime == eps / 2 and cal.beta == eps / 4


def _log_density(f, x, signs, loss, strong_convexity, beta):
    """log p(f | D) up to a constant shared by all datasets of size n."""
    n, dim = x.shape
    first, second = _derivatives(loss, signs * (x @ f))
    b = -(first * signs) @ x - n * strong_convexity * f
    a = (x.T * second) @ x + n * strong_convexity * np.eye(dim)
    sign, logdet = np.linalg.slogdet(a)
    assert sign > 0
    return -beta * np.linalg.norm(b) + logdet


def _privacy_loss(f, x, signs, x2, signs2, loss, eps, lam):
    cal = objective_calibration(eps, len(x), lam, loss.curvature_bound)
    total = lam + cal.extra_regularization
    return (_log_density(f, x, signs, loss, total, cal.beta)
            - _log_density(f, x2, signs2, loss, total, cal.beta))


# (epsilon, n, Lambda): the first keeps Delta = 0, the second needs Delta > 0 for c <= 5.
SETTINGS = [(1.0, 20, 2.0), (0.5, 10, 0.01)]


@pytest.mark.parametrize("loss", LOSSES, ids=lambda l: f"{l.name}-{l.huber_h}")
@pytest.mark.parametrize("eps, n, lam", SETTINGS)
def test_objective_privacy_loss_is_at_most_epsilon_on_random_neighbours(loss, eps, n, lam):
    branch = objective_calibration(eps, n, lam, loss.curvature_bound).extra_regularization
    assert (branch == 0) == (lam == 2.0)
    rng = np.random.default_rng(13)
    dim, worst = 3, 0.0
    for _ in range(60):
        x, signs = _unit_rows(rng, n, dim), rng.choice([-1.0, 1.0], n)
        x2, signs2 = x.copy(), signs.copy()
        x2[-1], signs2[-1] = _unit_rows(rng, 1, dim)[0], rng.choice([-1.0, 1.0])
        f = rng.normal(size=dim) * rng.choice([0.1, 1.0, 5.0, 50.0])
        worst = max(worst, abs(_privacy_loss(f, x, signs, x2, signs2, loss, eps, lam)))
    assert worst <= eps + 1e-9
    assert worst > 0.2 * eps  # the random neighbours do exercise the bound


def _aligned_dataset(n, dim):
    """Every record has y x = e_1, so at f = 0 the Huber margins sit in the linear piece."""
    x = np.zeros((n, dim))
    x[:, 0] = 1.0
    return x, np.ones(n)


@pytest.mark.parametrize("eps, n, lam", SETTINGS)
def test_noise_term_of_the_privacy_loss_reaches_epsilon_prime_exactly(eps, n, lam):
    # Flipping one label moves b from n e_1 to (n - 2) e_1 with equal determinants: the
    # loss is exactly 2 beta = epsilon'. A noise rate of epsilon' instead of epsilon'/2
    # would double it.
    loss = MarginLoss("huber", 0.5)
    x, signs = _aligned_dataset(n, 3)
    flipped = signs.copy()
    flipped[-1] = -1.0
    cal = objective_calibration(eps, n, lam, loss.curvature_bound)
    got = _privacy_loss(np.zeros(3), x, flipped, x, signs, loss, eps, lam)
    assert got == pytest.approx(cal.epsilon_prime, rel=1e-9)


def test_delta_is_needed_when_epsilon_prime_is_not_positive():
    # Huber h = 0.5 at f = e_2: a record along e_2 has margin 1 (quadratic piece, l'' = c),
    # records along e_1 have margin 0 (linear piece, l'' = 0). Replacing the former by the
    # latter changes det A by the factor 1 + c/(n (Lambda + Delta)).
    eps, n, lam = 0.5, 10, 0.01
    loss = MarginLoss("huber", 0.5)
    c = loss.curvature_bound
    dim = 3
    x, signs = _aligned_dataset(n, dim)
    f = np.zeros(dim)
    f[1] = 1.0  # margin 1 for a record along e_2, 0 for those along e_1
    x_quad = x.copy()
    x_quad[-1] = [0.0, 1.0, 0.0]
    cal = objective_calibration(eps, n, lam, c)
    got = _privacy_loss(f, x_quad, signs, x, signs, loss, eps, lam)
    assert got <= eps
    # Without Delta (Lambda alone, same beta) the determinant term alone exceeds epsilon.
    total = lam
    no_delta = (_log_density(f, x_quad, signs, loss, total, cal.beta)
                - _log_density(f, x, signs, loss, total, cal.beta))
    assert no_delta > eps
    assert math.log1p(c / (n * lam)) > eps  # the reason: c/(n Lambda) is large


# ------------------------------------------------------------------ exponential mechanism

def test_exponential_mechanism_ratio_is_at_most_e_epsilon_and_attained():
    eps = 1.0
    worst = 0.0
    base_counts = [0, 1, 5, 30]
    for z in itertools.product(base_counts, repeat=3):
        p = exponential_mechanism_probabilities(np.array(z), eps)
        for shift in itertools.product([-1, 0, 1], repeat=3):
            z2 = np.array(z) + np.array(shift)
            if np.any(z2 < 0):
                continue
            q = exponential_mechanism_probabilities(z2, eps)
            worst = max(worst, float(np.max(np.abs(np.log(p) - np.log(q)))))
    assert worst <= eps + 1e-12
    assert worst > eps - 1e-3  # the e^epsilon bound is attained: a weaker scale would fail


def test_exponential_mechanism_is_stable_for_huge_counts():
    p = exponential_mechanism_probabilities(np.array([10_000_000, 10_000_001]), 1.0)
    np.testing.assert_allclose(p, [1 / (1 + math.exp(-0.5)), 1 / (1 + math.exp(0.5))])
    np.testing.assert_array_equal(
        exponential_mechanism_probabilities(np.array([4, 2, 2]), math.inf), [0, 1, 0])


def test_solver_refuses_a_solution_short_of_the_tolerance():
    rng = np.random.default_rng(2)
    x, signs = _unit_rows(rng, 30, 3), rng.choice([-1.0, 1.0], 30)
    solution = minimise_erm(x, signs, MarginLoss("logistic"), 0.1, None, 1e-9)
    assert solution.gradient_norm <= 1e-9
    with pytest.raises(PrivateFailure, match="exact minimiser") as refused:
        minimise_erm(x, signs, MarginLoss("logistic"), 0.1, None, 1e-30)
    assert refused.value.public.startswith("the solver did not converge")
    assert "gradient norm" not in refused.value.public
