"""DP-SGD privacy calibration: the noise multiplier that meets a target (epsilon, delta).

Accounting is dp_accounting's RDP accountant for the Poisson-sampled Gaussian mechanism
(add/remove neighbours), composed over every training step (benchmarks.privacy.rdp, the
same arithmetic the run's ledger uses); the PLD accountant's epsilon for the same noise
is reported alongside. Each example is its own microbatch, so the
sensitivity of the clipped sum is the clip norm C (no microbatching, hence no doubling).

TensorFlow-free: the CLI imports this module for ``privboard privacy dp-sgd``.
"""
from __future__ import annotations

import argparse
import json
import math
import numbers
from typing import Any

import numpy as np

from benchmarks.privacy.errors import InputError
from benchmarks.privacy.rdp import (ORDERS, epsilon_from_rdp, sampled_gaussian_pld_epsilon,
                                    sampled_gaussian_rdp)

# The binary search over the noise multiplier stays inside this range; a budget that no
# multiplier in it meets is reported as unmeetable rather than silently clamped.
SIGMA_RANGE = (0.1, 1000.0)
# Relative width at which the search stops: the returned sigma is within 0.01% of the
# smallest sigma that meets the target.
SIGMA_RELATIVE_TOLERANCE = 1e-4


def steps_for(dataset_size: int, batch_size: int, epochs: float) -> int:
    """Training steps: ``epochs`` passes in expectation at sampling rate batch/N."""
    return math.ceil(epochs * dataset_size / batch_size)


def validate(epsilon: float, delta: float, dataset_size: int, batch_size: int,
             epochs: float) -> None:
    """Raise InputError (one line) for input no DP-SGD run can honour."""
    if not isinstance(epsilon, numbers.Real) or math.isnan(epsilon) or epsilon <= 0:
        raise InputError(f"epsilon must be > 0, got {epsilon!r}")
    if math.isinf(epsilon):
        raise InputError("DP-SGD needs a finite epsilon; epsilon = inf is non-private "
                         "training, use a non-private baseline")
    if not isinstance(delta, numbers.Real) or math.isnan(delta) or not 0 < delta < 1:
        raise InputError(f"delta must be in (0, 1), got {delta!r}")
    if int(dataset_size) != dataset_size or dataset_size < 1:
        raise InputError(f"dataset size must be a positive integer, got {dataset_size!r}")
    if int(batch_size) != batch_size or not 1 <= batch_size <= dataset_size:
        raise InputError(f"batch size must be an integer in [1, dataset size "
                         f"{dataset_size}], got {batch_size!r}")
    if not isinstance(epochs, numbers.Real) or not 0 < epochs < math.inf:
        raise InputError(f"epochs must be a positive finite number, got {epochs!r}")
    if delta >= 1 / dataset_size:
        raise InputError(f"delta = {delta:g} >= 1/N = {1 / dataset_size:g}: such a delta "
                         f"allows publishing a random record; choose delta < 1/N")


def calibrate(epsilon: float, delta: float, dataset_size: int, batch_size: int,
              epochs: float, spent_rdp: np.ndarray | None = None) -> dict[str, Any]:
    """The smallest noise multiplier (to 0.01%) whose RDP epsilon is <= ``epsilon``.

    ``spent_rdp``: the RDP curve (at rdp.ORDERS) of releases of the same records made
    besides the training (a normalisation's noisy statistics); the training composes
    with it, and gets what the budget leaves.

    Returns noise_multiplier, steps, sampling_rate, epsilon_rdp, epsilon_pld and delta;
    with ``spent_rdp`` the RDP epsilon is that of the composition, and the PLD epsilon
    (of the training alone) is None. Raises InputError before any search when the input
    is invalid, and when no noise multiplier in SIGMA_RANGE meets the target.
    """
    sigma, rate, steps = plan(epsilon, delta, dataset_size, batch_size, epochs, spent_rdp)
    return {
        "noise_multiplier": sigma,
        "steps": steps,
        "sampling_rate": rate,
        "epsilon_rdp": total_epsilon(sigma, rate, steps, delta, spent_rdp),
        "epsilon_pld": (sampled_gaussian_pld_epsilon(sigma, rate, steps, delta)
                        if spent_rdp is None else None),
        "delta": delta,
    }


