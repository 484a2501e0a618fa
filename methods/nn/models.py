"""Every Keras model builder in one place.

Models end in a Dense layer of logits (no softmax): label-DP priors apply a temperature
to the logits, and the losses take ``from_logits=True``. Keras places the layers on a
GPU when TensorFlow sees one; nothing here pins a device.
"""
from __future__ import annotations

from typing import Callable

import tensorflow as tf

layers = tf.keras.layers


def _norm(kind: str, channels: int) -> layers.Layer:
    """BatchNorm mixes examples in a batch, which per-example DP gradients cannot allow;
    GroupNorm does not, so DP-SGD builds models with ``norm="group"``."""
    if kind == "batch":
        return layers.BatchNormalization()
    if kind == "group":
        return layers.GroupNormalization(groups=_largest_divisor(channels, 16))
    if kind == "none":
        return layers.Activation("linear")
    raise ValueError(f"unknown norm {kind!r}; use batch, group or none")


def _largest_divisor(n: int, at_most: int) -> int:
    return max(d for d in range(1, at_most + 1) if n % d == 0)


def cnn(input_shape: tuple[int, ...], num_classes: int, norm: str = "none") -> tf.keras.Model:
    """The CPU-sized CNN: conv 32 (5x5, stride 2), conv 64 (3x3, stride 2), dense 128.
    Strided convolutions instead of pooling make it about 4x faster on a CPU than the
    same widths at full resolution."""
    inputs = tf.keras.Input(input_shape)
    h = inputs
    for filters, size in ((32, 5), (64, 3)):
        h = layers.Conv2D(filters, size, strides=2, padding="same")(h)
        h = layers.ReLU()(_norm(norm, filters)(h))
    h = layers.Flatten()(h)
    h = layers.Dense(128, activation="relu")(h)
    return tf.keras.Model(inputs, layers.Dense(num_classes)(h), name="cnn")


def _conv_bn_relu(h: tf.Tensor, filters: int, size: int, stride: int, norm: str) -> tf.Tensor:
    h = layers.Conv2D(filters, size, strides=stride, padding="same", use_bias=False)(h)
    return layers.ReLU()(_norm(norm, filters)(h))


def inception(input_shape: tuple[int, ...], num_classes: int,
              norm: str = "batch") -> tf.keras.Model:
    """The label-DP paper's simplified Inception for 28x28 images (Appendix B):
    Conv(3x3, 96) S1 S2 S3 GlobalMaxPool Linear, with Block(a, b) =
    Concat(Conv(1x1, a), Conv(3x3, b)) and Conv = Convolution, BatchNorm, ReLU."""

    def block(h: tf.Tensor, ones: int, threes: int) -> tf.Tensor:
        return layers.Concatenate()([_conv_bn_relu(h, ones, 1, 1, norm),
                                     _conv_bn_relu(h, threes, 3, 1, norm)])

    inputs = tf.keras.Input(input_shape)
    h = _conv_bn_relu(inputs, 96, 3, 1, norm)
    for a, b in ((32, 32), (32, 48)):
        h = block(h, a, b)
    h = _conv_bn_relu(h, 160, 3, 2, norm)
    for a, b in ((112, 48), (96, 64), (80, 80), (48, 96)):
        h = block(h, a, b)
    h = _conv_bn_relu(h, 240, 3, 2, norm)
    for a, b in ((176, 160), (176, 160)):
        h = block(h, a, b)
    h = layers.GlobalMaxPool2D()(h)
    return tf.keras.Model(inputs, layers.Dense(num_classes)(h), name="inception")


