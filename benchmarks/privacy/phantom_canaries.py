"""White-box canaries of a Gaussian release (Steinke, Nasr and Jagielski 2023, Section 6):
m phantom records, each with a vector of norm far above any clip norm on a coordinate of
its own, outside the model. A fair coin puts each in the training set. In the set, it is
Poisson-sampled, clipped and noised by the same calls as every real example, so its
coordinate of each release is its clipped vector (the sensitivity, when sampled) plus
the release's noise, and the model never sees it.

The auditor plants them on the run's ledger (``Ledger.phantoms``); each Gaussian release
of the privacy layer (DP-SGD's noisy clipped sum at every step, a noisy clipped mean)
finds them there and hands its released canary coordinates to ``observe``. The evidence
per canary is the log-likelihood ratio of its whole released sequence between "in the
set" and "not in it": the steps are independent given the coin, so it is the sum of each
step's log[(1 - q) N(u; 0, s) + q N(u; 1, s)] - log N(u; 0, s), in units of the
sensitivity, q the claimed sampling rate. The noise scale s is measured on the release
itself (on canaries fixed in advance, most of which were not sampled), not the claimed
one: a test with the claimed noise would read a release noised less than claimed with a
statistic made for more noise. This is the most powerful test of one canary's coin
(Neyman-Pearson); where the noise is large it is the sum of the canary's coordinates, and
where it is small (epsilon 4 and more) it weighs a step's large values more than the sum.
"""
from __future__ import annotations

import numpy as np

# A phantom's norm, in clip norms: far above any clip, so clipping always binds.
GRADIENT_NORM = 1e3
# The median absolute deviation of a standard normal: MAD / this estimates its scale.
_MAD_OF_NORMAL = 0.6744897501960817
# The canaries whose released coordinates measure each release's noise.
_NOISE_PROBES = 16_384


class PhantomCanaries:
    """m phantom records with their coins (True: in the training set)."""

    def __init__(self, coins: np.ndarray) -> None:
        self.coins = np.asarray(coins, dtype=bool)
        self.llr = np.zeros(len(self.coins))
        self.steps = 0
        self.where: list[str] = []

    def __len__(self) -> int:
        return len(self.coins)

    @property
    def members(self) -> np.ndarray:
        """The canaries in the training set: the only ones a mechanism may sample."""
        return np.flatnonzero(self.coins)

    def observe(self, mechanism: str, released: np.ndarray, sampling_rate: float,
                sensitivity: float) -> None:
        """One release of every canary's coordinate, in units of the noisy sum."""
        u = np.asarray(released, dtype=np.float32) / np.float32(sensitivity)
        probes = u[:_NOISE_PROBES]
        scale = np.median(np.abs(probes - np.median(probes))) / _MAD_OF_NORMAL
        # log1p(q expm1(z)), z the log-likelihood ratio of a sampled canary; a release
        # without noise (scale 0) is certain evidence, +-inf
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            z = (2 * u - 1) * np.float32(1 / (2 * scale * scale))
            np.expm1(z, out=z)
            z *= np.float32(sampling_rate)
            np.log1p(z, out=z)
        self.llr += z
        self.steps += 1
        if mechanism not in self.where:
            self.where.append(mechanism)
