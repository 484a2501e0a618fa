"""Random Fourier features for the Gaussian (RBF) kernel k(x, x') = exp(-gamma ||x - x'||^2).

Frequencies theta_j ~ N(0, 2 gamma I) are drawn independently of the data (Rahimi and
Recht 2007; Algorithm 3 of Chaudhuri et al. 2011), so releasing them costs no privacy.

The map pairs a cosine and a sine per frequency:
    v(x) = sqrt(1/m) [cos(theta_1.x), sin(theta_1.x), ..., cos(theta_m.x), sin(theta_m.x)]
with m = D/2. Then v(x).v(x') = (1/m) sum_j cos(theta_j.(x - x')), an unbiased estimate of
k(x, x'), and ||v(x)|| = 1 exactly, the norm bound DP-ERM's guarantees need. (The
random-phase form sqrt(2/D) [cos(theta_j.x + b_j)] reaches norms up to sqrt(2).)
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class RandomFourierFeatures:
    frequencies: np.ndarray  # (input_dim, D/2)

    @property
    def dim(self) -> int:
        return 2 * self.frequencies.shape[1]

    def transform(self, x: np.ndarray) -> np.ndarray:
        """Features of shape (N, D), float64, every row of L2 norm 1."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.frequencies.shape[0]:
            raise ValueError(f"random features expect inputs of shape (N, "
                             f"{self.frequencies.shape[0]}), got {x.shape}")
        phases = x @ self.frequencies
        pairs = np.stack([np.cos(phases), np.sin(phases)], axis=2)
        return pairs.reshape(len(x), self.dim) / math.sqrt(self.frequencies.shape[1])


def draw_rbf_features(input_dim: int, dim: int, gamma: float,
                      rng: np.random.Generator) -> RandomFourierFeatures:
    """D = ``dim`` (even) random features approximating exp(-gamma ||x - x'||^2)."""
    check_rbf_params(dim, gamma)
    frequencies = rng.normal(0.0, math.sqrt(2.0 * gamma), size=(input_dim, dim // 2))
    return RandomFourierFeatures(frequencies)


def check_rbf_params(dim: int, gamma: float) -> None:
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 2 or dim % 2:
        raise ValueError(f"rff_dim must be an even integer >= 2 (cosine/sine pairs), got {dim!r}")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0 < gamma < math.inf:
        raise ValueError(f"rff_gamma must be a finite number > 0, got {gamma!r}")
