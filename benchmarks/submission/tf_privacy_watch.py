"""The watch of tensorflow-privacy (library_watch): hooks on its Keras DP optimizers'
gradients and on DPModel's train step, for the length of a fit. Their steps run in
TensorFlow graphs: the hooks add to each trace counters of its steps, its smallest and
largest batch, its smallest sigma and largest clipping norm (all of an optimizer's or
model's steps are rated at those), read when the block ends. The noisy gradients pass
through the replay's tape (library_replay) as the noise made them, in a py_function
that the graph runs in order: the optimizers' as ``_compute_gradients`` returns them,
DPModel's as each is noised (``_reduce_per_example_grads``, or ghost clipping's
``add_aggregate_noise``), before its train step adds any regularisation gradient.
A trace compiled by XLA cannot run Python: it is noted (``Ran.compiled_by_xla``)."""
from __future__ import annotations

import contextlib
import math
from typing import Any, Callable

from benchmarks.submission.library_watch import TF_PRIVACY, Ran, Setting, patch, refusal


def watch(ran: Ran, stack: contextlib.ExitStack) -> None:
    """Watch tensorflow-privacy's steps into ``ran`` until ``stack`` closes."""
    import tensorflow as tf
    import tensorflow_privacy
    from tensorflow.python.ops.control_flow_util import GraphOrParentsInXlaContext
    from tensorflow_privacy.privacy.dp_query.gaussian_query import GaussianSumQuery
    from tensorflow_privacy.privacy.fast_gradient_clipping import gradient_clipping_utils
    from tensorflow_privacy.privacy.keras_models import dp_keras_model
    from tensorflow_privacy.privacy.optimizers import dp_optimizer_keras as keras_optimizers

    optimizers = (keras_optimizers.GenericDPSGDOptimizer, keras_optimizers.GenericDPAdamOptimizer,
                  keras_optimizers.GenericDPAdagradOptimizer)
    models = (dp_keras_model.DPModel, dp_keras_model.DPSequential)
    names = {value: name for name, value in vars(tensorflow_privacy).items()
             if isinstance(value, type)}  # the classes' names are those of their factories
    counters: dict[int, tuple[Any, dict[str, Any]]] = {}  # id(owner) -> (owner, counters)
    train_steps: set[Callable] = set()  # the watched train_step functions
    stepping: list[Any] = []  # the model whose train step is being traced

    def counters_of(owner: Any) -> dict[str, Any]:
        """The counters of one optimizer or model, made at its first trace (a tf.function
        may create variables only then)."""
        if id(owner) not in counters:
            with tf.init_scope():
                made = {"steps": tf.Variable(0, dtype=tf.int64, trainable=False), **{
                    name: tf.Variable(start, dtype=tf.float64, trainable=False)
                    for name, start in (("smallest", math.inf), ("largest", 0.0),
                                        ("sigma", math.inf), ("clip", 0.0))}}
            counters[id(owner)] = owner, made
            ran.settle.append(lambda: settle(made))
        return counters[id(owner)][1]

    def settle(made: dict[str, Any]) -> None:
        steps = int(made["steps"].numpy())
        if steps:
            ran.step(Setting(TF_PRIVACY, *(float(made[name].numpy()) for name in (
                "sigma", "clip", "smallest", "largest"))), steps)

    def counted(owner: Any, smallest, largest, microbatches, std, clip) -> list:
        """Ops that count one step of ``owner`` with what it runs at."""
        made = counters_of(owner)
        smallest, largest, microbatches, std, clip = (
            tf.cast(value, tf.float64) for value in (smallest, largest, microbatches, std, clip))
        # A microbatch of several examples moves by up to twice the clipping norm when one
        # of them is added or removed.
        sensitivity = clip * tf.where(largest > microbatches, tf.constant(2.0, tf.float64),
                                      tf.constant(1.0, tf.float64))
        return [made["steps"].assign_add(1),
                made["smallest"].assign(tf.minimum(made["smallest"], smallest)),
                made["largest"].assign(tf.maximum(made["largest"], largest)),
                made["sigma"].assign(tf.minimum(made["sigma"], std / sensitivity)),
                made["clip"].assign(tf.maximum(made["clip"], sensitivity))]

    def optimizer_watched(optimizer: Any) -> bool:
        refused = refusal(optimizer, optimizers, TF_PRIVACY, names)
        query = getattr(optimizer, "_dp_sum_query", None)
        if not refused and type(query) is not GaussianSumQuery:
            refused = (f"tensorflow-privacy's {names.get(type(optimizer), 'optimizer')} with a "
                       f"{type(query).__name__} is not watched")
        if refused:
            ran.refuse(refused)
        return not refused

    def model_watched(model: Any) -> bool:
        refused = refusal(model, models, TF_PRIVACY, names,
                          allowed=lambda name, value: name == "train_step" and getattr(
                              getattr(value, "python_function", None), "__func__",
                              None) in train_steps)  # DPModel's XLA-compiled train_step
        if refused:
            ran.refuse(refused)
        return not refused

    def compiled(what: str, fix: str) -> bool:
        """Whether the trace under way is compiled by XLA (noted, with ``what`` ran so)."""
        if GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()):
            ran.compiled_by_xla(what, fix)
            return True
        return False

    def replayed(gradients: list) -> list:
        """One step's noisy gradients through the tape: recorded, or replaced by the
        recorded ones; as they are without a tape, or in a trace XLA compiles."""
        tape = ran.tape
        if tape is None or GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()):
            return gradients
        # A stateful op: the traced step runs it in program order, after the noise.
        handed = tf.py_function(
            lambda *values: tape.noised(TF_PRIVACY, [value.numpy() for value in values]),
            gradients, [gradient.dtype for gradient in gradients])
        for value, gradient in zip(handed, gradients):
            value.set_shape(gradient.shape)
        return handed

    def compute_gradients(original):
        def watched_gradients(self, loss, *args, **kwargs):
            if not optimizer_watched(self):
                return original(self, loss, *args, **kwargs)
            compiled(f"the steps of tensorflow-privacy's {named(self)} are compiled by XLA "
                     f"(jit_compile=True)", "run them without jit_compile")
            state = self._global_state  # what the clipping and the noise below read
            # A loss given as a function is evaluated inside: its batch is unknown.
            smallest, largest = (0.0, math.inf) if callable(loss) else (tf.shape(loss)[0],) * 2
            microbatches = largest if self._num_microbatches is None else self._num_microbatches
            with tf.control_dependencies(counted(self, smallest, largest, microbatches,
                                                 state.stddev, state.l2_norm_clip)):
                gradients, variables = zip(*original(self, loss, *args, **kwargs))
            return list(zip(replayed(list(gradients)), variables))
        return watched_gradients

    def named(owner: Any) -> str:
        return names.get(type(owner), type(owner).__name__)

    def train_step(original):
        def watched_step(self, data):
            if not model_watched(self):
                return original(self, data)
            name = named(self)
            if "train_step" in vars(self):  # DPModel's use_xla
                compiled(f"tensorflow-privacy's {name} compiles its train step with XLA "
                         f"(use_xla=True, its default)", f"make the {name} with use_xla=False")
            else:
                compiled(f"the train step of tensorflow-privacy's {name} is compiled by XLA "
                         f"(jit_compile=True)", "compile it without jit_compile")
            examples = tf.shape(tf.keras.utils.unpack_x_y_sample_weight(data)[1])[0]
            clip = ran.number(self._l2_norm_clip, f"the l2_norm_clip of {name}")
            std = clip * ran.number(self._noise_multiplier, f"the noise_multiplier of {name}")
            stepping.append(self)
            try:
                with tf.control_dependencies(counted(
                        self, examples, examples, self._num_microbatches or examples, std,
                        clip)):
                    return original(self, data)
            finally:
                stepping.pop()
        train_steps.add(watched_step)
        return watched_step

    def reduce_per_example_grads(original):
        """DPModel's noise on the gradient of one variable."""
        def watched_reduce(self, stacked_grads):
            return replayed([original(self, stacked_grads)])[0]
        return watched_reduce

    def add_aggregate_noise(original):
        """Ghost clipping's noise on DPModel's gradients, the function of a module that
        any code may call: replayed inside a watched train step only."""
        def watched_noise(*args, **kwargs):
            noisy = original(*args, **kwargs)
            return replayed(list(noisy)) if stepping else noisy
        return watched_noise

    def refused(what: str):
        def wrap(original):
            def watched_refused(self, *args, **kwargs):
                ran.refuse(what)
                return original(self, *args, **kwargs)
            return watched_refused
        return wrap

    def apply_gradients(original):
        """Every Keras (and TF1) optimizer applies its gradients here: one of
        tensorflow-privacy's must be watched."""
        def watched_apply(self, *args, **kwargs):
            if _of_module(type(self), "tensorflow_privacy"):
                optimizer_watched(self)
            return original(self, *args, **kwargs)
        return watched_apply

    def make_train_function(original):
        """Every Keras fit makes its train function here: a model of tensorflow-privacy's
        must be watched."""
        def watched_make(self, *args, **kwargs):
            if _of_module(type(self), "tensorflow_privacy"):
                model_watched(self)
            return original(self, *args, **kwargs)
        return watched_make

    for cls in optimizers:
        patch(stack, cls, "_compute_gradients", compute_gradients)
        patch(stack, cls, "get_gradients", refused(
            f"tensorflow-privacy's {names[cls]}.get_gradients (the graph-mode path) is not "
            f"watched"))
    for cls in models:
        patch(stack, cls, "train_step", train_step)
        patch(stack, cls, "_reduce_per_example_grads", reduce_per_example_grads)
    patch(stack, gradient_clipping_utils, "add_aggregate_noise", add_aggregate_noise)
    for base in {tf.keras.optimizers.legacy.Optimizer, tf.keras.optimizers.Optimizer,
                 tf.compat.v1.train.Optimizer}:
        patch(stack, base, "apply_gradients", apply_gradients)
    patch(stack, tf.keras.Model, "make_train_function", make_train_function)


def _of_module(cls: type, module: str) -> bool:
    """Whether a class of ``module`` is among ``cls`` and its bases."""
    return any(klass.__module__.split(".")[0] == module for klass in cls.__mro__)