def resnet18_v2(input_shape: tuple[int, ...], num_classes: int,
                norm: str = "batch") -> tf.keras.Model:
    """ResNet18 v2 (pre-activation) with the CIFAR stem: one 3x3 stride-1 convolution
    replaces ImageNet's 7x7 convolution and max pooling; the upper layers are unchanged."""

    def unit(h: tf.Tensor, filters: int, stride: int) -> tf.Tensor:
        pre = layers.ReLU()(_norm(norm, h.shape[-1])(h))
        shortcut = h
        if stride != 1 or h.shape[-1] != filters:
            shortcut = layers.Conv2D(filters, 1, strides=stride, use_bias=False)(pre)
        r = layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(pre)
        r = layers.ReLU()(_norm(norm, filters)(r))
        r = layers.Conv2D(filters, 3, padding="same", use_bias=False)(r)
        return layers.Add()([shortcut, r])

    inputs = tf.keras.Input(input_shape)
    h = layers.Conv2D(64, 3, padding="same", use_bias=False)(inputs)
    for filters, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        h = unit(h, filters, stride)
        h = unit(h, filters, 1)
    h = layers.ReLU()(_norm(norm, h.shape[-1])(h))
    h = layers.GlobalAveragePooling2D()(h)
    return tf.keras.Model(inputs, layers.Dense(num_classes)(h), name="resnet18_v2")


def ncf(input_shape: tuple[int, ...], num_classes: int, norm: str = "none",
        users: int = 6040, items: int = 3952, width: int = 64) -> tf.keras.Model:
    """Two-branch neural collaborative filtering (He et al. 2017) for ratings as classes:
    a generalised matrix-factorisation branch (element-wise product of user and item
    embeddings) beside an MLP branch on their concatenation. Inputs are (user, item)
    index pairs; MovieLens-1M's ids go up to 6040 users and 3952 movies."""
    if tuple(input_shape) != (2,):
        raise ValueError(f"ncf takes (user, item) index pairs, got inputs of shape {input_shape}")
    inputs = tf.keras.Input((2,), dtype="int64")
    user, item = inputs[:, 0], inputs[:, 1]

    def embed(ids: tf.Tensor, count: int) -> tf.Tensor:
        return layers.Embedding(count, width)(ids)

    gmf = layers.Multiply()([embed(user, users), embed(item, items)])
    mlp = layers.Concatenate()([embed(user, users), embed(item, items)])
    for units in (2 * width, width):
        mlp = layers.Dense(units, activation="relu")(mlp)
    h = layers.Concatenate()([gmf, mlp])
    return tf.keras.Model(inputs, layers.Dense(num_classes)(h), name="ncf")


def small_cnn(input_shape: tuple[int, ...], num_classes: int,
              norm: str = "none") -> tf.keras.Model:
    """LabelDP-Pro's network for MNIST, Fashion-MNIST and KMNIST (Ghazi et al. 2024,
    Table 10a): conv 16 (3x3, ReLU), 2x2 average pooling, conv 16 (3x3, ReLU), 2x2
    average pooling, dense 16 (ReLU), dense of logits. The table names no padding;
    "same" is ours (the default of the JAX library the paper used), 15,210 weights on
    28x28x1."""
    inputs = tf.keras.Input(input_shape)
    h = inputs
    for _ in range(2):
        h = layers.Conv2D(16, 3, padding="same")(h)
        h = layers.AveragePooling2D()(layers.ReLU()(_norm(norm, 16)(h)))
    h = layers.Dense(16, activation="relu")(layers.Flatten()(h))
    return tf.keras.Model(inputs, layers.Dense(num_classes)(h), name="small_cnn")

BUILDERS: dict[str, Callable[..., tf.keras.Model]] = {
    "cnn": cnn,
    "inception": inception,
    "resnet18_v2": resnet18_v2,
    "ncf": ncf,
    "small-cnn": small_cnn,
}


def build(name: str, input_shape: tuple[int, ...], num_classes: int,
          norm: str | None = None) -> tf.keras.Model:
    """Build a registered model; ``norm`` overrides the builder's default normalisation."""
    if name not in BUILDERS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(BUILDERS)}")
    kwargs = {} if norm is None else {"norm": norm}
    return BUILDERS[name](tuple(input_shape), num_classes, **kwargs)


# PATE's teachers. methods.nn.ensemble trains T of them as one stacked model, so they are
# chains of the layers it can stack: Conv2D, MaxPooling2D, Flatten, Dense and activations.
# With ``norm="group"`` or ``"batch"`` they are ordinary Keras models it refuses to stack.

