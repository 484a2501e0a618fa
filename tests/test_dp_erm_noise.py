"""The DP-ERM noise: density proportional to exp(-beta ||b||), checked against its exact
radial and angular laws (with checks that a wrong law fails the same test)."""
import numpy as np
import pytest
from scipy import stats

from benchmarks.privacy.erm_noise import sample_norm_exponential_noise

DIM, BETA, DRAWS = 5, 2.5, 4000


def _draws(dim: int, beta: float, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.array([sample_norm_exponential_noise(dim, beta, rng) for _ in range(DRAWS)])


@pytest.fixture(scope="module")
def draws() -> np.ndarray:
    return _draws(DIM, BETA)


def test_norm_follows_gamma_shape_d_scale_one_over_beta(draws):
    norms = np.linalg.norm(draws, axis=1)
    assert stats.kstest(norms, stats.gamma(a=DIM, scale=1 / BETA).cdf).pvalue > 0.01
    # The same test rejects a neighbouring shape or rate: it can fail.
    for wrong in (stats.gamma(a=DIM - 1, scale=1 / BETA), stats.gamma(a=DIM + 1, scale=1 / BETA),
                  stats.gamma(a=DIM, scale=1.2 / BETA)):
        assert stats.kstest(norms, wrong.cdf).pvalue < 1e-4


def test_direction_is_uniform_on_the_sphere(draws):
    unit = draws / np.linalg.norm(draws, axis=1, keepdims=True)
    shape = (DIM - 1) / 2  # (u_1 + 1)/2 ~ Beta((d-1)/2, (d-1)/2) for u uniform on S^(d-1)
    for coordinate in range(DIM):
        values = (unit[:, coordinate] + 1) / 2
        assert stats.kstest(values, stats.beta(shape, shape).cdf).pvalue > 0.001
    # A direction normalised from a uniform cube is not uniform on the sphere; caught.
    rng = np.random.default_rng(3)
    cube = rng.uniform(-1, 1, size=(20 * DRAWS, DIM))
    cube_first = (cube[:, 0] / np.linalg.norm(cube, axis=1) + 1) / 2
    assert stats.kstest(cube_first, stats.beta(shape, shape).cdf).pvalue < 1e-4


def test_norm_and_direction_are_independent(draws):
    norms = np.linalg.norm(draws, axis=1)
    first = draws[:, 0] / norms
    assert abs(stats.spearmanr(norms, np.abs(first)).statistic) < 0.06


def test_one_dimension_is_the_laplace_law():
    # In d = 1 the density exp(-beta |b|) is Laplace with scale 1/beta.
    b = _draws(1, BETA)[:, 0]
    assert stats.kstest(b, stats.laplace(scale=1 / BETA).cdf).pvalue > 0.01
    assert stats.kstest(b, stats.laplace(scale=1.2 / BETA).cdf).pvalue < 1e-4


def test_same_generator_state_same_draw():
    a = sample_norm_exponential_noise(4, 1.0, np.random.default_rng(11))
    b = sample_norm_exponential_noise(4, 1.0, np.random.default_rng(11))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dim, beta", [(0, 1.0), (2.5, 1.0), (True, 1.0), (3, 0.0),
                                       (3, -1.0), (3, float("inf")), (3, float("nan"))])
def test_bad_arguments_raise(dim, beta):
    with pytest.raises(ValueError):
        sample_norm_exponential_noise(dim, beta, np.random.default_rng(0))
