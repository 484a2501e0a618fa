"""PATE's privacy analysis, checked exactly: every bound against the Renyi divergence of
the mechanism it covers, computed from its exact output distribution for every vote
vector and every neighbour (one vote moved), with wrong bounds shown to fail the same
check; composition, smooth sensitivity, calibration and the command."""
import functools
import itertools
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import scipy.special
import test_pate_aggregation as exact  # pytest puts this folder on sys.path

from benchmarks.cli import main
from benchmarks.privacy import aggregators, ledger, pate, rdp

ORDERS = np.array([1.25, 1.5, 2, 3, 5, 8, 12, 20, 40])
SLACK = 1e-9  # floating-point rounding allowed where a bound is tight


def neighbour_pairs(votes):
    """Index pairs (n, n') over ``votes`` with n' = n - e_i + e_j, i != j."""
    index = {tuple(v): row for row, v in enumerate(votes)}
    pairs = []
    for row, counts in enumerate(votes):
        for i in np.flatnonzero(counts):
            for j in range(len(counts)):
                if j != i:
                    moved = counts.copy()
                    moved[i] -= 1
                    moved[j] += 1
                    pairs.append((row, index[tuple(moved)]))
    return np.array(pairs)


def renyi(log_p, log_q, orders=ORDERS):
    """(pairs, orders): D_lambda(P || Q) of discrete distributions given by their logs."""
    lam = np.asarray(orders)[None, :, None]
    return scipy.special.logsumexp(lam * log_p[:, None, :] + (1 - lam) * log_q[:, None, :],
                                   axis=-1) / (lam[..., 0] - 1)


def worst_ratio(divergence, bound):
    """The largest divergence / bound; > 1 means the bound is broken."""
    return float(np.max(divergence / bound))


# ----- GNMax ------------------------------------------------------------------------------

GNMAX_CASES = [(0.5, 6, 3), (1.0, 6, 3), (2.0, 6, 3), (0.5, 10, 2)]  # sigma, teachers, classes


@functools.cache
def gnmax_case(sigma, teachers, classes):
    """Every vote vector, its neighbour pairs, and D_lambda(M(n) || M(n')) for each pair."""
    votes = exact.all_vote_vectors(teachers, classes)
    log_probs = exact.gnmax_log_probs(votes, sigma)
    pairs = neighbour_pairs(votes)
    return votes, pairs, renyi(log_probs[pairs[:, 0]], log_probs[pairs[:, 1]]), log_probs


def gnmax_worst_ratio(bound, sigma, teachers, classes):
    """Check ``bound(votes, sigma, orders)`` (an RDP bound at the actual votes n) against
    the exact divergence from M(n) to M(n') for every neighbour n'."""
    votes, pairs, divergence, _ = gnmax_case(sigma, teachers, classes)
    return worst_ratio(divergence, bound(votes, sigma, ORDERS)[pairs[:, 0]])


def constant(curve):
    return lambda votes, sigma, orders: np.broadcast_to(curve(sigma, orders),
                                                        (len(votes), len(orders)))


def reference_theorem6(q, sigma, lam):
    """Theorem 6's expression for one q and order, conditions not checked."""
    mu2 = sigma * math.sqrt(math.log(1 / q))
    mu1 = mu2 + 1
    e1, e2 = mu1 / sigma**2, mu2 / sigma**2
    log_a = math.log(1 - q) - math.log(1 - (math.exp(e2) * q) ** ((mu2 - 1) / mu2))
    log_b = e1 - math.log(q) / (mu1 - 1)
    return np.logaddexp(math.log(1 - q) + (lam - 1) * log_a,
                        math.log(q) + (lam - 1) * log_b) / (lam - 1)


def reference_theorem6_applies(q, sigma, lam):
    mu2 = sigma * math.sqrt(math.log(1 / q))
    mu1 = mu2 + 1
    e2 = mu2 / sigma**2
    return (mu2 > 1 and math.log(1 / q) > e2 and lam < mu1
            and q <= math.exp((mu2 - 1) * e2) / ((mu1 / (mu1 - 1)) * (mu2 / (mu2 - 1))) ** mu2)


def theorem6_without_conditions(votes, sigma, orders):
    return np.array([[reference_theorem6(q, sigma, lam) for lam in orders]
                     for q in np.exp(pate.gnmax_log_q(votes, sigma))])


