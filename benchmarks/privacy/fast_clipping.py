"""Per-example clipping without per-example backward passes.

tensorflow-privacy's fast-clipping layer registry maps a layer class to a function that
returns, from the gradient of the summed loss with respect to the layer's output, every
example's squared gradient norm for that layer's weights. It ships Dense and Embedding;
this module adds Conv2D and GroupNormalization, so the project's CNNs and ResNet clip
with one forward and one backward pass: the backward pass stops at the layer outputs,
the norms give each example's clip factor c_i = min(1, C / norm_i), and each layer's
weight gradient is then taken from its output gradient with row i scaled by c_i (the
cost of the weight gradients of ordinary training).

A Conv2D kernel's per-example gradient is A_i^T G_i, with A_i the (P, k*k*Cin) matrix of
input patches and G_i the (P, Cout) output gradient at the P output positions. Its
squared norm is either taken directly (P*D*Cout flops, D*Cout memory per example) or by
the ghost-norm identity ||A^T G||^2 = sum_{p,q} <a_p, a_q><g_p, g_q> (P^2 (D + Cout)
flops); each layer uses whichever is cheaper for its shapes.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import tensorflow as tf
from tensorflow_privacy.privacy.fast_gradient_clipping import (clip_grads,
                                                               gradient_clipping_utils,
                                                               layer_registry)

# Normalisations that mix examples: one example's gradient then depends on the others
# in its batch, so clipping it bounds nothing.
BATCH_MIXING_LAYERS = (tf.keras.layers.BatchNormalization,)


def _no_microbatches(num_microbatches: Any) -> None:
    if num_microbatches is not None:
        raise NotImplementedError("microbatches are not supported: each example is clipped")


def _without_activation(layer: tf.keras.layers.Layer, inputs: tf.Tensor,
                        tape: tf.GradientTape) -> tuple[tf.Tensor, tf.Tensor]:
    """The pre-activation output (watched) and the layer's real output."""
    activation = layer.activation
    layer.activation = None
    try:
        pre_activation = layer(inputs)
    finally:
        layer.activation = activation
    tape.watch(pre_activation)
    return pre_activation, activation(pre_activation) if activation else pre_activation


def conv_kernel_uses_ghost_norm(positions: int, patch_size: int, filters: int) -> bool:
    """Ghost norm when its P^2 (D + Cout) flops beat the direct P D Cout."""
    return positions * (patch_size + filters) < patch_size * filters


# extract_patches copies one channel vector at a time, which is slow for few channels;
# a convolution with a one-hot kernel costs P*D^2 and wins for small patches (measured
# on a 2-core CPU: 7x faster for 5x5x1 patches, 2.3x slower for 3x3x32).
PATCHES_BY_CONVOLUTION_MAX_SIZE = 64


def _patches(layer: tf.keras.layers.Conv2D, inputs: tf.Tensor) -> tf.Tensor:
    """(B, Ho, Wo, kh*kw*Cin) input patches, in the kernel's (kh, kw, Cin) order."""
    kernel_h, kernel_w, channels_in, _ = layer.kernel.shape
    size = kernel_h * kernel_w * channels_in
    if size <= PATCHES_BY_CONVOLUTION_MAX_SIZE:
        one_hot = tf.reshape(tf.eye(size, dtype=inputs.dtype),
                             [kernel_h, kernel_w, channels_in, size])
        return tf.nn.conv2d(inputs, one_hot, strides=layer.strides,
                            padding=layer.padding.upper(), dilations=layer.dilation_rate)
    return tf.image.extract_patches(
        inputs, sizes=[1, kernel_h, kernel_w, 1], strides=[1, *layer.strides, 1],
        rates=[1, *layer.dilation_rate, 1], padding=layer.padding.upper())