def _teacher_conv(h: tf.Tensor, norm: str, filters: int, size: int, stride: int = 1,
                  padding: str = "same", pool: bool = False) -> tf.Tensor:
    """Convolution, optional 2x2 max pooling, norm, ReLU. Pooling straight after the
    convolution leaves the rest a quarter of the values; with no norm it is the same
    function as pooling after the ReLU (max and ReLU commute)."""
    h = layers.Conv2D(filters, size, strides=stride, padding=padding)(h)
    if pool:
        h = layers.MaxPooling2D()(h)
    return layers.ReLU()(_norm(norm, filters)(h))


def _teacher_head(inputs: tf.Tensor, h: tf.Tensor, dense: tuple[int, ...], num_classes: int,
                  name: str) -> tf.keras.Model:
    """Flatten, the hidden dense layers with ReLU, and the logits."""
    h = layers.Flatten()(h)
    for units in dense:
        h = layers.Dense(units, activation="relu")(h)
    return tf.keras.Model(inputs, layers.Dense(num_classes)(h), name=name)


def teacher_cnn(input_shape: tuple[int, ...], num_classes: int,
                norm: str = "none") -> tf.keras.Model:
    """The CPU-sized PATE teacher, LeNet-like: conv 8 (5x5, unpadded), pool, conv 16
    (3x3), pool, dense 64; 0.3M multiply-adds per 28x28 image, and 8x8 images still fit.
    With 240 examples, pooling at full resolution generalises better than the strided
    ``cnn``."""
    inputs = tf.keras.Input(input_shape)
    h = _teacher_conv(inputs, norm, 8, 5, padding="valid", pool=True)
    h = _teacher_conv(h, norm, 16, 3, pool=True)
    return _teacher_head(inputs, h, (64,), num_classes, "teacher_cnn")


def pate_mnist_cnn(input_shape: tuple[int, ...], num_classes: int,
                   norm: str = "none") -> tf.keras.Model:
    """PATE 2017's MNIST teacher: two 5x5 convolutions (64, 128 channels), dense 384 and
    192. The paper's summary names no pooling; 2x2 max pooling after each convolution is
    ours."""
    inputs = tf.keras.Input(input_shape)
    h = _teacher_conv(inputs, norm, 64, 5, pool=True)
    h = _teacher_conv(h, norm, 128, 5, pool=True)
    return _teacher_head(inputs, h, (384, 192), num_classes, "pate_mnist_cnn")


def pate_deep_cnn(input_shape: tuple[int, ...], num_classes: int,
                  norm: str = "none") -> tf.keras.Model:
    """PATE 2017's deeper SVHN teacher, which PATE++ reuses for Fashion-MNIST: seven
    convolutions (3x3 and 5x5; 96, then 192 channels) and two dense 192. The order and
    the down-sampling (a stride-2 convolution closing each block of three) are ours."""
    inputs = tf.keras.Input(input_shape)
    h = inputs
    for filters in (96, 192):
        h = _teacher_conv(h, norm, filters, 5)
        h = _teacher_conv(h, norm, filters, 3)
        h = _teacher_conv(h, norm, filters, 3, stride=2)
    h = _teacher_conv(h, norm, 192, 3)
    return _teacher_head(inputs, h, (192, 192), num_classes, "pate_deep_cnn")


def teacher_mlp(input_shape: tuple[int, ...], num_classes: int,
                norm: str = "none") -> tf.keras.Model:
    """PATE's teacher for tabular rows (UCI Adult): dense 256 and 128 with ReLU. The 2018
    paper does not describe its Adult teachers; this is ours."""
    if norm != "none":
        raise ValueError("teacher_mlp has no normalisation layers")
    inputs = tf.keras.Input(input_shape)
    h = inputs
    for units in (256, 128):
        h = layers.Dense(units, activation="relu")(h)
    return tf.keras.Model(inputs, layers.Dense(num_classes)(h), name="teacher_mlp")


BUILDERS.update(teacher_cnn=teacher_cnn, pate_mnist_cnn=pate_mnist_cnn,
                pate_deep_cnn=pate_deep_cnn, teacher_mlp=teacher_mlp)
