"""Audits of the privacy mechanisms alone, on worst-case neighbouring inputs.

For each mechanism, `trials` runs on each input of each candidate pair of neighbouring
inputs choose the pair, the output event S and which input plays d (the one S favours).
Then `trials` fresh runs on d and on d' count S, and ``clopper_pearson_epsilon`` turns the
two counts into a lower bound on epsilon. Because the choice is made on runs the bound never
sees, the bound needs no correction for the many events tried; its only correction is the
Bonferroni split of its two one-sided limits.

A lower bound above the claimed epsilon is flagged: at 95% confidence the mechanism is not
as private as claimed. An honest mechanism is flagged in at most 5% of audits.

Each mechanism registers its audit (``register``) beside its own code: the layer's
randomizers and DP-ERM noise in their modules, PATE's aggregators with the PATE method's
default ensemble in methods/pate.py.

The command: privboard audit mechanism NAME --epsilon E [--trials N] [--seed S] [--json].
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import importlib
import json
import math
import numbers
import pkgutil
import textwrap
from typing import Any, Callable, Iterator

import numpy as np

from benchmarks.privacy.audit_bounds import clopper_pearson_epsilon
from benchmarks.privacy.errors import InputError, unknown

CONFIDENCE = 0.95
DEFAULT_TRIALS = 10_000
MIN_TRIALS = 100
# Candidate thresholds per statistic on the selection runs; quantiles beyond this many.
_MAX_THRESHOLDS = 256
# Output values listed in an event's description.
_VALUES_SHOWN = 6

# (input, trials, epsilon, rng) -> one output row per run, from ONE call where the mechanism
# is vectorised.
Sampler = Callable[[Any, int, float, np.random.Generator], np.ndarray]


@dataclasses.dataclass(frozen=True)
class NeighbouringPair:
    first: Any
    second: Any
    first_text: str
    second_text: str


@dataclasses.dataclass(frozen=True)
class Statistic:
    """A real function of an output row; the candidate events are {score >= threshold}."""
    score: Callable[[np.ndarray], np.ndarray]
    describe: Callable[[float], str]  # the event {score >= threshold}, in words


@dataclasses.dataclass(frozen=True)
class AuditSpec:
    """How to audit one mechanism. `statistics` builds the candidate events of a pair from
    its selection runs (the pair, outputs on first, outputs on second). The mechanism is
    calibrated to the claimed epsilon by `sample`, and claims (epsilon, delta)-DP."""
    summary: str
    pairs: tuple[NeighbouringPair, ...]
    sample: Sampler
    statistics: Callable[[NeighbouringPair, np.ndarray, np.ndarray], list[Statistic]]
    delta: float = 0.0


@dataclasses.dataclass(frozen=True)
class AuditResult:
    mechanism: str
    claimed_epsilon: float
    claimed_delta: float
    lower_bound: float
    confidence: float
    trials: int
    seed: int
    d: str
    d_prime: str
    event: str
    count_d: int
    count_d_prime: int

    @property
    def flagged(self) -> bool:
        return self.lower_bound > self.claimed_epsilon

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"flagged": self.flagged}


# ----- events ---------------------------------------------------------------------------------

def _rows(outputs: np.ndarray) -> np.ndarray:
    return np.asarray(outputs).reshape(len(outputs), -1)


def format_row(row: np.ndarray) -> str:
    text = ", ".join(f"{x:.4g}" for x in row)
    return text if len(row) == 1 else f"({text})"


def _value_statistic(log_ratio: dict[bytes, float], shown: dict[bytes, str], sign: float,
                     ) -> Statistic:
    def score(outputs):
        # Values never seen in the selection runs are in no event.
        keys = (row.tobytes() for row in _rows(outputs))
        return np.array([sign * log_ratio[key] if key in log_ratio else -math.inf
                         for key in keys])

    def describe(threshold):
        members = sorted((text for key, text in shown.items()
                          if sign * log_ratio[key] >= threshold))
        more = len(members) - _VALUES_SHOWN
        listed = ", ".join(members[:_VALUES_SHOWN]) + (f" and {more} more" if more > 0 else "")
        return f"output in {{{listed}}}"

    return Statistic(score, describe)


def output_values(pair: NeighbouringPair, first: np.ndarray, second: np.ndarray,
                  ) -> list[Statistic]:
    """Events that are sets of output values, for mechanisms with discrete outputs.

    Values are ranked by their smoothed log ratio of counts on the selection runs, one
    ranking favouring each input; the events are the top sets of either ranking. Under pure
    DP the tight event is the set of values of largest likelihood ratio.
    """
    rows_first, rows_second = _rows(first), _rows(second)
    counts_first = collections.Counter(row.tobytes() for row in rows_first)
    counts_second = collections.Counter(row.tobytes() for row in rows_second)
    shown = {row.tobytes(): format_row(row) for row in np.concatenate([rows_first, rows_second])}
    log_ratio = {key: math.log((counts_first[key] + 0.5) / (counts_second[key] + 0.5))
                 for key in shown}
    return [_value_statistic(log_ratio, shown, +1.0), _value_statistic(log_ratio, shown, -1.0)]


def _coordinate_statistic(index: int, sign: float) -> Statistic:
    relation = ">=" if sign > 0 else "<="
    return Statistic(lambda x: sign * _rows(x)[:, index],
                     lambda t: f"output[{index}] {relation} {sign * t:.4g}")


def coordinates(pair: NeighbouringPair, first: np.ndarray, second: np.ndarray,
                ) -> list[Statistic]:
    """Events that bound one coordinate of the output from below or from above, for outputs
    with too many distinct values to rank one by one."""
    return [_coordinate_statistic(index, sign)
            for index in range(_rows(first).shape[1]) for sign in (+1.0, -1.0)]


def displacement(pair: NeighbouringPair, first: np.ndarray, second: np.ndarray,
                 ) -> list[Statistic]:
    """Events for a vector released around one of two points a (first) and b (second):
    half-spaces across the line from b to a, and balls around each point."""
    a, b = np.asarray(pair.first, float), np.asarray(pair.second, float)
    direction = (a - b) / np.linalg.norm(a - b)
    along = f"u the unit vector from {format_row(b)} to {format_row(a)}"
    return [
        Statistic(lambda x: (x - b) @ direction,
                  lambda t: f"(x - {format_row(b)}) . u >= {t:.4g}, {along}"),
        Statistic(lambda x: -((x - b) @ direction),
                  lambda t: f"(x - {format_row(b)}) . u <= {-t:.4g}, {along}"),
        Statistic(lambda x: -np.linalg.norm(x - a, axis=1),
                  lambda t: f"|x - {format_row(a)}| <= {-t:.4g}"),
        Statistic(lambda x: -np.linalg.norm(x - b, axis=1),
                  lambda t: f"|x - {format_row(b)}| <= {-t:.4g}"),
    ]


# ----- the registry -------------------------------------------------------------------------

# NAME -> audit. Each mechanism registers its audit beside its own code.
MECHANISMS: dict[str, AuditSpec] = {}


def register(name: str, spec: AuditSpec) -> None:
    if name in MECHANISMS:
        raise ValueError(f"the audit of mechanism {name!r} is registered twice")
    MECHANISMS[name] = spec


@dataclasses.dataclass(frozen=True)
class LabelRow:
    """One example's label and its (label-independent) prior over the classes."""
    label: int
    prior: tuple[float, ...]


