"""PATE's student: a semi-supervised GAN with feature matching (Salimans et al. 2016), and
the noisy-label variants of PATE++ (Zhang et al. 2020): two discriminators that co-teach,
co-teaching+ (PATE+), and noisy-label cleansing (PATE++).

The discriminator has K + 1 classes, the last one "generated". It outputs K logits l and
the generated class's logit is fixed at 0, so with Z(x) = sum_k exp l_k(x):
p(generated | x) = 1 / (1 + Z(x)) and p(k | x, real) = softmax(l)_k. The unsupervised loss
is then written with LSE = log Z: a real sample costs -log(1 - p(generated)) =
softplus(LSE) - LSE, a generated one -log p(generated) = softplus(LSE).

Modes (one training loop; they differ only in which labelled samples each discriminator's
supervised loss uses, see ``supervised_picks``):
- "pate": one discriminator, every labelled sample of the batch.
- "co-teaching": D1 and D2; each picks the R(e) fraction of the batch's labelled samples
  with its smallest supervised loss, and the other one trains on them.
- "co-teaching-plus" (PATE+): the same among the samples on which D1 and D2 disagree.
- "pate-plus-plus": PATE+ while counting, per labelled sample, the epochs in which D1 and
  D2 disagree and both differ from its label; then the top tau fraction loses its label
  (moves to the unlabelled set) and PATE+ is retrained from scratch.
- "supervised": the baseline of the semi-supervised student: the same discriminator
  network trained on the labelled samples alone, with no GAN and no unlabelled input.

The open choices (epoch numbering, rounding, the fallback when D1 and D2 agree on a whole
batch, the count table's decay, retraining, the reported discriminator) are settings or
documented where they are made, and every run lists them in ``Student.choices``.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import tensorflow as tf

from methods.nn.training import seed_everything

layers = tf.keras.layers

MODES = ("pate", "co-teaching", "co-teaching-plus", "pate-plus-plus", "supervised")
SINGLE = ("pate", "supervised")  # the modes with one discriminator
REPORTS = ("d1", "d2", "average")
# "decayed": T <- alpha T + c_e, the decayed count the paper's prose describes.
# "scaled": T <- T + alpha c_e, Algorithm 2 line 16 as printed (it decays nothing).
DECAY_RULES = ("decayed", "scaled")
NOISE_DIM = 100
INIT_BATCH = 500  # real samples for the data-dependent initialisation
# Three of the improved-GAN reference's training details that keep the game balanced: with
# Keras' defaults (epsilon 1e-7, the unsupervised loss at full weight, batch-norm epsilon
# 1e-3) the discriminator won outright on MNIST within 2,000-4,000 steps (its loss near
# 0.001, feature matching 30-fold up) and the student's accuracy fell back.
UNSUPERVISED_WEIGHT = 0.5  # the reference halves the real and generated terms
ADAM_EPSILON = 1e-4  # the reference adds 1e-8 under Adam's square root: the same floor
BATCH_NORM_EPSILON = 1e-6
# The student predicts with an exponential moving average of each discriminator's weights,
# as the reference evaluates its averaged discriminator: the trained weights swing by a
# point of accuracy from epoch to epoch. The reference averages at rate 1e-4 over 180,000
# steps, a time constant of 1/18 of its training; the rate keeps that proportion to the
# steps of each training phase, so that short runs do not average in their first epochs.
AVERAGED_SPANS = 18


@dataclass(frozen=True)
class Widths:
    discriminator: tuple[int, ...]
    generator: tuple[int, ...]


WIDTHS = {
    "paper": Widths(discriminator=(1000, 500, 250, 250, 250), generator=(500, 500)),
    "small": Widths(discriminator=(64, 32, 16, 16, 16), generator=(32, 32)),
}


# ----------------------------------------------------------------------------- networks

class WeightNormDense(layers.Layer):
    """Dense layer with weight normalisation, w = scale * v / ||v|| per output unit, as in
    the improved-GAN networks: it keeps the feature scale that the generator matches from
    drifting. ``initialise`` sets scale and bias from a batch so that the pre-activations
    start with mean 0 and variance 1; hidden layers then keep that scale fixed."""

    def __init__(self, units: int, activation: str | None = None,
                 train_scale: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.units, self.train_scale = units, train_scale
        self.activation = tf.keras.activations.get(activation)

    def build(self, input_shape: tf.TensorShape) -> None:
        self.direction = self.add_weight(
            "direction", (input_shape[-1], self.units),
            initializer=tf.keras.initializers.RandomNormal(stddev=0.1))
        self.scale = self.add_weight("scale", (self.units,), initializer="ones",
                                     trainable=self.train_scale)
        self.bias = self.add_weight("bias", (self.units,), initializer="zeros")
        super().build(input_shape)

    def _normalised(self, inputs: tf.Tensor) -> tf.Tensor:
        return tf.matmul(inputs, self.direction) / tf.norm(self.direction, axis=0)

    def call(self, inputs: tf.Tensor) -> tf.Tensor:
        return self.activation(self._normalised(inputs) * self.scale + self.bias)

    def initialise(self, inputs: tf.Tensor) -> None:
        mean, variance = tf.nn.moments(self._normalised(inputs), axes=[0])
        inverse_std = tf.math.rsqrt(variance + 1e-6)
        self.scale.assign(inverse_std)
        self.bias.assign(-mean * inverse_std)

    def get_config(self) -> dict:
        return {**super().get_config(), "units": self.units, "train_scale": self.train_scale,
                "activation": tf.keras.activations.serialize(self.activation)}


def build_generator(output_shape: tuple[int, ...], hidden: tuple[int, ...] = (500, 500),
                    noise_dim: int = NOISE_DIM) -> tf.keras.Model:
    """U(0, 1) noise -> dense layers (batch norm, softplus) -> weight-normalised sigmoid
    image: the improved-GAN MNIST generator. Batch norm sits before the softplus and
    replaces the dense layer's bias, as in that network."""
    z = tf.keras.Input((noise_dim,))
    h = z
    for units in hidden:
        h = layers.Dense(units, use_bias=False)(h)
        h = layers.Activation("softplus")(
            layers.BatchNormalization(scale=False, epsilon=BATCH_NORM_EPSILON)(h))
    h = WeightNormDense(math.prod(output_shape), "sigmoid", train_scale=True)(h)
    return tf.keras.Model(z, layers.Reshape(output_shape)(h), name="generator")


