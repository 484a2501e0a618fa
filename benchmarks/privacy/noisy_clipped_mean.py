"""The Gaussian mechanism on the mean of clipped per-example vectors: a statistic of the
whole training set (the mean of feature moments that normalise a model's inputs, as in
Tramer and Boneh 2021) released once.

Each example's vector is clipped to L2 norm C, so adding or removing one example moves
the sum by at most C; the sum gets N(0, sigma^2 C^2 I) and is divided by the public
dataset size N (as DP-SGD divides by its expected batch size). That is the Gaussian
mechanism of noise multiplier sigma, charged to the ledger as one Poisson-sampled
Gaussian step at sampling rate 1: full DP, add/remove neighbours, accounted by RDP.

One object is one release: it charges the ledger when it is made and refuses a second
release. numpy only; the generator is the caller's (a seeded stream of the run).

An audit's phantom canaries (benchmarks.privacy.phantom_canaries) planted on the ledger
are released with the statistic: each in the training set is one more example whose
vector lies on a coordinate of its own, clipped by the same ``clip_factors`` and noised
in the same draw, and the auditor observes those coordinates, with the noise added to
the statistic's own.
"""
from __future__ import annotations

import numpy as np

from benchmarks.privacy import phantom_canaries, rdp
from benchmarks.privacy.ledger import Ledger, SampledGaussian, records

MECHANISM = "Gaussian mean of clipped vectors"


def rdp_curve(noise_multiplier: float, releases: int = 1) -> np.ndarray:
    """RDP of ``releases`` such means, at rdp.ORDERS: what their charges add up to, known
    before any data is read (so a DP-SGD calibration can leave room for it)."""
    return rdp.sampled_gaussian_rdp(noise_multiplier, 1.0, releases)


class NoisyClippedMean:
    """The release of one mean over ``dataset_size`` examples, clipped to ``clip_norm``,
    with noise multiplier ``noise_multiplier``; ``what`` names it in the ledger."""

    def __init__(self, ledger: Ledger, *, dataset_size: int, clip_norm: float,
                 noise_multiplier: float, rng: np.random.Generator, what: str) -> None:
        ledger = Ledger.of(ledger, MECHANISM)
        if not clip_norm > 0 or not noise_multiplier > 0 or dataset_size < 1:
            raise ValueError(f"{MECHANISM} needs clip_norm > 0, noise_multiplier > 0 and "
                             f"examples, got {clip_norm!r}, {noise_multiplier!r}, "
                             f"{dataset_size!r}")
        self.dataset_size, self.clip_norm = int(dataset_size), float(clip_norm)
        self.noise_std = float(noise_multiplier) * self.clip_norm
        self.rng, self.ledger = rng, ledger
        self.released = False
        ledger.charge(MECHANISM, records(group=what),
                      SampledGaussian(float(noise_multiplier), 1.0, 1),
                      clip_norm=self.clip_norm, dataset_size=self.dataset_size)

    def clip_factors(self, norms: np.ndarray) -> np.ndarray:
        """Per vector, min(1, C / norm): the vector times this has norm at most C."""
        return self.clip_norm / np.maximum(self.clip_norm, norms)

    def clipped_sum(self, vectors: np.ndarray) -> np.ndarray:
        """The sum over examples (rows) of each vector scaled to norm at most C."""
        vectors = np.asarray(vectors, dtype=np.float64)
        return (vectors * self.clip_factors(np.linalg.norm(vectors, axis=1, keepdims=True))
                ).sum(axis=0)

    def release(self, vectors: np.ndarray) -> np.ndarray:
        """The noisy mean of ``vectors`` (N, d), N the charged dataset size; once."""
        if self.released:
            raise RuntimeError(f"{MECHANISM}: released already; its charge covers one release")
        if len(vectors) != self.dataset_size:
            raise ValueError(f"{MECHANISM}: charged for {self.dataset_size} examples, "
                             f"given {len(vectors)}")
        self.released = True
        total = self.clipped_sum(vectors)
        phantoms = self.ledger.phantoms
        if phantoms is not None:  # their coordinates follow the statistic's
            total = np.concatenate([total, self._phantom_sum(phantoms)])
        noisy = total + self.rng.normal(0.0, self.noise_std, total.shape)
        if phantoms is not None:
            real = len(total) - phantoms.size
            noise = noisy[:real] - total[:real]
            phantoms.observe(MECHANISM, noisy[real:], 1.0, self.clip_norm, self.noise_std,
                             float(noise @ noise), real)
            noisy = noisy[:real]
        return self.ledger.released(MECHANISM, noisy / self.dataset_size,
                                    dataset_size=self.dataset_size, clip_norm=self.clip_norm,
                                    noise_std=self.noise_std)

    def _phantom_sum(self, phantoms) -> np.ndarray:
        """Each phantom's coordinate of the clipped sum, and the probes' (none): its
        clipped vector, in the direction its coin gives it, when it is in the training
        set."""
        norm = phantom_canaries.GRADIENT_NORM * self.clip_norm
        total = np.zeros(phantoms.size)
        total[phantoms.rows] = phantoms.signs * (self.clip_factors(norm) * norm)
        return total