@pytest.mark.parametrize("case", GNMAX_CASES)
def test_gnmax_data_independent_bound_holds_exactly(case):
    assert gnmax_worst_ratio(constant(pate.gnmax_rdp), *case) <= 1 + SLACK


def test_gnmax_data_independent_bound_is_nearly_tight_and_wrong_ones_fail():
    assert max(gnmax_worst_ratio(constant(pate.gnmax_rdp), *c) for c in GNMAX_CASES) > 0.9
    half = constant(lambda sigma, orders: orders / (2 * sigma**2))  # sensitivity 1, not sqrt 2
    assert max(gnmax_worst_ratio(half, *c) for c in GNMAX_CASES) > 1.5
    not_squared = constant(lambda sigma, orders: orders / sigma)
    assert gnmax_worst_ratio(not_squared, 0.5, 6, 3) > 1.5


@pytest.mark.parametrize("case", GNMAX_CASES)
def test_gnmax_data_dependent_bound_holds_exactly(case):
    assert gnmax_worst_ratio(pate.gnmax_data_dependent_rdp, *case) <= 1 + SLACK
    votes = gnmax_case(*case)[0]
    dependent = pate.gnmax_data_dependent_rdp(votes, case[0], ORDERS)
    if case[0] < 2:  # the check covers the data-dependent regime, not only the fallback
        assert (dependent < 0.99 * pate.gnmax_rdp(case[0], ORDERS)).any()


def test_gnmax_data_dependent_bound_without_its_conditions_fails():
    assert gnmax_worst_ratio(theorem6_without_conditions, 0.5, 6, 3) > 1.1


def test_theorem6_matches_its_statement():
    rng = np.random.default_rng(3)
    for _ in range(300):
        sigma = float(rng.choice([0.5, 2.0, 10.0, 40.0]))
        q = math.exp(-rng.uniform(0.01, 60.0))
        lam = float(rng.choice(ORDERS))
        independent = lam / sigma**2
        expected = (min(reference_theorem6(q, sigma, lam), independent)
                    if reference_theorem6_applies(q, sigma, lam) else independent)
        got = pate.noisy_max_rdp([math.log(q)], sigma, [lam])[0, 0]
        assert got == pytest.approx(expected, rel=1e-10)
    np.testing.assert_array_equal(pate.noisy_max_rdp([-np.inf], 3.0, ORDERS), 0.0)


@pytest.mark.parametrize("case", GNMAX_CASES)
def test_proposition7_bounds_the_exact_q(case):
    sigma = case[0]
    votes, _, _, log_probs = gnmax_case(*case)
    exact_q = -np.expm1(log_probs[np.arange(len(votes)), votes.argmax(axis=1)])
    union = np.exp(pate.gnmax_log_q(votes, sigma))
    assert (union >= exact_q * (1 - SLACK)).all()
    assert (union <= 1 - 1 / votes.shape[1]).all()


# ----- the threshold check ----------------------------------------------------------------

MAX_COUNTS = np.arange(21)


def threshold_worst_ratio(bound, threshold, sigma1):
    """``bound(max_counts)`` (an RDP bound at max count m) against the exact divergence of
    the answered/not-answered output from m to m - 1 and m + 1."""
    log_p = scipy.special.log_ndtr((MAX_COUNTS - threshold) / sigma1)
    log_outputs = np.column_stack([log_p, pate._log1mexp(log_p)])
    pairs = np.array([(m, n) for m in MAX_COUNTS for n in (m - 1, m + 1) if 0 <= n <= 20])
    divergence = renyi(log_outputs[pairs[:, 0]], log_outputs[pairs[:, 1]])
    return worst_ratio(divergence, bound(MAX_COUNTS)[pairs[:, 0]])


def votes_with_max(counts):
    return np.column_stack([counts, np.zeros_like(counts)])


THRESHOLD_CASES = [(3.0, 0.5), (10.0, 1.0), (10.0, 2.0), (3.0, 5.0)]  # threshold, sigma1


