"""Exact tests of the label-DP randomizers: distributions, the epsilon-DP ratio, optimality."""
import math

import numpy as np
import pytest
import scipy.optimize
import scipy.stats

from speed.bench_rr_with_prior import rr_with_prior_loop, time_rr_with_prior
from benchmarks.privacy import randomizers as mechanisms
from benchmarks.privacy.randomizers import (cluster_histogram_noise, optimal_k,
                                            rr_top_k_distribution, rr_with_prior_distribution)
from charged import noisy_cluster_priors, randomized_response, rr_top_k, rr_with_prior

EPSILONS = [0.1, 0.5, 1.0, 2.0, 4.0, 8.0]


def random_prior(rng, num_classes, ties):
    """A Dirichlet prior, or (ties=True) one with many equal values and zeros."""
    if not ties:
        return rng.dirichlet(np.full(num_classes, 0.7))
    counts = rng.integers(0, 3, num_classes).astype(float)
    counts[rng.integers(num_classes)] += 1  # never all zero
    return counts / counts.sum()


def prior_cases(seed, count):
    rng = np.random.default_rng(seed)
    for i in range(count):
        num_classes = int(rng.integers(2, 9))
        yield random_prior(rng, num_classes, ties=i % 2 == 1), float(rng.choice(EPSILONS))


# ----- independent reference, one row at a time, straight from the paper's definitions ----

def reference_top(prior, k):
    return sorted(range(len(prior)), key=lambda c: (-prior[c], c))[:k]


def reference_top_k_row(y, prior, k, epsilon):
    """Algorithm 1's output distribution for one label, by enumeration."""
    top = reference_top(prior, k)
    dist = np.zeros(len(prior))
    if y in top:
        for c in top:
            dist[c] = (math.exp(epsilon) if c == y else 1.0) / (math.exp(epsilon) + k - 1)
    else:
        dist[top] = 1.0 / k
    return dist


def reference_optimal_k(prior, epsilon):
    """argmax_k w_k by a loop; among equal w_k the larger k."""
    desc = sorted(prior, reverse=True)
    best_k, best_w, total = 0, -1.0, 0.0
    for k in range(1, len(prior) + 1):
        total += desc[k - 1]
        w = total / (1.0 + (k - 1) * math.exp(-epsilon))
        if w >= best_w:
            best_k, best_w = k, w
    return best_k, best_w


def channel(prior, epsilon, k=None):
    """The K x K matrix M[y, o] = P(o | y) for one prior (RRWithPrior when k is None)."""
    num_classes = len(prior)
    labels = np.arange(num_classes)
    priors = np.tile(prior, (num_classes, 1))
    if k is None:
        return rr_with_prior_distribution(labels, priors, epsilon)
    return rr_top_k_distribution(labels, priors, k, epsilon)


