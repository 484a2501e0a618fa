"""DP-SGD under label-DP: a fit's charge holds its guarantee under label substitution.

A tiny fit is watched: its ledger's charge (noise multiplier, sampling rate, steps), the
steps its loop runs and the noise its mechanism adds, measured on a release of an empty
batch.
One step's exact Renyi divergences between an example's two clipped gradients (its two
labels, up to 2C apart), over all outputs, must be within the charged curve at every
order, and the steps run must be the steps charged. Charged at sensitivity C (DP-SGD's
add/remove analysis), the same check fails."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.contract import Budget
from benchmarks.privacy import SampledGaussian, rdp
from methods import dp_sgd_label_dp
from methods.dp_sgd_label_dp import DPSGDLabelDP
from tests.substitution_divergence import ORDERS, PAIRS, substitution_divergences

tf = pytest.importorskip("tensorflow")

from methods.nn import dp_training  # noqa: E402
from tests.test_dp_sgd import ObservedStep, tiny_split  # noqa: E402

BUDGET = Budget(1.0, 1e-5)


def watched_fit(monkeypatch):
    """A tiny fit: its one charge, its step and the noise std measured on its mechanism."""
    ObservedStep.seen.clear()
    monkeypatch.setattr(dp_training, "DPSGDStep", ObservedStep)
    method = DPSGDLabelDP(BUDGET, seed=1, epochs=2.0, batch_size=60, clip_norm=0.5)
    method.fit(tiny_split(), 3)
    [charge] = method.ctx.ledger.charges
    [step] = ObservedStep.seen
    mechanism = step.mechanism
    # A step on an empty batch releases the noise alone, on every coordinate of the model.
    empty = tf.zeros([0, 8, 8, 1]), tf.zeros([0], tf.int32)
    release = tf.function(lambda: mechanism.noisy_mean_gradient(step.model, *empty)[0],
                          autograph=False)
    noise = np.concatenate([np.concatenate([g.numpy().ravel() for g in release()])
                            for _ in range(5)]) * mechanism.expected_batch
    return method, charge, step, float(np.std(noise))


def test_the_charge_covers_one_label_replaced_over_all_outputs(monkeypatch):
    method, charge, step, noise_std = watched_fit(monkeypatch)
    assert isinstance(charge.cost, SampledGaussian)
    assert charge.cost.steps == len(step.batch_sizes)
    clip = step.mechanism.clip_norm
    assert clip == 0.5
    charged = rdp.sampled_gaussian_rdp(charge.cost.noise_multiplier, charge.cost.sampling_rate,
                                       1, orders=ORDERS)
    for a, b in PAIRS:  # in units of the clip norm: the gradients are clipped to C
        divergence = substitution_divergences(a, b, charge.cost.sampling_rate,
                                              noise_std / clip)
        assert np.all(divergence <= charged * (1 + 0.02) + 1e-9), (a, b, divergence, charged)
    total = method.spent()
    assert total.epsilon <= BUDGET.epsilon
    assert method.notion.protects.value == "labels"
    assert method.privacy_details()["noise_std_in_clip_norms"] == pytest.approx(
        noise_std / clip, rel=0.02)


def test_the_same_check_refuses_a_charge_at_sensitivity_c(monkeypatch):
    monkeypatch.setattr(DPSGDLabelDP, "gradient_sensitivity", 1)
    _, charge, step, noise_std = watched_fit(monkeypatch)
    charged = rdp.sampled_gaussian_rdp(charge.cost.noise_multiplier, charge.cost.sampling_rate,
                                       1, orders=ORDERS)
    antipodal = substitution_divergences(1.0, -1.0, charge.cost.sampling_rate,
                                         noise_std / step.mechanism.clip_norm)
    assert np.any(antipodal > charged * 1.5)


def test_the_record_names_label_dp_and_the_2c_charge():
    details = DPSGDLabelDP(BUDGET).privacy_details()
    assert "2C" in details["sensitivity"]
    assert dp_sgd_label_dp.NOTION.neighbours.value == "substitution"