@pytest.mark.parametrize("threshold, sigma1", THRESHOLD_CASES)
def test_threshold_bounds_hold_exactly(threshold, sigma1):
    independent = pate.threshold_rdp(sigma1, ORDERS)
    assert threshold_worst_ratio(lambda m: np.tile(independent, (len(m), 1)), threshold,
                                 sigma1) <= 1 + SLACK
    dependent = lambda m: pate.threshold_data_dependent_rdp(votes_with_max(m), threshold,
                                                            sigma1, ORDERS)
    assert threshold_worst_ratio(dependent, threshold, sigma1) <= 1 + SLACK
    if sigma1 < 2:
        assert (dependent(MAX_COUNTS) < 0.99 * independent).any()


@pytest.mark.parametrize("threshold, sigma1", THRESHOLD_CASES[:2])
def test_threshold_bounds_with_sensitivity_sqrt2_fail(threshold, sigma1):
    # The max count moves by 1: treating it like GNMax's votes (sqrt 2) halves the bound.
    halved = pate.threshold_rdp(sigma1, ORDERS) / 2
    assert threshold_worst_ratio(lambda m: np.tile(halved, (len(m), 1)), threshold,
                                 sigma1) > 1.5

    def dependent_halved(m):
        log_p = pate.threshold_log_p(votes_with_max(m), threshold, sigma1)
        return pate.noisy_max_rdp(np.minimum(log_p, pate._log1mexp(log_p)), 2 * sigma1, ORDERS)

    assert threshold_worst_ratio(dependent_halved, threshold, sigma1) > 1.5


# ----- LNMax ------------------------------------------------------------------------------

@functools.cache
def lnmax_case(gamma, teachers, classes):
    votes = exact.all_vote_vectors(teachers, classes)
    log_probs = exact.lnmax_log_probs(votes, gamma)
    return votes, neighbour_pairs(votes), log_probs


@pytest.mark.parametrize("gamma", [0.5, 1.0])
def test_lnmax_is_pure_2_gamma_dp_exactly(gamma):
    _, pairs, log_probs = lnmax_case(gamma, 6, 3)
    worst_log_ratio = np.max(log_probs[pairs[:, 0]] - log_probs[pairs[:, 1]])
    assert worst_log_ratio <= 2 * gamma + SLACK
    assert worst_log_ratio > gamma  # gamma alone (sensitivity 1) would be wrong
    np.testing.assert_array_equal(pate.lnmax_rdp(gamma, ORDERS),
                                  rdp.pure_rdp(2 * gamma, ORDERS))


@pytest.mark.parametrize("gamma", [0.5, 1.0])
def test_lnmax_data_dependent_bound_holds_exactly(gamma):
    votes, pairs, log_probs = lnmax_case(gamma, 6, 3)
    dependent = pate.lnmax_data_dependent_rdp(votes, gamma, ORDERS)
    divergence = renyi(log_probs[pairs[:, 0]], log_probs[pairs[:, 1]])
    assert worst_ratio(divergence, dependent[pairs[:, 0]]) <= 1 + SLACK
    assert (dependent < 0.99 * pate.lnmax_rdp(gamma, ORDERS)).any()
    exact_q = -np.expm1(log_probs[np.arange(len(votes)), votes.argmax(axis=1)])
    assert (np.exp(pate.lnmax_log_q(votes, gamma)) >= exact_q * (1 - SLACK)).all()


# ----- composition over the queries -------------------------------------------------------

def test_threshold_is_charged_on_every_query_gnmax_on_answered_ones():
    rng = np.random.default_rng(0)
    votes = rng.multinomial(50, rng.dirichlet(np.full(4, 0.3)), size=30)
    answered = rng.random(30) < 0.4
    sigma2, threshold, sigma1 = 6.0, 30.0, 8.0
    account = pate.confident_gnmax_account(votes, answered, sigma2=sigma2, delta=1e-5,
                                           threshold=threshold, sigma1=sigma1, orders=ORDERS)
    gn, th = ORDERS / sigma2**2, ORDERS / (2 * sigma1**2)
    np.testing.assert_allclose(account.rdp_data_independent, answered.sum() * gn + 30 * th,
                               rtol=1e-12)
    assert not np.allclose(account.rdp_data_independent, 30 * (gn + th))
    assert not np.allclose(account.rdp_data_independent, answered.sum() * (gn + th))
    per_query_gn = pate.gnmax_data_dependent_rdp(votes, sigma2, ORDERS)
    per_query_th = pate.threshold_data_dependent_rdp(votes, threshold, sigma1, ORDERS)
    np.testing.assert_allclose(account.rdp_data_dependent,
                               per_query_gn[answered].sum(0) + per_query_th.sum(0),
                               rtol=1e-12)
    assert not np.allclose(account.rdp_data_dependent,
                           per_query_gn.sum(0) + per_query_th.sum(0))
    assert not np.allclose(account.rdp_data_dependent,
                           per_query_gn[answered].sum(0) + per_query_th[answered].sum(0))
    assert (account.queries, account.answered) == (30, answered.sum())
    assert (account.epsilon_data_independent, account.order_data_independent) == \
        rdp.epsilon_from_rdp(account.rdp_data_independent, 1e-5, ORDERS)
    assert (account.rdp_data_dependent <= account.rdp_data_independent + 1e-15).all()