def label_sampler(randomize: Callable) -> Sampler:
    """`randomize(labels, priors, epsilon, rng)` on `trials` copies of one LabelRow, in one call."""
    def sample(row: LabelRow, trials: int, epsilon: float, rng: np.random.Generator):
        return randomize(np.full(trials, row.label), np.tile(row.prior, (trials, 1)), epsilon, rng)
    return sample


def votes_sampler(aggregate: Callable) -> Sampler:
    """`aggregate(votes, epsilon, rng)` on `trials` copies of one vote vector, in one call."""
    def sample(votes: np.ndarray, trials: int, epsilon: float, rng: np.random.Generator):
        return aggregate(np.tile(votes, (trials, 1)), epsilon, rng)
    return sample


# ----- the audit ------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Events:
    """One statistic's candidate events on one pair, counted in the selection runs."""
    pair: NeighbouringPair
    statistic: Statistic
    thresholds: np.ndarray
    in_first: np.ndarray
    in_second: np.ndarray


@dataclasses.dataclass(frozen=True)
class _Choice:
    selection_bound: float
    events: _Events
    threshold: float
    second_is_d: bool  # the event favours the pair's second input, which then plays d


def _thresholds(scores: np.ndarray) -> np.ndarray:
    values = np.unique(scores[np.isfinite(scores)])
    if len(values) > _MAX_THRESHOLDS:
        values = np.unique(np.quantile(values, np.linspace(0, 1, _MAX_THRESHOLDS)))
    return values


def _selection_events(spec: AuditSpec, pair: NeighbouringPair, first: np.ndarray,
                      second: np.ndarray) -> Iterator[_Events]:
    runs = len(first)
    for statistic in spec.statistics(pair, first, second):
        on_first, on_second = statistic.score(first), statistic.score(second)
        thresholds = _thresholds(np.concatenate([on_first, on_second]))
        yield _Events(pair, statistic, thresholds,
                      runs - np.searchsorted(np.sort(on_first), thresholds),
                      runs - np.searchsorted(np.sort(on_second), thresholds))


def _choose(spec: AuditSpec, candidates: list[_Events], runs: int,
            confidence: float) -> _Choice:
    """The event, and the input it favours, with the best bound on the selection runs.

    Each candidate is judged at the confidence that would hold for all of them at once
    (Bonferroni); at the plain confidence, some small event always looks good by luck on the
    selection runs and then shows nothing on the fresh ones.
    """
    strict = 1 - (1 - confidence) / (2 * sum(len(c.thresholds) for c in candidates))
    choices = []
    for events in candidates:
        for second_is_d, (k_d, k_d_prime) in ((False, (events.in_first, events.in_second)),
                                              (True, (events.in_second, events.in_first))):
            bounds = clopper_pearson_epsilon(k_d, runs, k_d_prime, runs, spec.delta, strict)
            best = int(np.argmax(bounds))
            choices.append(_Choice(float(bounds[best]), events, float(events.thresholds[best]),
                                   second_is_d))
    return max(choices, key=lambda choice: choice.selection_bound)


