"""PATE's teachers trained as one model: T copies of a Keras architecture stacked along a
teacher axis, so that one optimiser step updates all of them.

Stacking. Every weight of the Keras template (a models.BUILDERS chain of Conv2D,
MaxPooling2D, Flatten, Dense and activation layers) gets a leading teacher axis,
(T, *shape). Image activations are laid out (batch, height, width, T * channels), teacher
t owning channels [t*C, (t+1)*C): a stacked Conv2D is one grouped convolution with T
groups, group t's kernel being teacher t's, and bias, activations and max pooling act
channel by channel. Flatten moves to (T, batch, features) and a stacked Dense layer is a
batched matmul. In training, row i of teacher t's slice is the i-th example of its batch
from shard t; for queries every teacher sees the same images. A grouped convolution is one
oneDNN (or cuDNN) call; on a 2-core CPU it measured 1.2-3x faster than patch extraction
and batched matmuls.

Privacy: teacher t's parameters depend on shard t and the seed only.
- No operation mixes channel groups or teacher slices: no normalisation layers, no
  softmax over channels, no reduction across teachers but the loss below.
- The training loss is the SUM over teachers of each teacher's mean loss on its own
  batch, so teacher t's gradient is exactly that of its own loss; nothing normalises,
  rescales or clips by a quantity computed over several teachers.
- Adam's moments are per parameter. Its step count is shared, and data-independent:
  shards have equal sizes (PATE gives each teacher floor(N / T) examples), so all
  teachers take the same number of steps.
- Teacher t's initial weights and its shuffles of shard t come from a generator seeded by
  (seed, t).
tests/test_teacher_ensemble.py changes one shard and checks that every other teacher stays
bit-identical.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import tensorflow as tf

from methods.nn import models

layers = tf.keras.layers

# Queries go through all T teachers at once, in chunks whose widest activation stays
# under this many bytes.
QUERY_CHUNK_BYTES = 1 << 28

StackedOp = Callable[[tf.Tensor, Sequence[tf.Variable]], tf.Tensor]
Optimizer = tf.keras.optimizers.Optimizer | tf.keras.optimizers.legacy.Optimizer


def _elementwise(activation: Callable) -> Callable:
    """Activations act per value; a softmax over T * C channels would mix teachers."""
    if activation.__name__ in ("softmax", "log_softmax"):
        raise ValueError("a softmax inside a stacked model would mix teachers; "
                         "models end in logits")
    return activation


def _teachers_in_channels(x: tf.Tensor) -> tf.Tensor:
    """(T, B, H, W, C) -> (B, H, W, T * C): teacher t's images in channel group t."""
    teachers, _, height, width, channels = x.shape
    x = tf.transpose(x, [1, 2, 3, 0, 4])
    return tf.reshape(x, [-1, height, width, teachers * channels])


def _teachers_in_rows(h: tf.Tensor, teachers: int) -> tf.Tensor:
    """Flatten: (B, H, W, T * C) -> (T, B, H * W * C), features in Keras' (H, W, C) order."""
    _, height, width, stacked = h.shape
    channels = stacked // teachers
    h = tf.reshape(h, [-1, height, width, teachers, channels])
    return tf.reshape(tf.transpose(h, [3, 0, 1, 2, 4]),
                      [teachers, -1, height * width * channels])


def _conv2d(layer: layers.Conv2D) -> StackedOp:
    if layer.data_format != "channels_last" or layer.groups != 1:
        raise ValueError(f"{layer.name}: only channels-last, ungrouped Conv2D is stacked")
    activation = _elementwise(layer.activation)

    def apply(h: tf.Tensor, weights: Sequence[tf.Variable]) -> tf.Tensor:
        teachers, height, width, channels_in, filters = weights[0].shape
        kernel = tf.reshape(tf.transpose(weights[0], [1, 2, 3, 0, 4]),
                            [height, width, channels_in, teachers * filters])
        h = tf.nn.conv2d(h, kernel, strides=layer.strides, padding=layer.padding.upper(),
                         dilations=layer.dilation_rate)
        if layer.use_bias:
            h = tf.nn.bias_add(h, tf.reshape(weights[1], [-1]))
        return activation(h)
    return apply


def _dense(layer: layers.Dense) -> StackedOp:
    activation = _elementwise(layer.activation)

    def apply(h: tf.Tensor, weights: Sequence[tf.Variable]) -> tf.Tensor:
        h = tf.matmul(h, weights[0])
        if layer.use_bias:
            h = h + weights[1][:, tf.newaxis, :]
        return activation(h)
    return apply


def _max_pooling(layer: layers.MaxPooling2D) -> StackedOp:
    if layer.data_format != "channels_last":
        raise ValueError(f"{layer.name}: only channels-last pooling is stacked")
    return lambda h, weights: tf.nn.max_pool2d(h, layer.pool_size, layer.strides,
                                               layer.padding.upper())


