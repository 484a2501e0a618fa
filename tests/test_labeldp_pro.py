"""LabelDP-Pro's guarantee and its denoiser.

The guarantee: DP-SGD's noisy clipped sum, reused unchanged, charged at the sensitivity
that replacing one label implies (2C, the clipped gradient moving across the C-ball):
the charge is dp_accounting's epsilon for the noise over 2C, and one step under label
substitution is checked, over all outputs on a fine grid, to have Renyi divergences no
larger than the charged mechanism's, for every pair of clipped gradients tried,
including the worst (antipodal). The same check refuses a charge at sensitivity C, the
DP-SGD analysis the paper reuses. The denoiser: per-class gradients, the projection onto
their hull and the smoothed step, against direct computations."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import optimize

from benchmarks.contract import Budget, Split
from benchmarks.privacy import Ledger, rdp
from benchmarks.privacy.ledger import SampledGaussian
from methods import labeldp_pro
from tests.substitution_divergence import ORDERS, PAIRS, substitution_divergences

tf = pytest.importorskip("tensorflow")

from benchmarks.privacy import fast_clipping  # noqa: E402
from methods.nn import models  # noqa: E402

# MNIST's size and LabelDP-Pro's batch and epochs at epsilon 1 (suite label-dp-small).
N, BATCH, EPOCHS, EPSILON, DELTA, C = 60_000, 1024, 5.0, 1.0, 1e-5, 1.0


def mechanism_at(epsilon=EPSILON, clip_norm=C):
    from benchmarks.privacy import dp_sgd

    calibration = dp_sgd.calibrate(epsilon, DELTA, N, BATCH, EPOCHS)
    ledger = Ledger()
    mechanism = substitution_sum(ledger, dataset_size=N,
                                 sampling_rate=calibration["sampling_rate"],
                                 noise_multiplier=calibration["noise_multiplier"],
                                 clip_norm=clip_norm, steps=calibration["steps"])
    return calibration, ledger, mechanism


def substitution_sum(ledger, **settings):
    """DP-SGD's mechanism as LabelDP-Pro makes it: clipped to C, charged at 2C."""
    from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum

    return NoisyClippedSum(ledger, seed=0, sensitivity=labeldp_pro.SUBSTITUTION_SENSITIVITY,
                           **settings)


def test_the_charge_is_the_accountants_epsilon_at_the_substitution_sensitivity():
    calibration, ledger, mechanism = mechanism_at()
    sigma, q, steps = (calibration["noise_multiplier"], calibration["sampling_rate"],
                       calibration["steps"])
    [charge] = ledger.charges
    assert charge.cost == SampledGaussian(sigma, q, steps)
    assert charge.details["clip_norm"] == C
    assert charge.details["sensitivity"] == 2 * C
    assert mechanism.noise_std == pytest.approx(sigma * 2 * C, rel=1e-12)
    total = ledger.total(labeldp_pro.NOTION, DELTA)
    # The accountant's epsilon for the noise over the substitution sensitivity 2C...
    at_2c = rdp.sampled_gaussian_epsilon(mechanism.noise_std / (2 * C), q, steps, DELTA)
    assert total.epsilon == pytest.approx(at_2c, rel=1e-9)
    assert total.epsilon <= EPSILON
    # ... not the smaller one the same noise would claim at sensitivity C.
    at_c = rdp.sampled_gaussian_epsilon(mechanism.noise_std / C, q, steps, DELTA)
    assert at_c < 0.6 * total.epsilon


def test_a_labels_replacement_moves_the_clipped_sum_by_at_most_2c():
    _, _, mechanism = mechanism_at()
    norms = tf.constant([0.0, 0.3, 1.0, 1.7, 50.0, 1e6])
    clipped = (mechanism.clip_weights(norms) * norms).numpy()
    np.testing.assert_allclose(clipped, [0.0, 0.3, 1.0, 1.0, 1.0, 1.0], rtol=1e-6)
    # Two clipped gradients of one example (its two labels) are at most 2C apart: the
    # sensitivity the mechanism is charged and noised at.
    assert 2 * clipped.max() <= mechanism.sensitivity * (1 + 1e-6)


@pytest.mark.parametrize("q, sigma", [(BATCH / N, 0.8), (0.1, 1.0), (0.5, 2.0), (1.0, 1.0)])
def test_a_label_substitution_step_is_within_its_charge_over_all_outputs(q, sigma):
    """Per step, with C = 1 and the mechanism's noise sigma (2C) = 2 sigma: D_alpha of
    each substitution pair <= the RDP dp_accounting charges (sampled Gaussian, noise
    multiplier sigma); without sampling (q = 1) the antipodal pair meets it. The same
    pairs break a charge at sensitivity C (multiplier 2 sigma): the check's power."""
    noise = 2 * sigma * C
    charged = rdp.sampled_gaussian_rdp(sigma, q, 1, orders=ORDERS)
    at_c = rdp.sampled_gaussian_rdp(2 * sigma, q, 1, orders=ORDERS)
    worst = np.zeros(len(ORDERS))
    for a, b in PAIRS:
        divergence = substitution_divergences(a, b, q, noise)
        assert np.all(divergence <= charged * (1 + 1e-6) + 1e-12), (a, b, divergence, charged)
        worst = np.maximum(worst, divergence)
    if q == 1.0:
        np.testing.assert_allclose(worst, charged, rtol=1e-4)
    assert np.any(worst > at_c * 1.5), (worst, at_c)


# ----- the denoiser ----------------------------------------------------------------------

def tiny_model(classes=3):
    tf.keras.utils.set_random_seed(3)
    return models.build("small-cnn", (8, 8, 1), classes)


