"""A noisy-gradient cell's Gaussian releases alone, audited with phantom canaries: its
statistics of the training inputs if it releases any (a data normalisation's noisy
means), then the noisy clipped sum of every DP-SGD step at its setting (dataset size,
sampling rate, clip norm and sensitivity, calibrated noise and steps), each on real
coordinates of zeros (STAND_INS of them, or the scattering's channels), since the
phantoms touch none of a model's. The same releases, charges, phantoms and audit as the
cell's audited twin, without its training: for measuring the audit's power and for
tests of broken mechanisms at a suite's setting.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from benchmarks.audit import levels
from benchmarks.audit.training import CONFIDENCE, PHANTOMS, phantom_audit
from benchmarks.privacy.claimed_profile import ClaimedProfile
from benchmarks.privacy.phantom_canaries import PhantomCanaries

# The real coordinates of zeros each step releases: enough for the noise check to see
# half the noise at once, few beside the phantoms.
STAND_INS = 4096
SCATTERING_CHANNELS = 81


def audit_cell_release(cell, *, epsilon: float | None = None, seed: int = 0,
                       phantoms: int = PHANTOMS) -> dict[str, Any]:
    """The release audit (benchmarks.audit.training.phantom_audit) of one run of
    ``cell``'s releases, at the cell's epsilon unless another is given, with ``phantoms``
    canaries; their coins and every noise drawn from ``seed``. With it, ``noise_checks``:
    each release's real coordinates' noise against its phantoms', with its level and
    whether it fails there."""
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
    notion = method.notion_for(budget, method.hparams)
    ledger.phantoms = PhantomCanaries(rng.integers(0, 2, size=phantoms).astype(bool),
                                      notion.neighbours)
    dataset_size = len(datasets.load(cell.dataset).train.y)
    method.release_statistics(np.zeros((dataset_size, 1, 1, SCATTERING_CHANNELS), np.float32))
    calibration = method.calibration(dataset_size)
    mechanism = NoisyClippedSum(
        ledger, dataset_size=dataset_size, sampling_rate=calibration["sampling_rate"],
        noise_multiplier=calibration["noise_multiplier"], clip_norm=method.hparams["clip_norm"],
        steps=calibration["steps"], seed=int(rng.integers(2**31)),
        sensitivity=method.gradient_sensitivity)

    @tf.function(autograph=False)
    def step():
        mechanism.batch()  # samples the phantoms
        return mechanism.noisy_mean_of_zeros(STAND_INS)

    for _ in range(calibration["steps"]):
        step()
    checks = ledger.phantoms.noise_checks()
    release = phantom_audit(ledger.phantoms, ClaimedProfile.of(ledger, notion, budget.delta),
                            CONFIDENCE, len(checks))
    level = levels.noise_check_level({"release": release}, 1 - CONFIDENCE, len(checks))
    return release | {"noise_checks": [check.as_dict(level) | {"level": level}
                                       for check in checks]}


def simulated_releases(cell, epsilon: float | None = None):
    """The releases of ``cell`` (at ``epsilon`` unless the cell's) as an exact simulation
    draws them (benchmarks.audit.simulation), with the curve its ledger claims, the
    neighbouring relation of its notion and its budget: the same statistics and DP-SGD
    steps as ``audit_cell_release``, at the same noise, sampling rate and steps."""
    from benchmarks import datasets
    from benchmarks.audit.simulation import GaussianRelease
    from benchmarks.context import RunContext
    from benchmarks.contract import Budget
    from benchmarks.privacy import SampledGaussian, records
    from benchmarks.privacy.noisy_clipped_mean import MECHANISM as MEAN
    from benchmarks.privacy.noisy_clipped_sum import MECHANISM as SUM
    from benchmarks.registry import get_method

    budget = Budget(cell.epsilon if epsilon is None else epsilon, cell.delta)
    method = get_method(cell.method)(budget, context=RunContext(seed=0), **cell.hparams)
    ledger = method.ctx.ledger
    size = len(datasets.load(cell.dataset).train.y)
    method.release_statistics(np.zeros((size, 1, 1, SCATTERING_CHANNELS), np.float32))
    means = [c.cost for c in ledger.charges if c.mechanism == MEAN]
    releases = [GaussianRelease(MEAN, means[0].noise_multiplier, 1.0, len(means),
                                SCATTERING_CHANNELS * len(means))] if means else []
    calibration = method.calibration(size)
    ledger.charge(SUM, records(), SampledGaussian(calibration["noise_multiplier"],
                                                  calibration["sampling_rate"],
                                                  calibration["steps"]))
    releases.append(GaussianRelease(
        "DP-SGD noisy clipped sum", calibration["noise_multiplier"] * method.gradient_sensitivity,
        calibration["sampling_rate"], calibration["steps"], STAND_INS * calibration["steps"]))
    notion = method.notion_for(budget, method.hparams)
    return (tuple(releases), ClaimedProfile.of(ledger, notion, budget.delta), notion.neighbours,
            budget)


def audit_simulated_release(cell, *, epsilon: float | None = None, seed: int = 0,
                            phantoms: int = PHANTOMS, noise: float = 1.0) -> dict[str, Any]:
    """``audit_cell_release`` on an exact simulation of the releases, each noised at
    ``noise`` times its charge: in seconds where the mechanisms take minutes."""
    from benchmarks.audit.simulation import add_release

    releases, claim, neighbours, _ = simulated_releases(cell, epsilon)
    rng = np.random.default_rng(seed)
    planted = PhantomCanaries(rng.integers(0, 2, size=phantoms).astype(bool), neighbours)
    for release in releases:
        add_release(rng, planted, dataclasses.replace(release, noise=noise * release.noise))
    return phantom_audit(planted, claim, CONFIDENCE, len(planted.noise_checks()))
