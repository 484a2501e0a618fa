"""White-box canaries of a Gaussian release (Steinke, Nasr and Jagielski 2023, Section 6):
m phantom records, each with a vector of norm far above any clip norm on a coordinate of
its own, outside the model, and a fair coin. The coin's two sides are the neighbouring
relation's two datasets, whatever sensitivity the mechanism was configured with:

- add/remove: the phantom is in the training set or not. In the set, it is
  Poisson-sampled, clipped and noised by the same calls as every real example, so its
  coordinate of a step is C when sampled (C the clip norm), plus the noise.
- substitution: every phantom is in the training set, and the coin picks its vector's
  direction, +v or -v: replacing a record (its label, say) moves its clipped vector from
  +C to -C, the most a replacement can move it. A mechanism noised for sensitivity C
  instead of 2C is seen for what it is.

Beyond the phantoms, PROBES coordinates hold no record: their release is the noise alone.

The auditor plants them on the run's ledger (``Ledger.phantoms``); each Gaussian release
of the privacy layer (DP-SGD's noisy clipped sum at every step, a noisy clipped mean)
finds them there, adds their clipped vectors to its sum and noises every coordinate in
the same draw, and hands their coordinates of the release to ``observe``, with the sum
of squares of the noise it added to its own, real coordinates.

What the audit reads, per mechanism (its steps share one sampling rate and one noise
scale): each phantom's sum S1 of its coordinate over the n steps, in clip norms, and the
probes' sum of squares, which measures the noise scale s on the release itself (a
statistic built with the claimed noise would read a release noised less than claimed
with weights made for more). Sampled in K ~ Binomial(n, q) steps (q the claimed sampling
rate), a phantom's sum is N(c K, n s^2), c its direction, so the evidence is the
log-likelihood ratio of S1 between the coin's two sides,

    log sum_k P[K = k] exp((2 k S1 - k^2) / (2 n s^2)) - (the same at c = -1, or 0),

the most powerful test of a coin given the sum, summed over the mechanisms. At the
suites' audited cells (epsilon 1, noise multipliers of 3 and more) it is as powerful as
the log-likelihood ratio of every step; at epsilon 4, where single steps stand out from
the noise, less (docs/audits.md). In exchange it reads the release only through its sums,
whose law is exact at two draws a phantom, so honest audits can be simulated exactly
(benchmarks.audit.simulation).

The noise on the real coordinates is checked against the probes' (``noise_checks``): a
mechanism that noises the phantoms as charged and its own coordinates less is flagged.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import stats

from benchmarks.privacy.noise_checks import NoiseCheck
from benchmarks.privacy.notions import Neighbours

# A phantom's norm, in clip norms: far above any clip, so clipping always binds.
GRADIENT_NORM = 1e3
# The coordinates of every release that hold no record: the noise alone.
PROBES = 16_384


# Counts of sampled steps less likely than this against the likeliest count are left out
# of the evidence's sum (their terms are below 1e-26 of it).
_LOG_NEGLIGIBLE = -60.0
# Exponents beyond this are kept out of exp (float64 overflows at 709).
_LOG_SAFE = 600.0


@dataclasses.dataclass
class Release:
    """What the phantoms saw of one mechanism's releases, in its clip norms."""

    sampling_rate: float
    sums: np.ndarray  # S1 per phantom
    steps: int = 0
    probe_squares: float = 0.0
    probe_values: int = 0
    real_squares: float = 0.0  # the noise added to the mechanism's real coordinates
    real_values: int = 0

    @property
    def noise_variance(self) -> float:
        """The noise scale s^2 measured on the probes, in squared clip norms."""
        return self.probe_squares / self.probe_values

    def check(self, mechanism: str) -> NoiseCheck:
        """The real coordinates' noise against the probes': an F test, in the direction
        of too little noise on the real ones. Both are sums of squares of independent
        normals of the same variance when the mechanism noises all its coordinates
        alike."""
        real = self.real_squares / self.real_values
        if self.noise_variance:
            ratio = real / self.noise_variance
        else:  # phantoms released without noise: the claim test sees that
            ratio = math.inf if real else 1.0
        return NoiseCheck(
            f"{mechanism}, its real coordinates", "the noise of its phantom coordinates",
            f"noise variance {ratio:.4f} of the phantoms' over {self.real_values} real "
            f"and {self.probe_values} probe values",
            float(stats.f.cdf(ratio, self.real_values, self.probe_values)))


