"""Without phantom canaries, the Gaussian releases draw what they drew before the audit's
phantoms were tested by the neighbouring relation: the same Poisson batches, the same
number and order of draws (the generator's state after them) and the same releases. The
archived cells of DP-SGD, LabelDP-Pro, ScatterNet and DP-SGD under label-DP were run
with these draws; a change here changes them."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.contract import Split
from benchmarks.privacy import Ledger
from benchmarks.privacy.noisy_clipped_mean import NoisyClippedMean

tf = pytest.importorskip("tensorflow")

from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum  # noqa: E402
from methods.nn import dp_training  # noqa: E402

# Figures of the releases below, printed by the code of commit 6e31ed5.
BATCHES = [[1, 6, 9, 10, 14, 21, 25, 31, 34, 35, 36, 39, 43, 49, 52, 55, 58],
           [1, 2, 5, 11, 14, 16, 21, 22, 24, 30, 32, 36, 38, 40, 41, 49, 50, 56, 58, 59],
           [2, 3, 6, 7, 10, 11, 16, 17, 19, 22, 24, 25, 31, 33, 36, 37, 38, 45, 49, 54, 55,
            59]]
GENERATOR_STATE = [85259, 0, 0]
# The first values of each released gradient at the third step, by sensitivity.
RELEASED = {1.0: [[0.03763, -0.01537, 0.0625, -0.02696], [0.03855, 0.00842, 0.01544]],
            2.0: [[0.06532, -0.01735, 0.12155, -0.06404], [0.05516, 0.02894, 0.04071]]}
MEAN_RELEASED = [-0.0581843842, -0.0591806036, -0.0914450637, 0.0232485405, 0.0604280263,
                 -0.0208426388]
MEAN_STATE = 287218357398215675558064510100540469752


@pytest.mark.parametrize("sensitivity", [1.0, 2.0], ids=["add-remove", "label-substitution"])
def test_a_noisy_clipped_sum_without_phantoms_draws_as_before(sensitivity):
    rng = np.random.default_rng(0)
    split = Split(rng.random((60, 4, 4, 1), dtype=np.float32), rng.integers(0, 3, 60))
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((4, 4, 1)), tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(3)])
    mechanism = NoisyClippedSum(Ledger(), dataset_size=60, sampling_rate=0.3,
                                noise_multiplier=1.3, clip_norm=0.7, steps=3, seed=11,
                                sensitivity=sensitivity)
    step = dp_training.DPSGDStep(model, split.x, split.y, mechanism=mechanism,
                                 optimizer=tf.keras.optimizers.SGD(0.1))
    release = tf.function(step.noisy_mean_gradient)
    batches = []
    for _ in range(3):
        index = mechanism.batch()
        batches.append(index.numpy().tolist())
        released, _ = release(index)
    assert batches == BATCHES
    assert mechanism.generator.state.numpy().tolist() == GENERATOR_STATE
    for found, expected in zip(released, RELEASED[sensitivity]):
        assert found.numpy().ravel()[:4] == pytest.approx(expected, abs=1e-5)


def test_a_noisy_clipped_mean_without_phantoms_draws_as_before():
    rng = np.random.default_rng(5)
    mechanism = NoisyClippedMean(Ledger(), dataset_size=30, clip_norm=0.5,
                                 noise_multiplier=2.0, rng=rng, what="t")
    released = mechanism.release(np.random.default_rng(1).normal(size=(30, 6)))
    assert released == pytest.approx(MEAN_RELEASED, abs=1e-9)
    assert rng.bit_generator.state["state"]["state"] == MEAN_STATE