def conv2d_layer_computation(layer: tf.keras.layers.Conv2D, input_args: Sequence[Any],
                             input_kwargs: dict, tape: tf.GradientTape,
                             num_microbatches: Any = None):
    """Registry function for tf.keras.layers.Conv2D (channels_last, groups = 1)."""
    _no_microbatches(num_microbatches)
    if input_kwargs or len(input_args) != 1:
        raise ValueError("Conv2D calls take exactly one input and no keyword arguments")
    if layer.data_format != "channels_last" or layer.groups != 1:
        raise NotImplementedError("fast clipping supports channels_last Conv2D with groups=1")
    inputs = input_args[0]
    pre_activation, outputs = _without_activation(layer, inputs, tape)
    kernel_h, kernel_w, channels_in, filters = layer.kernel.shape
    patch_size = kernel_h * kernel_w * channels_in

    def sqr_norm_fn(grads: tf.Tensor) -> tf.Tensor:
        batch = tf.shape(grads)[0]
        positions = grads.shape[1] * grads.shape[2]  # static even when the batch is not
        g = tf.reshape(grads, [batch, positions, filters])  # (B, P, Cout)
        a = tf.reshape(_patches(layer, inputs), [batch, positions, patch_size])  # (B, P, D)
        if conv_kernel_uses_ghost_norm(positions, patch_size, filters):
            norms = tf.reduce_sum(tf.einsum("bpd,bqd->bpq", a, a)
                                  * tf.einsum("bpc,bqc->bpq", g, g), axis=[1, 2])
        else:
            norms = tf.reduce_sum(tf.square(tf.einsum("bpd,bpc->bdc", a, g)), axis=[1, 2])
        if layer.use_bias:
            norms += tf.reduce_sum(tf.square(tf.reduce_sum(g, axis=1)), axis=1)
        return norms

    return pre_activation, outputs, sqr_norm_fn