def plan(epsilon: float, delta: float, dataset_size: int, batch_size: int, epochs: float,
         spent_rdp: np.ndarray | None = None) -> tuple[float, float, int]:
    """(noise multiplier, sampling rate, steps) of ``calibrate``, without its epsilons."""
    validate(epsilon, delta, dataset_size, batch_size, epochs)
    rate = batch_size / dataset_size
    steps = steps_for(dataset_size, batch_size, epochs)
    return noise_multiplier_for(epsilon, delta, rate, steps, spent_rdp), rate, steps


def total_epsilon(sigma: float, rate: float, steps: int, delta: float,
                  spent_rdp: np.ndarray | None = None) -> float:
    """The RDP epsilon of the training composed with ``spent_rdp`` (none: alone)."""
    spent = np.zeros_like(ORDERS) if spent_rdp is None else np.asarray(spent_rdp)
    return epsilon_from_rdp(sampled_gaussian_rdp(sigma, rate, steps) + spent, delta)[0]


def noise_multiplier_for(epsilon: float, delta: float, rate: float, steps: int,
                         spent_rdp: np.ndarray | None = None) -> float:
    """The smallest noise multiplier (to 0.01%) whose RDP epsilon after ``steps`` steps
    at sampling rate ``rate``, composed with ``spent_rdp``, is <= ``epsilon`` (as a
    library's data loader sets them). InputError when no noise multiplier in SIGMA_RANGE
    meets it."""

    def meets(sigma: float) -> bool:
        return total_epsilon(sigma, rate, steps, delta, spent_rdp) <= epsilon

    # Bracket in factors of 4 from sigma = 1 (usual budgets need 0.5-5), since the RDP
    # accountant is slowest at large sigma.
    smallest, largest = SIGMA_RANGE
    high = 1.0
    while not meets(high):
        if high >= largest:
            raise InputError(
                f"epsilon = {epsilon:g} at delta = {delta:g} is unmeetable with {steps} steps "
                f"at sampling rate {rate:.4g}: even noise multiplier {largest:g} spends more; "
                f"use fewer epochs or a smaller batch")
        high = min(4 * high, largest)
    low = high / 4
    while meets(low):
        if low <= smallest:
            raise InputError(
                f"epsilon = {epsilon:g} at delta = {delta:g} is met by noise multiplier "
                f"{smallest:g} already (the bottom of the search range {SIGMA_RANGE}); such a "
                f"budget gives no meaningful protection: train longer or use a smaller epsilon")
        high, low = low, max(low / 4, smallest)
    while high / low > 1 + SIGMA_RELATIVE_TOLERANCE:
        middle = math.sqrt(low * high)  # bisect in log space: the range spans decades
        low, high = (low, middle) if meets(middle) else (middle, high)
    return high


# --- the command: privboard privacy dp-sgd --------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--epsilon", type=float, required=True, help="target epsilon")
    parser.add_argument("--delta", type=float, required=True, help="target delta (< 1/N)")
    parser.add_argument("--dataset-size", type=int, required=True,
                        help="number of training examples N")
    parser.add_argument("--batch-size", type=int, required=True,
                        help="expected batch size L (sampling rate L/N)")
    parser.add_argument("--epochs", type=float, required=True,
                        help="epochs in expectation (steps = ceil(epochs N / L))")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """Print the calibration; unusable input raises InputError (one line, exit code 2)."""
    result = calibrate(args.epsilon, args.delta, args.dataset_size, args.batch_size,
                       args.epochs)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"noise multiplier {result['noise_multiplier']:.4f} "
          f"(Poisson sampling rate {result['sampling_rate']:.6g}, {result['steps']} steps)\n"
          f"epsilon {result['epsilon_rdp']:.4f} (RDP accountant), "
          f"{result['epsilon_pld']:.4f} (PLD accountant) at delta {result['delta']:g}; "
          f"full DP, add/remove neighbours")
    return 0
