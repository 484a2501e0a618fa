"""PATE's aggregators: their output distributions, drawn many times with a fixed seed,
against the exact distributions computed by numerical integration; input checks.

The exact distributions here are also what tests/test_pate_analysis.py checks the
privacy bounds against."""
import itertools
import math

import numpy as np
import pytest
import scipy.integrate
import scipy.special
import scipy.stats

from charged import confident_gnmax, gnmax, lnmax

# The standard normal integration variable: the densest noise a case here needs is
# sigma = 0.5 with gaps up to 8 votes, i.e. peaks within |z| < 16.
_Z = np.linspace(-40.0, 40.0, 16001)


def with_precise_likeliest(log_probs):
    """The likeliest output's log probability as log(1 - the others' total): computed
    directly, its rounding error would swamp divergences of order of the others."""
    out = np.array(log_probs)
    rows = np.arange(len(out))
    top = out.argmax(axis=1)
    others = out.copy()
    others[rows, top] = -np.inf
    out[rows, top] = np.log1p(-np.exp(scipy.special.logsumexp(others, axis=1)))
    return out


def gnmax_log_probs(votes, sigma):
    """(V, K) log Pr[GNMax outputs j]: log of the integral over z of
    phi(z) prod_{k != j} Phi((n_j - n_k) / sigma + z), by Simpson's rule on a grid fine
    enough for every output's own peak (each scaled by its own maximum, so tiny
    probabilities keep their relative precision)."""
    votes = np.asarray(votes, dtype=float)
    num_classes = votes.shape[1]
    lead = (votes[:, :, None] - votes[:, None, :]) / sigma  # lead[v, j, k] = (n_j - n_k) / sigma
    log_cdf = scipy.special.log_ndtr(lead[..., None] + _Z)
    others = ~np.eye(num_classes, dtype=bool)[None, :, :, None]
    log_integrand = (np.where(others, log_cdf, 0.0).sum(axis=2)
                     - _Z**2 / 2 - 0.5 * math.log(2 * math.pi))
    peak = log_integrand.max(axis=-1, keepdims=True)
    integral = scipy.integrate.simpson(np.exp(log_integrand - peak), x=_Z, axis=-1)
    return with_precise_likeliest(peak[..., 0] + np.log(integral))


def lnmax_log_probs(votes, gamma):
    """(V, K) log Pr[LNMax outputs j]: the integral over x of the Laplace(1/gamma) density
    at x - n_j times prod_{k != j} of its cdf at x - n_k, by quad with the kinks marked."""
    b = 1.0 / gamma

    def log_cdf(y):
        return math.log(0.5) + y / b if y < 0 else math.log1p(-0.5 * math.exp(-y / b))

    def log_density(x, counts, j):
        return (-abs(x - counts[j]) / b - math.log(2 * b)
                + sum(log_cdf(x - c) for k, c in enumerate(counts) if k != j))

    out = np.empty(np.shape(votes))
    for row, counts in enumerate(np.asarray(votes, dtype=float)):
        for j in range(len(counts)):
            value, _ = scipy.integrate.quad(
                lambda x, counts=counts, j=j: math.exp(log_density(x, counts, j)),
                counts.min() - 80 * b, counts.max() + 80 * b, points=sorted(set(counts)),
                epsabs=0, epsrel=1e-12, limit=400)
            out[row, j] = math.log(value)
    return with_precise_likeliest(out)


def all_vote_vectors(teachers, classes):
    """Every vote vector of ``teachers`` votes over ``classes`` classes."""
    return np.array([c for c in itertools.product(range(teachers + 1), repeat=classes)
                     if sum(c) == teachers])


# ----- the exact distributions themselves -------------------------------------------------

def test_gnmax_integration_agrees_with_closed_form_and_quad():
    # Two classes: class 1 wins when N(0, 2 sigma^2) > n_0 - n_1.
    votes = all_vote_vectors(6, 2)
    expected = scipy.stats.norm.logsf((votes[:, 0] - votes[:, 1]) / (math.sqrt(2) * 0.5))
    np.testing.assert_allclose(gnmax_log_probs(votes, 0.5)[:, 1], expected, rtol=1e-9,
                               atol=1e-13)
    # Three classes, a tiny probability, against adaptive quadrature.
    counts, sigma = np.array([6.0, 0.0, 0.0]), 0.5

    def integrand(z):
        return scipy.stats.norm.pdf(z) * scipy.stats.norm.cdf((counts[1] - counts[0]) / sigma + z) \
            * scipy.stats.norm.cdf((counts[1] - counts[2]) / sigma + z)

    value, _ = scipy.integrate.quad(integrand, -40, 40, points=[0, 6, 12], epsabs=0,
                                    epsrel=1e-12, limit=400)
    assert gnmax_log_probs(counts[None], sigma)[0, 1] == pytest.approx(math.log(value),
                                                                       rel=1e-9)


@pytest.mark.parametrize("log_probs, scale", [(gnmax_log_probs, 1.0), (lnmax_log_probs, 0.5)])
def test_exact_distributions_sum_to_one(log_probs, scale):
    votes = all_vote_vectors(4, 3)
    np.testing.assert_allclose(np.exp(log_probs(votes, scale)).sum(axis=1), 1.0, atol=1e-10)


# ----- draws against the exact distributions ----------------------------------------------

ROWS = np.array([[5, 3, 0], [2, 2, 2], [6, 0, 0], [1, 4, 1]])
DRAWS = 20_000


