"""A noisy-gradient cell's Gaussian releases alone, audited with phantom canaries: its
statistics of the training inputs if it releases any (a data normalisation's noisy
means), then the noisy clipped sum of every DP-SGD step at its setting (dataset size,
sampling rate, clip norm and sensitivity, calibrated noise and steps), each on inputs of
no coordinates, since the phantoms touch none of a model's. The same releases, charges,
phantoms and audit as the cell's audited twin, without its training: for measuring the
audit's power and for tests of broken mechanisms at a suite's setting.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.audit.training import CONFIDENCE, PHANTOMS, phantom_audit
from benchmarks.privacy.claimed_profile import ClaimedProfile
from benchmarks.privacy.phantom_canaries import PhantomCanaries


def audit_cell_release(cell, *, epsilon: float | None = None, seed: int = 0,
                       phantoms: int = PHANTOMS) -> dict[str, Any]:
    """The release audit (benchmarks.audit.training.phantom_audit) of one run of
    ``cell``'s releases, at the cell's epsilon unless another is given, with ``phantoms``
    canaries; their coins and every noise drawn from ``seed``."""
    import tensorflow as tf

    from benchmarks import datasets
    from benchmarks.context import RunContext
    from benchmarks.contract import Budget
    from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum
    from benchmarks.registry import get_method

    budget = Budget(cell.epsilon if epsilon is None else epsilon, cell.delta)
    method = get_method(cell.method)(budget, context=RunContext(seed=seed), **cell.hparams)
    rng = np.random.default_rng(seed)
    ledger = method.ctx.ledger
    ledger.phantoms = PhantomCanaries(rng.integers(0, 2, size=phantoms).astype(bool))
    dataset_size = len(datasets.load(cell.dataset).train.y)
    method.release_statistics(np.zeros((dataset_size, 1, 1, 0), np.float32))
    calibration = method.calibration(dataset_size)
    mechanism = NoisyClippedSum(
        ledger, dataset_size=dataset_size, sampling_rate=calibration["sampling_rate"],
        noise_multiplier=calibration["noise_multiplier"], clip_norm=method.hparams["clip_norm"],
        steps=calibration["steps"], seed=int(rng.integers(2**31)),
        sensitivity=method.gradient_sensitivity)

    @tf.function(autograph=False)
    def step():
        mechanism.batch()  # samples the phantoms
        return mechanism.noisy_mean_of_no_examples()

    for _ in range(calibration["steps"]):
        step()
    claim = ClaimedProfile.of(ledger, method.notion_for(budget, method.hparams), budget.delta)
    return phantom_audit(ledger.phantoms, claim, CONFIDENCE)
