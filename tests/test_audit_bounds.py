"""The audit bounds: the paper's printed values, saturation, monotonicity, and validity by
simulation (a valid 95% lower bound exceeds the true epsilon in at most 5% of audits)."""
import math

import numpy as np
import pytest
from scipy import special, stats

from benchmarks.privacy.audit_bounds import (clopper_pearson_epsilon, clopper_pearson_lower,
                                     clopper_pearson_upper, one_run_lower_bound,
                                     one_run_p_value, saturation)

RUNS = 4000


def exceed_rate_is_at_most(exceeded, level=0.05):
    """False when the exceedances are significantly (p < 1e-3) above `level`."""
    return stats.binomtest(int(np.sum(exceeded)), len(exceeded), level,
                           alternative="greater").pvalue > 1e-3


def bounds_of(correct_counts, bound):
    """`bound(v)` for every audit; computed once per distinct count."""
    values, inverse = np.unique(correct_counts, return_inverse=True)
    return np.array([bound(int(v)) for v in values])[inverse]


# ----- one run: the paper's figures ----------------------------------------------------------

@pytest.mark.parametrize("canaries, guesses, correct, delta, printed", [
    (1000, 100, 75, 1e-4, 0.673),     # the worked example of the paper's Appendix D
    (100000, 1510, 1439, 1e-5, 2.675),  # the paper's Section 7, Figure 11
])
def test_reproduces_the_bounds_printed_in_the_paper(canaries, guesses, correct, delta, printed):
    bound = one_run_lower_bound(canaries, guesses, correct, delta)
    assert bound == pytest.approx(printed, abs=1e-3)


def test_saturation_figures():
    # algorithms.md: "about 5.8" and "about 3.5"; exactly 5.782 and 3.465 at delta = 1e-5.
    assert saturation(1000, 1000, 1e-5) == pytest.approx(5.7823, abs=1e-4)
    assert saturation(1000, 100, 1e-5) == pytest.approx(3.4654, abs=1e-4)
    # Without delta the all-right p-value is q^r, so the ceiling is logit(0.05^(1/r)).
    for guesses in (100, 1000):
        assert saturation(1000, guesses) == pytest.approx(special.logit(0.05 ** (1 / guesses)))
        assert saturation(1000, guesses, 1e-5) < saturation(1000, guesses)


def test_the_bound_is_where_the_p_value_crosses_alpha():
    for delta in (0.0, 1e-4):
        bound = one_run_lower_bound(1000, 200, 160, delta)
        assert one_run_p_value(1000, 200, 160, bound - 1e-9, delta) < 0.05
        assert one_run_p_value(1000, 200, 160, bound + 1e-6, delta) >= 0.05


# ----- one run: shape ------------------------------------------------------------------------

def test_more_right_guesses_give_a_larger_bound():
    bounds = [one_run_lower_bound(1000, 200, v, 1e-5) for v in range(100, 201, 5)]
    assert np.all(np.diff(bounds) >= 0) and bounds[-1] > bounds[0]


def test_more_guesses_at_the_same_count_give_a_smaller_bound():
    bounds = [one_run_lower_bound(1000, r, 150, 1e-5) for r in range(150, 301, 10)]
    assert np.all(np.diff(bounds) <= 0) and bounds[-1] < bounds[0]


def test_more_guesses_at_the_same_accuracy_give_a_larger_bound():
    bounds = [one_run_lower_bound(1000, r, int(0.8 * r), 1e-5) for r in (50, 100, 200, 500, 1000)]
    assert np.all(np.diff(bounds) > 0)
    assert np.all(np.diff([saturation(1000, r, 1e-5) for r in (10, 100, 1000)]) > 0)


def test_delta_and_more_canaries_only_weaken_the_bound():
    by_delta = [one_run_lower_bound(1000, 200, 170, d) for d in (0, 1e-6, 1e-5, 1e-4, 1e-3)]
    assert np.all(np.diff(by_delta) <= 0) and by_delta[-1] < by_delta[0]
    by_canaries = [one_run_lower_bound(m, 200, 170, 1e-4) for m in (200, 1000, 10000)]
    assert np.all(np.diff(by_canaries) <= 0) and by_canaries[-1] < by_canaries[0]