def label_counts(labels, classes):
    """(rows, classes + 1) counts of each label per row of ROWS, -1 (unanswered) last."""
    per_row = labels.reshape(len(ROWS), DRAWS)
    return np.stack([np.bincount(np.where(r < 0, classes, r), minlength=classes + 1)
                     for r in per_row])


def chi_square_p(counts, probs):
    return scipy.stats.chisquare(counts, DRAWS * probs / probs.sum()).pvalue


@pytest.mark.parametrize("aggregate, log_probs, scale, wrong_scale", [
    (gnmax, gnmax_log_probs, 2.0, 1.6),
    (lnmax, lnmax_log_probs, 0.5, 0.6),
])
def test_aggregator_draws_follow_the_exact_distribution(aggregate, log_probs, scale,
                                                        wrong_scale):
    labels = aggregate(np.repeat(ROWS, DRAWS, axis=0), scale, np.random.default_rng(0))
    counts = label_counts(labels, 3)
    assert (counts[:, 3] == 0).all()
    exact, wrong = np.exp(log_probs(ROWS, scale)), np.exp(log_probs(ROWS, wrong_scale))
    for row in range(len(ROWS)):
        assert chi_square_p(counts[row, :3], exact[row]) > 1e-3
    # The same test has the power to reject a slightly different noise scale.
    assert min(chi_square_p(counts[row, :3], wrong[row]) for row in range(len(ROWS))) < 1e-6


def test_confident_gnmax_draws_follow_the_exact_distribution():
    threshold, sigma1, sigma2 = 4.0, 1.5, 2.0
    answered, labels = confident_gnmax(np.repeat(ROWS, DRAWS, axis=0), threshold, sigma1,
                                       sigma2, np.random.default_rng(1))
    assert ((labels == -1) == ~answered).all()
    counts = label_counts(labels, 3)
    # Independent noises: Pr[answered and j] = Pr[max + N(0, sigma1^2) >= T] Pr[GNMax = j].
    p_answered = scipy.stats.norm.sf(threshold - ROWS.max(axis=1), scale=sigma1)
    exact = np.column_stack([p_answered[:, None] * np.exp(gnmax_log_probs(ROWS, sigma2)),
                             1 - p_answered])
    for row in range(len(ROWS)):
        assert chi_square_p(counts[row], exact[row]) > 1e-3
    # Threshold noise with sigma2 in place of sigma1 is rejected.
    p_wrong = scipy.stats.norm.sf(threshold - ROWS.max(axis=1), scale=sigma2)
    wrong = np.column_stack([p_wrong[:, None] * np.exp(gnmax_log_probs(ROWS, sigma2)),
                             1 - p_wrong])
    assert min(chi_square_p(counts[row], wrong[row]) for row in range(len(ROWS))) < 1e-6


def test_noise_is_drawn_from_the_generator():
    votes = np.repeat(ROWS, 50, axis=0)
    first = gnmax(votes, 3.0, np.random.default_rng(5))
    np.testing.assert_array_equal(first, gnmax(votes, 3.0, np.random.default_rng(5)))
    assert (first != gnmax(votes, 3.0, np.random.default_rng(6))).any()
    a1, l1 = confident_gnmax(votes, 4, 1.0, 3.0, np.random.default_rng(5))
    a2, l2 = confident_gnmax(votes, 4, 1.0, 3.0, np.random.default_rng(5))
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(l1, l2)


def test_no_queries_give_no_labels():
    empty = np.zeros((0, 4), dtype=int)
    assert gnmax(empty, 1.0, np.random.default_rng(0)).shape == (0,)
    answered, labels = confident_gnmax(empty, 1.0, 1.0, 1.0, np.random.default_rng(0))
    assert answered.shape == labels.shape == (0,)


# ----- input checks -----------------------------------------------------------------------

GOOD = np.array([[3, 1, 0]])


@pytest.mark.parametrize("call, message", [
    (lambda rng: gnmax([3, 1, 0], 1.0, rng), "2-D array"),
    (lambda rng: gnmax([[3], [1]], 1.0, rng), "at least 2 classes"),
    (lambda rng: gnmax([[3, -1, 0]], 1.0, rng), "non-negative"),
    (lambda rng: gnmax([[3, 0.5, 0]], 1.0, rng), "integer counts"),
    (lambda rng: gnmax([[True, False]], 1.0, rng), "integer counts"),
    (lambda rng: gnmax(GOOD, 0.0, rng), "sigma must be"),
    (lambda rng: gnmax(GOOD, math.inf, rng), "sigma must be"),
    (lambda rng: lnmax(GOOD, -1.0, rng), "gamma must be"),
    (lambda rng: gnmax(GOOD, 1.0, 7), "numpy.random.Generator"),
    (lambda rng: confident_gnmax(GOOD, 2.0, None, 1.0, rng), "give both or neither"),
    (lambda rng: confident_gnmax(GOOD, None, None, 1.0, rng), "needs a threshold"),
    (lambda rng: confident_gnmax(GOOD, math.nan, 1.0, 1.0, rng), "threshold must be"),
    (lambda rng: confident_gnmax(GOOD, 2.0, 1.0, 0.0, rng), "sigma2 must be"),
])
def test_bad_input_is_one_line_value_error(call, message):
    with pytest.raises(ValueError, match=message) as error:
        call(np.random.default_rng(0))
    assert "\n" not in str(error.value)