def test_plain_gnmax_answers_every_query_and_lnmax_composes_likewise():
    votes = np.array([[40, 5, 5], [20, 20, 10]])
    account = pate.confident_gnmax_account(votes, sigma2=5.0, delta=1e-5)
    np.testing.assert_allclose(account.rdp_data_independent, 2 * rdp.ORDERS / 25)
    assert account.answered == 2
    lnmax = pate.lnmax_account(votes, gamma=0.05, delta=1e-5)
    np.testing.assert_allclose(lnmax.rdp_data_independent, 2 * rdp.pure_rdp(0.1))
    np.testing.assert_allclose(lnmax.rdp_data_dependent,
                               pate.lnmax_data_dependent_rdp(votes, 0.05).sum(0))


# ----- published figures ------------------------------------------------------------------

FIGURE_ORDERS = [2.0, 5.0, 10.0, 20.0]
TEN = [0, 0, 0, 0, 0, 0, 0]


def test_figures_of_the_2018_research_code_are_reproduced():
    # Values of tensorflow/privacy research/pate_2018/core.py for these inputs.
    np.testing.assert_allclose(
        pate.gnmax_data_dependent_rdp([[200, 30, 20] + TEN], 40.0, FIGURE_ORDERS)[0],
        [0.0008796578296676374, 0.0009701000005208364, 0.0011803544483336209,
         0.0019955507553328132], rtol=1e-9)
    np.testing.assert_allclose(
        pate.gnmax_data_dependent_rdp([[240, 6, 4] + TEN], 40.0, FIGURE_ORDERS)[0],
        [3.586131996099337e-05, 4.078300715441068e-05, 5.345212075045376e-05,
         0.0001151099304495808], rtol=1e-9)
    np.testing.assert_allclose(
        pate.threshold_data_dependent_rdp([[240, 6, 4] + TEN], 200.0, 10.0, FIGURE_ORDERS)[0],
        [3.651657911131872e-05, 5.99782173054527e-05, 0.00023563339571245031,
         0.009548559552585023], rtol=1e-9)
    np.testing.assert_allclose(
        pate.lnmax_data_dependent_rdp([[230, 10, 10] + TEN], 0.05, FIGURE_ORDERS)[0],
        [7.317332986354457e-05, 7.935263622609242e-05, 9.297437850947037e-05,
         0.0001405200616361124], rtol=1e-9)


def test_local_sensitivities_of_the_2018_research_code_are_reproduced():
    # From that code's smooth_sensitivity_test.py. Its numbers are at distance exactly d,
    # ours the maximum over distances <= d, so they agree where its own grow.
    np.testing.assert_allclose(
        pate.gnmax_local_sensitivity([[10, 0, 0]], 0.5, 1.5)[0, :3],
        [3.13503646e-17, 1.60178280e-08, 5.90681786e-03], rtol=1e-8)
    going_left = pate.gnmax_local_sensitivity([[1000, 500, 300, 200, 0]], 250.0, 10.0)[0]
    np.testing.assert_allclose(going_left[:2000],
                               [0.0] * 298 + [2.77693450548e-7, 2.10853979548e-6]
                               + [2.73113623988e-6] * 1700, rtol=1e-8)
    threshold = pate.threshold_local_sensitivity([[20, 10, 0]], 50, 2.0, 10.0)[0]
    np.testing.assert_allclose(threshold[:11], [
        1.35750725752e-19, 1.88990500499e-17, 2.05403154065e-15, 1.74298153642e-13,
        1.15489723995e-11, 5.97584949325e-10, 2.41486826748e-08, 7.62150641922e-07,
        1.87846248741e-05, 0.000360973025976, 0.000360973025976], rtol=1e-8)
    assert pate.threshold_local_sensitivity([[20, 10, 0]], 2, 2.0, 10.0)[0, 0] == \
        pytest.approx(1.60212079e-01, rel=1e-8)


