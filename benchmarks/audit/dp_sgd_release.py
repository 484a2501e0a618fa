"""DP-SGD's release alone, audited with phantom gradient canaries: the noisy clipped sum
of a cell's setting (dataset size, sampling rate, clip norm, calibrated noise and steps)
run on a model of no coordinates, since the phantoms touch none of a model's. The same
release, phantoms and bound as the audited twin of a DP-SGD cell, without its training:
for measuring the audit's power and for tests of broken mechanisms at a suite's setting.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.audit.training import CONFIDENCE, PHANTOMS, phantom_audit
from benchmarks.privacy import Ledger
from benchmarks.privacy.phantom_canaries import PhantomCanaries


def audit_cell_release(cell, *, epsilon: float | None = None, seed: int = 0,
                       phantoms: int = PHANTOMS) -> dict[str, Any]:
    """``audit_release`` at a suite cell's DP-SGD setting: its dataset's size, its clip
    norm, and the noise and steps its method calibrates (after any release it makes
    besides the training), at the cell's epsilon unless another is given."""
    from benchmarks import datasets
    from benchmarks.contract import Budget
    from benchmarks.registry import get_method

    method = get_method(cell.method)(
        Budget(cell.epsilon if epsilon is None else epsilon, cell.delta), **cell.hparams)
    dataset_size = len(datasets.load(cell.dataset).train.y)
    return audit_release(method.calibration(dataset_size), dataset_size=dataset_size,
                         clip_norm=method.hparams["clip_norm"], delta=cell.delta, seed=seed,
                         phantoms=phantoms)


def audit_release(calibration: dict[str, Any], *, dataset_size: int, clip_norm: float,
                  delta: float, seed: int = 0, phantoms: int = PHANTOMS) -> dict[str, Any]:
    """The release audit (benchmarks.audit.training.phantom_audit) of one run of the
    mechanism calibrated as ``calibration`` (benchmarks.privacy.dp_sgd.calibrate) with
    ``phantoms`` canaries, their coins and the noise drawn from ``seed``."""
    import tensorflow as tf

    from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum

    rng = np.random.default_rng(seed)
    ledger = Ledger()
    ledger.phantoms = PhantomCanaries(rng.integers(0, 2, size=phantoms).astype(bool))
    mechanism = NoisyClippedSum(
        ledger, dataset_size=dataset_size, sampling_rate=calibration["sampling_rate"],
        noise_multiplier=calibration["noise_multiplier"], clip_norm=clip_norm,
        steps=calibration["steps"], seed=int(rng.integers(2**31)))

    @tf.function(autograph=False)
    def step():
        mechanism.batch()  # samples the phantoms
        return mechanism.noisy_mean_of_no_examples()

    for _ in range(calibration["steps"]):
        step()
    return phantom_audit(ledger.phantoms, delta, CONFIDENCE)
