"""The Gaussian releases' noise check (phantom_canaries.Release.check): the real
coordinates' noise against the probes', an F test whose p-value is exactly uniform on an
honest release, so it rejects at its level, and near 0 where the real coordinates get
half the noise. Its rejection rate at its level on 20,000 honest twins of each suite's
release, through the simulation's own code: python -m speed.bench_noise_check."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from benchmarks.privacy.phantom_canaries import BINS, PROBES, Release

DRAWS = 500


def p_values(real_values: int, probe_values: int, seed: int, real_noise: float = 1.0,
             draws: int = DRAWS) -> np.ndarray:
    """The check's p-value on ``draws`` releases at noise 1.3, their real coordinates at
    ``real_noise`` times it."""
    rng = np.random.default_rng(seed)
    probes = 1.3 ** 2 * rng.chisquare(probe_values, draws)
    reals = (1.3 * real_noise) ** 2 * rng.chisquare(real_values, draws)
    return np.array([Release(0.1, 1.3, np.zeros((BINS, 0)), np.zeros(0),
                             probe_squares=probe, probe_values=probe_values,
                             real_squares=real, real_values=real_values
                             ).check("a release").p_value
                     for probe, real in zip(probes, reals)])


@pytest.mark.parametrize("real_values, probe_values", [(3, 8), (1758 * 4096, 1758 * PROBES)],
                         ids=["few", "label-dp-small"])
def test_an_honest_releases_p_value_is_uniform(real_values, probe_values):
    """At few degrees of freedom, where a wrong count would show, and at label-dp-small's
    DP-SGD release (1,758 steps of 4,096 real coordinates and PROBES probes), where the
    p-value's precision is tested."""
    assert stats.kstest(p_values(real_values, probe_values, seed=0), "uniform").pvalue > 0.01


def test_real_coordinates_at_half_the_noise_fail_it_at_once():
    """At ScatterNet's DP-SGD release in label-dp-small, the fewest real coordinates of
    the suites' releases; 1e-6 is far below any level the check is given."""
    assert (p_values(586 * 4096, 586 * PROBES, seed=1, real_noise=0.5, draws=20) < 1e-6).all()
