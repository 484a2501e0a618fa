"""The fast path's per-example norms and clipped sums against one GradientTape per example."""
from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from benchmarks.privacy import Ledger  # noqa: E402
from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum  # noqa: E402
from benchmarks.privacy import fast_clipping  # noqa: E402
from methods.nn import models  # noqa: E402

layers = tf.keras.layers
NUM_CLASSES = 5


def dense_model(shape):
    inputs = tf.keras.Input(shape)
    h = layers.Dense(16, activation="tanh")(layers.Flatten()(inputs))
    return tf.keras.Model(inputs, layers.Dense(NUM_CLASSES)(h), name="dense")


def branchy_model(shape):
    """Valid padding, dilation, no bias, a residual Add and GroupNorm without scale."""
    inputs = tf.keras.Input(shape)
    h = layers.Conv2D(8, 3, padding="valid", dilation_rate=2, use_bias=False)(inputs)
    h = layers.GroupNormalization(groups=4, scale=False)(h)
    r = layers.Conv2D(8, 3, padding="same", activation="relu")(h)
    h = layers.Add()([h, r])
    h = layers.GlobalAveragePooling2D()(h)
    return tf.keras.Model(inputs, layers.Dense(NUM_CLASSES)(h), name="branchy")


MODELS = {
    "cnn-group": lambda shape: models.build("cnn", shape, NUM_CLASSES, norm="group"),
    "cnn-none": lambda shape: models.build("cnn", shape, NUM_CLASSES, norm="none"),
    "dense": dense_model,
    "branchy": branchy_model,
}


def reference(model, x, labels, clip_norm):
    """Per-example gradients, one tape each: their norms and the sum of their clips."""
    norms, total = [], [tf.zeros_like(v) for v in model.trainable_variables]
    for i in range(len(x)):
        with tf.GradientTape() as tape:
            loss = fast_clipping.per_example_loss(labels[i:i + 1], model(x[i:i + 1]))[0]
        grads = tape.gradient(loss, model.trainable_variables)
        norm = tf.linalg.global_norm(grads)
        norms.append(norm.numpy())
        factor = min(1.0, clip_norm / float(norm))
        total = [t + factor * g for t, g in zip(total, grads)]
    return np.array(norms), [t.numpy() for t in total]


def randomise_norm_weights(model, rng):
    """GroupNorm starts at gamma = 1, beta = 0; other values exercise both terms."""
    for layer in model.layers:
        if isinstance(layer, layers.GroupNormalization):
            for v in layer.trainable_variables:
                v.assign(rng.normal(1.0, 0.5, v.shape).astype("float32"))


def clipping_to(clip_norm: float):
    """The privacy layer's clip weights at ``clip_norm``."""
    return NoisyClippedSum(Ledger(), dataset_size=1, sampling_rate=1.0, noise_multiplier=1.0,
                           clip_norm=clip_norm, steps=1, seed=0).clip_weights


@pytest.mark.parametrize("name", sorted(MODELS))
def test_fast_norms_and_clipped_sum_match_per_example_tapes(name):
    tf.keras.utils.set_random_seed(1)
    rng = np.random.default_rng(1)
    x = tf.constant(rng.random((6, 10, 10, 1), dtype=np.float32))
    labels = tf.constant(rng.integers(0, NUM_CLASSES, 6), tf.int32)
    model = MODELS[name]((10, 10, 1))
    randomise_norm_weights(model, rng)
    registry = fast_clipping.make_registry()
    fast_clipping.check_model(model, registry)

    want_norms, _ = reference(model, x, labels, np.inf)
    clip_norm = float(np.median(want_norms))  # about half the examples get clipped
    _, want_sum = reference(model, x, labels, clip_norm)
    grads, norms, _ = tf.function(fast_clipping.clipped_gradient_sum)(
        model, registry, x, labels, clipping_to(clip_norm))

    np.testing.assert_allclose(norms.numpy(), want_norms, rtol=1e-4)
    for got, want in zip(grads, want_sum):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-6)


def test_both_conv_norm_routes_are_exercised_by_the_cnn():
    # 10x10 input: the first conv (P=25, D=25, Cout=32) goes direct with patches from a
    # one-hot convolution, the second (P=9, D=288, Cout=64) ghost with extract_patches,
    # so the test above checks both formulas and both patch routes.
    assert not fast_clipping.conv_kernel_uses_ghost_norm(25, 25, 32)
    assert fast_clipping.conv_kernel_uses_ghost_norm(9, 288, 64)
    assert 25 <= fast_clipping.PATCHES_BY_CONVOLUTION_MAX_SIZE < 288


def test_clipped_sum_handles_an_empty_poisson_batch():
    model = MODELS["cnn-group"]((10, 10, 1))
    grads, norms, _ = tf.function(fast_clipping.clipped_gradient_sum)(
        model, fast_clipping.make_registry(), tf.zeros((0, 10, 10, 1)),
        tf.zeros((0,), tf.int32), clipping_to(1.0))
    assert norms.shape == (0,)
    assert all(float(tf.reduce_sum(tf.abs(g))) == 0 for g in grads)


def test_batchnorm_models_are_rejected():
    model = models.build("cnn", (10, 10, 1), NUM_CLASSES, norm="batch")
    with pytest.raises(ValueError, match="BatchNormalization"):
        fast_clipping.check_model(model, fast_clipping.make_registry())


def test_layers_without_a_norm_function_are_rejected():
    inputs = tf.keras.Input((10, 10, 1))
    h = layers.DepthwiseConv2D(3)(inputs)
    model = tf.keras.Model(inputs, layers.Dense(NUM_CLASSES)(layers.Flatten()(h)))
    with pytest.raises(ValueError, match="DepthwiseConv2D"):
        fast_clipping.check_model(model, fast_clipping.make_registry())