def test_sensitivity_conditions_match_the_2018_research_code():
    # Its symbolic check: (sigma 20, 10 classes, order 25) fails C6, (30, 10, 25) holds.
    assert not pate.gnmax_sensitivity_conditions_hold(20.0, 10, 25.0, 1000)
    assert pate.gnmax_sensitivity_conditions_hold(30.0, 10, 25.0, 1000)


def test_mnist_confident_gnmax_data_independent_epsilon():
    # T = 200, sigma1 = 150, sigma2 = 40: 640 queries, 286 answered. The paper's 1.97 is
    # data-dependent (it needs the teachers' votes); data-independent it is 2.76 here
    # (dp_accounting's conversion; 3.17 with the classic min over orders).
    curve = 640 * pate.threshold_rdp(150.0) + 286 * pate.gnmax_rdp(40.0)
    assert rdp.epsilon_from_rdp(curve, 1e-5)[0] == pytest.approx(2.7579, abs=1e-4)
    classic = np.min(curve + math.log(1e5) / (rdp.ORDERS - 1))
    assert classic == pytest.approx(3.1740, abs=1e-4)
    assert pate.calibrate_sigma2(2.7578869456, 1e-5, 286) < 40 < pate.calibrate_sigma2(
        2.7578869456, 1e-5, 640, sigma1=150.0)


# ----- smooth sensitivity -----------------------------------------------------------------

def random_votes(rng, queries, teachers, classes, concentration):
    return rng.multinomial(teachers, rng.dirichlet(np.full(classes, concentration)),
                           size=queries)


def move_one_vote(rng, votes):
    moved = votes.copy()
    for row in moved:
        i = rng.choice(np.flatnonzero(row))
        j = rng.choice([c for c in range(len(row)) if c != i])
        row[i] -= 1
        row[j] += 1
    return moved


# sigma, order, classes, teachers: settings where conditions C5 and C6 hold
SENSITIVITY_CASES = [(40.0, 14.0, 10, 250), (10.0, 5.0, 2, 60), (20.0, 10.0, 10, 250),
                     (5.0, 2.0, 3, 60)]


@pytest.mark.parametrize("sigma, order, classes, teachers", SENSITIVITY_CASES)
def test_gnmax_local_sensitivity_bounds_every_change_within_distance_k(sigma, order, classes,
                                                                        teachers):
    assert pate.gnmax_sensitivity_conditions_hold(sigma, classes, order, teachers)
    rng = np.random.default_rng(int(sigma * order))
    votes = np.vstack([random_votes(rng, 30, teachers, classes, c) for c in (0.02, 0.3, 3)])
    ls = pate.gnmax_local_sensitivity(votes, sigma, order)
    assert ls.shape == (len(votes), teachers + 1)
    cost = lambda v: pate.gnmax_data_dependent_rdp(v, sigma, [order])[:, 0]
    assert (np.abs(cost(move_one_vote(rng, votes)) - cost(votes)) <= ls[:, 0] * (1 + SLACK)).all()
    assert (np.diff(ls, axis=1) >= 0).all()
    for distance in (1, 3, 10, 40):
        far = votes
        for _ in range(distance):
            far = move_one_vote(rng, far)
        change = np.abs(cost(move_one_vote(rng, far)) - cost(far))
        assert (change <= ls[:, distance] * (1 + SLACK)).all()
    # Smoothness: a neighbour's bound at distance k is within this one's at k + 1.
    neighbour = pate.gnmax_local_sensitivity(move_one_vote(rng, votes), sigma, order)
    assert (neighbour[:, :-1] <= ls[:, 1:] * (1 + SLACK)).all()


def test_gnmax_local_sensitivity_is_tight_somewhere():
    # Two classes: the neighbour range [BL(q), BU(q)] is reached, so LS is attained.
    sigma, order = 10.0, 5.0
    votes = np.column_stack([np.arange(31, 61), 60 - np.arange(31, 61)])
    ls = pate.gnmax_local_sensitivity(votes, sigma, order)[:, 0]
    cost = lambda v: pate.gnmax_data_dependent_rdp(v, sigma, [order])[:, 0]
    change = np.abs(cost(votes + [-1, 1]) - cost(votes))
    assert (ls > 0).any()
    assert np.max(change[ls > 0] / ls[ls > 0]) == pytest.approx(1.0, abs=1e-9)