def _positive_finite(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not 0 < value < math.inf:
        raise InputError(f"{name} must be finite and > 0, got {value!r}")
    return float(value)


def audit(spec: AuditSpec, epsilon: float, trials: int = DEFAULT_TRIALS, seed: int = 0,
          confidence: float = CONFIDENCE) -> AuditResult:
    """Audit one mechanism calibrated to `epsilon`: `trials` runs per input to choose the
    event, `trials` fresh runs on each of d and d' to bound epsilon."""
    epsilon = _positive_finite(epsilon, "epsilon")
    if isinstance(trials, bool) or not isinstance(trials, numbers.Integral) \
            or trials < MIN_TRIALS:
        raise InputError(f"trials must be an integer >= {MIN_TRIALS}, got {trials!r}")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InputError(f"seed must be an integer >= 0, got {seed!r}")
    rng = np.random.default_rng(seed)
    candidates = [events for pair in spec.pairs
                  for events in _selection_events(spec, pair,
                                                  spec.sample(pair.first, trials, epsilon, rng),
                                                  spec.sample(pair.second, trials, epsilon, rng))]
    choice = _choose(spec, candidates, trials, confidence)
    pair, statistic = choice.events.pair, choice.events.statistic
    inputs = [(pair.first, pair.first_text), (pair.second, pair.second_text)]
    if choice.second_is_d:
        inputs.reverse()
    (d, d_text), (d_prime, d_prime_text) = inputs

    def count_event(x) -> int:
        outputs = spec.sample(x, trials, epsilon, rng)
        return int(np.count_nonzero(statistic.score(outputs) >= choice.threshold))

    count_d, count_d_prime = count_event(d), count_event(d_prime)
    return AuditResult(
        mechanism=spec.summary, claimed_epsilon=epsilon, claimed_delta=spec.delta,
        lower_bound=float(clopper_pearson_epsilon(count_d, trials, count_d_prime, trials,
                                                  spec.delta, confidence)),
        confidence=confidence, trials=int(trials), seed=int(seed), d=d_text,
        d_prime=d_prime_text, event=statistic.describe(choice.threshold),
        count_d=count_d, count_d_prime=count_d_prime)


def names() -> list[str]:
    """The registered mechanisms: the layer's own, which register their audits when their
    modules load (every module of the layer is loaded here, so a new one needs no entry),
    and those of the modules imported so far."""
    import benchmarks.privacy as layer

    for module in pkgutil.iter_modules(layer.__path__):
        importlib.import_module(f"{layer.__name__}.{module.name}")
    return sorted(MECHANISMS)


def lookup(name: str) -> AuditSpec:
    """The registered audit of `name`; an unknown name suggests the closest one."""
    known = names()
    if name not in known:
        raise unknown("mechanism", name, known)
    return MECHANISMS[name]


# ----- the command: privboard audit mechanism ---------------------------------------------------

class _WholeNames(argparse.HelpFormatter):
    """Wraps help between words only: the default also breaks lines inside hyphenated names."""
    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(text, width, break_on_hyphens=False)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = _WholeNames
    parser.add_argument("name", metavar="NAME",
                        help="the mechanism (an unknown name lists the registered ones)")
    parser.add_argument("--epsilon", type=float, required=True,
                        help="the claimed epsilon the mechanism is calibrated to")
    parser.add_argument("--trials", type=int, default=DEFAULT_TRIALS,
                        help=f"runs per input, for choosing the event and again for the bound "
                             f"(default: %(default)s, at least {MIN_TRIALS})")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _report(name: str, result: AuditResult) -> str:
    verdict = ("FLAGGED: the lower bound exceeds the claimed epsilon" if result.flagged
               else "consistent with the claim")
    return (f"{name}: {result.mechanism}\n"
            f"claimed epsilon {result.claimed_epsilon:g}, lower bound "
            f"{result.lower_bound:.4f} at {result.confidence:.0%} confidence: {verdict}\n"
            f"  d  = {result.d}\n"
            f"  d' = {result.d_prime}\n"
            f"  event: {result.event}\n"
            f"  seen in {result.count_d} of {result.trials} runs on d, {result.count_d_prime} "
            f"of {result.trials} on d' (event chosen on {result.trials} other runs per input)")


def run(args: argparse.Namespace) -> int:
    """Print the audit. Exit code 0 when consistent with the claim, 1 when flagged;
    unusable input raises a PrivboardError (one line, exit code 2 from the command)."""
    result = audit(lookup(args.name), args.epsilon, args.trials, args.seed)
    if args.json:
        print(json.dumps(result.as_dict() | {"name": args.name}))
    else:
        print(_report(args.name, result))
    return 1 if result.flagged else 0
