"""The privacy profile a run's ledger claims for one notion, as the trade-off curve that a
one-run audit tests (benchmarks.privacy.one_run_fdp), and its family under scaled noise.

The claim is what the ledger charged, composed as the ledger composes it: when every
charge is a Poisson-sampled Gaussian on every example (DP-SGD's noisy clipped sums, the
Gaussian means of a data normalisation), the composition's privacy-loss distribution
(dp_accounting's PLD, pessimistic: its deltas are upper bounds, so the curve is never
stronger than the charges'); otherwise the worst
example's RDP curve, converted to a delta per epsilon by dp_accounting. Neither is a
Gaussian approximation.

The family: the same charges with every noise multiplier times s (an RDP curve that is
no sampled Gaussian is divided by s^2, as a Gaussian's is). s = 1 is the claim, s < 1
less noise; more noise is a post-processing of less, so the curves grow with s.

dp_accounting is imported inside the functions.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from benchmarks.privacy import rdp
from benchmarks.privacy.ledger import Ledger, SampledGaussian, worst_example
from benchmarks.privacy.notions import PrivacyNotion
from benchmarks.privacy.tradeoff import TradeOff

PLD = "PLD accountant (dp_accounting)"
RDP = "RDP accountant (dp_accounting)"
# The profile is taken at this many epsilons, from 0 to where delta falls below _FLOOR.
_EPSILONS, _FLOOR = 512, 1e-12
_TOP = 100.0  # where delta never falls below the floor
# The PLD's discretisation of the privacy loss: ten times dp_accounting's default, and ten
# times faster (a curve at the suites' settings in a quarter of a second); pessimistic,
# so its deltas stay upper bounds, and its epsilons within 0.3% of the default's there.
_DISCRETISATION = 1e-3


@dataclasses.dataclass(frozen=True)
class ClaimedProfile:
    """The charges of one notion, at noise scale ``scale`` (1: as charged)."""

    charges: tuple
    delta: float
    scale: float = 1.0

    @classmethod
    def of(cls, ledger: Ledger, notion: PrivacyNotion, delta: float) -> "ClaimedProfile":
        charges = tuple(ledger.relevant(notion))
        if not charges:
            raise ValueError("the ledger charged nothing to audit under this notion")
        return cls(charges, float(delta))

    def scaled(self, scale: float) -> "ClaimedProfile":
        return dataclasses.replace(self, scale=float(scale))

    @property
    def accountant(self) -> str:
        gaussians = all(isinstance(c.cost, SampledGaussian) and c.touches.examples is None
                        for c in self.charges)
        return PLD if gaussians else RDP

    def tradeoff(self) -> TradeOff:
        if self.accountant == PLD:
            return _pld_tradeoff(self._gaussians())
        return _rdp_tradeoff(tuple(self._rdp_curve()))

    def epsilon(self) -> float:
        """Epsilon at the claim's delta, by the same accountant."""
        if self.accountant == PLD:
            return float(_pld(self._gaussians()).get_epsilon_for_delta(self.delta))
        return rdp.epsilon_from_rdp(self._rdp_curve(), self.delta)[0]

    def describe(self) -> str:
        parts = [f"{c.mechanism}: " + (
            f"noise multiplier {c.cost.noise_multiplier:.6g}, sampling rate "
            f"{c.cost.sampling_rate:.6g}, {c.cost.steps} step{'s' * (c.cost.steps > 1)}"
            if isinstance(c.cost, SampledGaussian) else c.cost.as_dict()["type"])
            for c in self.charges]
        return f"{'; '.join(parts)}; composed by the {self.accountant}"

    def _gaussians(self) -> tuple[tuple[float, float, int], ...]:
        return tuple((c.cost.noise_multiplier * self.scale, c.cost.sampling_rate, c.cost.steps)
                     for c in self.charges)

    def _rdp_curve(self) -> np.ndarray:
        def curve(charge) -> np.ndarray:
            cost = charge.cost
            if isinstance(cost, SampledGaussian):
                return rdp.sampled_gaussian_rdp(cost.noise_multiplier * self.scale,
                                                cost.sampling_rate, cost.steps)
            return cost.curve() / self.scale ** 2
        return worst_example(list(self.charges), curve)


@functools.lru_cache(maxsize=64)
def _pld_tradeoff(gaussians: tuple[tuple[float, float, int], ...]) -> TradeOff:
    pld = _pld(gaussians)
    epsilons = _epsilons(pld.get_epsilon_for_delta(_FLOOR))
    return TradeOff(epsilons, pld.get_delta_for_epsilon(epsilons))


@functools.lru_cache(maxsize=64)
def _rdp_tradeoff(curve: tuple[float, ...]) -> TradeOff:
    from dp_accounting.rdp.rdp_privacy_accountant import compute_delta

    orders = rdp.ORDERS.tolist()
    epsilons = _epsilons(rdp.epsilon_from_rdp(np.asarray(curve), _FLOOR)[0])
    return TradeOff(epsilons, [compute_delta(orders, list(curve), e)[0] for e in epsilons])


def _epsilons(top: float) -> np.ndarray:
    return np.linspace(0.0, top if math.isfinite(top) else _TOP, _EPSILONS)


@functools.lru_cache(maxsize=64)
def _pld(gaussians: tuple[tuple[float, float, int], ...]):
    """The PLD of the sampled Gaussians (noise multiplier, rate, steps) composed."""
    from dp_accounting.pld import privacy_loss_distribution

    composed = None
    for sigma, rate, steps in gaussians:
        one = privacy_loss_distribution.from_gaussian_mechanism(
            sigma, sampling_prob=rate, value_discretization_interval=_DISCRETISATION)
        one = one.self_compose(steps) if steps > 1 else one
        composed = one if composed is None else composed.compose(one)
    return composed
