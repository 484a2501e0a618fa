"""Exact tests of ALIBI's release, Laplace noise on one-hot labels: the epsilon-label-DP
ratio over every pair of labels and every output, the law of its draws, its charge, and
the posterior the method trains on."""
import itertools

import numpy as np
import pytest
import scipy.stats

from benchmarks.privacy import Field, Ledger, PureEpsilon
from benchmarks.privacy import randomizers
from benchmarks.privacy.randomizers import laplace_one_hot, one_hot_log_likelihood

EPSILONS = [0.1, 0.5, 1.0, 2.0, 4.0]
# Every coordinate's term of the log density ratio, log f(r - e) - log f(r - e'), is
# piecewise linear in r with its only breakpoints at 0 and 1 and constant beyond them, so
# the ratio's largest value over all outputs is reached on a grid holding 0, 1 and a
# point beyond each: checking the grid checks every output.
GRID = np.array([-2.0, -1.0, 0.0, 0.25, 0.5, 1.0, 1.5, 3.0])


def log_density(outputs: np.ndarray, label: int, epsilon: float) -> np.ndarray:
    """log P(output | label) of the release, straight from its noise's density."""
    one_hot = np.eye(outputs.shape[1])[label]
    return randomizers.one_hot_noise(epsilon).logpdf(outputs - one_hot).sum(axis=1)


def max_log_ratio(num_classes: int, epsilon: float) -> float:
    outputs = np.array(list(itertools.product(GRID, repeat=num_classes)))
    densities = [log_density(outputs, y, epsilon) for y in range(num_classes)]
    return max(float(np.max(densities[y] - densities[z]))
               for y in range(num_classes) for z in range(num_classes) if y != z)


@pytest.mark.parametrize("num_classes", [2, 3, 4])
@pytest.mark.parametrize("epsilon", EPSILONS)
def test_every_pair_of_labels_is_within_epsilon_and_the_bound_is_reached(num_classes,
                                                                       epsilon):
    bound = max_log_ratio(num_classes, epsilon)
    assert bound <= epsilon + 1e-9
    assert bound == pytest.approx(epsilon, rel=1e-9)


def half_the_noise(monkeypatch):
    monkeypatch.setattr(randomizers, "one_hot_noise",
                        lambda epsilon: scipy.stats.laplace(scale=1 / epsilon))


def test_the_ratio_check_fails_at_half_the_noise(monkeypatch):
    half_the_noise(monkeypatch)
    assert max_log_ratio(2, 1.0) == pytest.approx(2.0)


def noise_drawn(epsilon: float, rows: int = 4000, num_classes: int = 5) -> np.ndarray:
    labels = np.arange(rows) % num_classes
    released = laplace_one_hot(Ledger(), labels, num_classes, epsilon,
                               np.random.default_rng(7), examples=np.arange(rows))
    return (released - np.eye(num_classes)[labels]).ravel()


def follows_laplace(noise: np.ndarray, epsilon: float) -> float:
    """The KS p-value of the draws against Laplace of scale 2 / epsilon, written here
    apart from the mechanism's own scale."""
    return scipy.stats.kstest(noise, scipy.stats.laplace(scale=2 / epsilon).cdf).pvalue


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_the_draws_follow_laplace_of_scale_2_over_epsilon(epsilon):
    assert follows_laplace(noise_drawn(epsilon), epsilon) > 1e-3


def test_half_the_noise_fails_the_law_check(monkeypatch):
    half_the_noise(monkeypatch)
    assert follows_laplace(noise_drawn(1.0), 1.0) < 1e-6


def test_the_release_charges_its_epsilon_and_is_observed():
    ledger, rows = Ledger(), np.array([4, 7, 9])
    ledger.watch(np.array([7]))
    released = laplace_one_hot(ledger, np.array([0, 2, 1]), 3, 0.7, np.random.default_rng(0),
                               examples=rows, group="g")
    [charge] = ledger.charges
    assert (charge.mechanism, charge.cost, charge.touches.field, charge.touches.group) == (
        "Laplace one-hot labels", PureEpsilon(0.7), Field.LABELS, "g")
    np.testing.assert_array_equal(charge.touches.examples, rows)
    assert released.shape == (3, 3)
    mechanism, group, vector = ledger.observed[7]
    assert (mechanism, group) == ("Laplace one-hot labels", "g")
    np.testing.assert_array_equal(vector, released[1])
    with pytest.raises(ValueError, match="needs the run's privacy ledger"):
        laplace_one_hot(None, [0], 3, 1.0, np.random.default_rng(0), examples=[0])
    with pytest.raises(ValueError, match="index of each of the 3 rows"):
        laplace_one_hot(Ledger(), [0, 1, 2], 3, 1.0, np.random.default_rng(0),
                        examples=[0, 1])


@pytest.mark.parametrize("kwargs, message", [
    ({"epsilon": 0.0}, "epsilon"), ({"epsilon": float("nan")}, "epsilon"),
    ({"labels": [0, 3]}, "labels must be in"), ({"num_classes": 0}, "num_classes"),
])
def test_bad_arguments(kwargs, message):
    args = {"labels": [0, 1], "num_classes": 3, "epsilon": 1.0} | kwargs
    with pytest.raises(ValueError, match=message):
        laplace_one_hot(Ledger(), rng=np.random.default_rng(0), examples=[0, 1], **args)


def test_infinite_epsilon_releases_the_one_hot_labels():
    released = laplace_one_hot(Ledger(), [2, 0], 3, np.inf, np.random.default_rng(0),
                               examples=[0, 1])
    np.testing.assert_array_equal(released, np.eye(3)[[2, 0]])
    np.testing.assert_array_equal(one_hot_log_likelihood(released, np.inf),
                                  [[-np.inf, -np.inf, 0], [0, -np.inf, -np.inf]])


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_the_posterior_is_bayes_rule_on_the_full_density(epsilon):
    """softmax(log prior + one_hot_log_likelihood) is the posterior of the label given the
    release, by Bayes' rule on the release's whole density."""
    rng = np.random.default_rng(3)
    released = laplace_one_hot(Ledger(), rng.integers(0, 4, 50), 4, epsilon, rng,
                               examples=np.arange(50))
    prior = rng.dirichlet(np.ones(4), size=50)
    joint = np.stack([log_density(released, y, epsilon) for y in range(4)], axis=1) \
        + np.log(prior)
    expected = scipy.special.softmax(joint, axis=1)
    got = scipy.special.softmax(np.log(prior) + one_hot_log_likelihood(released, epsilon),
                                axis=1)
    np.testing.assert_allclose(got, expected, rtol=1e-9)