def _stacked_op(layer: layers.Layer, teachers: int, flat: bool) -> StackedOp:
    """``flat``: whether a Flatten came before ``layer``."""
    kind = type(layer)
    before_flatten = kind in (layers.Conv2D, layers.MaxPooling2D, layers.Flatten)
    if (flat and before_flatten) or (not flat and kind is layers.Dense):
        raise ValueError(f"{layer.name}: images go through Conv2D and MaxPooling2D, then "
                         "one Flatten, then Dense layers")
    if kind is layers.Conv2D:
        return _conv2d(layer)
    if kind is layers.Dense:
        return _dense(layer)
    if kind is layers.MaxPooling2D:
        return _max_pooling(layer)
    if kind is layers.Flatten:
        return lambda h, weights: _teachers_in_rows(h, teachers)
    if kind is layers.ReLU:
        return lambda h, weights: layer(h)
    if kind is layers.Activation:
        activation = _elementwise(layer.activation)
        return lambda h, weights: activation(h)
    raise ValueError(f"{layer.name} ({kind.__name__}) cannot be stacked: teachers are "
                     "chains of Conv2D, MaxPooling2D, Flatten, Dense and activations "
                     "(normalisation would need per-teacher statistics)")


def _initialisers(layer: layers.Layer) -> list[tf.keras.initializers.Initializer]:
    """One per weight, in ``layer.weights`` order (kernel, then bias)."""
    if not layer.weights:
        return []
    return [layer.kernel_initializer] + ([layer.bias_initializer] if layer.use_bias else [])


def _draw(initialiser: tf.keras.initializers.Initializer, shape: tf.TensorShape,
          rng: np.random.Generator) -> np.ndarray:
    """The initialiser's distribution, seeded from ``rng``: Keras' fan-in and fan-out
    are those of one teacher."""
    config = initialiser.get_config()
    if "seed" in config:
        config["seed"] = int(rng.integers(2**31))
    return type(initialiser).from_config(config)(shape).numpy()


class StackedModel:
    """T teachers of the ``template``'s architecture; weight i of the template becomes a
    variable of shape (T, *shape), drawn by teacher t's generator in ``rngs``, or given
    in ``weights`` (teachers trained before)."""

    def __init__(self, template: tf.keras.Model,
                 rngs: Sequence[np.random.Generator] | None = None,
                 weights: Sequence[np.ndarray] | None = None) -> None:
        self.template = template
        self.teachers = len(rngs) if weights is None else len(weights[0])
        self.ops: list[tuple[StackedOp, slice]] = []
        self.variables: list[tf.Variable] = []
        # Feature vectors (tabular data) are laid out (T, B, D) from the start.
        self.flat_input = len(template.input_shape) == 2
        previous, flat = None, self.flat_input
        for layer in template.layers:
            if previous is not None and layer.input is not previous.output:
                raise ValueError(f"{template.name} is not a chain of layers at {layer.name}")
            previous = layer
            if isinstance(layer, layers.InputLayer):
                continue
            op, first = _stacked_op(layer, self.teachers, flat), len(self.variables)
            flat = flat or isinstance(layer, layers.Flatten)
            for initialiser, weight in zip(_initialisers(layer), layer.weights):
                stacked = (weights[len(self.variables)] if weights is not None else
                           np.stack([_draw(initialiser, weight.shape, rng) for rng in rngs]))
                self.variables.append(tf.Variable(stacked, name=weight.name.split(":")[0]))
            self.ops.append((op, slice(first, len(self.variables))))

    def __call__(self, h: tf.Tensor) -> tf.Tensor:
        """Logits (T, B, classes) of inputs laid out by ``per_teacher`` or ``shared``."""
        for op, weights in self.ops:
            h = op(h, self.variables[weights])
        return h

    def per_teacher(self, x: tf.Tensor) -> tf.Tensor:
        """The layout of (T, B, ...) inputs, teacher t's own batch in slice t: images as
        (B, H, W, T * C), feature vectors as they are."""
        return x if self.flat_input else _teachers_in_channels(x)

    def shared(self, x: tf.Tensor) -> tf.Tensor:
        """The layout of (B, ...) inputs that every teacher sees (the queries)."""
        if self.flat_input:
            return tf.tile(x[tf.newaxis], [self.teachers, 1, 1])
        return tf.tile(x, [1, 1, 1, self.teachers])

    def teacher_weights(self, t: int) -> list[np.ndarray]:
        """Teacher t's weights in the template's ``get_weights`` order."""
        return [v[t].numpy() for v in self.variables]

    def weights(self) -> list[np.ndarray]:
        """Every stacked weight, (T, *shape) each: what ``load_teachers`` takes back."""
        return [v.numpy() for v in self.variables]


