"""The one-run test of a claimed trade-off curve (benchmarks.privacy.one_run_fdp, Mahloujifar,
Melis and Chaudhuri 2025) and what it rests on: the curves of privacy profiles, the
test's rejections against a direct computation from its theorem on small games, its
false-positive rate on exactly simulated mechanisms at their claim and its power at 0.7
times their noise, and the claimed profile read from a ledger."""
import math

import numpy as np
import pytest
from scipy import optimize, special, stats

from benchmarks.audit.claim_audit import (CLAIM_GUESS_SHARES, audit_claim, noise_boundary,
                                          right_guesses)
from benchmarks.audit.simulation import GaussianRelease, add_release
from benchmarks.privacy import Ledger, Neighbours, RdpCurve, SampledGaussian, rdp, records
from benchmarks.privacy.claimed_profile import PLD, RDP, ClaimedProfile
from benchmarks.privacy.one_run_fdp import rejects
from benchmarks.privacy.phantom_canaries import PhantomCanaries
from benchmarks.privacy.tradeoff import TradeOff

ALPHA = 0.05


def gaussian_profile(mu: float, epsilons: np.ndarray) -> np.ndarray:
    """delta(epsilon) of the Gaussian mechanism with mean shift mu (Balle and Wang 2018)."""
    return (stats.norm.cdf(-epsilons / mu + mu / 2)
            - np.exp(epsilons) * stats.norm.cdf(-epsilons / mu - mu / 2))


def gaussian_curve(mu: float, points: int = 600) -> TradeOff:
    epsilons = np.linspace(0, 10 * mu + 2, points)
    return TradeOff(epsilons, gaussian_profile(mu, epsilons))


def rr_curve(epsilon: float) -> TradeOff:
    """Randomised response on one bit, pure epsilon-DP: delta is 0 from epsilon on."""
    epsilons = np.linspace(0, 2 * epsilon, 401)
    return TradeOff(epsilons, np.maximum(0.0, 1 - np.exp(epsilons - epsilon)))


# ----- trade-off curves -------------------------------------------------------------------

@pytest.mark.parametrize("mu", [0.25, 1.0, 3.0])
def test_a_gaussian_profiles_curve_is_the_gaussian_trade_off_never_above_it(mu):
    alphas = np.linspace(0, 1, 2001)
    exact = stats.norm.cdf(stats.norm.ppf(1 - alphas) - mu)
    curve = gaussian_curve(mu)
    found = np.array([curve(a) for a in alphas])
    assert np.all(found <= exact + 1e-12)  # never a stronger claim than the profile's
    assert np.max(exact - found) < 2e-4


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_a_pure_profiles_curve_is_randomised_responses(epsilon):
    alphas = np.linspace(0, 1, 1001)
    exact = np.maximum.reduce([np.zeros_like(alphas), 1 - np.exp(epsilon) * alphas,
                               np.exp(-epsilon) * (1 - alphas)])
    curve = rr_curve(epsilon)
    assert np.allclose([curve(a) for a in alphas], exact, atol=1e-12)


def test_curves_are_symmetric_convex_and_decreasing():
    for curve in (gaussian_curve(0.7), rr_curve(1.0)):
        alphas = np.linspace(0, 1, 501)
        values = np.array([curve(a) for a in alphas])
        assert np.allclose([curve(v) for v in values], alphas, atol=1e-9)  # its own inverse
        assert np.all(np.diff(values) <= 1e-15) and np.all(np.diff(values, 2) >= -1e-12)


# ----- the test against its theorem, computed directly --------------------------------------

def most_likely_count(curve: TradeOff, canaries: int, guesses: int, correct: int,
                      constrained_below: int) -> float:
    """The largest P[W >= correct] over laws of the right count W on 0..guesses that meet
    the theorem's constraints r(i+1) <= 1 - f(h(i)) for i < constrained_below, where
    r(i) = E[W; W >= i] / m and h(i) = E[guesses - W; W >= i] / m: a linear programme,
    since 1 - f is the least of the lines 1 - (segment of f) through the curve's corners."""
    counts = np.arange(guesses + 1)
    slopes = np.diff(curve.y) / np.diff(curve.x)
    intercepts = curve.y[:-1] - slopes * curve.x[:-1]
    rows, bounds = [], []
    for i in range(constrained_below):
        right = np.where(counts >= i + 1, counts, 0) / canaries
        wrong = np.where(counts >= i, guesses - counts, 0) / canaries
        for slope, intercept in zip(slopes, intercepts):
            rows.append(right + slope * wrong)  # r <= 1 - (slope h + intercept)
            bounds.append(1 - intercept)
    found = optimize.linprog(-(counts >= correct).astype(float),
                             A_ub=np.array(rows) if rows else None,
                             b_ub=np.array(bounds) if rows else None,
                             A_eq=np.ones((1, guesses + 1)), b_eq=[1.0], bounds=(0, None),
                             method="highs")
    assert found.status == 0, found.message
    return -found.fun


