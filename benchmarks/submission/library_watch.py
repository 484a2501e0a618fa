"""What the known outside DP libraries ran during a fit, measured without any change to
the method's code, and every noisy step the watch cannot see, refused. The hooks of each
library are in ``opacus_watch`` and ``tf_privacy_watch``; the noisy gradients they record
and hand back are ``library_replay``'s.

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
from typing import Any, Callable, Iterator

import numpy as np

from benchmarks.contract import Method
from benchmarks.errors import InputError
from benchmarks.privacy import rdp
from benchmarks.privacy.noise_checks import NoiseCheck
from benchmarks.submission import library_replay

OPACUS, TF_PRIVACY = "Opacus", "tensorflow-privacy"
OF = {OPACUS: "Opacus'", TF_PRIVACY: "tensorflow-privacy's"}  # a class of the library
# library -> (distribution, module, the releases whose code the hooks are written for)
SUPPORTED = {OPACUS: ("opacus", "opacus", ("1.6.0",)),
             TF_PRIVACY: ("tensorflow-privacy", "tensorflow_privacy", ("0.9.0",))}
# How far a composed epsilon may exceed the charge: the libraries draw their noise at a
# single-precision standard deviation, which the watch reads.
FLOAT32_TOLERANCE = 1e-6
# What makes a watched library's fit reproducible for a seed, when nothing else explains
# why two fits differ.
SEEDING = {OPACUS: "likely cause: PyTorch's generator not seeded by the fit (Opacus draws "
                   "its Poisson batches and, unless make_private is given a "
                   "noise_generator, its noise from it): call "
                   "torch.manual_seed(self.ctx.seed_for(...)) before the fit",
           TF_PRIVACY: "likely cause: TensorFlow not seeded by the fit: call "
                       "tf.keras.utils.set_random_seed(self.ctx.seed_for(...)) before the "
                       "fit"}
# The types of a setting the watch reads as the library computes with it: another type
# (a float subclass) could compute with another value than the one it reads.
PLAIN_NUMBERS = frozenset({float, int, np.float64, np.float32, np.int64, np.int32})
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
    # the noisy gradients of the steps, recorded or handed back (library_replay); None
    # when the fit is neither recorded nor replayed
    tape: library_replay.Steps | None = None
    # (what, how to avoid it) for each watched path that ran compiled by XLA: a seed does
    # not reproduce its noise, and its noisy gradients cannot be recorded
    xla: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def step(self, setting: Setting, count: int = 1) -> None:
        self.steps[setting] += count

    def added_noise(self, library: str, std: float, noise: np.ndarray) -> None:
        tally = self.noise.setdefault((library, std), [0, 0, 0.0])
        tally[0] += 1
        tally[1] += noise.size
        tally[2] += float(np.sum(np.square(noise, dtype=np.float64)))

    def refuse(self, what: str) -> None:
        self.unwatched.append(what)

    def number(self, value: Any, what: str) -> float:
        """``value``, a setting the library computes with, as a float; refused unless it
        is a plain number."""
        if type(value) not in PLAIN_NUMBERS:
            self.refuse(f"{what} is a {type(value).__name__}, not a plain number")
        return float(value)

    def compiled_by_xla(self, what: str, fix: str) -> None:
        self.xla.append((what, fix))
        if self.tape is not None:
            self.tape.cannot_record(f"{what}, where its noisy gradients cannot be recorded")

    def likely_nondeterminism(self) -> str:
        """The likely reason why two fits with one seed that ran these steps differ, with
        its fix; "" when no watched step ran."""
        if self.xla:
            what, fix = self.xla[0]
            return (f"likely cause: {what}, which a seed does not make reproducible: "
                    f"{fix}")
        return "; ".join(SEEDING[library] for library in self.libraries)

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
def watch(tape: library_replay.Steps | None = None) -> Iterator[Ran]:
    """The steps of the imported watched libraries during the block, their noisy gradients
    recorded onto ``tape`` or, when it replays a recorded fit, handed back from it.
    Unwatched when the block ends (without an error of its own) and a noisy step went
    unseen; StepMismatch when the replaying fit departed from the tape, whatever it
    raised or caught."""
    ran = Ran(tape=tape)
    with contextlib.ExitStack() as stack:
        patch(stack, Method, "__init__", lambda original: _sized(original, ran))
        if "opacus" in sys.modules:
            from benchmarks.submission import opacus_watch

            opacus_watch.watch(ran, stack)
        if "tensorflow_privacy" in sys.modules:
            from benchmarks.submission import tf_privacy_watch

            tf_privacy_watch.watch(ran, stack)
        try:
            yield ran
        except Exception:
            if tape is not None and tape.mismatch:
                raise library_replay.StepMismatch(tape.mismatch) from None
            raise
        finally:
            for settle in ran.settle:
                settle()
    if ran.unwatched:
        raise Unwatched(f"privboard submit cannot see every noisy step of this fit: "
                        f"{'; '.join(dict.fromkeys(ran.unwatched))} (docs/submission.md "
                        f"lists the watched paths)")
    if tape is not None:
        tape.finish()


def patch(stack: contextlib.ExitStack, owner: Any, name: str,
          make: Callable[[Callable], Callable]) -> None:
    """``owner.name`` replaced by ``make(original)`` until ``stack`` closes."""
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


def refusal(obj: Any, watched: tuple[type, ...], library: str, names: dict[type, str],
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
    # Its own data descriptors (properties) would take the place of instance attributes.
    replaced = sorted({name for klass in own for name, value in vars(klass).items()
                       if name not in OWN_ATTRIBUTES and (hasattr(base, name) or any(
                           hasattr(type(value), hook) for hook in ("__set__", "__delete__")))})
    if replaced:
        return f"{cls.__qualname__} replaces {', '.join(replaced)} of {watched_name}"
    shadowed = sorted(name for name, value in getattr(obj, "__dict__", {}).items()
                      if isinstance(inspect.getattr_static(base, name, None),
                                    (types.FunctionType, classmethod, staticmethod))
                      and not allowed(name, value))
    if shadowed:
        return f"an instance of {watched_name} has its {', '.join(shadowed)} replaced"
    return ""