def test_the_vertices_are_the_gradients_of_every_input_class_pair():
    model, rng = tiny_model(), np.random.default_rng(0)
    x = tf.constant(rng.random((4, 8, 8, 1), dtype=np.float32))
    vertices = tf.function(labeldp_pro.per_class_gradients)(model, x, 3).numpy()
    assert vertices.shape == (12, sum(int(np.prod(v.shape)) for v in model.trainable_variables))
    for j in range(4):
        for k in range(3):
            with tf.GradientTape() as tape:
                loss = fast_clipping.per_example_loss(tf.constant([k]), model(x[j:j + 1]))[0]
            want = np.concatenate([g.numpy().ravel() for g in
                                   tape.gradient(loss, model.trainable_variables)])
            np.testing.assert_allclose(vertices[3 * j + k], want, rtol=1e-4, atol=1e-6)


def test_the_simplex_projection_is_the_nearest_point_of_the_simplex():
    rng = np.random.default_rng(1)
    for v in [rng.normal(0, 2, 7), np.array([0.2, 0.3, 0.5]), np.array([5.0, -1.0, 0.0])]:
        got = labeldp_pro.simplex_projection(tf.constant(v)).numpy()
        want = optimize.minimize(lambda a: np.sum((a - v) ** 2), np.full(len(v), 1 / len(v)),
                                 bounds=[(0, 1)] * len(v), method="SLSQP",
                                 constraints={"type": "eq", "fun": lambda a: a.sum() - 1}).x
        np.testing.assert_allclose(got, want, atol=1e-5)


def nearest_on_hull(vertices, target) -> float:
    """The least squared distance from ``target`` to the hull, by scipy."""
    count = len(vertices)
    best = optimize.minimize(
        lambda a: np.sum((a @ vertices - target) ** 2), np.full(count, 1 / count),
        bounds=[(0, 1)] * count, method="SLSQP",
        constraints={"type": "eq", "fun": lambda a: a.sum() - 1},
        options={"ftol": 1e-14, "maxiter": 1000})
    return best.fun


@pytest.mark.parametrize("shared", [0.0, 3.0], ids=["spread", "sharing-a-direction"])
def test_the_projection_finds_the_nearest_point_of_the_hull_in_200_steps(shared):
    """200 steps, as the suite runs. Gradients share a common part ("sharing a
    direction"), which a step size set by the full Gram matrix's curvature leaves near
    the uniform point."""
    rng = np.random.default_rng(2)
    vertices = shared * rng.normal(size=30) + rng.normal(size=(40, 30))
    inside = rng.dirichlet(np.ones(40)) @ vertices
    outside = rng.normal(0, 3, 30)
    for target in (inside, outside):
        alpha = labeldp_pro.hull_coefficients(tf.constant(vertices), tf.constant(target),
                                              200).numpy()
        assert alpha.min() >= 0 and alpha.sum() == pytest.approx(1, abs=1e-9)
        distance = np.sum((alpha @ vertices - target) ** 2)
        assert distance <= nearest_on_hull(vertices, target) + 1e-3 * (1 + distance)
    np.testing.assert_allclose(
        labeldp_pro.hull_coefficients(tf.constant(vertices), tf.constant(inside), 200).numpy()
        @ vertices, inside, atol=1e-2)


def test_the_step_is_along_the_smoothed_hull_point():
    """ĝ = G^T (lambda alpha + (1 - lambda) / (K n2)), G unclipped (the paper's), in the
    model's variables' shapes."""
    model, rng = tiny_model(), np.random.default_rng(4)
    x = rng.random((20, 8, 8, 1), dtype=np.float32)
    mechanism = substitution_sum(Ledger(), dataset_size=20, sampling_rate=0.5,
                                 noise_multiplier=1.0, clip_norm=C, steps=5)
    step = labeldp_pro.ProjectedStep(
        model, x, rng.integers(0, 3, 20), 3, mechanism=mechanism,
        optimizer=tf.keras.optimizers.SGD(0.1), alt_batch=4, projection_steps=50,
        smoothing=0.75, seed=0)
    noisy = [tf.constant(rng.normal(size=v.shape), tf.float32)
             for v in model.trainable_variables]
    public_x = tf.constant(x[:4])
    update = tf.function(step.denoise)(noisy, public_x)
    vertices = labeldp_pro.per_class_gradients(model, public_x, 3).numpy()
    alpha = labeldp_pro.hull_coefficients(
        vertices, tf.concat([tf.reshape(g, [-1]) for g in noisy], 0), 50).numpy()
    want = (0.75 * alpha + 0.25 / 12) @ vertices
    got = np.concatenate([u.numpy().ravel() for u in update])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert [u.shape for u in update] == [v.shape for v in model.trainable_variables]


def test_a_fit_charges_one_sampled_gaussian_at_2c_and_stays_within_budget():
    rng = np.random.default_rng(5)
    train = Split(rng.random((200, 8, 8, 1), dtype=np.float32), rng.integers(0, 3, 200))
    method = labeldp_pro.LabelDPPro(Budget(2.0, 1e-3), seed=0, epochs=1.0, batch_size=50,
                                    alt_batch=4, projection_steps=5, clip_norm=0.5)
    method.fit(train, 3)
    [charge] = method.ctx.ledger.charges
    details = method.privacy_details()
    assert charge.details["clip_norm"] == 0.5
    assert charge.details["sensitivity"] == 1.0  # 2C
    assert charge.cost.noise_multiplier == details["calibrated_noise_multiplier_at_2C"]
    assert method.spent().epsilon <= 2.0
    assert "inputs are public" in details["notion"]
    assert method.predict_proba(train.x[:5]).shape == (5, 3)