@pytest.mark.parametrize("guesses, correct", [(100, 50), (100, 40), (100, 0), (0, 0), (1, 1)])
def test_nothing_is_claimed_at_chance_level(guesses, correct):
    assert one_run_lower_bound(1000, guesses, correct) == 0.0


@pytest.mark.parametrize("args", [(10, 20, 5), (10, 5, 6), (0, 0, 0), (10, 5, -1), (10.0, 5, 3)])
def test_impossible_counts_are_refused(args):
    with pytest.raises(ValueError):
        one_run_lower_bound(*args)


@pytest.mark.parametrize("kwargs", [{"delta": 1.0}, {"delta": -1e-5}, {"confidence": 1.0},
                                    {"confidence": 0.0}])
def test_bad_delta_or_confidence_is_refused(kwargs):
    with pytest.raises(ValueError):
        one_run_lower_bound(1000, 100, 90, **kwargs)


# ----- one run: validity ---------------------------------------------------------------------

def wald_bound(guesses, correct):
    """A WRONG bound: the normal-approximation lower limit on the accuracy, made an epsilon.
    It undercovers near accuracy 1, and claims infinity when every guess is right."""
    if correct == guesses:
        return math.inf
    p = correct / guesses
    low = p - stats.norm.ppf(0.95) * math.sqrt(p * (1 - p) / guesses)
    return float(special.logit(low)) if low > 0.5 else 0.0


@pytest.mark.parametrize("epsilon, guesses", [(1.0, 200), (2.0, 100), (3.0, 100)])
def test_pure_bound_exceeds_the_truth_at_most_5_percent_exactly(epsilon, guesses):
    """Exact: sum of P[v] over the counts whose bound exceeds epsilon."""
    correct = np.arange(guesses + 1)
    pmf = stats.binom.pmf(correct, guesses, special.expit(epsilon))
    bounds = np.array([one_run_lower_bound(1000, guesses, int(v)) for v in correct])
    assert pmf[bounds > epsilon].sum() <= 0.05


def test_pure_bound_is_valid_by_simulation_and_a_wald_bound_is_not():
    """An exactly epsilon-DP audit: each coin guessed right with probability e^eps/(1+e^eps)."""
    epsilon, guesses = 3.0, 100
    rng = np.random.default_rng(20230515)
    right = rng.binomial(guesses, special.expit(epsilon), RUNS)
    honest = bounds_of(right, lambda v: one_run_lower_bound(1000, guesses, v))
    wrong = bounds_of(right, lambda v: wald_bound(guesses, v))
    assert exceed_rate_is_at_most(honest > epsilon)
    assert not exceed_rate_is_at_most(wrong > epsilon)


def test_delta_term_is_needed_by_simulation():
    """An (eps, delta)-DP mechanism that, with probability delta, reveals every coin (an event
    of probability delta for each canary), and otherwise is eps-randomized response. delta =
    0.1 is large so that the delta term matters: dropping it overclaims."""
    epsilon, delta, canaries = 1.0, 0.1, 100
    rng = np.random.default_rng(7)
    revealed = rng.random(RUNS) < delta
    right = np.where(revealed, canaries, rng.binomial(canaries, special.expit(epsilon), RUNS))
    honest = bounds_of(right, lambda v: one_run_lower_bound(canaries, canaries, v, delta))
    dropped = bounds_of(right, lambda v: one_run_lower_bound(canaries, canaries, v))
    assert exceed_rate_is_at_most(honest > epsilon)
    assert not exceed_rate_is_at_most(dropped > epsilon)


# ----- Clopper-Pearson -----------------------------------------------------------------------

def test_one_sided_limits_match_scipys_exact_interval():
    for k, n in [(0, 20), (3, 20), (10, 20), (20, 20), (517, 1000)]:
        # A two-sided 90% exact interval is two one-sided 95% limits.
        interval = stats.binomtest(k, n).proportion_ci(confidence_level=0.90, method="exact")
        assert clopper_pearson_lower(k, n) == pytest.approx(interval.low, abs=1e-12)
        assert clopper_pearson_upper(k, n) == pytest.approx(interval.high, abs=1e-12)