def max_log_ratio(m):
    """max over y, y', o of log M[y, o] - log M[y', o] (inf when the support differs)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.log(m[:, None, :]) - np.log(m[None, :, :])
    return np.nanmax(np.where(m[:, None, :] == 0, -np.inf, ratio))


def broken_channel(prior, epsilon, k):
    """The classic bug: the flip is drawn from all K - 1 other labels, not the top-k set."""
    num_classes = len(prior)
    m = np.array([reference_top_k_row(y, prior, k, epsilon) for y in range(num_classes)])
    for y in reference_top(prior, k):
        m[y] = (1.0 - m[y, y]) / (num_classes - 1)
        m[y, y] = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    return m


# ----- the analytic distribution ------------------------------------------------------------

@pytest.mark.parametrize("seed", range(4))
def test_top_k_distribution_matches_enumeration(seed):
    for prior, epsilon in prior_cases(seed, 12):
        for k in range(1, len(prior) + 1):
            expected = np.array([reference_top_k_row(y, prior, k, epsilon)
                                 for y in range(len(prior))])
            np.testing.assert_allclose(channel(prior, epsilon, k), expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize("seed", range(4))
def test_with_prior_distribution_is_top_k_at_optimal_k(seed):
    for prior, epsilon in prior_cases(100 + seed, 12):
        k, _ = reference_optimal_k(prior, epsilon)
        expected = np.array([reference_top_k_row(y, prior, k, epsilon)
                             for y in range(len(prior))])
        np.testing.assert_allclose(channel(prior, epsilon), expected, rtol=1e-12, atol=0)


def test_rows_use_their_own_prior():
    rng = np.random.default_rng(7)
    priors = rng.dirichlet(np.ones(6), size=50)
    labels = rng.integers(0, 6, 50)
    ks = rng.integers(1, 7, 50)
    batch = rr_top_k_distribution(labels, priors, ks, 1.5)
    for i in range(50):
        np.testing.assert_allclose(batch[i], reference_top_k_row(labels[i], priors[i], ks[i], 1.5))


# ----- sampling matches the analytic distribution --------------------------------------------

def assert_frequencies_match(sampler, distribution, labels, priors, draws, seed):
    """Chi-square test of `draws` samples per row against the exact distribution."""
    rows = np.repeat(np.arange(len(labels)), draws)
    out = sampler(labels[rows], priors[rows], np.random.default_rng(seed))
    dist = distribution(labels, priors)
    for i in range(len(labels)):
        counts = np.bincount(out[rows == i], minlength=priors.shape[1])
        support = dist[i] > 0
        assert counts[~support].sum() == 0, f"row {i}: output outside the support"
        if support.sum() > 1:
            p = scipy.stats.chisquare(counts[support], draws * dist[i][support]).pvalue
            assert p > 1e-4, f"row {i}: frequencies {counts} vs {dist[i]} (p = {p:.2g})"


@pytest.mark.parametrize("ties", [False, True])
def test_rr_with_prior_frequencies(ties):
    rng = np.random.default_rng(11 + ties)
    for epsilon in [0.5, 1.0, 2.0, 4.0]:
        num_classes = int(rng.integers(2, 9))
        priors = np.array([random_prior(rng, num_classes, ties) for _ in range(num_classes)])
        labels = np.arange(num_classes)  # every label, each row with a different prior
        assert_frequencies_match(
            lambda y, p, g: rr_with_prior(y, p, epsilon, g),
            lambda y, p: rr_with_prior_distribution(y, p, epsilon),
            labels, priors, draws=20000, seed=int(epsilon * 10))


@pytest.mark.parametrize("ties", [False, True])
def test_rr_top_k_frequencies(ties):
    rng = np.random.default_rng(21 + ties)
    num_classes = 7
    priors = np.array([random_prior(rng, num_classes, ties) for _ in range(14)])
    labels = np.tile(np.arange(num_classes), 2)
    ks = rng.integers(1, num_classes + 1, 14)
    assert_frequencies_match(
        lambda y, p, g: rr_top_k(y, p, np.repeat(ks, 20000), 1.0, g),
        lambda y, p: rr_top_k_distribution(y, p, ks, 1.0),
        labels, priors, draws=20000, seed=5)


def test_randomized_response_frequencies():
    num_classes, epsilon, draws = 5, 1.0, 20000
    out = randomized_response(np.full(draws, 2), num_classes, epsilon, np.random.default_rng(3))
    keep = math.exp(epsilon) / (math.exp(epsilon) + num_classes - 1)
    expected = np.full(num_classes, (1 - keep) / (num_classes - 1))
    expected[2] = keep
    counts = np.bincount(out, minlength=num_classes)
    assert scipy.stats.chisquare(counts, draws * expected).pvalue > 1e-4


def test_frequency_check_can_fail():
    """A sampler that keeps the label too often is caught by the same check."""
    priors = np.full((3, 3), 1 / 3)
    with pytest.raises(AssertionError):
        assert_frequencies_match(
            lambda y, p, g: rr_with_prior(y, p, 1.2, g),
            lambda y, p: rr_with_prior_distribution(y, p, 1.0),
            np.arange(3), priors, draws=4000, seed=0)


def test_benchmark_loop_baseline_is_the_same_mechanism():
    rng = np.random.default_rng(8)
    priors = np.array([random_prior(rng, 6, ties) for ties in (False, True)])
    assert_frequencies_match(lambda y, p, g: rr_with_prior_loop(y, p, 1.0, g),
                             lambda y, p: rr_with_prior_distribution(y, p, 1.0),
                             np.array([0, 3]), priors, draws=3000, seed=2)
    result = time_rr_with_prior(400, 5, seed=0, loop_rows=50, repeats=1)
    assert result["vectorised_seconds"] > 0 and result["loop_seconds"] > 0
    assert result["speedup"] == pytest.approx(
        result["loop_seconds"] * 400 / 50 / result["vectorised_seconds"])
    with pytest.raises(ValueError, match="loop_rows"):
        time_rr_with_prior(10, 5, seed=0, loop_rows=20)


# ----- privacy: the exact e^epsilon ratio over all labels and outputs ------------------------

@pytest.mark.parametrize("seed", range(4))
def test_every_channel_is_epsilon_dp(seed):
    for prior, epsilon in prior_cases(200 + seed, 12):
        channels = [channel(prior, epsilon)] + [channel(prior, epsilon, k)
                                                for k in range(1, len(prior) + 1)]
        for m in channels:
            np.testing.assert_allclose(m.sum(axis=1), 1.0)
            assert max_log_ratio(m) <= epsilon + 1e-12


@pytest.mark.parametrize("seed", range(2))
def test_float32_priors_are_used_as_given_and_stay_epsilon_dp(seed):
    """A model's float32 softmax goes through without a float64 copy; its channel is
    still exactly epsilon-DP, and the sampler follows that same channel."""
    for prior, epsilon in prior_cases(300 + seed, 8):
        prior32 = prior.astype(np.float32)
        prior32 /= prior32.sum(dtype=np.float64)
        m = channel(prior32, epsilon)
        np.testing.assert_allclose(m.sum(axis=1), 1.0)
        assert max_log_ratio(m) <= epsilon + 1e-12
    rows = np.tile(prior32, (20_000, 1))
    assert mechanisms._as_priors(rows) is rows  # no float64 copy
    labels = np.zeros(len(rows), dtype=np.int64)
    drawn = rr_with_prior(labels, rows, epsilon, np.random.default_rng(seed))
    expected = m[0] * len(rows)
    seen = np.bincount(drawn, minlength=len(prior32))
    support = expected > 0
    assert (seen[~support] == 0).all()
    assert scipy.stats.chisquare(seen[support], expected[support]).pvalue > 1e-4


def test_ratio_bound_is_tight_for_rr():
    m = channel(np.full(4, 0.25), 1.3)
    assert max_log_ratio(m) == pytest.approx(1.3, abs=1e-12)


@pytest.mark.parametrize("seed", range(2))
def test_flip_from_all_labels_fails_the_privacy_check(seed):
    failures = 0
    for prior, epsilon in prior_cases(300 + seed, 12):
        for k in range(2, len(prior)):
            failures += max_log_ratio(broken_channel(prior, epsilon, k)) > epsilon + 1e-12
    assert failures > 0
    # a concrete case: K = 4, k = 2
    assert max_log_ratio(broken_channel(np.array([0.4, 0.3, 0.2, 0.1]), 1.0, 2)) > 1.0


# ----- Theorem 3: optimality ----------------------------------------------------------------

def lp_optimum(prior, epsilon):
    """max sum_y p_y M[y, y] over all epsilon-DP channels M, by linear programming."""
    num_classes = len(prior)
    n = num_classes * num_classes  # variable M[y, o] at index y * K + o
    objective = np.zeros(n)
    objective[np.arange(num_classes) * (num_classes + 1)] = -prior
    rows = []
    for y in range(num_classes):
        for y2 in range(num_classes):
            if y != y2:
                for o in range(num_classes):
                    row = np.zeros(n)
                    row[y * num_classes + o] = 1.0
                    row[y2 * num_classes + o] = -math.exp(epsilon)
                    rows.append(row)
    sums = np.kron(np.eye(num_classes), np.ones(num_classes))
    result = scipy.optimize.linprog(objective, A_ub=np.array(rows), b_ub=np.zeros(len(rows)),
                                    A_eq=sums, b_eq=np.ones(num_classes), bounds=(0, 1),
                                    method="highs")
    assert result.success
    return -result.fun


@pytest.mark.parametrize("seed", range(3))
def test_theorem_3_optimality(seed):
    rng = np.random.default_rng(400 + seed)
    for i in range(6):
        num_classes = int(rng.integers(2, 6))
        prior = random_prior(rng, num_classes, ties=i % 3 == 2)
        epsilon = float(rng.choice(EPSILONS))
        _, best_w = reference_optimal_k(prior, epsilon)
        accuracy = prior @ np.diag(channel(prior, epsilon))
        assert accuracy == pytest.approx(best_w, abs=1e-12)
        assert accuracy == pytest.approx(lp_optimum(prior, epsilon), abs=1e-7)


# ----- optimal_k ----------------------------------------------------------------------------

def test_optimal_k_matches_loop():
    rng = np.random.default_rng(5)
    for epsilon in EPSILONS:
        for num_classes in [2, 3, 10, 50]:
            priors = np.array([random_prior(rng, num_classes, ties=i % 2 == 1)
                               for i in range(40)])
            expected = [reference_optimal_k(p, epsilon)[0] for p in priors]
            np.testing.assert_array_equal(optimal_k(priors, epsilon), expected)


@pytest.mark.parametrize("epsilon", [0.01, 0.5, 3.0, 20.0])
def test_uniform_prior_is_plain_rr(epsilon):
    num_classes = 9
    uniform = np.full((1, num_classes), 1 / num_classes)
    assert optimal_k(uniform, epsilon)[0] == num_classes
    keep = 1.0 / (1.0 + (num_classes - 1) * math.exp(-epsilon))
    dist = rr_with_prior_distribution([4], uniform, epsilon)[0]
    np.testing.assert_allclose(dist[4], keep)
    np.testing.assert_allclose(np.delete(dist, 4), (1 - keep) / (num_classes - 1))


def test_infinite_epsilon_keeps_labels():
    rng = np.random.default_rng(0)
    priors = rng.dirichlet(np.full(10, 0.2), size=500)
    priors[:, 3] = 0.0  # labels with zero prior are kept too
    priors /= priors.sum(axis=1, keepdims=True)
    labels = rng.integers(0, 10, 500)
    np.testing.assert_array_equal(rr_with_prior(labels, priors, math.inf, rng), labels)
    np.testing.assert_array_equal(rr_with_prior_distribution(labels, priors, math.inf),
                                  np.eye(10)[labels])
    np.testing.assert_array_equal(optimal_k(priors, math.inf), 10)


def test_sharp_prior_prunes_and_large_epsilon_is_finite():
    prior = np.array([[0.97, 0.01, 0.01, 0.01]])
    assert optimal_k(prior, 1.0)[0] == 1
    assert np.isfinite(rr_with_prior_distribution([2], prior, 1000.0)).all()


def test_empty_batch():
    out = rr_with_prior(np.zeros(0, dtype=int), np.zeros((0, 3)), 1.0, np.random.default_rng(0))
    assert out.shape == (0,)


def test_output_is_int_and_seeded():
    rng = np.random.default_rng(1)
    priors = rng.dirichlet(np.ones(5), size=200)
    labels = rng.integers(0, 5, 200)
    a = rr_with_prior(labels, priors, 1.0, np.random.default_rng(9))
    b = rr_with_prior(labels, priors, 1.0, np.random.default_rng(9))
    assert a.dtype.kind == "i" and a.shape == (200,)
    np.testing.assert_array_equal(a, b)


# ----- bad input ----------------------------------------------------------------------------

GOOD_PRIORS = np.full((2, 3), 1 / 3)
GOOD_LABELS = np.array([0, 2])


@pytest.mark.parametrize("labels, priors, epsilon, message", [
    (GOOD_LABELS, np.full(3, 1 / 3), 1.0, "2-D"),
    (np.array([0, 1, 2]), GOOD_PRIORS, 1.0, "labels must have shape"),
    (np.array([0.0, 1.0]), GOOD_PRIORS, 1.0, "integers"),
    (np.array([0, 3]), GOOD_PRIORS, 1.0, "labels must be in"),
    (np.array([-1, 0]), GOOD_PRIORS, 1.0, "labels must be in"),
    (GOOD_LABELS, np.array([[0.5, 0.6, -0.1], [1 / 3] * 3]), 1.0, "non-negative"),
    (GOOD_LABELS, np.array([[0.5, 0.6, 0.1], [1 / 3] * 3]), 1.0, "sum to 1"),
    (GOOD_LABELS, np.array([[np.nan, 0.5, 0.5], [1 / 3] * 3]), 1.0, "NaN"),
    (GOOD_LABELS, GOOD_PRIORS, 0.0, "epsilon"),
    (GOOD_LABELS, GOOD_PRIORS, -1.0, "epsilon"),
    (GOOD_LABELS, GOOD_PRIORS, math.nan, "epsilon"),
    (GOOD_LABELS, GOOD_PRIORS, "1", "epsilon"),
])
def test_bad_arguments(labels, priors, epsilon, message):
    rng = np.random.default_rng(0)
    calls = [lambda: rr_with_prior(labels, priors, epsilon, rng),
             lambda: rr_top_k(labels, priors, 1, epsilon, rng),
             lambda: rr_with_prior_distribution(labels, priors, epsilon),
             lambda: rr_top_k_distribution(labels, priors, 1, epsilon)]
    for call in calls:
        with pytest.raises(ValueError, match=message):
            call()


@pytest.mark.parametrize("k, message", [
    (0, r"k must be in \[1, 3\]"), (4, r"k must be in \[1, 3\]"),
    (np.array([1, 4]), r"k must be in \[1, 3\]"), (1.5, "integer"),
    (np.array([1, 2, 3]), "shape"),
])
def test_bad_k(k, message):
    with pytest.raises(ValueError, match=message):
        rr_top_k(GOOD_LABELS, GOOD_PRIORS, k, 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match=message):
        rr_top_k_distribution(GOOD_LABELS, GOOD_PRIORS, k, 1.0)


def test_bad_rng_and_counts():
    with pytest.raises(ValueError, match="Generator"):
        rr_with_prior(GOOD_LABELS, GOOD_PRIORS, 1.0, 0)
    with pytest.raises(ValueError, match="num_classes"):
        randomized_response(GOOD_LABELS, 0, 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="epsilon"):
        optimal_k(GOOD_PRIORS, 0.0)


# ----- noisy cluster priors (Algorithm 4) ---------------------------------------------------

def histogram_max_log_ratio(noise, radius=60):
    """max over outputs of log P(out | h) / P(out | h') for one changed label.

    Changing a label takes one count from bin a and gives it to bin b; the other bins'
    noise is identical. With z = output - h on each of the two bins, the log ratio is
    [log f(z_a) - log f(z_a + 1)] + [log f(z_b) - log f(z_b - 1)]; all pairs are checked.
    """
    z = np.arange(-radius, radius + 1)
    from_a = noise.logpmf(z) - noise.logpmf(z + 1)
    to_b = noise.logpmf(z) - noise.logpmf(z - 1)
    return (from_a[:, None] + to_b[None, :]).max()


@pytest.mark.parametrize("epsilon", [0.025, 0.05, 0.5, 1.0, 3.0])
def test_histogram_noise_is_epsilon_dp(epsilon):
    bound = histogram_max_log_ratio(cluster_histogram_noise(epsilon))
    assert bound <= epsilon + 1e-9
    assert bound == pytest.approx(epsilon)  # and the bound is reached


@pytest.mark.parametrize("epsilon", [0.05, 1.0])
def test_histogram_noise_at_the_wrong_scale_fails(epsilon):
    assert histogram_max_log_ratio(scipy.stats.dlaplace(a=epsilon)) > epsilon + 1e-9


def test_noisy_cluster_priors():
    rng = np.random.default_rng(0)
    clusters = rng.integers(0, 4, 3000)
    labels = (clusters + (rng.random(3000) < 0.2)) % 3  # cluster c mostly holds label c % 3
    priors = noisy_cluster_priors(labels, clusters, 4, 3, 0.5, rng)
    assert priors.shape == (3000, 3)
    np.testing.assert_allclose(priors.sum(axis=1), 1.0)
    for c in range(4):
        members = priors[clusters == c]
        assert (members == members[0]).all()
        assert members[0].argmax() == c % 3
    # with almost no noise the prior is the cluster's label histogram
    exact = noisy_cluster_priors(labels, clusters, 4, 3, 80.0, rng)
    for c in range(4):
        hist = np.bincount(labels[clusters == c], minlength=3)
        np.testing.assert_allclose(exact[clusters == c][0], hist / hist.sum())


@pytest.mark.parametrize("kwargs, message", [
    ({"epsilon": math.inf}, "finite"),
    ({"epsilon": 0.0}, "epsilon"),
    ({"clusters": np.array([0, 5])}, "clusters must be in"),
    ({"labels": np.array([0, 1, 2])}, "labels must have shape"),
    ({"num_clusters": 0}, "num_clusters"),
])
def test_noisy_cluster_priors_bad_arguments(kwargs, message):
    args = {"labels": np.array([0, 1]), "clusters": np.array([0, 1]), "num_clusters": 2,
            "num_classes": 2, "epsilon": 1.0, "rng": np.random.default_rng(0)} | kwargs
    with pytest.raises(ValueError, match=message):
        noisy_cluster_priors(**args)


# Three rows of labels 0 with uniform priors over 3 classes, released by each mechanism.
THREE = np.zeros(3, int)
UNIFORM = np.full((3, 3), 1 / 3)


@pytest.mark.parametrize("release, name", [
    (lambda ledger, rows, rng: mechanisms.rr_with_prior(
        ledger, THREE, UNIFORM, 0.7, rng, examples=rows, group="g"), "RRWithPrior"),
    (lambda ledger, rows, rng: mechanisms.rr_top_k(
        ledger, THREE, UNIFORM, 2, 0.7, rng, examples=rows, group="g"), "RRTop-k"),
    (lambda ledger, rows, rng: mechanisms.randomized_response(
        ledger, THREE, 3, 0.7, rng, examples=rows, group="g"), "randomized response"),
    (lambda ledger, rows, rng: mechanisms.noisy_cluster_priors(
        ledger, THREE, THREE, 1, 3, 0.7, rng, examples=rows, group="g"),
     "noisy cluster histograms"),
])
def test_each_release_charges_its_epsilon_to_the_labels_of_its_rows(release, name):
    from benchmarks.privacy import Field, Ledger, PureEpsilon

    ledger, rows = Ledger(), np.array([4, 7, 9])
    release(ledger, rows, np.random.default_rng(0))
    [charge] = ledger.charges
    assert (charge.mechanism, charge.cost, charge.touches.field) == (
        name, PureEpsilon(0.7), Field.LABELS)
    np.testing.assert_array_equal(charge.touches.examples, rows)
    assert charge.touches.group == "g"
    with pytest.raises(ValueError, match="needs the run's privacy ledger"):
        release(None, rows, np.random.default_rng(0))
    with pytest.raises(ValueError, match="index of each of the 3 rows"):
        release(Ledger(), rows[:2], np.random.default_rng(0))
