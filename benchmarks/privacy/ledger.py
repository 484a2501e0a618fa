"""The privacy ledger: every call of a privacy mechanism during a fit is charged to the
ledger that the run owns, and the record's epsilon is what the ledger composes.

A charge names the mechanism, whom it touches (which examples' labels, inputs or whole
records; or every example) and its cost: a pure epsilon, an RDP curve, the parameters of
a Poisson-sampled Gaussian, or "unprotected" (the data is used without any guarantee).

Composition is per example: the charges that touch an example compose sequentially, and
the epsilon is that of the worst example, so charges on disjoint examples compose in
parallel. Pure charges alone give a pure epsilon (delta 0). Once any charge is an RDP
curve or a sampled Gaussian, every charge becomes an RDP curve (pure epsilon e is
(alpha, min(e, alpha e^2 / 2))-RDP), the per-example curves are summed, and the worst
example's curve (taken order by order, an upper bound) is converted to (epsilon, delta)
by dp_accounting. Sampled Gaussians alone are also composed by the PLD accountant, which
is reported beside the RDP epsilon.

Only the charges on the fields a notion protects count towards its epsilon (under
label-DP the inputs are public); the others stay in the entries, so a page can show them.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Union

import numpy as np

from benchmarks.privacy.errors import InputError
from benchmarks.privacy import rdp
from benchmarks.privacy.notions import Field, PrivacyNotion


@dataclasses.dataclass(frozen=True)
class Touches:
    """Whom a charge touches: ``field`` of the examples ``examples`` (indices into the
    training set, repeated where an example is touched repeatedly), or of every example."""

    field: Field
    examples: np.ndarray | None = None
    group: str = ""  # a short public description, e.g. "stage 2 of 3"

    def __post_init__(self) -> None:
        if self.examples is not None:
            index = np.asarray(self.examples)
            if index.ndim != 1 or (index.size and (not np.issubdtype(index.dtype, np.integer)
                                                   or index.min() < 0)):
                raise ValueError("examples must be a 1-D array of non-negative indices")
            object.__setattr__(self, "examples", index.astype(np.int64))

    def as_dict(self) -> dict[str, Any]:
        count = "all" if self.examples is None else int(len(self.examples))
        return {"field": self.field.value, "examples": count, "group": self.group}


def labels(examples: np.ndarray | None = None, group: str = "") -> Touches:
    return Touches(Field.LABELS, examples, group)


def records(examples: np.ndarray | None = None, group: str = "") -> Touches:
    return Touches(Field.RECORDS, examples, group)


def inputs(examples: np.ndarray | None = None, group: str = "") -> Touches:
    return Touches(Field.INPUTS, examples, group)


@dataclasses.dataclass(frozen=True)
class PureEpsilon:
    epsilon: float

    def __post_init__(self) -> None:
        if not self.epsilon >= 0 or math.isnan(self.epsilon):
            raise ValueError(f"a pure charge needs epsilon >= 0, got {self.epsilon!r}")

    def curve(self) -> np.ndarray:
        return rdp.pure_rdp(self.epsilon)

    def as_dict(self) -> dict[str, Any]:
        return {"type": "pure", "epsilon": _encode(self.epsilon)}


@dataclasses.dataclass(frozen=True)
class RdpCurve:
    """RDP values at ``rdp.ORDERS``: epsilon(alpha) of the charged release."""

    values: tuple[float, ...]

    def __post_init__(self) -> None:
        values = np.asarray(self.values, dtype=np.float64)
        if values.shape != rdp.ORDERS.shape or np.isnan(values).any() or (values < 0).any():
            raise ValueError(f"an RDP charge needs {len(rdp.ORDERS)} non-negative values "
                             f"at rdp.ORDERS, got shape {values.shape}")
        object.__setattr__(self, "values", tuple(float(v) for v in values))

    def curve(self) -> np.ndarray:
        return np.asarray(self.values, dtype=np.float64)

    def as_dict(self) -> dict[str, Any]:
        return {"type": "rdp", "orders": rdp.ORDERS.tolist(),
                "values": [_encode(v) for v in self.values]}


@dataclasses.dataclass(frozen=True)
class SampledGaussian:
    """``steps`` steps of the Gaussian mechanism with noise multiplier sigma on a Poisson
    sample of rate q (DP-SGD), accounted with the add/remove neighbour relation."""

    noise_multiplier: float
    sampling_rate: float
    steps: int

    def __post_init__(self) -> None:
        if not (self.noise_multiplier > 0 and 0 < self.sampling_rate <= 1 and self.steps >= 1):
            raise ValueError(f"bad sampled Gaussian {self}")

    def curve(self) -> np.ndarray:
        return rdp.sampled_gaussian_rdp(self.noise_multiplier, self.sampling_rate, self.steps)

    def as_dict(self) -> dict[str, Any]:
        return {"type": "sampled gaussian", "noise_multiplier": self.noise_multiplier,
                "sampling_rate": self.sampling_rate, "steps": self.steps}


@dataclasses.dataclass(frozen=True)
class Unprotected:
    """The data is used with no guarantee at all (non-private training, an oracle)."""

    reason: str

    def curve(self) -> np.ndarray:
        return np.full(rdp.ORDERS.shape, math.inf)

    def as_dict(self) -> dict[str, Any]:
        return {"type": "unprotected", "reason": self.reason}


Cost = Union[PureEpsilon, RdpCurve, SampledGaussian, Unprotected]


@dataclasses.dataclass(frozen=True)
class Charge:
    mechanism: str
    touches: Touches
    cost: Cost
    details: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        details = {key: _encode(value) if isinstance(value, float) else value
                   for key, value in self.details.items()}
        return {"mechanism": self.mechanism, "touches": self.touches.as_dict(),
                "cost": self.cost.as_dict(), "details": details}


@dataclasses.dataclass(frozen=True)
class Total:
    """What the ledger's charges add up to for one notion."""

    epsilon: float
    delta: float
    composition: str  # "none" (no charge), "pure", "rdp" or "unprotected"
    details: dict[str, Any]


