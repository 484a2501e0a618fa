"""White-box canaries of DP-SGD's release (Steinke, Nasr and Jagielski 2023, Section 6):
m phantom records, each with a gradient of norm far above any clip norm on a coordinate
of its own, outside the model. A fair coin puts each in the training set. In the set,
it is Poisson-sampled, clipped and noised by the same calls as every real example, so
its coordinate of each step's release is its clipped gradient (C, when sampled) plus the
step's noise, and the model never sees it.

The auditor plants them on the run's ledger (``Ledger.phantoms``); the noisy clipped sum
finds them there and hands each step's released canary coordinates to ``observe``. The
evidence per canary is the log-likelihood ratio of its released sequence between "in the
set" and "not in it", under the claimed sampling rate and clip norm and the noise scale
measured on the release itself (every canary's coordinate carries the noise, and most
were not sampled): a test with the claimed noise would miss a release noised less than
claimed, where a broken run's spikes stand out most.
"""
from __future__ import annotations

import numpy as np

# A phantom's gradient norm, in clip norms: far above any clip, so clipping always binds.
GRADIENT_NORM = 1e3
# The median absolute deviation of a standard normal: MAD / this estimates its scale.
_MAD_OF_NORMAL = 0.6744897501960817


class PhantomCanaries:
    """m phantom records with their coins (True: in the training set)."""

    def __init__(self, coins: np.ndarray) -> None:
        self.coins = np.asarray(coins, dtype=bool)
        self.llr = np.zeros(len(self.coins))
        self.steps = 0
        self.where = ""

    def __len__(self) -> int:
        return len(self.coins)

    @property
    def members(self) -> np.ndarray:
        """The canaries in the training set: the only ones a mechanism may sample."""
        return np.flatnonzero(self.coins)

    def observe(self, mechanism: str, released: np.ndarray, sampling_rate: float,
                clip_norm: float) -> None:
        """One step's release of every canary's coordinate, in units of the clipped sum."""
        u = np.asarray(released, dtype=np.float64) / clip_norm
        median = np.median(u)
        sigma = np.median(np.abs(u - median)) / _MAD_OF_NORMAL
        # log[(1 - q) N(u; 0, s) + q N(u; 1, s)] - log N(u; 0, s); a release without noise
        # (s = 0) is certain evidence, +-inf
        with np.errstate(divide="ignore"):
            shift = (2 * u - 1) / (2 * sigma * sigma)
        self.llr += np.logaddexp(np.log1p(-sampling_rate), np.log(sampling_rate) + shift)
        self.steps += 1
        self.where = mechanism
