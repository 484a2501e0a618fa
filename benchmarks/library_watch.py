"""What the known outside DP libraries ran during a fit, watched without any change to the
method's code: every noisy step of Opacus' ``DPOptimizer`` and
``DPOptimizerFastGradientClipping`` (ghost clipping), and of the variants that add their
noise through them (per-layer clipping, distributed), and of tensorflow-privacy's Keras
DP optimizers and DP models (``DPSequential``, ``DPModel``). Opacus' AdaClip and FSDP
optimizers add their noise by code of their own and are not watched: a method that uses
them is self-accounted.

Each step is recorded with the settings it ran at: the noise multiplier, the clipping
norm, the expected batch size and the sampling rate, and whether the batch was a Poisson
sample. The steps compose, as Poisson-sampled Gaussians under dp_accounting's RDP
accountant (add/remove neighbours), to the epsilon the library actually spent at the
run's delta, which ``compare`` holds against what the run charged. Steps on shuffled
fixed-size batches are accounted as Poisson samples at rate batch/N, as both libraries'
own accountants do.

Where the library exposes both the clipped sum and the noisy sum (Opacus' ``add_noise``),
the noise it added is tested against the law its noise multiplier claims, N(0, (sigma
C)^2) on every coordinate: a library patched to add less noise is flagged.

The hooks wrap the libraries' public step functions for the length of a block, and only
for the versions in ``SUPPORTED``; a library is watched when it has been imported.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import math
import sys
from typing import Any, Callable, Iterator

import numpy as np

from benchmarks.contract import Method
from benchmarks.errors import InputError
from benchmarks.privacy import rdp
from benchmarks.privacy.noise_checks import NoiseCheck

OPACUS, TF_PRIVACY = "Opacus", "tensorflow-privacy"
# library -> (distribution, module that holds its hooks, supported release series)
SUPPORTED = {OPACUS: ("opacus", "opacus", "1.6"),
             TF_PRIVACY: ("tensorflow-privacy", "tensorflow_privacy", "0.9")}


@dataclasses.dataclass(frozen=True)
class Setting:
    """The settings of one noisy step. ``sampling_rate`` is None when the library does not
    say it (fixed-size batches, an optimizer made without its data loader): then it is
    batch/N, N the size of the training set the fit was given."""

    library: str
    noise_multiplier: float
    clip_norm: float
    expected_batch: float
    sampling_rate: float | None
    poisson: bool


@dataclasses.dataclass
class Ran:
    steps: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    # (library, noise std) -> [steps, coordinates, sum of squared noise]: the noise added
    noise: dict[tuple[str, float], list[float]] = dataclasses.field(default_factory=dict)
    # the size of every training set a method's fit was given
    train_sizes: list[int] = dataclasses.field(default_factory=list)
    # what adds the steps counted inside TensorFlow graphs, when the block ends
    settle: list[Callable[[], None]] = dataclasses.field(default_factory=list)

    def step(self, setting: Setting) -> None:
        self.steps[setting] += 1

    def added_noise(self, library: str, std: float, noise: np.ndarray) -> None:
        tally = self.noise.setdefault((library, std), [0, 0, 0.0])
        tally[0] += 1
        tally[1] += noise.size
        tally[2] += float(np.sum(np.square(noise, dtype=np.float64)))

    @property
    def libraries(self) -> list[str]:
        return sorted({setting.library for setting in self.steps})

    def sampling_rate(self, setting: Setting) -> float:
        """The library's rate, else batch/N at the smallest training set a fit was given
        (the largest rate); 1 when no fit was seen."""
        if setting.sampling_rate is not None:
            return setting.sampling_rate
        if not self.train_sizes:
            return 1.0
        return min(1.0, setting.expected_batch / min(self.train_sizes))

    def epsilon(self, delta: float) -> tuple[float, list[str]]:
        """The epsilon of every watched step composed at ``delta``, and a phrase for each
        setting ("Opacus ran sigma 0.27 for 224 steps at q 0.045")."""
        curve = np.zeros(rdp.ORDERS.shape)
        # (library, sigma, clip, Poisson) -> [steps, rates]: a phrase each
        runs: dict[tuple, list] = {}
        for setting, count in self.steps.items():
            rate = self.sampling_rate(setting)
            curve = curve + (rdp.sampled_gaussian_rdp(setting.noise_multiplier, rate, count)
                             if setting.noise_multiplier > 0 else math.inf)
            run = runs.setdefault((setting.library, setting.noise_multiplier,
                                   setting.clip_norm, setting.poisson), [0, []])
            run[0] += count
            run[1].append(rate)
        phrases = [f"{library} ran sigma {sigma:.3g} (clip {clip:g}) for {steps} steps at q "
                   + "–".join(dict.fromkeys(f"{rate:.3g}" for rate in sorted(rates)))
                   + ("" if poisson else " (fixed-size batches, accounted as Poisson)")
                   for (library, sigma, clip, poisson), (steps, rates) in sorted(runs.items())]
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
    if any_charge and spent <= charged * (1 + 1e-9):
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
        distribution, module, series = SUPPORTED[library]
        if not (version == series or version.startswith(series + ".")):
            raise InputError(f"{library} {version} is installed, but privboard submit "
                             f"watches {library} {series}.x only: install "
                             f"{distribution}=={series}.* to submit")
        importlib.import_module(module)


@contextlib.contextmanager
def watch() -> Iterator[Ran]:
    """The steps of the imported watched libraries during the block."""
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


def _watch_opacus(ran: Ran, stack: contextlib.ExitStack) -> None:
    from opacus import PrivacyEngine
    from opacus.optimizers.optimizer import DPOptimizer
    from opacus.optimizers.optimizer_fast_gradient_clipping import (
        DPOptimizerFastGradientClipping)
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    sampling: dict[int, tuple[float, bool]] = {}  # id(optimizer) -> (rate, Poisson)

    def make_private(original):
        def watched(self, *args, **kwargs):
            made = original(self, *args, **kwargs)  # module, optimizer[, criterion], loader
            optimizer, loader = made[1], made[-1]
            # Opacus' own rule: one batch of the loader per step, in expectation.
            sampling[id(optimizer)] = (1 / len(loader), isinstance(
                loader.batch_sampler, UniformWithReplacementSampler))
            return made
        return watched

    def add_noise(original):
        def watched(self):
            clipped = [p.summed_grad.detach().clone() for p in self.params]
            original(self)
            noise = np.concatenate([(p.grad.detach() - c.view_as(p)).cpu().numpy().ravel()
                                    for p, c in zip(self.params, clipped)])
            # Adaptive clipping noises at an adjusted multiplier and accounts at its own.
            std = float(getattr(self, "_adjusted_noise_multiplier", self.noise_multiplier)
                        * self.max_grad_norm)
            ran.added_noise(OPACUS, std, noise)
            rate, poisson = sampling.get(id(self), (None, False))
            ran.step(Setting(OPACUS, float(self.noise_multiplier), float(self.max_grad_norm),
                             float(self.expected_batch_size * self.accumulated_iterations),
                             None if rate is None else rate * self.accumulated_iterations,
                             poisson))
        return watched

    _patch(stack, PrivacyEngine, "make_private", make_private)
    for cls in (DPOptimizer, DPOptimizerFastGradientClipping):
        _patch(stack, cls, "add_noise", add_noise)


def _watch_tf_privacy(ran: Ran, stack: contextlib.ExitStack) -> None:
    """The Keras optimizers and models run their steps in TensorFlow graphs: the hook adds
    to each trace two counters, its steps and its largest batch (all of its steps are
    rated at that batch), read when the block ends."""
    import tensorflow as tf
    from tensorflow_privacy.privacy.keras_models import dp_keras_model
    from tensorflow_privacy.privacy.optimizers import dp_optimizer_keras as keras_optimizers

    counters: dict[int, tuple[Any, Any]] = {}  # id(optimizer or model) -> its counters

    def counters_of(owner: Any) -> tuple[Any, Any]:
        """The step and batch counters of one optimizer or model, made at its first trace
        (a tf.function may create variables only then) with its settings."""
        if id(owner) not in counters:
            noise_multiplier, clip = settings_of(owner)
            with tf.init_scope():
                steps = tf.Variable(0, dtype=tf.int64, trainable=False)
                batch = tf.Variable(0.0, dtype=tf.float64, trainable=False)
            counters[id(owner)] = steps, batch
            ran.settle.append(lambda: ran.steps.update({Setting(
                TF_PRIVACY, noise_multiplier, clip, float(batch.numpy()), None, False):
                int(steps.numpy())}))
        return counters[id(owner)]

    def settings_of(owner: Any) -> tuple[float, float]:
        """(noise multiplier, clipping norm) of a Keras DP optimizer or a DP model."""
        if hasattr(owner, "_dp_sum_query"):
            query = owner._dp_sum_query
            return float(query._stddev / query._l2_norm_clip), float(query._l2_norm_clip)
        return float(owner._noise_multiplier), float(owner._l2_norm_clip)

    def recorder(batch_of: Callable):
        def wrap(original):
            def watched(self, *args, **kwargs):
                steps, batch = counters_of(self)
                # Variables, not a Python callback: XLA compiles DPModel's train step.
                counted = [steps.assign_add(1),
                           batch.assign(tf.maximum(batch, batch_of(*args, **kwargs)))]
                with tf.control_dependencies(counted):
                    return original(self, *args, **kwargs)
            return watched
        return wrap

    def optimizer_batch(loss, *args, **kwargs):
        # A loss given as a function is not evaluated twice: its step counts as a batch
        # of the whole training set.
        return tf.constant(math.inf, tf.float64) if callable(loss) else tf.cast(
            tf.shape(loss)[0], tf.float64)

    for cls in (keras_optimizers.GenericDPSGDOptimizer, keras_optimizers.GenericDPAdamOptimizer,
                keras_optimizers.GenericDPAdagradOptimizer):
        _patch(stack, cls, "_compute_gradients", recorder(optimizer_batch))
    for cls in (dp_keras_model.DPSequential, dp_keras_model.DPModel):
        _patch(stack, cls, "train_step", recorder(
            lambda data: tf.cast(tf.shape(tf.keras.utils.unpack_x_y_sample_weight(data)[1])[0],
                                 tf.float64)))
