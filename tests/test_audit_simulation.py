"""The exact simulations of honest twins (benchmarks.audit.simulation): the sums they
draw have the law of a release run step by step, honest twins are flagged at most at
the family-wise level, and broken releases are flagged. The suites' settings, 1,000 runs
each: python -m speed.bench_false_flags (docs/audits.md)."""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from scipy import stats

from benchmarks.audit import levels, simulation
from benchmarks.privacy import Ledger, Neighbours, SampledGaussian, randomizers, records
from benchmarks.privacy.claimed_profile import ClaimedProfile
from benchmarks.privacy.phantom_canaries import PROBES, PhantomCanaries

# A release small enough to simulate in seconds: epsilon 2.2 at delta 1e-5 (PLD).
RELEASE = simulation.GaussianRelease("simulated", noise=2.0, sampling_rate=0.2, steps=20,
                                     real_values=20 * 500)
PHANTOMS = 50_000


def step_by_step(rng: np.random.Generator, planted: PhantomCanaries,
                 release: simulation.GaussianRelease) -> None:
    """``release`` run as a mechanism runs it: each step samples the phantoms in the set,
    adds their clipped vectors (1 clip norm, in their direction) and noises every
    coordinate."""
    contribution = np.zeros(planted.size)
    for _ in range(release.steps):
        sampled = rng.random(len(planted.rows)) < release.sampling_rate
        contribution[:] = 0
        contribution[planted.rows] = planted.signs * sampled
        real = release.noise * rng.standard_normal(release.real_values // release.steps)
        planted.observe(release.mechanism,
                        contribution + release.noise * rng.standard_normal(planted.size),
                        release.sampling_rate, 1.0, release.noise, float(real @ real),
                        len(real))


@pytest.mark.parametrize("neighbours", [Neighbours.ADD_REMOVE, Neighbours.SUBSTITUTION])
def test_the_simulated_sums_have_the_law_of_the_release_step_by_step(neighbours):
    coins = np.arange(20_000) % 2 == 0
    stepped, drawn = PhantomCanaries(coins, neighbours), PhantomCanaries(coins, neighbours)
    step_by_step(np.random.default_rng(0), stepped, RELEASE)
    simulation.add_release(np.random.default_rng(1), drawn, RELEASE)
    [a], [b] = stepped.releases.values(), drawn.releases.values()
    for side in (coins, ~coins):
        assert stats.ks_2samp(b.sums[side], a.sums[side]).pvalue > 1e-3
        assert stats.ks_2samp(drawn.evidence()[side], stepped.evidence()[side]).pvalue > 1e-3
        for row in range(len(a.counts)):  # each bin's counts
            found, expected = b.counts[row, side], a.counts[row, side]
            assert abs(found.mean() - expected.mean()) <= 5 * max(expected.std(), 0.01) / 100
    assert b.probe_values == a.probe_values == PROBES * RELEASE.steps
    assert b.noise_variance == pytest.approx(RELEASE.noise ** 2, rel=0.01)
    assert b.real_values == a.real_values


@pytest.mark.parametrize("way", [simulation.each_draw, simulation.bin_by_bin,
                                 simulation.multinomial],
                         ids=["each-draw", "bin-by-bin", "the-first-bin-by-bin-the-rest-each"])
def test_every_way_of_drawing_the_counts_has_the_multinomial_law(way):
    """Each column's counts sum to its draws, a bin of probability 0 gets none, and the
    10 outcomes of 3 draws over the other 3 bins come up as often as the multinomial's
    probabilities say (chi-squared). ``multinomial`` draws the first bin (1.74 expected
    draws a column) bin by bin and the others (fewer than one) draw by draw."""
    p = np.array([0.6, 0.0, 0.25, 0.15])
    draws = np.repeat([0, 1, 3], [1_000, 1_000, 50_000])
    counts = way(np.random.default_rng(0), draws, p)
    assert counts.shape == (len(p), len(draws)) and np.array_equal(counts.sum(0), draws)
    assert not counts[1].any()
    outcomes, found = np.unique(counts[:, draws == 3].T, axis=0, return_counts=True)
    assert len(outcomes) == 10
    expected = stats.multinomial.pmf(outcomes, 3, p) * found.sum()
    assert stats.chisquare(found, expected).pvalue > 1e-3
    assert np.mean(counts[:, draws == 1], axis=1) == pytest.approx(p, abs=0.05)


@functools.cache
def small_claim() -> ClaimedProfile:
    ledger = Ledger()
    ledger.charge("simulated", records(), SampledGaussian(RELEASE.noise, RELEASE.sampling_rate,
                                                          RELEASE.steps))
    return ClaimedProfile(tuple(ledger.charges), 1e-5)


def small_twin(rng, release=RELEASE, real_noise=1.0) -> simulation.Twin:
    return simulation.gaussian_twin(rng, (release,), small_claim(), Neighbours.ADD_REMOVE,
                                    epsilon=small_claim().epsilon(), phantoms=PHANTOMS,
                                    canaries=300, real_noise=real_noise)


def at_most_the_level(flagged: int, runs: int) -> bool:
    """At most as many flags as ``runs`` twins flagged at the family-wise level give
    but with probability 0.1%."""
    return flagged <= stats.binom.ppf(0.999, runs, levels.FAMILY_WISE_LEVEL)


@pytest.mark.integration  # seconds; speed.bench_false_flags measures the suites' 1,000 runs
def test_honest_twins_are_flagged_at_most_at_the_family_wise_level():
    """A small Gaussian release and the quick suite's ALIBI release, whose bound at the
    release is tight (its rejections near their 2.5%), 40 runs each."""
    assert at_most_the_level(simulation.flagged(40, small_twin), 40)
    alibi = lambda ledger, labels, rng, rows: randomizers.laplace_one_hot(
        ledger, labels, 10, 1.0, rng, examples=rows)
    assert at_most_the_level(
        simulation.flagged(40, lambda rng: simulation.label_twin(rng, alibi, 10, 1.0)), 40)


def test_broken_releases_are_flagged_in_the_simulations_too():
    """Real coordinates noised at half the phantoms' noise fail the noise check; a
    release at half its noise fails the claim test."""
    rng, level = np.random.default_rng(3), levels.FAMILY_WISE_LEVEL
    halved_real = small_twin(rng, real_noise=0.5)(level)
    assert [t.test for t in halved_real.tests if t.rejects] == [levels.NOISE]
    halved = small_twin(rng, release=simulation.GaussianRelease(
        "simulated", RELEASE.noise / 2, RELEASE.sampling_rate, RELEASE.steps,
        RELEASE.real_values))(level)
    assert halved.of(levels.CLAIM).rejects


def test_randomized_response_at_the_claim_is_the_one_run_bounds_tight_case():
    """The model of a checked twin: at epsilon 1 its right guesses are
    Binomial(m, e / (1 + e)), where the one-run bound is exact."""
    rng = np.random.default_rng(4)
    verdicts = [simulation.checked_twin(rng, Ledger(), 1.0, 0.0, 2000)(levels.FAMILY_WISE_LEVEL)
                for _ in range(20)]
    bounds = [v.of(levels.MODEL).bound for v in verdicts]
    assert not any(v.flagged for v in verdicts)
    assert 0.7 < np.median(bounds) < 1.0
    assert math.isclose(verdicts[0].family_wise, levels.FAMILY_WISE_LEVEL)
