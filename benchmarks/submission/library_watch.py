"""What the known outside DP libraries ran during a fit, measured without any change to
the method's code, and every noisy step the watch cannot see, refused.

Watched (docs/submission.md lists them with the releases, ``SUPPORTED``):

- Opacus: ``DPOptimizer`` (per-sample clipping) and ``DPOptimizerFastGradientClipping``
  (ghost clipping, through its loss ``DPLossFastGradientClipping``);
- tensorflow-privacy: the Keras DP optimizers (``DPKerasSGDOptimizer``, ``...Adam...``,
  ``...Adagrad...``: their generic classes with a ``GaussianSumQuery``) through
  ``_compute_gradients`` (Keras' fit, ``minimize``), and ``DPSequential`` /
  ``DPModel`` through ``train_step``;

and subclasses of these that replace none of their attributes (``__init__`` aside).

Each noisy step is measured as it runs, never read from an attribute a method sets:

- the examples clipped into its sum: the rows of Opacus' per-sample gradients (or of
  ghost clipping's coefficients) over every backward pass accumulated into the step; the
  rows of tensorflow-privacy's per-example loss;
- the clipping norm the clipping code read and the standard deviation the noise was
  drawn at; sigma is their ratio. A microbatch of several examples changes by up to
  twice its clipping norm when one example is added or removed, which is then its
  sensitivity; a step without noise costs infinity;
- whether its batch was a Poisson sample: an Opacus step is one when the examples it
  clipped are exactly those Opacus' Poisson sampler drew since the last step, rated at
  the sampler's draw probability times the sampler's population over the training set's
  size when that is larger. k draws accumulated into one noisy step (gradient
  accumulation) hold an example up to k times: the step is accounted as one draw at rate
  1 - (1 - q)^k whose sensitivity is k clipping norms, which bounds it (its output is a
  mixture over the example's multiplicity, and Renyi divergence to a fixed law is convex
  in the mixture and grows with the shift), where Opacus' own rate k q does not. Any other
  batch is a fixed-size one (a shuffle), rated at its size over N, N the smallest
  training set the fit was given, and accounted as if it were Poisson-sampled, as both
  libraries' accountants do: that is no proven bound (Chua et al., "How Private are
  DP-SGD Implementations?", ICML 2024), unless every step took the whole training set.

The steps compose, as Poisson-sampled Gaussians under dp_accounting's RDP accountant
(add/remove neighbours), to the epsilon that ``compare`` holds against what the run
charged. Opacus' noise is also tested against the standard deviation it was drawn at
(``noise_checks``), so a library patched to add less noise than it draws at is flagged.

Fail closed: a noisy step the hooks cannot see (another optimizer class of either
library, a subclass or an instance that replaces a watched method, a hook that changes
the noised gradient before the step, a gradient that ghost clipping did not clip, an
optimizer that steps without a watched noisy step) raises ``Unwatched`` when the block
ends, one line naming the class.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import inspect
import math
import sys
import types
import weakref
from typing import Any, Callable, Iterator

import numpy as np

from benchmarks.contract import Method
from benchmarks.errors import InputError
from benchmarks.privacy import rdp
from benchmarks.privacy.noise_checks import NoiseCheck

OPACUS, TF_PRIVACY = "Opacus", "tensorflow-privacy"
OF = {OPACUS: "Opacus'", TF_PRIVACY: "tensorflow-privacy's"}  # a class of the library
# library -> (distribution, module, the releases whose code the hooks are written for)
SUPPORTED = {OPACUS: ("opacus", "opacus", ("1.6.0",)),
             TF_PRIVACY: ("tensorflow-privacy", "tensorflow_privacy", ("0.9.0",))}
# How far a composed epsilon may exceed the charge: the libraries draw their noise at a
# single-precision standard deviation, which the watch reads.
FLOAT32_TOLERANCE = 1e-6
# What a subclass of a watched class may define: its own __init__, and what Python
# writes into every class.
OWN_ATTRIBUTES = frozenset({"__init__", "__module__", "__qualname__", "__doc__", "__dict__",
                            "__weakref__", "__annotations__", "__firstlineno__",
                            "__static_attributes__", "__orig_bases__", "__parameters__"})


class Unwatched(InputError):
    """A noisy step the watch cannot see; one line naming the class."""


@dataclasses.dataclass(frozen=True)
class Setting:
    """What noisy steps ran at, as measured. ``clip_norm`` is the sensitivity of a step's
    sum (the clipping norm, twice it for microbatches of several examples) and
    ``noise_multiplier`` the noise's standard deviation over it. The batches are the
    examples clipped into a step's sum; ``poisson_rate`` is None unless the batch was a
    Poisson sample."""

    library: str
    noise_multiplier: float
    clip_norm: float
    smallest_batch: float
    largest_batch: float
    poisson_rate: float | None = None


@dataclasses.dataclass
class Ran:
    steps: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    # (library, noise std) -> [steps, coordinates, sum of squared noise]: the noise added
    noise: dict[tuple[str, float], list[float]] = dataclasses.field(default_factory=dict)
    # the size of every training set a method's fit was given
    train_sizes: list[int] = dataclasses.field(default_factory=list)
    # what adds the steps counted inside TensorFlow graphs, when the block ends
    settle: list[Callable[[], None]] = dataclasses.field(default_factory=list)
    # the noisy paths the watch could not see, each naming its class
    unwatched: list[str] = dataclasses.field(default_factory=list)

    def step(self, setting: Setting, count: int = 1) -> None:
        self.steps[setting] += count

    def added_noise(self, library: str, std: float, noise: np.ndarray) -> None:
        tally = self.noise.setdefault((library, std), [0, 0, 0.0])
        tally[0] += 1
        tally[1] += noise.size
        tally[2] += float(np.sum(np.square(noise, dtype=np.float64)))

    def refuse(self, what: str) -> None:
        self.unwatched.append(what)

    @property
    def libraries(self) -> list[str]:
        return sorted({setting.library for setting in self.steps})

    def sampling_rate(self, setting: Setting) -> float:
        """The Poisson rate, else the largest batch over the smallest training set a fit
        was given; 1 when no fit was seen."""
        if setting.poisson_rate is not None:
            return setting.poisson_rate
        if not self.train_sizes:
            return 1.0
        return min(1.0, setting.largest_batch / min(self.train_sizes))

    def proven(self, setting: Setting) -> bool:
        """A Poisson sample, or every record of every training set in every step."""
        return setting.poisson_rate is not None or (
            bool(self.train_sizes) and setting.smallest_batch >= max(self.train_sizes))

    @property
    def shuffled(self) -> list[str]:
        """The libraries that ran steps on shuffled fixed-size batches, accounted as
        Poisson samples."""
        return sorted({setting.library for setting in self.steps if not self.proven(setting)})

    def epsilon(self, delta: float) -> tuple[float, list[str]]:
        """The epsilon of every watched step composed at ``delta``, and a phrase for each
        setting ("Opacus ran sigma 0.27 (clip 1) for 224 steps at q 0.045")."""
        costs: collections.Counter = collections.Counter()  # (sigma, rate) -> steps
        # (library, sigma, clip, proven) -> [steps, rates]: a phrase each
        runs: dict[tuple, list] = {}
        for setting, count in self.steps.items():
            rate = self.sampling_rate(setting)
            costs[setting.noise_multiplier, rate] += count
            run = runs.setdefault((setting.library, setting.noise_multiplier,
                                   setting.clip_norm, self.proven(setting)), [0, []])
            run[0] += count
            run[1].append(rate)
        curve = np.zeros(rdp.ORDERS.shape)
        for (sigma, rate), count in costs.items():
            if not sigma > 0:  # no noise (or none measured): nothing bounds the step
                curve = curve + math.inf
            elif not math.isinf(sigma):  # an infinite sigma: nothing of the data is summed
                curve = curve + rdp.sampled_gaussian_rdp(sigma, rate, count)
        phrases = [f"{library} ran sigma {sigma:.3g} (clip {clip:g}) for {steps} steps at q "
                   + "–".join(dict.fromkeys(f"{rate:.3g}" for rate in sorted(rates)))
                   + ("" if proven else " (batches were shuffled, accounted as Poisson)")
                   for (library, sigma, clip, proven), (steps, rates) in sorted(runs.items())]
        if np.isinf(curve).all():
            return math.inf, phrases
        return rdp.epsilon_from_rdp(curve, delta)[0], phrases

    def noise_checks(self) -> list[NoiseCheck]:
        """The noise added over all steps at one noise level against chi-squared with as
        many degrees of freedom, in the direction of too little noise."""
        from scipy.stats import chi2

        checks = []
        for (library, std), (steps, size, squares) in sorted(self.noise.items()):
            ratio = squares / (size * std * std) if std > 0 else math.inf
            checks.append(NoiseCheck(
                f"{library} DP-SGD", f"N(0, {std:.4g}²) on each coordinate",
                f"{ratio:.3g} of that variance over {steps} steps ({size} coordinates)",
                float(chi2.cdf(squares / (std * std), size)) if std > 0 else 1.0))
        return checks


def compare(ran: Ran, charged: float, any_charge: bool, delta: float) -> str:
    """"" when what the watched libraries ran is covered by the ``charged`` epsilon; else
    one line with both figures. A run that charged nothing covers nothing."""
    if not ran.steps:
        return ""
    if not 0 < delta < 1:
        spent, phrases = math.inf, ran.epsilon(1e-5)[1]
        at = "at delta 0 (no delta to convert at)"
    else:
        spent, phrases = ran.epsilon(delta)
        at = f"at delta {delta:g}"
    if any_charge and spent <= charged * (1 + FLOAT32_TOLERANCE):
        return ""
    return (f"{'; '.join(phrases)}: epsilon {spent:.3g} {at}, charged "
            + (f"{charged:.3g}" if any_charge else "nothing"))


def installed() -> dict[str, str]:
    """library -> its installed release, for the watched libraries that are installed."""
    return {library: importlib.metadata.version(distribution)
            for library, (distribution, module, _) in SUPPORTED.items()
            if importlib.util.find_spec(module) is not None}


def import_installed() -> None:
    """Import the watched libraries that are installed, so that a method that imports
    one inside its fit is watched too. InputError for a release not in SUPPORTED."""
    for library, version in installed().items():
        distribution, module, releases = SUPPORTED[library]
        if version not in releases:
            raise InputError(f"{library} {version} is installed, but privboard submit "
                             f"watches {library} {' and '.join(releases)} only: install "
                             f"{distribution}=={releases[-1]} to submit")
        importlib.import_module(module)


@contextlib.contextmanager
def watch() -> Iterator[Ran]:
    """The steps of the imported watched libraries during the block; Unwatched when the
    block ends (without an error of its own) and a noisy step went unseen."""
    ran = Ran()
    with contextlib.ExitStack() as stack:
        _patch(stack, Method, "__init__", lambda original: _sized(original, ran))
        if "opacus" in sys.modules:
            _watch_opacus(ran, stack)
        if "tensorflow_privacy" in sys.modules:
            _watch_tf_privacy(ran, stack)
        try:
            yield ran
        finally:
            for settle in ran.settle:
                settle()
            ran.steps = +ran.steps  # without the settings that ran no step
    if ran.unwatched:
        raise Unwatched(f"privboard submit cannot see every noisy step of this fit: "
                        f"{'; '.join(dict.fromkeys(ran.unwatched))} (docs/submission.md "
                        f"lists the watched paths)")


def _patch(stack: contextlib.ExitStack, owner: Any, name: str,
           make: Callable[[Callable], Callable]) -> None:
    original = owner.__dict__[name]
    setattr(owner, name, make(original))
    stack.callback(setattr, owner, name, original)


def _sized(init: Callable, ran: Ran) -> Callable:
    """A method's ``__init__`` that makes its instance's fit note its training set's size."""
    def watched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        fit = self.fit

        def sized_fit(train, *fit_args, **fit_kwargs):
            ran.train_sizes.append(len(train))
            return fit(train, *fit_args, **fit_kwargs)
        self.fit = sized_fit
    return watched


