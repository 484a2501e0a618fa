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
from benchmarks.privacy import Ledger, dp_sgd
from benchmarks.privacy.phantom_canaries import PhantomCanaries


def audit_cell_release(cell, *, epsilon: float | None = None, seed: int = 0,
                       phantoms: int = PHANTOMS) -> dict[str, Any]:
    """``audit_release`` at a suite cell's DP-SGD setting (its dataset's size, batch size,
    epochs, clip norm and delta), at the cell's epsilon unless another is given. A method
    whose sum is charged at a multiple of its clip norm (LabelDP-Pro: 2C under label
    substitution) declares the multiple as ``gradient_sensitivity``; the release is then
    noised and audited at that sensitivity."""
    from benchmarks import datasets
    from benchmarks.registry import get_method

    method = get_method(cell.method)
    h = method.defaults | cell.hparams
    sensitivity = getattr(method, "gradient_sensitivity", 1)
    return audit_release(
        dataset_size=len(datasets.load(cell.dataset).train.y), batch_size=h["batch_size"],
        epochs=h["epochs"], clip_norm=sensitivity * h["clip_norm"],
        epsilon=cell.epsilon if epsilon is None else epsilon, delta=cell.delta, seed=seed,
        phantoms=phantoms)


def audit_release(*, dataset_size: int, batch_size: int, epochs: float, clip_norm: float,
                  epsilon: float, delta: float, seed: int = 0,
                  phantoms: int = PHANTOMS) -> dict[str, Any]:
    """The release audit (benchmarks.audit.training.phantom_audit) of one run of the
    mechanism with ``phantoms`` canaries, their coins and the noise drawn from ``seed``."""
    import tensorflow as tf

    from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum

    calibration = dp_sgd.calibrate(epsilon, delta, dataset_size, batch_size, epochs)
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
        return mechanism.noisy_mean([tf.zeros([0])])

    for _ in range(calibration["steps"]):
        step()
    return phantom_audit(ledger.phantoms, delta, CONFIDENCE)
