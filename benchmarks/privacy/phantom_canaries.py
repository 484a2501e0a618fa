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
scale): how many of each phantom's n steps fell in each of the bins EDGES (in units of
the mechanism's noise, as configured; in clip norms, a sampled phantom adds c = +-1 or
0), and the probes' sum of squares, which measures the noise scale s on the release
itself (a statistic built with the claimed noise would read a release noised less than
claimed with weights made for more). A step in bin b has the log-likelihood ratio

    l_b = log[(1 - q) P0(b) + q P+(b)] - log P0(b), under add/remove, or
          log[(1 - q) P0(b) + q P+(b)] - log[(1 - q) P0(b) + q P-(b)], under substitution,

P0, P+ and P- the bin's probabilities under N(0, s^2), N(1, s^2) and N(-1, s^2), q the
claimed sampling rate. The steps are independent given the coin, so the evidence is
sum_b N_b l_b: the log-likelihood ratio of the phantom's released sequence read through
the bins, the most powerful test of its coin from them. The bins are fine enough (a
quarter of the noise wide over +-6 noise widths, both sides alike since a replaced
record moves its step either way) to lose little of the log-likelihood ratio of the
values themselves, which weighs a step far out in the tail (a sampled step that stands
out from the noise) much more than the sum of the steps does; and its law is exact and
cheap, a phantom's counts being multinomial given how many steps sampled it, so honest
audits can be simulated exactly (benchmarks.audit.simulation).

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


# The bins of a phantom's released values, in units of its mechanism's noise: a quarter
# of a noise wide over +-6, then one noise wide to +-8 (docs/audits.md measures the
# claim test's power with them, coarser and finer bins).
EDGES = np.concatenate([[-8.0, -7.0], np.linspace(-6.0, 6.0, 49), [7.0, 8.0]])
BINS = len(EDGES) + 1
# A phantom's count per bin fits in this type: a mechanism releases at most its maximum.
_COUNT = np.uint16


@dataclasses.dataclass
class Release:
    """What the phantoms saw of one mechanism's releases, in its clip norms."""

    sampling_rate: float
    noise: float  # the noise the mechanism is configured with: places the bins
    counts: np.ndarray  # (BINS, phantoms): the steps of each phantom in each bin
    sums: np.ndarray  # their sums: the evidence of a release without noise
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
                clip_norm: float, noise: float, real_squares: float, real_values: int
                ) -> None:
        """One release of the phantoms' and probes' coordinates (``size`` values) by a
        mechanism configured with ``noise`` (its standard deviation), with the sum of
        squares of the noise on its ``real_values`` coordinates."""
        u = np.asarray(released, dtype=np.float64) / clip_norm
        phantoms, probes = u[:len(self)], u[len(self):]
        release = self._release(mechanism, sampling_rate, noise / clip_norm, 1)
        release.counts[np.searchsorted(EDGES * release.noise, phantoms),
                       np.arange(len(self))] += 1
        self._add(release, phantoms, float(probes @ probes), len(probes),
                  real_squares / clip_norm ** 2, real_values)

    def add(self, mechanism: str, sampling_rate: float, noise: float, steps: int,
            counts: np.ndarray, sums: np.ndarray, probe_squares: float, probe_values: int,
            real_squares: float, real_values: int) -> None:
        """``steps`` releases of ``mechanism`` (``noise`` in clip norms), by each
        phantom's counts per bin (BINS, phantoms) and sums."""
        release = self._release(mechanism, sampling_rate, noise, steps)
        release.counts += counts.astype(_COUNT, copy=False)
        self._add(release, sums, probe_squares, probe_values, real_squares, real_values)

    def _release(self, mechanism: str, sampling_rate: float, noise: float,
                 steps: int) -> Release:
        release = self.releases.setdefault(mechanism, Release(
            sampling_rate, noise, np.zeros((BINS, len(self)), _COUNT), np.zeros(len(self))))
        if (release.sampling_rate, release.noise) != (sampling_rate, noise):
            raise ValueError(f"{mechanism} released at sampling rates {release.sampling_rate}"
                             f" and {sampling_rate}, noise {release.noise} and {noise}: its "
                             f"evidence assumes one of each")
        if release.steps + steps > np.iinfo(_COUNT).max:
            raise ValueError(f"{mechanism}: phantom canaries count at most "
                             f"{np.iinfo(_COUNT).max} steps")
        release.steps += steps
        return release

    @staticmethod
    def _add(release: Release, sums: np.ndarray, probe_squares: float, probe_values: int,
             real_squares: float, real_values: int) -> None:
        release.sums += sums
        release.probe_squares += probe_squares
        release.probe_values += probe_values
        release.real_squares += real_squares
        release.real_values += real_values

    def evidence(self) -> np.ndarray:
        """Per phantom, > 0 where its coin looks like 1 (in the set; the vector +v); its
        size the confidence: the log-likelihood ratio of its steps' bins (the module's
        docstring). A release without noise gives certain evidence, +-inf."""
        total = np.zeros(len(self))
        for release in self.releases.values():
            s1, scale = release.sums, math.sqrt(release.noise_variance)
            if scale == 0:
                certain = s1 if self.neighbours is Neighbours.SUBSTITUTION else s1 - 0.5
                total += np.where(certain > 0, math.inf, np.where(certain < 0, -math.inf, 0))
                continue
            weights = bin_log_ratios(release.noise * EDGES, release.sampling_rate, scale,
                                     self.neighbours)
            for weight, counts in zip(weights, release.counts):  # no float copy of them all
                total += weight * counts
        return total

    def noise_checks(self) -> list[NoiseCheck]:
        """Per mechanism with real coordinates, their noise against the probes'."""
        return [release.check(mechanism) for mechanism, release in self.releases.items()
                if release.real_values]


def bin_probabilities(edges: np.ndarray, mean: float, scale: float) -> np.ndarray:
    """P[N(mean, scale^2) in each bin of ``edges``], each tail from its own side so that
    the far bins keep their precision."""
    z = (edges - mean) / scale
    below = np.diff(stats.norm.cdf(np.concatenate([[-np.inf], z, [np.inf]])))
    above = -np.diff(stats.norm.sf(np.concatenate([[-np.inf], z, [np.inf]])))
    lower = np.concatenate([[-np.inf], z]) < 0  # the bin starts below the mean
    return np.where(lower, below, above)


def bin_log_ratios(edges: np.ndarray, q: float, scale: float,
                   neighbours: Neighbours) -> np.ndarray:
    """The log-likelihood ratio l_b of one step in each bin (the module's docstring)."""
    nothing, plus = bin_probabilities(edges, 0.0, scale), bin_probabilities(edges, 1.0, scale)
    other = (bin_probabilities(edges, -1.0, scale) if neighbours is Neighbours.SUBSTITUTION
             else nothing)
    with np.errstate(divide="ignore"):
        ratios = (np.log((1 - q) * nothing + q * plus) - np.log((1 - q) * nothing + q * other))
    return np.nan_to_num(ratios, nan=0.0)  # a bin no world reaches: never counted