def test_limits_broadcast_over_arrays():
    k = np.array([0, 5, 10])
    np.testing.assert_allclose(clopper_pearson_lower(k, 10),
                               [clopper_pearson_lower(int(x), 10) for x in k])
    np.testing.assert_allclose(clopper_pearson_epsilon(k, 10, 10 - k, 10),
                               [clopper_pearson_epsilon(int(x), 10, 10 - int(x), 10) for x in k])


def test_epsilon_bound_edge_cases():
    assert clopper_pearson_epsilon(0, 100, 0, 100) == 0.0
    assert clopper_pearson_epsilon(30, 100, 70, 100) == 0.0  # the event favours d': no claim
    assert clopper_pearson_epsilon(100, 100, 0, 100) > 0
    assert clopper_pearson_epsilon(100, 100, 0, 100, delta=0.99) == 0.0
    assert clopper_pearson_epsilon(900, 1000, 100, 1000, confidence=0.99) < \
        clopper_pearson_epsilon(900, 1000, 100, 1000, confidence=0.9)
    with pytest.raises(ValueError):
        clopper_pearson_epsilon(11, 10, 0, 10)
    with pytest.raises(ValueError):
        clopper_pearson_epsilon(1.5, 10, 0, 10)


@pytest.mark.parametrize("confidence", [0.95, 0.99])
def test_the_epsilon_bound_takes_each_limit_at_half_the_error(confidence):
    """The two one-sided limits hold together at ``confidence`` by Bonferroni: each at
    1 - (1 - confidence) / 2, exactly."""
    each = 1 - (1 - confidence) / 2
    for k_d, k_d_prime, delta in [(900, 100, 0.0), (700, 300, 0.1), (60, 2, 0.01)]:
        expected = math.log((clopper_pearson_lower(k_d, 1000, each) - delta)
                            / clopper_pearson_upper(k_d_prime, 1000, each))
        assert clopper_pearson_epsilon(k_d, 1000, k_d_prime, 1000, delta, confidence) == \
            pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("epsilon, p_d_prime, delta", [(1.0, 0.2, 0.0), (2.0, 0.02, 0.0),
                                                       (1.0, 0.1, 0.2)])
def test_clopper_pearson_bound_covers_and_point_estimates_do_not(epsilon, p_d_prime, delta):
    """P[S|d] = e^eps P[S|d'] + delta exactly: the tightest (eps, delta)-DP pair of rates.
    The wrong bound is the plug-in log ratio (minus delta), with no confidence at all."""
    runs_each, audits = 200, 20000
    p_d = math.exp(epsilon) * p_d_prime + delta
    rng = np.random.default_rng(11)
    k_d = rng.binomial(runs_each, p_d, audits)
    k_d_prime = rng.binomial(runs_each, p_d_prime, audits)
    honest = clopper_pearson_epsilon(k_d, runs_each, k_d_prime, runs_each, delta=delta)
    with np.errstate(divide="ignore", invalid="ignore"):
        plug_in = np.log((k_d / runs_each - delta) / (k_d_prime / runs_each))
    assert exceed_rate_is_at_most(honest > epsilon)
    assert not exceed_rate_is_at_most(np.nan_to_num(plug_in, nan=0.0) > epsilon)


def test_clopper_pearson_bound_needs_the_delta_term():
    epsilon, p_d_prime, delta, runs_each, audits = 1.0, 0.1, 0.2, 200, 20000
    rng = np.random.default_rng(12)
    k_d = rng.binomial(runs_each, math.exp(epsilon) * p_d_prime + delta, audits)
    k_d_prime = rng.binomial(runs_each, p_d_prime, audits)
    assert exceed_rate_is_at_most(
        clopper_pearson_epsilon(k_d, runs_each, k_d_prime, runs_each, delta=delta) > epsilon)
    assert not exceed_rate_is_at_most(
        clopper_pearson_epsilon(k_d, runs_each, k_d_prime, runs_each) > epsilon)