def _refusal(obj: Any, watched: tuple[type, ...], library: str, names: dict[type, str],
             allowed: Callable[[str, Any], bool] = lambda *_: False) -> str:
    """"" when ``obj`` is an instance of a watched class, or of a subclass of one that
    replaces none of its attributes, and replaces none of its methods itself (but those
    ``allowed``); else what it is, in words."""
    cls = type(obj)
    base = next((klass for klass in cls.__mro__ if klass in watched), None)
    own = cls.__mro__[:cls.__mro__.index(base)] if base else cls.__mro__
    theirs = [klass for klass in own
              if klass.__module__.split(".")[0] == SUPPORTED[library][1]]
    if base is None or theirs:
        named = theirs[0] if theirs else cls
        return f"{OF[library]} {names.get(named, named.__name__)} is not watched"
    watched_name = f"{OF[library]} {names.get(base, base.__name__)}"
    replaced = sorted({name for klass in own for name in vars(klass)
                       if name not in OWN_ATTRIBUTES and hasattr(base, name)})
    if replaced:
        return f"{cls.__qualname__} replaces {', '.join(replaced)} of {watched_name}"
    shadowed = sorted(name for name, value in getattr(obj, "__dict__", {}).items()
                      if isinstance(inspect.getattr_static(base, name, None),
                                    (types.FunctionType, classmethod, staticmethod))
                      and not allowed(name, value))
    if shadowed:
        return f"an instance of {watched_name} has its {', '.join(shadowed)} replaced"
    return ""