def build_discriminator(input_shape: tuple[int, ...], num_classes: int,
                        hidden: tuple[int, ...] = (1000, 500, 250, 250, 250)
                        ) -> tf.keras.Model:
    """Flattened image + N(0, 0.3^2) noise -> weight-normalised ReLU dense layers, each
    followed by N(0, 0.5^2) noise -> K logits. Outputs (logits, features): the features
    are the last hidden layer before its noise, where the generator matches feature
    means. Call ``initialise_discriminator`` on real data before training."""
    x = tf.keras.Input(input_shape)
    h = layers.GaussianNoise(0.3)(layers.Flatten()(x))
    for units in hidden:
        features = WeightNormDense(units, "relu")(h)
        h = layers.GaussianNoise(0.5)(features)
    logits = WeightNormDense(num_classes, train_scale=True)(h)
    return tf.keras.Model(x, [logits, features], name="discriminator")


def initialise_discriminator(discriminator: tf.keras.Model, x: np.ndarray) -> None:
    """Data-dependent initialisation, layer by layer along the discriminator's chain."""
    h = tf.constant(x, tf.float32)
    for layer in discriminator.layers[1:]:
        if isinstance(layer, WeightNormDense):
            layer.initialise(h)
        h = layer(h, training=True)


# ------------------------------------------------------------------------------- losses