class PhantomCanaries:
    """m phantom records with their coins, and the neighbouring relation that says what
    a coin changes."""

    def __init__(self, coins: np.ndarray, neighbours: Neighbours) -> None:
        if neighbours not in (Neighbours.ADD_REMOVE, Neighbours.SUBSTITUTION):
            raise ValueError(f"phantom canaries need neighbours, not {neighbours}")
        self.coins = np.asarray(coins, dtype=bool)
        self.neighbours = neighbours
        self.releases: dict[str, Release] = {}

    def __len__(self) -> int:
        return len(self.coins)

    @property
    def size(self) -> int:
        """The coordinates a release carries for them: the phantoms', then the probes'."""
        return len(self) + PROBES

    @property
    def rows(self) -> np.ndarray:
        """The phantoms in the training set: the only ones a mechanism may sample."""
        if self.neighbours is Neighbours.SUBSTITUTION:
            return np.arange(len(self))
        return np.flatnonzero(self.coins)

    @property
    def signs(self) -> np.ndarray:
        """The direction of each row's vector: +1, or -1 for a replaced record."""
        if self.neighbours is Neighbours.SUBSTITUTION:
            return np.where(self.coins, 1.0, -1.0).astype(np.float32)
        return np.ones(len(self.rows), np.float32)

    @property
    def steps(self) -> int:
        return sum(release.steps for release in self.releases.values())

    @property
    def where(self) -> list[str]:
        return list(self.releases)

    def observe(self, mechanism: str, released: np.ndarray, sampling_rate: float,
                clip_norm: float, real_squares: float, real_values: int) -> None:
        """One release of the phantoms' and probes' coordinates (``size`` values), with
        the sum of squares of the noise on the mechanism's ``real_values`` coordinates."""
        u = np.asarray(released, dtype=np.float64) / clip_norm
        probes = u[len(self):]
        self.add(mechanism, sampling_rate, 1, u[:len(self)], float(probes @ probes),
                 len(probes), real_squares / clip_norm ** 2, real_values)

    def add(self, mechanism: str, sampling_rate: float, steps: int, sums: np.ndarray,
            probe_squares: float, probe_values: int, real_squares: float,
            real_values: int) -> None:
        """``steps`` releases of ``mechanism``, by their sums (in clip norms)."""
        release = self.releases.setdefault(mechanism,
                                           Release(sampling_rate, np.zeros(len(self))))
        if release.sampling_rate != sampling_rate:
            raise ValueError(f"{mechanism} released at sampling rates {release.sampling_rate}"
                             f" and {sampling_rate}: its evidence assumes one")
        release.steps += steps
        release.sums += sums
        release.probe_squares += probe_squares
        release.probe_values += probe_values
        release.real_squares += real_squares
        release.real_values += real_values

    def evidence(self) -> np.ndarray:
        """Per phantom, > 0 where its coin looks like 1 (in the set; the vector +v); its
        size the confidence: the log-likelihood ratio of its sums (the module's
        docstring). A release without noise gives certain evidence, +-inf."""
        total = np.zeros(len(self))
        for release in self.releases.values():
            q, n, s1 = release.sampling_rate, release.steps, release.sums
            variance = release.noise_variance
            if variance == 0:
                certain = s1 if self.neighbours is Neighbours.SUBSTITUTION else s1 - 0.5
                total += np.where(certain > 0, math.inf, np.where(certain < 0, -math.inf, 0))
                continue
            total += _log_likelihood(s1, q, n, variance)
            if self.neighbours is Neighbours.SUBSTITUTION:  # against -v (out of the set: 0)
                total -= _log_likelihood(-s1, q, n, variance)
        return total

    def noise_checks(self) -> list[NoiseCheck]:
        """Per mechanism with real coordinates, their noise against the probes'."""
        return [release.check(mechanism) for mechanism, release in self.releases.items()
                if release.real_values]


def _log_likelihood(sums: np.ndarray, q: float, n: int, variance: float) -> np.ndarray:
    """log sum_k P[K = k] exp((2 k S1 - k^2) / (2 n s^2)), K ~ Binomial(n, q): the
    log-likelihood of sums S1 of a vector +v sampled in K of n steps, against v = 0.

    With x = S1 / (n s^2), it is log sum_k c_k e^(k x), c_k = P[K = k] e^(-k^2 / (2 n s^2)):
    a polynomial in e^x of positive coefficients, evaluated by Horner's rule where no
    term can overflow or vanish (every honest release), else term by term."""
    counts = np.arange(n + 1)
    weights = stats.binom.logpmf(counts, n, q)
    kept = counts[weights >= weights.max() + _LOG_NEGLIGIBLE]  # consecutive counts
    logs = weights[kept] - kept * kept / (2 * n * variance)  # log c_k
    top = logs.max()
    x = sums / (n * variance)
    total = np.empty(len(sums))
    fast = np.abs(x) * kept[-1] < _LOG_SAFE
    if logs.min() - top > -_LOG_SAFE:
        y, poly = np.exp(x[fast]), np.zeros(int(fast.sum()))
        for coefficient in np.exp(logs[::-1] - top):
            poly = poly * y + coefficient
        total[fast] = top + np.log(poly) + kept[0] * x[fast]
    else:
        fast[:] = False
    slow = np.full(int((~fast).sum()), -math.inf)
    for k, log_c in zip(kept, logs):
        np.logaddexp(slow, log_c + k * x[~fast], out=slow)
    total[~fast] = slow
    return total