@pytest.mark.parametrize("curve, canaries, guesses", [
    (gaussian_curve(1.0, 100), 20, 20), (gaussian_curve(2.0, 100), 30, 12),
    (rr_curve(1.5), 25, 25),
], ids=["gaussian-mu1-all-guessed", "gaussian-mu2-abstaining", "rr-eps1.5"])
def test_rejections_are_where_the_theorems_largest_probability_is_below_alpha(
        curve, canaries, guesses):
    """The recursion is the least solution of the theorem's constraints below the
    observed count: it rejects exactly where the largest probability of that many right
    guesses those constraints allow is below alpha; with every constraint (the theorem
    whole) that probability is smaller still."""
    decided = 0
    for correct in range(guesses + 1):
        relaxed = most_likely_count(curve, canaries, guesses, correct, correct)
        whole = most_likely_count(curve, canaries, guesses, correct, guesses)
        assert whole <= relaxed + 1e-9
        if abs(relaxed - ALPHA) > 1e-6:
            assert rejects(curve, canaries, guesses, correct, ALPHA) == (relaxed < ALPHA), \
                (correct, relaxed)
            decided += 1
    assert decided >= guesses  # the comparison was made, not skipped


@pytest.mark.parametrize("epsilon, canaries", [(1.0, 40), (2.0, 60), (0.5, 200)])
def test_randomised_response_exceeds_the_rejection_count_at_most_alpha_exactly(epsilon,
                                                                              canaries):
    """Randomised response on each canary's coin, every coin guessed from its release:
    the right guesses are Binomial(m, e^eps / (1 + e^eps)) exactly, and the least count
    the test rejects is reached with probability below alpha."""
    curve = rr_curve(epsilon)
    first = next(c for c in range(canaries + 1) if rejects(curve, canaries, canaries, c, ALPHA))
    assert stats.binom.sf(first - 1, canaries, special.expit(epsilon)) < ALPHA
    assert all(rejects(curve, canaries, canaries, c, ALPHA) for c in range(first, canaries + 1))


def test_impossible_counts_are_refused():
    curve = rr_curve(1.0)
    for args in [(10, 11, 3), (10, 5, 6), (0, 0, 0), (10, 5, -1), (10, 5, 2.0)]:
        with pytest.raises(ValueError):
            rejects(curve, *args, ALPHA)
    with pytest.raises(ValueError):
        rejects(curve, 10, 5, 3, 1.5)


# ----- exactly simulated mechanisms: false positives at the claim, power at 0.7 sigma ----

# A Poisson-sampled Gaussian small enough to simulate often: 100,000 canaries, 10 steps,
# epsilon 1.6 at delta 1e-5 (PLD); the 500 strongest guessed, a count fixed here for this
# size (the suites' 0.2% suits 500,000 canaries).
CANARIES, RATE, SIGMA, STEPS, DELTA, GUESSES = 100_000, 0.2, 2.0, 10, 1e-5, 500
RUNS = 30


def claim(sigma: float = SIGMA, rate: float = RATE, steps: int = STEPS) -> ClaimedProfile:
    ledger = Ledger()
    ledger.charge("DP-SGD (Poisson-sampled Gaussian)", records(),
                  SampledGaussian(sigma, rate, steps))
    return ClaimedProfile(tuple(ledger.charges), DELTA)


def simulated_evidence(rng: np.random.Generator, noise: float, rate: float = RATE,
                       steps: int = STEPS) -> tuple[np.ndarray, np.ndarray]:
    """The phantom canaries' evidence after the mechanism at ``noise`` (sampled, clipped
    to 1, noised; its exact law, benchmarks.audit.simulation), read as the audited twin
    reads it."""
    phantoms = PhantomCanaries(rng.integers(0, 2, CANARIES).astype(bool),
                               Neighbours.ADD_REMOVE)
    add_release(rng, phantoms, GaussianRelease("simulated", noise, rate, steps, 0))
    return phantoms.evidence(), phantoms.coins


def rejection_rate(claimed: ClaimedProfile, noise: float, seed: int, runs: int = RUNS,
                   **mechanism) -> float:
    curve, rng = claimed.tradeoff(), np.random.default_rng(seed)
    found = []
    for _ in range(runs):
        evidence, coins = simulated_evidence(rng, noise, **mechanism)
        [correct] = right_guesses(evidence, coins, [GUESSES])
        found.append(rejects(curve, CANARIES, GUESSES, correct, ALPHA))
    return float(np.mean(found))


@pytest.mark.parametrize("sampled", [True, False], ids=["poisson-sampled", "one-gaussian"])
def test_the_claim_is_rejected_in_at_most_5_percent_of_exact_runs_at_its_noise(sampled):
    """At its claim, the mechanism is rejected in at most 5% of runs (in none, here: the
    test holds for every f-DP mechanism, so it is cautious with this one)."""
    mechanism = {} if sampled else {"rate": 1.0, "steps": 1}
    assert rejection_rate(claim(**mechanism), SIGMA, seed=1, **mechanism) <= ALPHA


