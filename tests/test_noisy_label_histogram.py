"""Exact tests of the noisy label histogram (the README's example method releases its
counts): the epsilon-label-DP ratio over every pair of neighbouring labellings of a small
training set and every output, the law its release follows, and its charge."""
import itertools
import math

import numpy as np
import pytest
import scipy.stats

from benchmarks.privacy import Field, Ledger, PureEpsilon
from benchmarks.privacy import randomizers
from benchmarks.privacy.randomizers import noisy_label_histogram

EPSILONS = [0.1, 0.5, 1.0, 2.0, 4.0]
ROWS, CLASSES = 3, 3
# Every count of a histogram of ROWS labels is at most ROWS, and the noise's log pmf is
# linear beyond it, so an output count above ROWS + 1 has the likelihood ratio of
# ROWS + 1 between any two histograms: outputs 0 to ROWS + 2 on each class hold every
# ratio of the release.
OUTPUTS = np.array(list(itertools.product(range(ROWS + 3), repeat=CLASSES)))


def log_probability(histogram: np.ndarray, epsilon: float) -> np.ndarray:
    """log P(release = output | histogram) of every output, straight from the noise's law:
    each count is its histogram count plus the noise, clipped at 0."""
    noise = randomizers.cluster_histogram_noise(epsilon)
    return np.where(OUTPUTS == 0, noise.logcdf(-histogram),
                    noise.logpmf(OUTPUTS - histogram)).sum(axis=1)


def max_log_ratio(epsilon: float) -> float:
    """The largest log ratio over every labelling of ROWS rows, every neighbour (one
    label changed) and every output."""
    worst = -math.inf
    for labels in itertools.product(range(CLASSES), repeat=ROWS):
        first = log_probability(np.bincount(labels, minlength=CLASSES), epsilon)
        for row, other in itertools.product(range(ROWS), range(CLASSES)):
            neighbour = np.array(labels)
            neighbour[row] = other
            second = log_probability(np.bincount(neighbour, minlength=CLASSES), epsilon)
            worst = max(worst, float(np.max(first - second)))
    return worst


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_every_neighbouring_labelling_is_within_epsilon_and_the_bound_is_reached(epsilon):
    bound = max_log_ratio(epsilon)
    assert bound <= epsilon + 1e-9
    assert bound == pytest.approx(epsilon, rel=1e-9)


def test_the_ratio_check_fails_at_half_the_noise(monkeypatch):
    monkeypatch.setattr(randomizers, "cluster_histogram_noise",
                        lambda epsilon: scipy.stats.dlaplace(a=epsilon))
    assert max_log_ratio(1.0) == pytest.approx(2.0)


@pytest.mark.parametrize("seed", range(5))
def test_the_release_is_the_histogram_plus_that_noise_clipped_at_zero(seed):
    labels = np.array([0, 2, 2, 1, 2])
    released = noisy_label_histogram(Ledger(), labels, 3, 0.5, np.random.default_rng(seed),
                                     examples=np.arange(5))
    noise = randomizers.cluster_histogram_noise(0.5).rvs(
        size=(1, 3), random_state=np.random.default_rng(seed))[0]
    np.testing.assert_array_equal(released, np.clip(np.array([1, 1, 3]) + noise, 0, None))


def test_it_charges_its_epsilon_to_the_labels_of_its_rows_and_is_exact_at_infinity():
    ledger, rows = Ledger(), np.array([4, 7, 9])
    noisy_label_histogram(ledger, [0, 1, 1], 2, 0.7, np.random.default_rng(0),
                          examples=rows, group="g")
    [charge] = ledger.charges
    assert (charge.mechanism, charge.cost, charge.touches.field, charge.touches.group) == (
        "noisy label histogram", PureEpsilon(0.7), Field.LABELS, "g")
    np.testing.assert_array_equal(charge.touches.examples, rows)
    exact = noisy_label_histogram(Ledger(), [0, 1, 1], 3, math.inf, np.random.default_rng(0),
                                  examples=rows)
    np.testing.assert_array_equal(exact, [1, 2, 0])


@pytest.mark.parametrize("kwargs, message", [
    ({"epsilon": 0.0}, "epsilon"),
    ({"labels": np.array([0, 3])}, "labels must be in"),
    ({"num_classes": 0}, "num_classes"),
    ({"ledger": None}, "needs the run's privacy ledger"),
    ({"examples": np.arange(3)}, "index of each of the 2 rows"),
])
def test_bad_arguments(kwargs, message):
    args = {"ledger": Ledger(), "labels": np.array([0, 1]), "num_classes": 3,
            "epsilon": 1.0, "rng": np.random.default_rng(0), "examples": np.arange(2)} | kwargs
    with pytest.raises(ValueError, match=message):
        noisy_label_histogram(**args)
