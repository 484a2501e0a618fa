"""Renyi-DP arithmetic, done by dp_accounting: RDP curves of the Poisson-sampled
Gaussian and of pure-DP mechanisms, and the conversion of an RDP curve to (epsilon, delta).

dp_accounting is imported inside the functions: listing and reporting never need it.
"""
from __future__ import annotations

import functools

import numpy as np

# dp_accounting's default orders: fine steps below 11, integers to 63, then doublings.
ORDERS = np.array([1 + x / 10 for x in range(1, 100)] + list(range(11, 64))
                  + [128, 256, 512, 1024], dtype=np.float64)


def _sampled_gaussian_event(noise_multiplier: float, sampling_rate: float, steps: int):
    import dp_accounting

    return dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(
            sampling_rate, dp_accounting.GaussianDpEvent(noise_multiplier)), steps)


def sampled_gaussian_rdp(noise_multiplier: float, sampling_rate: float, steps: int,
                         orders: np.ndarray = ORDERS) -> np.ndarray:
    """RDP at ``orders`` of ``steps`` Poisson-sampled Gaussian steps (add/remove)."""
    return np.array(_sampled_gaussian_rdp(noise_multiplier, sampling_rate, steps,
                                          tuple(orders)))


# Cached, as the PLD epsilon below: a calibration's search, its run's ledger and the
# record ask for the same values again, at ~0.1 s a curve and ~1 s a PLD epsilon.
@functools.lru_cache(maxsize=4096)
def _sampled_gaussian_rdp(noise_multiplier: float, sampling_rate: float, steps: int,
                          orders: tuple[float, ...]) -> tuple[float, ...]:
    from dp_accounting import rdp

    class CurveAccountant(rdp.RdpAccountant):
        """dp_accounting's RDP accountant, with its composed curve readable."""

        @property
        def curve(self) -> tuple[float, ...]:
            return tuple(float(value) for value in self._rdp)

    accountant = CurveAccountant(orders=list(orders))
    accountant.compose(_sampled_gaussian_event(noise_multiplier, sampling_rate, steps))
    return accountant.curve


def pure_rdp(epsilon: float, orders: np.ndarray = ORDERS) -> np.ndarray:
    """An epsilon-DP mechanism is (alpha, min(epsilon, alpha epsilon^2 / 2))-RDP
    (Bun and Steinke 2016; the same rule dp_accounting applies to Laplace events)."""
    return np.minimum(epsilon, 0.5 * epsilon * epsilon * np.asarray(orders, dtype=np.float64))


def repeat_and_select_rdp(curve: np.ndarray, mean: float, shape: float,
                          orders: np.ndarray = ORDERS) -> np.ndarray:
    """The RDP curve of the best of K runs of a mechanism with RDP ``curve``, K truncated
    negative binomial with ``mean`` and ``shape`` (Papernot and Steinke 2022, Theorem 2):
    dp_accounting's computation of its RepeatAndSelectDpEvent, on any curve."""
    from dp_accounting.rdp.rdp_privacy_accountant import _compute_rdp_repeat_and_select

    return np.asarray(_compute_rdp_repeat_and_select(
        list(orders), list(np.asarray(curve, dtype=np.float64)), mean, shape),
        dtype=np.float64)


def epsilon_from_rdp(curve: np.ndarray, delta: float,
                     orders: np.ndarray = ORDERS) -> tuple[float, float]:
    """(epsilon, best order) of an RDP curve at ``delta``: dp_accounting's conversion."""
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    epsilon, order = compute_epsilon(list(orders), list(curve), delta)
    return float(epsilon), float(order)


def sampled_gaussian_epsilon(noise_multiplier: float, sampling_rate: float, steps: int,
                             delta: float) -> float:
    """Epsilon of the Poisson-sampled Gaussian under dp_accounting's RDP accountant."""
    return epsilon_from_rdp(sampled_gaussian_rdp(noise_multiplier, sampling_rate, steps),
                            delta)[0]


@functools.lru_cache(maxsize=4096)
def sampled_gaussian_pld_epsilon(noise_multiplier: float, sampling_rate: float, steps: int,
                                 delta: float) -> float:
    """The same under the PLD accountant (tighter; pessimistic discretisation)."""
    import dp_accounting
    from dp_accounting import pld

    accountant = pld.PLDAccountant(dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE)
    accountant.compose(_sampled_gaussian_event(noise_multiplier, sampling_rate, steps))
    return float(accountant.get_epsilon(delta))