@pytest.mark.parametrize("sampled", [True, False], ids=["poisson-sampled", "one-gaussian"])
def test_the_claim_is_rejected_in_most_exact_runs_at_07_times_its_noise(sampled):
    """Its power at 0.7 sigma with 100,000 canaries, at least 70% of 30 runs: the
    Poisson-sampled release's measured 84% (docs/audits.md) gives 21 or more of 30 with
    probability 98%, and 92% at its interval's lower end, 79%; at 0.5 sigma, every run
    (of 10)."""
    mechanism = {} if sampled else {"rate": 1.0, "steps": 1}
    assert rejection_rate(claim(**mechanism), 0.7 * SIGMA, seed=2, **mechanism) >= 0.7
    assert rejection_rate(claim(**mechanism), 0.5 * SIGMA, seed=3, runs=10, **mechanism) == 1.0


# ----- the audit of a claim, its family and its empirical epsilon ----------------------

def test_an_audit_reports_the_verdict_and_the_familys_boundary():
    """On one Gaussian release (fast to account at any noise), at its suites' share."""
    rng, one = np.random.default_rng(4), {"rate": 1.0, "steps": 1}
    claimed = claim(**one)
    honest = audit_claim(*simulated_evidence(rng, SIGMA, **one), claimed)
    assert not honest.rejected and honest.canaries == CANARIES
    assert honest.guesses == (int(CLAIM_GUESS_SHARES[0] * CANARIES),)
    assert honest.empirical_noise_scale > 1.0
    assert 0 < honest.empirical_epsilon < honest.claimed_epsilon
    assert honest.claimed_epsilon == pytest.approx(claimed.epsilon())
    assert honest.empirical_epsilon == pytest.approx(
        claimed.scaled(honest.empirical_noise_scale).epsilon())
    assert honest.claim.endswith("composed by the " + PLD)
    broken = audit_claim(*simulated_evidence(rng, 0.5 * SIGMA, **one), claimed)
    assert broken.rejected and broken.empirical_noise_scale < 1.0
    assert broken.empirical_epsilon > broken.claimed_epsilon


def test_the_boundary_is_the_least_rejected_scale():
    for true in (0.5, 0.6, 0.93, 1.0, 1.3, 3.99):
        found = noise_boundary(lambda scale: scale >= true)
        assert true <= found <= 1.01 * true
    assert noise_boundary(lambda scale: scale >= 5.0) is None
    assert noise_boundary(lambda scale: True) == 0.5


def test_guesses_are_the_largest_evidence_with_its_sign():
    evidence = np.array([0.1, -3.0, 2.0, -0.5, 0.0])
    coins = np.array([True, False, False, False, True])
    assert right_guesses(evidence, coins, [1, 2, 3, 5]) == [1, 1, 2, 3]


# ----- the claimed profile read from a ledger -------------------------------------------

def test_a_sampled_gaussian_claim_is_its_pld_and_grows_with_the_noise():
    claimed = claim(sigma=1.2, rate=0.01, steps=200)
    assert claimed.accountant == PLD
    pld = rdp.sampled_gaussian_pld_epsilon(1.2, 0.01, 200, DELTA)  # finer, as the ledger's
    assert pld <= claimed.epsilon() <= 1.01 * pld
    assert claimed.epsilon() < rdp.sampled_gaussian_epsilon(1.2, 0.01, 200, DELTA)
    less, more = claimed.scaled(0.7).tradeoff(), claimed.scaled(1.4).tradeoff()
    for alpha in np.linspace(0.001, 0.999, 50):
        assert less(alpha) <= claimed.tradeoff()(alpha) <= more(alpha)


def test_composed_gaussians_compose_and_other_charges_go_through_rdp():
    ledger = Ledger()
    ledger.charge("mean", records(group="means"), SampledGaussian(8.0, 1.0, 1))
    ledger.charge("DP-SGD", records(), SampledGaussian(1.0, 0.01, 100))
    composed = ClaimedProfile(tuple(ledger.charges), DELTA)
    assert composed.accountant == PLD
    assert composed.epsilon() > claim(1.0, 0.01, 100).epsilon()
    tuned = Ledger()
    tuned.charge("private selection", records(),
                 RdpCurve(tuple(rdp.sampled_gaussian_rdp(1.0, 0.01, 100))))
    by_rdp = ClaimedProfile(tuple(tuned.charges), DELTA)
    assert by_rdp.accountant == RDP
    assert by_rdp.epsilon() == pytest.approx(rdp.sampled_gaussian_epsilon(1.0, 0.01, 100, DELTA))
    # Scaled as a Gaussian's: the curve divided by s^2.
    assert by_rdp.scaled(2.0).epsilon() == pytest.approx(rdp.epsilon_from_rdp(
        rdp.sampled_gaussian_rdp(1.0, 0.01, 100) / 4, DELTA)[0])
    assert math.isfinite(by_rdp.tradeoff()(0.5))
