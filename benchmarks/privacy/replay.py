"""Replay: a fit may depend on the private data only through what the layer released.

Inside ``record()`` every release a mechanism of the layer returns is kept on a tape, in
order, with the public inputs the mechanism was given (a prior, a k, a noise scale, the
rows it touches), and so is every charge made to a ledger. Inside ``replay(tape)`` every
mechanism still checks its input and charges its ledger as usual, but returns the tape's
next release in place of its own, whatever its private input; its public inputs must be
the recorded ones, since they may depend on earlier releases and public data only, and
so must every charge (its mechanism, the examples it touches, its cost and details,
which the record publishes). The replaying fit must make the recorded releases and
charges, no more and no fewer, in the same order: a departure fails the replay when the
block ends, even one the fit caught and went on from. A second fit with the same seed on
altered private data that replays the first fit's releases must then give the same
model: anything else is private data read beside the layer (training on true labels
next to an honest release, a prior or a choice taken from the training labels), which
no audit can be relied on to see. The check is exact and deterministic. A mechanism
that runs several fits inside (a private choice among trainings) replays as they do:
its releases are on the tape in the order it made them.

A mechanism whose release the method computes itself (the minimiser of objective
perturbation) is replayable when the layer owns the computation. One that cannot be
replayed takes its place on the tape all the same, with the rows it reads and why
(``Ledger.not_replayed``): it exempts only itself, for the replay check keeps those
rows' private data as it was and replays the rest of the fit.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
from typing import Any, Iterator

import numpy as np

from benchmarks.privacy.ledger import Charge, Ledger, Touches


class ReplayMismatch(Exception):
    """The replaying fit asked the layer for releases, or made charges, other than the
    recorded ones. Not an InputError: a method that handles bad input must not take it
    for one."""


@dataclasses.dataclass(frozen=True)
class Release:
    mechanism: str
    value: Any
    public: dict[str, Any]  # the public inputs, with the rows it touches where it says
    not_replayed: str = ""  # why the layer cannot hand it back; "" when it can

    @property
    def touches(self) -> Touches | None:
        return self.public.get("touches")


class Tape:
    """The releases and charges of one fit, in the order they were made; or, replaying
    ``recorded``, how far the replaying fit has followed it."""

    def __init__(self, recorded: Tape | None = None) -> None:
        self.recorded = recorded
        self.releases: list[Release] = [] if recorded is None else recorded.releases
        self.charges: list[Charge] = [] if recorded is None else recorded.charges
        self.position = 0  # releases handed back
        self.charged = 0  # charges matched
        self.mismatch = ""  # the first departure from the recorded fit

    @property
    def replaying(self) -> bool:
        return self.recorded is not None

    def release(self, mechanism: str, value: Any, public: dict[str, Any],
                not_replayed: str = "") -> Any:
        if not self.replaying:
            self.releases.append(Release(mechanism, copy.deepcopy(value),
                                         copy.deepcopy(public), not_replayed))
            return value
        where = f"release {self.position + 1} ({mechanism})"
        if self.position >= len(self.releases):
            self._depart(f"{where} came after the {len(self.releases)} release(s) of the "
                         f"recorded fit")
        recorded = self.releases[self.position]
        if recorded.mechanism != mechanism:
            self._depart(f"{where} came where the recorded fit released by "
                         f"{recorded.mechanism}")
        moved = _moved(recorded.public, public)
        if moved:
            self._depart(f"{where} was given another {' and '.join(moved)} than in the "
                         f"recorded fit: a public input of the release taken from private "
                         f"data")
        self.position += 1
        return copy.deepcopy(recorded.value)

    def charge(self, charge: Charge) -> None:
        if not self.replaying:
            self.charges.append(copy.deepcopy(charge))
            return
        where = f"charge {self.charged + 1} ({charge.mechanism})"
        if self.charged >= len(self.charges):
            self._depart(f"{where} came after the {len(self.charges)} charge(s) of the "
                         f"recorded fit")
        recorded = self.charges[self.charged]
        moved = _moved(_parts(recorded), _parts(charge))
        if moved:
            self._depart(f"{where} had another {' and '.join(moved)} than in the recorded "
                         f"fit: a charge taken from private data")
        self.charged += 1

    def not_replayed(self) -> list[Release]:
        """The releases that could not be replayed, each exempting only itself."""
        return [release for release in self.releases if release.not_replayed]

    def mechanisms(self) -> list[str]:
        """The mechanisms whose releases were handed back, each once, in order."""
        return list(dict.fromkeys(r.mechanism for r in self.releases if not r.not_replayed))

    def finish(self) -> None:
        """Raise ReplayMismatch unless the replaying fit made every recorded release and
        charge, in order, and nothing else."""
        if not self.mismatch:
            for done, recorded, what in ((self.position, self.releases, "release"),
                                         (self.charged, self.charges, "charge")):
                if done < len(recorded):
                    self.mismatch = (f"the replayed fit made {done} of the {len(recorded)} "
                                     f"{what}(s) of the recorded fit")
                    break
        if self.mismatch:
            raise ReplayMismatch(self.mismatch)

    def _depart(self, line: str) -> None:
        self.mismatch = self.mismatch or line
        raise ReplayMismatch(line)


@contextlib.contextmanager
def record() -> Iterator[Tape]:
    """Keep every release of the layer, and every charge, made in the block on a new
    tape."""
    with _active(Tape()) as tape:
        yield tape


@contextlib.contextmanager
def replay(tape: Tape) -> Iterator[Tape]:
    """Hand back ``tape``'s releases, in order, in place of the layer's own. Raises
    ReplayMismatch when the block ends if it departed from the tape, whatever it raised
    or caught."""
    replaying = Tape(recorded=tape)
    try:
        with _active(replaying):
            yield replaying
    except Exception:
        if replaying.mismatch:
            raise ReplayMismatch(replaying.mismatch) from None
        raise
    replaying.finish()


def _parts(charge: Charge) -> dict[str, Any]:
    return {"mechanism": charge.mechanism, "touches": charge.touches, "cost": charge.cost,
            "details": charge.details}


def _moved(recorded: dict[str, Any], given: dict[str, Any]) -> list[str]:
    """The keys whose values differ, those that only one side has included."""
    return [key for key in dict.fromkeys([*recorded, *given])
            if key not in recorded or key not in given or not _equal(recorded[key], given[key])]


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, Touches) or isinstance(b, Touches):
        return (type(a) is type(b) and a.field == b.field and a.group == b.group
                and _equal(a.examples, b.examples))
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and not _moved(a, b)
    if a is None or b is None:
        return a is b
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


@contextlib.contextmanager
def _active(tape: Tape) -> Iterator[Tape]:
    if Ledger.tape is not None:
        raise RuntimeError("a replay check is already running")
    Ledger.tape = tape
    try:
        yield tape
    finally:
        Ledger.tape = None