def supervised_losses(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Per-sample -log p(label | x, real) = LSE(l) - l_label: the generated class drops out
    of the conditional distribution."""
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def unsupervised_loss(real_logits: tf.Tensor, generated_logits: tf.Tensor) -> tf.Tensor:
    """-E_real log(1 - p(generated | x)) - E_generated log p(generated | x)."""
    real = tf.reduce_logsumexp(real_logits, axis=1)
    generated = tf.reduce_logsumexp(generated_logits, axis=1)
    return (tf.reduce_mean(tf.nn.softplus(real) - real)
            + tf.reduce_mean(tf.nn.softplus(generated)))


def feature_matching_loss(real_features: tf.Tensor, generated_features: tf.Tensor
                          ) -> tf.Tensor:
    """The mean over features of (mean real feature - mean generated feature)^2: a mean,
    not a sum, so that the gradient's size against ADAM_EPSILON is the reference's."""
    gap = tf.reduce_mean(real_features, axis=0) - tf.reduce_mean(generated_features, axis=0)
    return tf.reduce_mean(tf.square(gap))


def class_probabilities(logits: np.ndarray) -> np.ndarray:
    """p(k | x, real): the prediction conditions on the sample being real, so the K
    probabilities sum to 1."""
    z = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)


# ---------------------------------------------------------------------- selection rules

def keep_ratio(epoch: int, beta: float, ramp_epochs: int = 15) -> float:
    """R(e) = 1 - beta * min(e / ramp_epochs, 1) with 0-based epochs, so the first epoch
    keeps every sample: the networks fit clean labels before noisy ones, so nothing is
    dropped until they have learnt something."""
    return 1.0 - beta * min(epoch / ramp_epochs, 1.0)


def keep_count(n: tf.Tensor, ratio: tf.Tensor) -> tf.Tensor:
    """ceil(R n): the smallest subset with |m'| >= R |m| (Algorithm 1, line 9). float64
    and a 1e-9 slack keep an exact product such as 0.96 * 100 from rounding up to 97."""
    ratio = tf.cast(tf.convert_to_tensor(ratio, dtype_hint=tf.float64), tf.float64)
    product = ratio * tf.cast(n, tf.float64)
    return tf.cast(tf.math.ceil(product - 1e-9), tf.int32)


def small_loss_indices(losses: tf.Tensor, ratio: tf.Tensor) -> tf.Tensor:
    """Indices of the ceil(R n) smallest losses; ties go to the lower index."""
    order = tf.argsort(losses, stable=True)
    return order[:keep_count(tf.size(losses), ratio)]


def disagreements(predictions_1: tf.Tensor, predictions_2: tf.Tensor) -> tf.Tensor:
    """Indices of the samples on which the two discriminators predict different classes."""
    return tf.cast(tf.reshape(tf.where(predictions_1 != predictions_2), [-1]), tf.int32)


def co_teaching_picks(losses_1: tf.Tensor, losses_2: tf.Tensor, ratio: tf.Tensor,
                      candidates: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Among ``candidates``, each discriminator picks its small-loss samples and the other
    one trains on them. Returns (D1's training indices, D2's), as batch indices."""
    picked_by_1 = tf.gather(candidates, small_loss_indices(tf.gather(losses_1, candidates), ratio))
    picked_by_2 = tf.gather(candidates, small_loss_indices(tf.gather(losses_2, candidates), ratio))
    return picked_by_2, picked_by_1


def supervised_picks(rule: str, losses: list[tf.Tensor], predictions: list[tf.Tensor],
                     ratio: tf.Tensor) -> list[tf.Tensor]:
    """The batch indices each discriminator's supervised loss uses under ``rule``:
    "all", "co-teaching" or "co-teaching-plus". When D1 and D2 agree on every labelled
    sample of the batch, co-teaching+ falls back to co-teaching on the whole batch, so the
    supervised signal never stops (as the reference co-teaching+ code does)."""
    everything = tf.range(tf.size(losses[0]), dtype=tf.int32)
    if rule == "all":
        return [everything] * len(losses)
    candidates = everything
    if rule == "co-teaching-plus":
        disagreed = disagreements(*predictions)
        candidates = tf.cond(tf.size(disagreed) > 0, lambda: disagreed, lambda: everything)
    elif rule != "co-teaching":
        raise ValueError(f"unknown rule {rule!r}")
    return list(co_teaching_picks(*losses, ratio, candidates))


def label_suspects(predictions_1: tf.Tensor, predictions_2: tf.Tensor,
                   labels: tf.Tensor) -> tf.Tensor:
    """PATE++'s two criteria: D1 and D2 disagree, and both differ from the label."""
    return ((predictions_1 != predictions_2) & (predictions_1 != labels)
            & (predictions_2 != labels))


def update_counts(counts: np.ndarray, suspected: np.ndarray, alpha: float,
                  rule: str) -> np.ndarray:
    """One epoch's update of the count table; ``suspected`` (0/1 per labelled sample) is
    c_e, 1 if the sample met both criteria at least once in the epoch."""
    c = suspected.astype(np.float64)
    if rule == "decayed":
        return alpha * counts + c
    if rule == "scaled":
        return counts + alpha * c
    raise ValueError(f"unknown decay rule {rule!r}; use one of {DECAY_RULES}")


def removal_count(n_labelled: int, tau: float) -> int:
    """round(tau n), halves rounded up (Python's round() would round 0.5 to even)."""
    return math.floor(tau * n_labelled + 0.5)


def most_suspected(counts: np.ndarray, tau: float) -> np.ndarray:
    """Indices of the round(tau n) highest counts, in decreasing count (ties: lower index)."""
    return np.argsort(-counts, kind="stable")[:removal_count(len(counts), tau)]


def move_to_unlabelled(x_labelled: np.ndarray, y_labelled: np.ndarray,
                       x_unlabelled: np.ndarray, moved: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The cleansed split: the ``moved`` labelled samples join the unlabelled inputs
    without their labels. Returns (x_labelled, y_labelled, x_unlabelled)."""
    keep = np.ones(len(x_labelled), bool)
    keep[moved] = False
    return (x_labelled[keep], y_labelled[keep],
            np.concatenate([x_unlabelled, x_labelled[moved]]))


# ----------------------------------------------------------------------------- training

@dataclass(frozen=True)
class StepReport:
    """What one step did: the labelled batch indices each discriminator's supervised loss
    used, every discriminator's per-sample supervised losses and predicted classes (before
    the update), the supervised term of each discriminator's loss (its mean loss over its
    picks), PATE++'s suspects (None with one discriminator), and the mean losses."""
    picks: list[np.ndarray]
    supervised: list[np.ndarray]
    predictions: list[np.ndarray]
    supervised_terms: list[float]
    suspects: np.ndarray | None
    discriminator_loss: float
    generator_loss: float