@dataclasses.dataclass
class _Sum:
    """What went into an Opacus optimizer's clipped sum since its last noisy step."""

    examples: int = 0
    clips: list[float] = dataclasses.field(default_factory=list)


def _watch_opacus(ran: Ran, stack: contextlib.ExitStack) -> None:
    from torch.optim.optimizer import register_optimizer_step_pre_hook
    from opacus.grad_sample.grad_sample_module_fast_gradient_clipping import (
        GradSampleHooksFastGradientClipping)
    from opacus.optimizers import optimizer as flat
    from opacus.optimizers import optimizer_fast_gradient_clipping as ghost
    from opacus.utils.fast_gradient_clipping_utils import DPTensorFastGradientClipping
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    watched = (flat.DPOptimizer, ghost.DPOptimizerFastGradientClipping)
    sums: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # optimizer -> _Sum
    # optimizer -> (examples, clipping norm, gradients) of its last ghost-clipped backward
    ghost_clipped: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    # optimizer -> its noisy gradients, until the optimizer it wraps steps
    noised: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
    wrapped: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # inner -> DP optimizer
    draws: list[tuple[int, float, int]] = []  # Poisson draws since the last noisy step
    stds: list[float] = []  # the noise drawn in the add_noise under way
    coefficients: list[tuple[int, float]] = []  # ghost clipping's, in the backward under way

    def seen(optimizer) -> _Sum:
        """The optimizer's running sum, once its class is checked."""
        refusal = _refusal(optimizer, watched, OPACUS, {})
        if refusal:
            ran.refuse(refusal)
        wrapped[optimizer.original_optimizer] = optimizer
        return sums.setdefault(optimizer, _Sum())

    def init(original):
        def watched_init(self, *args, **kwargs):
            original(self, *args, **kwargs)
            seen(self)
        return watched_init

    def sampler_iter(original):
        def watched_iter(self):
            for indices in original(self):
                if type(self) is UniformWithReplacementSampler:  # what it drew with
                    draws.append((len(indices), float(self.sample_rate), int(self.num_samples)))
                yield indices
        return watched_iter

    def clip_and_accumulate(original):
        def watched_clip(self):
            total = seen(self)
            examples = len(self.grad_samples[0]) if self.params else 0
            clip = float(self.max_grad_norm)  # what the clipping below reads
            original(self)
            total.examples += examples
            total.clips.append(clip)
        return watched_clip

    def clipping_coef(original):
        def watched_coef(self):
            clip = float(self.max_grad_norm)
            coef = original(self)
            coefficients.append((len(coef), clip))
            return coef
        return watched_coef

    def ghost_backward(original):
        def watched_backward(self):
            coefficients.clear()
            original(self)
            if len(coefficients) == 1:
                ghost_clipped[self.optimizer] = (*coefficients[0], [
                    None if p.grad is None else p.grad.detach().clone()
                    for p in self.optimizer.params])
        return watched_backward

    def accumulate(original):
        def watched_accumulate(self):
            total = seen(self)
            clipped = ghost_clipped.pop(self, None)
            if clipped is None or not all(map(_same, (p.grad for p in self.params),
                                              clipped[2])):
                ran.refuse(f"{type(self).__name__} noised a gradient that its ghost-clipping "
                           f"loss did not clip")
            else:
                total.examples += clipped[0]
                total.clips.append(clipped[1])
            original(self)
        return watched_accumulate

    def generate_noise(original):
        def watched_noise(std, *args, **kwargs):
            stds.append(float(std))
            return original(std, *args, **kwargs)
        return watched_noise

    def add_noise(original):
        def watched_add_noise(self):
            total = seen(self)
            if "_adjusted_noise_multiplier" in vars(self):
                ran.refuse(f"Opacus' adaptive clipping (an adjusted noise multiplier on "
                           f"{type(self).__name__}) is not watched")
            clipped = [p.summed_grad.detach().clone() for p in self.params]
            stds.clear()
            original(self)
            noisy = [p.grad.detach().clone() for p in self.params]
            noised[self] = noisy
            std = min(stds, default=0.0)
            ran.added_noise(OPACUS, std, np.concatenate([
                (now - then.view_as(now)).cpu().numpy().ravel()
                for now, then in zip(noisy, clipped)]))
            if not total.clips:
                ran.refuse(f"{type(self).__name__} noised a sum that Opacus did not clip")
            clip = max(total.clips, default=0.0)
            rate, draws_summed = poisson_draws(total.examples)
            sensitivity = draws_summed * clip
            ran.step(Setting(OPACUS, std / sensitivity if clip > 0 else math.inf, sensitivity,
                             total.examples, total.examples, rate))
            sums[self] = _Sum()
            draws.clear()
        return watched_add_noise

    def poisson_draws(examples: int) -> tuple[float | None, int]:
        """(the step's rate, the draws summed into it) when its examples are those Opacus'
        Poisson sampler drew since the last step, at one rate from one population (k
        draws at rate q: one at 1 - (1 - q)^k, an example in it up to k times); else
        (None, 1)."""
        if not draws or sum(size for size, _, _ in draws) != examples or \
                len({(rate, population) for _, rate, population in draws}) != 1:
            return None, 1
        _, rate, population = draws[0]
        smallest = min(ran.train_sizes, default=population)
        once = min(1.0, rate * max(1.0, population / smallest))
        return 1.0 - (1.0 - once) ** len(draws), len(draws)

    def before_step(optimizer, args, kwargs) -> None:
        """Before any optimizer steps: one that a watched DP optimizer wraps steps right
        after that optimizer's noisy step, on its noised gradient (scaled), with no
        step pre-hook of its own that could change it."""
        dp = wrapped.get(optimizer)
        if dp is None:
            return
        noisy, name = noised.pop(dp, None), type(dp).__name__
        if noisy is None:
            ran.refuse(f"the optimizer that {name} wraps stepped without its noise")
        elif optimizer._optimizer_step_pre_hooks:
            ran.refuse(f"a step pre-hook of the optimizer that {name} wraps")
        elif not _scaled([p.grad for p in dp.params], noisy):
            ran.refuse(f"a hook changed the gradient that {name} noised before the step")

    _patch(stack, flat.DPOptimizer, "__init__", init)
    _patch(stack, UniformWithReplacementSampler, "__iter__", sampler_iter)
    _patch(stack, flat.DPOptimizer, "clip_and_accumulate", clip_and_accumulate)
    _patch(stack, GradSampleHooksFastGradientClipping, "get_clipping_coef", clipping_coef)
    _patch(stack, DPTensorFastGradientClipping, "backward", ghost_backward)
    _patch(stack, ghost.DPOptimizerFastGradientClipping, "accumulate", accumulate)
    for module in (flat, ghost):
        _patch(stack, module, "_generate_noise", generate_noise)
    for cls in watched:
        _patch(stack, cls, "add_noise", add_noise)
    stack.callback(register_optimizer_step_pre_hook(before_step).remove)