def _group_normalised(layer: tf.keras.layers.GroupNormalization,
                      inputs: tf.Tensor) -> tf.Tensor:
    """The layer's normalised input before scale and offset, per example and group."""
    shape = tf.shape(inputs)
    channels = inputs.shape[-1]
    grouped = tf.reshape(inputs, tf.concat([shape[:-1], [layer.groups,
                                                          channels // layer.groups]], 0))
    axes = [a for a in range(1, grouped.shape.rank) if a != grouped.shape.rank - 2]
    mean, variance = tf.nn.moments(grouped, axes=axes, keepdims=True)
    normalised = (grouped - mean) * tf.math.rsqrt(variance + layer.epsilon)
    return tf.reshape(normalised, shape)


def group_norm_layer_computation(layer: tf.keras.layers.GroupNormalization,
                                 input_args: Sequence[Any], input_kwargs: dict,
                                 tape: tf.GradientTape, num_microbatches: Any = None):
    """Registry function for tf.keras.layers.GroupNormalization (last axis, no mask).

    Its output is y = gamma * xhat + beta with xhat normalised within one example, so
    example i's gradients are sum over positions of g_i * xhat_i (gamma) and of g_i
    (beta), with g_i the gradient at the layer's output.
    """
    _no_microbatches(num_microbatches)
    if input_kwargs or len(input_args) != 1:
        raise ValueError("GroupNormalization calls take one input and no mask")
    if layer.axis not in (-1, len(input_args[0].shape) - 1):
        raise NotImplementedError("fast clipping supports GroupNormalization on the last axis")
    # The same function as the layer's call, computed here because xhat is needed for
    # the norms (and Keras' own call spends time on an all-ones mask).
    xhat = _group_normalised(layer, input_args[0])
    outputs = xhat * layer.gamma if layer.scale else xhat
    outputs = outputs + layer.beta if layer.center else outputs
    tape.watch(outputs)

    def sqr_norm_fn(grads: tf.Tensor) -> tf.Tensor:
        spatial = list(range(1, grads.shape.rank - 1))
        norms = tf.zeros(tf.shape(grads)[:1], grads.dtype)
        if layer.scale:
            norms += tf.reduce_sum(tf.square(tf.reduce_sum(grads * xhat, spatial)), axis=1)
        if layer.center:
            norms += tf.reduce_sum(tf.square(tf.reduce_sum(grads, spatial)), axis=1)
        return norms

    return outputs, outputs, sqr_norm_fn


def make_registry() -> layer_registry.LayerRegistry:
    """tensorflow-privacy's registry (Dense, Embedding) plus Conv2D and GroupNorm."""
    registry = layer_registry.make_default_layer_registry()
    registry.insert(tf.keras.layers.Conv2D, conv2d_layer_computation)
    registry.insert(tf.keras.layers.GroupNormalization, group_norm_layer_computation)
    return registry


def check_model(model: tf.keras.Model, registry: layer_registry.LayerRegistry) -> None:
    """Raise ValueError, before training, for a model fast clipping cannot handle."""
    mixing = [layer.name for layer in model.layers if isinstance(layer, BATCH_MIXING_LAYERS)]
    if mixing:
        raise ValueError(f"model {model.name!r} has BatchNormalization ({', '.join(mixing)}): "
                         f"it mixes examples in a batch, so per-example clipping cannot bound "
                         f"one example's influence; build it with norm='group' or 'none'")
    if not gradient_clipping_utils.all_trainable_layers_are_registered(model, registry):
        missing = sorted({type(layer).__name__ for layer in model.layers
                          if layer.trainable_variables and not registry.is_elem(layer)})
        raise ValueError(f"model {model.name!r} has layers without a per-example norm "
                         f"function: {', '.join(missing)}")


def per_example_loss(labels: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """Cross-entropy of integer labels, one value per example."""
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def clipped_gradient_sum(model: tf.keras.Model, registry: layer_registry.LayerRegistry,
                         x: tf.Tensor, labels: tf.Tensor,
                         clip_weights: Callable[[tf.Tensor], tf.Tensor],
                         ) -> tuple[list[tf.Tensor], tf.Tensor, tf.Tensor]:
    """sum_i c_i grad loss_i over the batch, c_i = clip_weights(norms)_i (the clipping of
    the mechanism that calls it, NoisyClippedSum), the per-example gradient norms, and
    the per-example losses.

    Each layer's output Z_l must carry one row per example, and no layer may mix
    examples (check_model refuses BatchNorm). A Poisson batch can be empty;
    convolutions reject empty inputs, so that case returns zeros. Graph mode only: call
    it inside a tf.function.
    """
    def empty():
        return ([tf.zeros_like(v) for v in model.trainable_variables],
                tf.zeros([0]), tf.zeros([0]))

    return tf.cond(tf.shape(labels)[0] > 0,
                   lambda: _clipped_gradient_sum(model, registry, x, labels, clip_weights),
                   empty)


def _clipped_gradient_sum(model, registry, x, labels, clip_weights):
    # One forward pass through the registry functions records each layer's output Z_l
    # (pre-activation) and its weights.
    with tf.GradientTape() as tape:
        logits, layer_outputs = gradient_clipping_utils.model_forward_pass(
            model, x, generator_fn=clip_grads.get_registry_generator_fn(tape, registry))
        losses = per_example_loss(labels, logits)
        total = tf.reduce_sum(losses)
    layer_outputs = [entry for entry in layer_outputs if entry is not None]
    z_grads = tape.gradient(total, [z for z, _, _ in layer_outputs],
                            unconnected_gradients=tf.UnconnectedGradients.ZERO)
    norms = tf.sqrt(tf.add_n([norm_fn(g) for g, (_, norm_fn, _) in
                              zip(z_grads, layer_outputs)]))
    factors = clip_weights(norms)
    # Examples are independent, so row i of dL/dZ_l is example i's own gradient: scaling
    # it by c_i and back-propagating only from Z_l to layer l's weights gives
    # sum_i c_i grad_i for those weights, without a second pass through the network.
    # tf.gradients, unlike the tape, differentiates only the ops between Z_l and layer l's
    # weights: the tape would also trace (dead) gradients of every earlier layer, O(L^2)
    # ops to build. So this runs in a graph: DPSGDStep compiles it.
    sums = {v.ref(): tf.zeros_like(v) for v in model.trainable_variables}
    for g, (z, _, weights) in zip(z_grads, layer_outputs):
        scale = tf.reshape(factors, [-1] + [1] * (g.shape.rank - 1))
        for v, grad in zip(weights, tf.gradients(z, weights, grad_ys=scale * g)):
            sums[v.ref()] += grad
    return [sums[v.ref()] for v in model.trainable_variables], norms, losses
