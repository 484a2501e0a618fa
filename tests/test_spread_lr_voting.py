"""The voting example: the debiased estimate is consistent, the naive one is not."""
import math

import numpy as np
import pytest

from methods import voting
from methods.corruption import flip_labels

THETA, P_F, TRIALS = 0.3, 0.3, 20
SIZES = [100, 1_000, 10_000, 100_000]


def mean_abs_error(estimator, n: int) -> float:
    errors = []
    for trial in range(TRIALS):
        rng = np.random.default_rng([n, trial])
        votes = (rng.random(n) < THETA).astype(np.int64)
        errors.append(abs(estimator(flip_labels(votes, P_F, rng)) - THETA))
    return float(np.mean(errors))


def standard_error(n: int) -> float:
    noisy = P_F + THETA * (1 - 2 * P_F)
    return math.sqrt(noisy * (1 - noisy) / n) / (1 - 2 * P_F)


def test_estimate_error_shrinks_like_one_over_root_n():
    errors = [mean_abs_error(lambda v: voting.estimate_vote_fraction(v, P_F), n) for n in SIZES]
    for n, err in zip(SIZES, errors):
        assert err < 2 * standard_error(n)  # mean |N(0, se^2)| is 0.8 se
    assert errors[-1] < errors[0] / 10


def test_naive_and_wrongly_debiased_estimates_fail_the_same_bound():
    naive = lambda v: float(v.mean())
    eq24_as_printed = lambda v: float(np.clip((v.mean() + P_F) / (1 - 2 * P_F), 0, 1))
    for wrong in (naive, eq24_as_printed):
        assert mean_abs_error(wrong, SIZES[-1]) > 2 * standard_error(SIZES[-1])


def test_no_noise_recovers_the_plain_fraction():
    votes = np.array([1, 0, 0, 1, 1])
    assert voting.estimate_vote_fraction(votes, 0.0) == pytest.approx(0.6)


@pytest.mark.parametrize("votes, p_f", [([], 0.1), ([0, 2], 0.1), ([0, 1], 0.5)])
def test_bad_input_raises_value_error(votes, p_f):
    with pytest.raises(ValueError):
        voting.estimate_vote_fraction(np.array(votes), p_f)