class Ledger:
    """The charges of one run, in the order they were made; and, for an audit, what the
    releases gave the rows it watches (its canaries)."""

    # The tape of a replay check (benchmarks.privacy.replay) while one runs, shared by
    # every ledger: the releases are kept on it, or taken from it.
    tape: Any = None

    def __init__(self) -> None:
        self.charges: list[Charge] = []
        self.watched = np.empty(0, dtype=np.int64)
        # training-set index -> (mechanism, group, released value): the first release
        self.observed: dict[int, tuple[str, str, Any]] = {}
        # An audit's phantom records (benchmarks.privacy.phantom_canaries), for the
        # mechanisms that release gradients to observe.
        self.phantoms: Any = None
        # The mechanisms whose release is the trained model itself (DP-ERM's weights): an
        # audit of the model is then an audit at the release.
        self.model_releases: list[str] = []

    def watch(self, examples: np.ndarray) -> None:
        """Keep what every later release gives the training rows ``examples``."""
        self.watched = np.asarray(examples, dtype=np.int64)

    def observe(self, mechanism: str, examples: np.ndarray, released: np.ndarray,
                group: str = "") -> None:
        """A release of ``released[i]`` for training row ``examples[i]``; the watched rows'
        first releases are kept."""
        if not self.watched.size:
            return
        examples = np.asarray(examples)
        for i in np.flatnonzero(np.isin(examples, self.watched)):
            self.observed.setdefault(int(examples[i]), (mechanism, group, released[i]))

    def released(self, mechanism: str, value: Any, **public: Any) -> Any:
        """What a mechanism returns once it has charged: ``value``, or during a replay
        check the recorded release in its place; ``public`` are the inputs of the release
        that must not depend on private data (benchmarks.privacy.replay)."""
        return value if Ledger.tape is None else Ledger.tape.release(mechanism, value, public)

    def not_replayed(self, mechanism: str, touches: Touches, reason: str) -> None:
        """A release the mechanism cannot hand back during a replay check (the caller
        computes it from the private data of ``touches``): it takes its place on the
        tape, and the check keeps those rows as they were and replays the rest."""
        if Ledger.tape is not None:
            Ledger.tape.release(mechanism, None, {"touches": touches}, not_replayed=reason)

    @staticmethod
    def of(ledger: Any, mechanism: str) -> "Ledger":
        """``ledger`` if it is one: a mechanism of the layer never runs uncharged."""
        if not isinstance(ledger, Ledger):
            raise InputError(f"{mechanism} needs the run's privacy ledger to charge, got "
                             f"{type(ledger).__name__}: a mechanism never runs uncharged")
        return ledger

    def charge(self, mechanism: str, touches: Touches, cost: Cost, **details: Any) -> Charge:
        entry = Charge(mechanism, touches, cost, details)
        if Ledger.tape is not None:  # a replay check compares every charge
            Ledger.tape.charge(entry)
        self.charges.append(entry)
        return entry

    def relevant(self, notion: PrivacyNotion) -> list[Charge]:
        return [c for c in self.charges if c.touches.field in notion.protects.fields]

    def uncovered(self, notion: PrivacyNotion, size: int) -> np.ndarray:
        """The examples (of ``size``) that no charge on the notion's fields touches: a
        fit must not depend on them at all."""
        covered = np.zeros(size, dtype=bool)
        for charge in self.relevant(notion):
            if charge.touches.examples is None:
                return np.empty(0, dtype=np.int64)
            covered[charge.touches.examples] = True
        return np.flatnonzero(~covered)

    def total(self, notion: PrivacyNotion, delta: float) -> Total:
        """The (epsilon, delta) that the charges on the notion's fields compose to.

        ``delta`` is the budget's: RDP composition converts at it; pure composition
        spends none of it. A non-private notion is infinite whatever was charged.
        """
        charges = self.relevant(notion)
        if not notion.private or any(isinstance(c.cost, Unprotected) for c in charges):
            return Total(math.inf, 0.0, "unprotected", {})
        if not charges:
            return Total(0.0, 0.0, "none", {})
        if all(isinstance(c.cost, PureEpsilon) for c in charges):
            return Total(worst_example(charges, lambda c: np.float64(c.cost.epsilon)),
                         0.0, "pure", {})
        if not 0 < delta < 1:
            raise InputError(f"RDP composition needs a delta in (0, 1), got {delta!r}")
        epsilon, order = rdp.epsilon_from_rdp(self.curve(notion), delta)
        details: dict[str, Any] = {"rdp_order": order}
        gaussians = [c.cost for c in charges]
        if len(gaussians) == 1 and isinstance(gaussians[0], SampledGaussian):
            g = gaussians[0]
            details["epsilon_pld"] = rdp.sampled_gaussian_pld_epsilon(
                g.noise_multiplier, g.sampling_rate, g.steps, delta)
        return Total(epsilon, delta, "rdp", details)

    def curve(self, notion: PrivacyNotion) -> np.ndarray:
        """The RDP curve (at rdp.ORDERS) of the worst example under the charges on the
        notion's fields: zero without a charge, infinite with an unprotected one."""
        charges = self.relevant(notion)
        if not charges:
            return np.zeros(rdp.ORDERS.shape)
        return np.broadcast_to(worst_example(charges, lambda c: c.cost.curve()),
                               rdp.ORDERS.shape).astype(np.float64)

    def entries(self, delta: float) -> list[dict[str, Any]]:
        """The charges for the record, each with the epsilon it would cost alone."""
        out = []
        for charge in self.charges:
            entry = charge.as_dict()
            cost = charge.cost
            if isinstance(cost, (RdpCurve, SampledGaussian)) and 0 < delta < 1:
                entry["epsilon_alone"] = _encode(rdp.epsilon_from_rdp(cost.curve(), delta)[0])
            elif isinstance(cost, PureEpsilon):
                entry["epsilon_alone"] = _encode(cost.epsilon)
            elif isinstance(cost, Unprotected):
                entry["epsilon_alone"] = "inf"
            out.append(entry)
        return out


def worst_example(charges: list[Charge], cost_of) -> Any:
    """The largest per-example sum of cost_of(charge) (a number, or a curve taken order
    by order): charges on every example add to all, indexed ones to their examples."""
    shared = sum((cost_of(c) for c in charges if c.touches.examples is None), np.float64(0))
    indexed = [c for c in charges if c.touches.examples is not None]
    if not indexed:
        return shared
    size = 1 + max((int(c.touches.examples.max()) for c in indexed if c.touches.examples.size),
                   default=0)
    per_example = np.zeros((size, *np.shape(cost_of(indexed[0]))))
    for charge in indexed:
        np.add.at(per_example, charge.touches.examples, cost_of(charge))
    return shared + per_example.max(axis=0)


def _encode(value: float) -> float | str:
    return "inf" if math.isinf(value) else float(value)