class TeacherEnsemble:
    """Trained teachers: their logits and predictions, and PATE's vote counts."""

    def __init__(self, stack: StackedModel, num_classes: int) -> None:
        self.stack, self.num_classes = stack, num_classes
        widest = max(np.prod(layer.output.shape[1:]) for layer in stack.template.layers)
        self.chunk = max(1, QUERY_CHUNK_BYTES // int(4 * widest * stack.teachers))
        shape = stack.template.input_shape[1:]
        self._logits = tf.function(
            lambda x: stack(stack.shared(x)),
            input_signature=[tf.TensorSpec([None, *shape], tf.float32)])

    @property
    def teachers(self) -> int:
        return self.stack.teachers

    def logits(self, x: np.ndarray) -> np.ndarray:
        """(T, queries, classes): every teacher's logits for every query."""
        x = np.asarray(x, np.float32)
        return np.concatenate([self._logits(x[i:i + self.chunk]).numpy()
                               for i in range(0, len(x), self.chunk)], axis=1)

    def predictions(self, x: np.ndarray) -> np.ndarray:
        """(T, queries) labels: teacher t's prediction for every query."""
        return self.logits(x).argmax(axis=-1)

    def votes(self, x: np.ndarray) -> np.ndarray:
        """(queries, classes) counts of teachers predicting each class; rows sum to T."""
        labels = self.predictions(x)
        return (labels[:, :, np.newaxis] == np.arange(self.num_classes)).sum(axis=0)

    def teacher(self, t: int) -> tf.keras.Model:
        """Teacher t as a standalone Keras model."""
        model = tf.keras.models.clone_model(self.stack.template)
        model.set_weights(self.stack.teacher_weights(t))
        return model


def load_teachers(weights: Sequence[np.ndarray], *, model: str,
                  input_shape: tuple[int, ...], num_classes: int) -> TeacherEnsemble:
    """The teachers whose ``StackedModel.weights()`` these are."""
    template = models.build(model, tuple(input_shape), num_classes)
    return TeacherEnsemble(StackedModel(template, weights=weights), num_classes)


def adam(learning_rate: float) -> tf.keras.optimizers.legacy.Optimizer:
    """The teachers' optimiser. The legacy Adam updates a variable in one fused kernel;
    the current one's dozen element-wise ops made steps of 250 teachers ~15% slower."""
    return tf.keras.optimizers.legacy.Adam(learning_rate)


def equal_shards(size: int, teachers: int, seed: int) -> list[np.ndarray]:
    """T disjoint shards of floor(size / T) indices, by a seeded permutation that never
    looks at the data; the remainder is unused."""
    per_teacher = size // teachers
    if per_teacher == 0:
        raise ValueError(f"{teachers} teachers need at least that many training examples, "
                         f"got {size}")
    order = np.random.default_rng(seed).permutation(size)[:teachers * per_teacher]
    return np.split(order, teachers)


def train_teachers(x: np.ndarray, y: np.ndarray, shards: Sequence[np.ndarray],
                   num_classes: int, *, model: str = "teacher_cnn", epochs: int,
                   batch_size: int, learning_rate: float, seed: int,
                   progress: Callable[[str], None] = lambda message: None
                   ) -> TeacherEnsemble:
    """Train teacher t on ``x[shards[t]], y[shards[t]]``, all at once: cross-entropy,
    Adam, ``epochs`` passes over a fresh shuffle of its shard in batches of
    ``batch_size`` (the last one smaller), as ``model.fit`` does for one teacher.
    ``shards`` are disjoint index arrays of equal size. Equal seeds give equal ensembles
    (on a GPU only with op determinism: training.seed_everything)."""
    if len({len(s) for s in shards}) != 1:
        raise ValueError("shards must have equal sizes (give each teacher floor(N / T) "
                         "examples) so that all teachers step together")
    index = np.stack(shards)
    if len(np.unique(index)) != index.size:
        raise ValueError("shards must be disjoint")
    teachers, size = index.shape
    rngs = [np.random.default_rng([seed, t]) for t in range(teachers)]
    stack = StackedModel(models.build(model, x.shape[1:], num_classes), rngs)
    optimizer = adam(learning_rate)
    # Its slots made now (the legacy optimiser's build): a first call that creates
    # variables is traced twice.
    optimizer._create_all_weights(stack.variables)
    step = training_step(stack, optimizer,
                         tf.constant(x[index], tf.float32), tf.constant(y[index], tf.int64))
    for epoch in range(epochs):
        order = np.stack([rng.permutation(size) for rng in rngs]).astype(np.int32)
        losses = [step(order[:, i:i + batch_size]) for i in range(0, size, batch_size)]
        progress(f"teachers epoch {epoch + 1}/{epochs} "
                 f"mean loss {np.mean([loss.numpy() for loss in losses]):.3f}")
    return TeacherEnsemble(stack, num_classes)


def training_step(stack: StackedModel, optimizer: Optimizer, x: tf.Tensor, y: tf.Tensor
                  ) -> Callable[[np.ndarray], tf.Tensor]:
    """One optimiser step of every teacher t on its batch ``x[t, order[t]]`` (inputs
    (T, shard size, ...), labels (T, shard size)); returns the teachers' mean losses."""

    @tf.function(input_signature=[tf.TensorSpec([stack.teachers, None], tf.int32)])
    def step(order: tf.Tensor) -> tf.Tensor:
        xb = stack.per_teacher(tf.gather(x, order, batch_dims=1))
        yb = tf.gather(y, order, batch_dims=1)
        with tf.GradientTape() as tape:
            losses = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=yb, logits=stack(xb)), axis=1)
            total = tf.reduce_sum(losses)
        grads = tape.gradient(total, stack.variables)
        optimizer.apply_gradients(zip(grads, stack.variables))
        return losses
    return step