class GanTrainer:
    """One generator and one or two discriminators on a (labelled, unlabelled) split.
    Each step updates the discriminators on a labelled, an unlabelled and a generated batch,
    then the generator on the mean feature-matching loss against the updated
    discriminators (Algorithm 1, lines 11-13), with fresh noise and a second real batch
    drawn independently of the first (as the improved-GAN reference does). Call
    ``seed_everything`` first: it seeds the weights and the Gaussian-noise layers;
    ``seed`` seeds the batches and G's noise."""

    def __init__(self, x_labelled: np.ndarray, y_labelled: np.ndarray,
                 x_unlabelled: np.ndarray, num_classes: int, *, discriminators: int,
                 widths: Widths, batch_size: int, learning_rate: float, beta1: float,
                 seed: int, epochs: int, adversarial: bool = True) -> None:
        input_shape = tuple(x_labelled.shape[1:])
        self.adversarial = adversarial
        self.x_labelled = tf.constant(x_labelled, tf.float32)
        self.y_labelled = tf.constant(y_labelled, tf.int32)
        # Without unlabelled inputs (or without the GAN) the labelled ones are the only
        # real data.
        real = x_unlabelled if len(x_unlabelled) and adversarial else x_labelled
        self.x_real = tf.constant(real, tf.float32)
        self.sizes = (len(x_labelled), len(real))
        # The supervised baseline takes the GAN student's steps too, so that both see the
        # labelled set equally often.
        self.steps_per_epoch = max(1, max(len(x_labelled), len(x_unlabelled)) // batch_size)
        self.batch_size = batch_size
        self.rng = np.random.default_rng(seed)
        self.generator = build_generator(input_shape, widths.generator)
        self.discriminators = [build_discriminator(input_shape, num_classes,
                                                   widths.discriminator)
                               for _ in range(discriminators)]
        for d in self.discriminators:
            initialise_discriminator(d, real[self.rng.permutation(len(real))[:INIT_BATCH]])
        self.optimizers = [tf.keras.optimizers.Adam(learning_rate, beta_1=beta1,
                                                    epsilon=ADAM_EPSILON)
                           for _ in range(discriminators + 1)]
        # Their slots made now: a first step that creates variables is traced twice.
        for optimizer, model in zip(self.optimizers, [*self.discriminators, self.generator]):
            optimizer.build(model.trainable_variables)
        self.noise = tf.random.Generator.from_seed(seed)
        self.average_rate = min(1.0, AVERAGED_SPANS / (epochs * self.steps_per_epoch))
        self.averages = [[tf.Variable(tf.zeros_like(v), trainable=False)
                          for v in d.trainable_variables] for d in self.discriminators]
        self.steps_taken = 0
        # autograph off: the step has no Python control flow on tensors.
        self._step = tf.function(self._train_step, autograph=False)

    def epoch_batches(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(steps, batch) indices of the labelled inputs, of the real inputs for the
        discriminators and of the real inputs for the generator: fresh permutations,
        the smaller set repeated to the larger one's size (Algorithm 1, line 1)."""
        need = self.steps_per_epoch * self.batch_size
        return tuple(_repeated_permutations(n, need, self.rng).reshape(-1, self.batch_size)
                     for n in (*self.sizes, self.sizes[1]))

    def averaged_discriminators(self) -> list[tf.keras.Model]:
        """The discriminators with their averaged weights, corrected for the average's
        start at zero (as Adam corrects its moments); the trainer's own stay untouched."""
        correction = 1 - (1 - self.average_rate) ** self.steps_taken
        averaged = []
        for d, averages in zip(self.discriminators, self.averages):
            copy = tf.keras.models.clone_model(d)
            copy.set_weights(d.get_weights())
            for variable, average in zip(copy.trainable_variables, averages):
                variable.assign(average / correction)
            averaged.append(copy)
        return averaged

    def step(self, labelled: np.ndarray, unlabelled: np.ndarray,
             generator_real: np.ndarray, ratio: float, rule: str) -> StepReport:
        self.steps_taken += 1
        out = self._step(*(tf.constant(i, tf.int32)
                           for i in (labelled, unlabelled, generator_real)),
                         tf.constant(ratio, tf.float64), rule)
        suspects = out["suspects"].numpy() if "suspects" in out else None
        return StepReport(*([t.numpy() for t in out[key]]
                            for key in ("picks", "supervised", "predictions")),
                          [float(t) for t in out["terms"]], suspects,
                          float(out["d_loss"]), float(out["g_loss"]))

    def _train_step(self, labelled: tf.Tensor, unlabelled: tf.Tensor,
                    generator_real: tf.Tensor, ratio: tf.Tensor, rule: str) -> dict:
        x_lab = tf.gather(self.x_labelled, labelled)
        y_lab = tf.gather(self.y_labelled, labelled)
        if not self.adversarial:
            return self._supervised_step(x_lab, y_lab)
        x_real = tf.gather(self.x_real, unlabelled)
        generated = self.generator(self.noise.uniform((self.batch_size, NOISE_DIM)),
                                   training=True)

        with tf.GradientTape(persistent=True) as tape:
            # One forward pass per discriminator over the three batches: no layer of D
            # mixes samples, and one large product is faster than three small ones.
            lab_logits, real_logits, generated_logits = zip(*[
                tf.split(d(tf.concat([x_lab, x_real, generated], 0), training=True)[0], 3)
                for d in self.discriminators])
            supervised = [supervised_losses(l, y_lab) for l in lab_logits]
            predictions = [tf.argmax(l, axis=1, output_type=tf.int32) for l in lab_logits]
            picks = supervised_picks(rule, [tf.stop_gradient(s) for s in supervised],
                                     predictions, ratio)
            terms = [tf.reduce_mean(tf.gather(s, p)) for s, p in zip(supervised, picks)]
            d_losses = [t + UNSUPERVISED_WEIGHT * unsupervised_loss(r, g)
                        for t, r, g in zip(terms, real_logits, generated_logits)]
        for d, loss, opt in zip(self.discriminators, d_losses, self.optimizers):
            opt.apply_gradients(zip(tape.gradient(loss, d.trainable_variables),
                                    d.trainable_variables))
        del tape
        self._update_averages()

        x_real = tf.gather(self.x_real, generator_real)
        with tf.GradientTape() as tape:
            generated = self.generator(self.noise.uniform((self.batch_size, NOISE_DIM)),
                                       training=True)
            g_loss = tf.add_n([
                feature_matching_loss(*tf.split(
                    d(tf.concat([x_real, generated], 0), training=True)[1], 2))
                for d in self.discriminators]) / len(self.discriminators)
        variables = self.generator.trainable_variables
        self.optimizers[-1].apply_gradients(zip(tape.gradient(g_loss, variables), variables))

        out = {"picks": picks, "supervised": supervised, "predictions": predictions,
               "terms": terms,
               "d_loss": tf.add_n(d_losses) / len(d_losses), "g_loss": g_loss}
        if len(predictions) == 2:
            out["suspects"] = label_suspects(*predictions, y_lab)
        return out

    def _update_averages(self) -> None:
        for d, averages in zip(self.discriminators, self.averages):
            for variable, average in zip(d.trainable_variables, averages):
                average.assign_add(self.average_rate * (variable - average))

    def _supervised_step(self, x_lab: tf.Tensor, y_lab: tf.Tensor) -> dict:
        """One step of the supervised loss alone, for the one discriminator."""
        d, optimizer = self.discriminators[0], self.optimizers[0]
        with tf.GradientTape() as tape:
            logits = d(x_lab, training=True)[0]
            supervised = supervised_losses(logits, y_lab)
            loss = tf.reduce_mean(supervised)
        optimizer.apply_gradients(zip(tape.gradient(loss, d.trainable_variables),
                                      d.trainable_variables))
        self._update_averages()
        return {"picks": [tf.range(tf.size(supervised), dtype=tf.int32)],
                "supervised": [supervised],
                "predictions": [tf.argmax(logits, axis=1, output_type=tf.int32)],
                "terms": [loss], "d_loss": loss, "g_loss": tf.constant(0.0)}


def _repeated_permutations(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    return np.concatenate([rng.permutation(n) for _ in range(-(-size // n))])[:size]


@dataclass(frozen=True)
class Student:
    """The trained discriminators; ``report`` says which one predicts."""
    discriminators: tuple[tf.keras.Model, ...]
    report: str
    choices: dict
    moved_to_unlabelled: np.ndarray = field(default_factory=lambda: np.zeros(0, int))

    def predict_proba(self, x: np.ndarray, batch_size: int = 1000) -> np.ndarray:
        """p(k | x, real) from D1, D2, or the mean of every discriminator's probabilities."""
        chosen = {"d1": self.discriminators[:1], "d2": self.discriminators[1:2],
                  "average": self.discriminators}[self.report]
        return np.mean([class_probabilities(np.concatenate(
            [d(x[i:i + batch_size], training=False)[0].numpy()
             for i in range(0, len(x), batch_size)]))
            for d in chosen], axis=0)


def train_student(x_labelled: np.ndarray, y_labelled: np.ndarray, x_unlabelled: np.ndarray,
                  num_classes: int, *, mode: str, epochs: int = 10,
                  batch_size: int = 100, learning_rate: float = 0.003, beta1: float = 0.5,
                  beta: float = 0.2, ramp_epochs: int = 15, warmup_epochs: int = 0,
                  tau: float = 0.2, alpha: float = 0.9, decay_rule: str = "decayed",
                  report: str = "d1", seed: int = 0, width: str = "paper",
                  progress: Callable[[str], None] = lambda message: None) -> Student:
    """Train PATE's student in ``mode`` (one of MODES) on labelled inputs with their
    (noisy) labels and unlabelled inputs.

    beta: the estimated noise rate of R(e); ramp_epochs: the epochs R(e) takes to reach
    1 - beta (15 in the paper); warmup_epochs: co-teaching+ epochs run as plain
    co-teaching first. PATE++: tau, the fraction of the labelled set that loses its
    label; alpha and decay_rule, the count table's update (DECAY_RULES). report: which
    discriminator predicts (REPORTS; "pate" has only D1). ``epochs`` is per training
    phase: PATE++ counts for ``epochs`` and retrains for ``epochs``."""
    y_labelled = np.asarray(y_labelled, np.int64)
    _check(x_labelled, y_labelled, num_classes, mode, report, decay_rule, width, beta, tau)
    settings = {"num_classes": num_classes, "epochs": epochs, "batch_size": batch_size,
                "learning_rate": learning_rate, "beta1": beta1, "beta": beta,
                "ramp_epochs": ramp_epochs, "warmup_epochs": warmup_epochs,
                "widths": WIDTHS[width], "seed": seed, "progress": progress}
    choices = {
        "mode": mode, "epochs": epochs, "batch_size": batch_size,
        "learning_rate": learning_rate, "adam_beta1": beta1, "adam_epsilon": ADAM_EPSILON,
        "width": width, "report": report,
        "steps_per_epoch": "max(labelled, unlabelled) // batch_size, the smaller set repeated",
        "generator_update": "after the discriminators, against their updated weights, "
                            "with fresh noise and its own real batch",
        "unsupervised_weight": UNSUPERVISED_WEIGHT,
        "feature_matching": "mean over features of the squared gap of batch means",
        "weight_norm": "every discriminator layer and the generator's output, "
                       "data-dependent initialisation (improved-GAN networks)",
        "unsupervised_real": "the unlabelled inputs; the labelled ones only if there are none",
        "prediction": f"the discriminators' weights averaged at rate {AVERAGED_SPANS} / "
                      "(the phase's steps), corrected for the start at zero",
    }
    if mode == "supervised":
        choices = {key: choices[key] for key in ("mode", "epochs", "batch_size",
                                                 "learning_rate", "adam_beta1", "adam_epsilon",
                                                 "width", "steps_per_epoch", "prediction")}
        choices["training"] = "the supervised loss on the labelled samples alone"
    if mode not in SINGLE:
        choices.update({
            "beta": beta, "ramp_epochs": ramp_epochs,
            "keep_ratio": "R(e) = 1 - beta min(e / ramp_epochs, 1), e 0-based",
            "keep_count": "ceil(R n) smallest supervised losses, ties to the lower index",
        })
    if mode in ("co-teaching-plus", "pate-plus-plus"):
        choices.update({
            "warmup_epochs": warmup_epochs,
            "no_disagreement": "co-teaching on the whole labelled batch",
        })
    seed_everything(seed)
    if mode != "pate-plus-plus":
        discriminators, _ = _train_phase(x_labelled, y_labelled, x_unlabelled, mode=mode,
                                         count_suspects=False, label="", **settings)
        return Student(tuple(discriminators), report, choices)

    _, counts = _train_phase(x_labelled, y_labelled, x_unlabelled, mode="co-teaching-plus",
                             count_suspects=True, alpha=alpha, decay_rule=decay_rule,
                             label="counting: ", **settings)
    moved = most_suspected(counts, tau)
    cleansed = move_to_unlabelled(x_labelled, y_labelled, x_unlabelled, moved)
    progress(f"moved {len(moved)} of {len(x_labelled)} labelled samples to the unlabelled set")
    discriminators, _ = _train_phase(*cleansed, mode="co-teaching-plus",
                                     count_suspects=False, label="retraining: ", **settings)
    choices.update({
        "tau": tau, "alpha": alpha, "decay_rule": decay_rule, "moved": len(moved),
        "removal_count": "round(tau x labelled), halves up",
        "suspect_predictions": "the training step's own (noisy) forward pass",
        "after_cleansing": "PATE+ retrained from new weights on the cleansed split",
    })
    return Student(tuple(discriminators), report, choices, moved)


def _train_phase(x_labelled: np.ndarray, y_labelled: np.ndarray, x_unlabelled: np.ndarray,
                 *, mode: str, num_classes: int, epochs: int, batch_size: int,
                 learning_rate: float, beta1: float, beta: float, ramp_epochs: int,
                 warmup_epochs: int, widths: Widths, seed: int,
                 progress: Callable[[str], None], count_suspects: bool, label: str,
                 alpha: float = 0.9, decay_rule: str = "decayed"
                 ) -> tuple[list[tf.keras.Model], np.ndarray]:
    """Train new networks for ``epochs``; returns the discriminators and the count table
    (zeros unless ``count_suspects``)."""
    trainer = GanTrainer(x_labelled, y_labelled, x_unlabelled, num_classes,
                         discriminators=1 if mode in SINGLE else 2, widths=widths,
                         batch_size=batch_size, learning_rate=learning_rate, beta1=beta1,
                         seed=seed, epochs=epochs, adversarial=mode != "supervised")
    counts = np.zeros(len(x_labelled))
    for epoch in range(epochs):
        rule = _rule(mode, epoch, warmup_epochs)
        ratio = keep_ratio(epoch, beta, ramp_epochs)
        suspected = np.zeros(len(x_labelled), bool)
        d_loss = g_loss = 0.0
        for labelled, *real in zip(*trainer.epoch_batches()):
            report = trainer.step(labelled, *real, ratio, rule)
            d_loss += report.discriminator_loss / trainer.steps_per_epoch
            g_loss += report.generator_loss / trainer.steps_per_epoch
            if count_suspects:
                suspected[labelled[report.suspects]] = True
        if count_suspects:
            counts = update_counts(counts, suspected, alpha, decay_rule)
        progress(f"{label}epoch {epoch + 1}/{epochs} {rule}"
                 + (f" R {ratio:.3f}" if rule != "all" else "")
                 + f" D loss {d_loss:.3f} G loss {g_loss:.3f}"
                 + (f" suspects {suspected.sum()}" if count_suspects else ""))
    return trainer.averaged_discriminators(), counts


def _rule(mode: str, epoch: int, warmup_epochs: int) -> str:
    if mode in SINGLE:
        return "all"
    if mode == "co-teaching" or epoch < warmup_epochs:
        return "co-teaching"
    return "co-teaching-plus"


def _check(x_labelled: np.ndarray, y_labelled: np.ndarray, num_classes: int, mode: str,
           report: str, decay_rule: str, width: str, beta: float, tau: float) -> None:
    for name, value, known in (("mode", mode, MODES), ("report", report, REPORTS),
                               ("decay_rule", decay_rule, DECAY_RULES),
                               ("width", width, tuple(WIDTHS))):
        if value not in known:
            raise ValueError(f"unknown {name} {value!r}; use one of {known}")
    if mode in SINGLE and report == "d2":
        raise ValueError(f'mode "{mode}" trains one discriminator; report "d1" or "average"')
    if len(x_labelled) != len(y_labelled) or len(x_labelled) == 0:
        raise ValueError("need as many labels as labelled inputs, and at least one")
    if np.any((y_labelled < 0) | (y_labelled >= num_classes)):
        raise ValueError(f"labels must lie in [0, {num_classes})")
    if not 0 <= beta < 1:
        raise ValueError(f"beta must lie in [0, 1), got {beta}")
    if mode == "pate-plus-plus" and not 0 <= tau < 1:
        raise ValueError(f"tau must lie in [0, 1), got {tau}")