def test_gnmax_local_sensitivity_falls_back_to_the_global_bound():
    assert not pate.gnmax_sensitivity_conditions_hold(2.0, 10, 20.0, 100)
    ls = pate.gnmax_local_sensitivity([[100] + [0] * 9], 2.0, 20.0)
    np.testing.assert_array_equal(ls, 20.0 / 4)


@pytest.mark.parametrize("threshold, sigma1, order", [(200.0, 150.0, 14.0), (40.0, 5.0, 5.0),
                                                      (30.0, 2.0, 10.0)])
def test_threshold_local_sensitivity_bounds_every_change(threshold, sigma1, order):
    rng = np.random.default_rng(11)
    votes = np.vstack([random_votes(rng, 50, 50, 5, c) for c in (0.05, 1.0)])
    ls = pate.threshold_local_sensitivity(votes, threshold, sigma1, order)
    cost = lambda v: pate.threshold_data_dependent_rdp(v, threshold, sigma1, [order])[:, 0]
    for distance in (0, 2, 7):
        far = votes
        for _ in range(distance):
            far = move_one_vote(rng, far)
        change = np.abs(cost(move_one_vote(rng, far)) - cost(far))
        assert (change <= ls[:, distance] * (1 + SLACK)).all()
    # Exact at distance 0: the larger of the steps to max count m - 1 and m + 1.
    m = votes.max(axis=1)
    up = np.abs(cost(votes_with_max(m + 1)) - cost(votes_with_max(m)))
    down = np.abs(cost(votes_with_max(m - 1)) - cost(votes_with_max(m)))
    lowest = -(-50 // 5)
    expected = np.maximum(np.where(m < 50, up, 0), np.where(m > lowest, down, 0))
    np.testing.assert_allclose(ls[:, 0], expected, rtol=1e-12, atol=1e-300)


def test_smooth_sensitivity_dominates_and_decreases_in_beta():
    rng = np.random.default_rng(2)
    votes = random_votes(rng, 40, 250, 10, 0.02)
    ls = pate.data_dependent_local_sensitivity(votes, sigma2=40.0, order=14.0,
                                               threshold=200.0, sigma1=150.0)
    assert ls[0] > 0 and (np.diff(ls) >= 0).all()
    betas = [0.001, 0.01, 0.02, 0.035]
    ss = [pate.smooth_sensitivity(ls, b) for b in betas]
    assert all(s >= ls[0] for s in ss)
    assert all(a > b for a, b in itertools.pairwise(ss))
    assert ss[0] <= ls[-1]


def gaussian_renyi(mean0, std0, mean1, std1, lam):
    """D_lambda(N(mean0, std0^2) || N(mean1, std1^2)), closed form."""
    mixed = lam * std1**2 + (1 - lam) * std0**2
    if mixed <= 0:
        return math.inf
    return (lam * (mean0 - mean1) ** 2 / (2 * mixed)
            - math.log(mixed / (std0 ** (2 * (1 - lam)) * std1 ** (2 * lam))) / (2 * (lam - 1)))


def gnss_worst_ratio(curve):
    """``curve(beta, s, orders)`` against the worst neighbour of f(D) + SS(D) N(0, s^2):
    SS' = SS e^r with |r| <= beta, |f' - f| <= min(SS, SS'); SS = 1 by scaling."""
    worst = 0.0
    for beta in (0.01, 0.05, 0.2):
        limit = 1 / -math.expm1(-2 * beta)
        orders = np.array([o for o in (1.5, 2, 5, 9.5, 20, 45, 50.2) if o < limit])
        bound = curve(beta, 2.0, orders)
        for lam, b in zip(orders, bound):
            divergence = max(gaussian_renyi(0, 2.0, min(1, math.exp(r)), 2.0 * math.exp(r), lam)
                             for r in np.linspace(-beta, beta, 81))
            worst = max(worst, divergence / b)
    return worst


def test_smooth_sensitivity_release_cost_holds_exactly():
    assert gnss_worst_ratio(pate.smooth_sensitivity_release_rdp) == pytest.approx(1.0, abs=1e-9)
    curve = pate.smooth_sensitivity_release_rdp(0.01, 1.0, [2.0, 50.0, 50.4, 50.6])
    assert np.isfinite(curve[:3]).all() and curve[3] == math.inf


def test_smooth_sensitivity_release_closed_form_of_the_2018_code_fails():
    def formula_2018(beta, s, orders):
        with np.errstate(invalid="ignore"):
            value = (orders * math.exp(2 * beta) / s**2
                     + (beta * orders - 0.5 * np.log(1 - 2 * orders * beta)) / (orders - 1))
        return np.where(2 * beta * orders < 1, value, np.inf)

    assert gnss_worst_ratio(formula_2018) > 1.5


def test_the_release_charges_the_run_its_own_worst_case_cost():
    """The ledger's charge for the smooth-sensitivity release is the release's RDP curve,
    which reaches the exact worst case of the Gaussian noise with smooth sensitivity (the
    ratio test below): never less, such as nothing at all."""
    rng = np.random.default_rng(4)
    votes = random_votes(rng, 50, 250, 10, 0.02)
    run = ledger.Ledger()
    beta, noise = 0.4 / 14, 3.0
    aggregators.release_data_dependent_epsilon(
        run, votes, rng.random(50) < 0.6, sigma2=40.0, threshold=200.0, sigma1=150.0,
        order=14.0, beta=beta, noise_multiplier=noise, rng=np.random.default_rng(9))
    [charge] = run.charges
    assert charge.touches == ledger.records()
    charged = charge.cost.curve()
    np.testing.assert_array_equal(charged, pate.smooth_sensitivity_release_rdp(beta, noise))
    finite = np.isfinite(charged)
    assert finite[:50].all() and (charged[finite] > 0).all()
    assert gnss_worst_ratio(pate.smooth_sensitivity_release_rdp) == pytest.approx(1.0,
                                                                                  abs=1e-9)


def test_release_adds_smooth_sensitivity_noise_and_reports_its_cost():
    rng = np.random.default_rng(4)
    votes = random_votes(rng, 50, 250, 10, 0.02)
    answered = rng.random(50) < 0.6
    settings = {"sigma2": 40.0, "threshold": 200.0, "sigma1": 150.0}
    order, beta, noise = 14.0, 0.4 / 14, 3.0
    release = pate.release_data_dependent_rdp(votes, answered, order=order, beta=beta,
                                              noise_multiplier=noise,
                                              rng=np.random.default_rng(9), **settings)
    cost = pate.confident_gnmax_account(votes, answered, delta=1e-5, orders=[order],
                                        **settings).rdp_data_dependent[0]
    ss = pate.smooth_sensitivity(pate.data_dependent_local_sensitivity(
        votes, answered, order=order, **settings), beta)
    assert release.value == pytest.approx(cost + ss * np.random.default_rng(9).normal(0, noise),
                                          rel=1e-12)
    np.testing.assert_array_equal(release.rdp, pate.smooth_sensitivity_release_rdp(beta, noise))
    assert release.rdp_at_order == pate.smooth_sensitivity_release_rdp(beta, noise, [order])[0]
    charge = ledger.RdpCurve(tuple(release.rdp))  # chargeable to the run's ledger
    assert np.isinf(charge.curve()).any() and np.isfinite(charge.curve()[:50]).all()
    assert release.epsilon(1e-5) == rdp.epsilon_from_rdp(
        np.array([max(release.value, 0) + release.rdp_at_order]), 1e-5, np.array([order]))[0]
    with pytest.raises(ValueError, match="too large for order"):
        pate.release_data_dependent_rdp(votes, answered, order=order, beta=0.05,
                                        noise_multiplier=noise, rng=rng, **settings)


# ----- calibration ------------------------------------------------------------------------

@pytest.mark.parametrize("epsilon, queries, sigma1", [(2.0, 286, None), (2.0, 640, 150.0),
                                                      (8.0, 1000, None)])
def test_calibrated_sigma2_is_the_smallest_that_meets_the_target(epsilon, queries, sigma1):
    sigma2 = pate.calibrate_sigma2(epsilon, 1e-5, queries, sigma1=sigma1)
    base = 0 if sigma1 is None else queries * pate.threshold_rdp(sigma1)

    def epsilon_at(s):
        return rdp.epsilon_from_rdp(base + queries * pate.gnmax_rdp(s), 1e-5)[0]

    assert epsilon_at(sigma2) <= epsilon < epsilon_at(sigma2 * (1 - 1e-5))


def test_calibration_refuses_bad_or_unmeetable_targets():
    with pytest.raises(ValueError, match="unmeetable"):
        pate.calibrate_sigma2(0.5, 1e-5, 640, sigma1=10.0)
    with pytest.raises(ValueError, match="queries"):
        pate.calibrate_sigma2(1.0, 1e-5, 0)
    with pytest.raises(ValueError, match="delta"):
        pate.calibrate_sigma2(1.0, 1.0, 10)


# ----- the command ------------------------------------------------------------------------

@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    votes = random_votes(rng, 40, 250, 10, 0.05)
    answered = rng.random(40) < 0.5
    paths = {"votes": tmp_path / "votes.npy", "answered": tmp_path / "mask.npy"}
    np.save(paths["votes"], votes)
    np.save(paths["answered"], answered)
    np.save(tmp_path / "floats.npy", votes + 0.5)
    np.save(tmp_path / "negative.npy", votes - 1)
    np.save(tmp_path / "short.npy", answered[:-1])
    return tmp_path, votes, answered


def command(argv, capsys):
    code = main(["privacy", "pate", *(str(a) for a in argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_command_prints_the_account_as_json(files, capsys):
    folder, votes, answered = files
    code, out, err = command(["--votes", folder / "votes.npy", "--answered", folder / "mask.npy",
                              "--sigma2", 40, "--threshold", 200, "--sigma1", 150,
                              "--delta", 1e-5, "--json"], capsys)
    assert (code, err) == (0, "")
    result = json.loads(out)
    assert set(result) == {"orders", "rdp_data_independent", "rdp_data_dependent",
                           "epsilon_data_independent", "epsilon_data_dependent", "queries",
                           "answered"}
    account = pate.confident_gnmax_account(votes, answered, sigma2=40, delta=1e-5,
                                           threshold=200, sigma1=150)
    assert result["orders"] == rdp.ORDERS.tolist()
    assert result["rdp_data_dependent"] == account.rdp_data_dependent.tolist()
    assert result["epsilon_data_independent"] == account.epsilon_data_independent
    assert (result["queries"], result["answered"]) == (40, int(answered.sum()))


def test_command_prints_a_summary(files, capsys):
    folder, _, _ = files
    code, out, _ = command(["--votes", folder / "votes.npy", "--sigma2", 40, "--delta", 1e-5],
                           capsys)
    assert code == 0
    assert "40 queries, 40 answered" in out and "data-dependent epsilon" in out


@pytest.mark.parametrize("argv", [
    ["--votes", "missing.npy", "--sigma2", 40, "--delta", 1e-5],
    ["--votes", "floats.npy", "--sigma2", 40, "--delta", 1e-5],
    ["--votes", "negative.npy", "--sigma2", 40, "--delta", 1e-5],
    ["--votes", "votes.npy", "--answered", "short.npy", "--sigma2", 40, "--delta", 1e-5],
    ["--votes", "votes.npy", "--answered", "missing.npy", "--sigma2", 40, "--delta", 1e-5],
    ["--votes", "votes.npy", "--sigma2", 40, "--delta", 0],
    ["--votes", "votes.npy", "--sigma2", 40, "--delta", 1],
    ["--votes", "votes.npy", "--sigma2", 0, "--delta", 1e-5],
    ["--votes", "votes.npy", "--sigma2", -3, "--delta", 1e-5],
    ["--votes", "votes.npy", "--sigma2", 40, "--threshold", 200, "--sigma1", 0,
     "--delta", 1e-5],
    ["--votes", "votes.npy", "--sigma2", 40, "--threshold", 200, "--delta", 1e-5],
    ["--votes", "votes.npy", "--sigma2", 40, "--sigma1", 150, "--delta", 1e-5],
])
def test_command_refuses_bad_input_with_one_line(files, capsys, argv):
    folder, _, _ = files
    argv = [folder / a if str(a).endswith(".npy") else a for a in argv]
    code, out, err = command(argv, capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("privboard: error")


def test_module_imports_cheaply():
    script = ("import sys, benchmarks.privacy.pate; "
              "print('dp_accounting' in sys.modules, 'tensorflow' in sys.modules)")
    probe = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           check=True)
    assert probe.stdout.split() == ["False", "False"]