def _same(now, then) -> bool:
    """Two gradients (None when a parameter has none) are the same tensor values."""
    import torch

    return (now is None and then is None) or (
        now is not None and then is not None and torch.equal(now, then))


def _scaled(now: list, noisy: list) -> bool:
    """Whether the gradients ``now`` are one positive multiple of ``noisy`` (Opacus scales
    its noisy sum by the batch size), as they are when nothing changed them since."""
    import torch

    if any(gradient is None for gradient in now):
        return False
    a = torch.cat([gradient.detach().reshape(-1) for gradient in now])
    b = torch.cat([gradient.reshape(-1) for gradient in noisy])
    if not b.any():
        return not a.any()
    scale = torch.dot(a, b) / torch.dot(b, b)
    return bool(scale > 0) and torch.allclose(a, scale * b, rtol=1e-4, atol=0.0)


def _watch_tf_privacy(ran: Ran, stack: contextlib.ExitStack) -> None:
    """The Keras optimizers and models run their steps in TensorFlow graphs: the hook adds
    to each trace counters of its steps, its smallest and largest batch, its smallest
    sigma and largest clipping norm (all of an optimizer's or model's steps are rated at
    those), read when the block ends."""
    import tensorflow as tf
    import tensorflow_privacy
    from tensorflow_privacy.privacy.dp_query.gaussian_query import GaussianSumQuery
    from tensorflow_privacy.privacy.keras_models import dp_keras_model
    from tensorflow_privacy.privacy.optimizers import dp_optimizer_keras as keras_optimizers

    optimizers = (keras_optimizers.GenericDPSGDOptimizer, keras_optimizers.GenericDPAdamOptimizer,
                  keras_optimizers.GenericDPAdagradOptimizer)
    models = (dp_keras_model.DPModel, dp_keras_model.DPSequential)
    names = {value: name for name, value in vars(tensorflow_privacy).items()
             if isinstance(value, type)}  # the classes' names are those of their factories
    counters: dict[int, tuple[Any, dict[str, Any]]] = {}  # id(owner) -> (owner, counters)
    train_steps: set[Callable] = set()  # the watched train_step functions

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
        refusal = _refusal(optimizer, optimizers, TF_PRIVACY, names)
        query = getattr(optimizer, "_dp_sum_query", None)
        if not refusal and type(query) is not GaussianSumQuery:
            refusal = (f"tensorflow-privacy's {names.get(type(optimizer), 'optimizer')} with a "
                       f"{type(query).__name__} is not watched")
        if refusal:
            ran.refuse(refusal)
        return not refusal

    def model_watched(model: Any) -> bool:
        refusal = _refusal(model, models, TF_PRIVACY, names,
                           allowed=lambda name, value: name == "train_step" and getattr(
                               getattr(value, "python_function", None), "__func__",
                               None) in train_steps)  # DPModel's XLA-compiled train_step
        if refusal:
            ran.refuse(refusal)
        return not refusal

    def compute_gradients(original):
        def watched_gradients(self, loss, *args, **kwargs):
            if not optimizer_watched(self):
                return original(self, loss, *args, **kwargs)
            state = self._global_state  # what the clipping and the noise below read
            # A loss given as a function is evaluated inside: its batch is unknown.
            smallest, largest = (0.0, math.inf) if callable(loss) else (tf.shape(loss)[0],) * 2
            microbatches = largest if self._num_microbatches is None else self._num_microbatches
            with tf.control_dependencies(counted(self, smallest, largest, microbatches,
                                                 state.stddev, state.l2_norm_clip)):
                return original(self, loss, *args, **kwargs)
        return watched_gradients

    def train_step(original):
        def watched_step(self, data):
            if not model_watched(self):
                return original(self, data)
            examples = tf.shape(tf.keras.utils.unpack_x_y_sample_weight(data)[1])[0]
            clip, multiplier = self._l2_norm_clip, self._noise_multiplier
            std = tf.where(tf.cast(multiplier, tf.float64) > 0,  # no noise at or below 0
                           tf.cast(multiplier, tf.float64) * tf.cast(clip, tf.float64),
                           tf.constant(0.0, tf.float64))
            with tf.control_dependencies(counted(
                    self, examples, examples, self._num_microbatches or examples, std, clip)):
                return original(self, data)
        train_steps.add(watched_step)
        return watched_step

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
        _patch(stack, cls, "_compute_gradients", compute_gradients)
        _patch(stack, cls, "get_gradients", refused(
            f"tensorflow-privacy's {names[cls]}.get_gradients (the graph-mode path) is not "
            f"watched"))
    for cls in models:
        _patch(stack, cls, "train_step", train_step)
    for base in {tf.keras.optimizers.legacy.Optimizer, tf.keras.optimizers.Optimizer,
                 tf.compat.v1.train.Optimizer}:
        _patch(stack, base, "apply_gradients", apply_gradients)
    _patch(stack, tf.keras.Model, "make_train_function", make_train_function)


def _of_module(cls: type, module: str) -> bool:
    """Whether a class of ``module`` is among ``cls`` and its bases."""
    return any(klass.__module__.split(".")[0] == module for klass in cls.__mro__)
