"""Replay: a fit may depend on the private data only through what the layer released.

Inside ``record()`` every release a mechanism of the layer returns is kept on a tape, in
order, with the public inputs the mechanism was given (a prior, a k, a noise scale, the
rows it touches). Inside ``replay(tape)`` every mechanism still checks its input and
charges its ledger as usual, but returns the tape's next release in place of its own,
whatever its private input; its public inputs must be the recorded ones, since they may
depend on earlier releases and public data only. A second fit with the same seed on
altered private data that replays the first fit's releases must then give the same
model: anything else is private data read beside the layer (training on true labels
next to an honest release, a prior or a choice taken from the training labels), which
no audit can be relied on to see. The check is exact and deterministic.

A mechanism whose release the method computes itself (the minimiser of objective
perturbation) is replayable when the layer owns the computation; one that cannot be
replayed says why on the tape (``cannot_replay``).
"""
from __future__ import annotations

import contextlib
import copy
from typing import Any, Iterator

import numpy as np

from benchmarks.privacy.ledger import Ledger, Touches


class ReplayMismatch(Exception):
    """The replaying fit asked the layer for releases other than the recorded ones. Not
    an InputError: a method that handles bad input must not take it for one."""


class Tape:
    """The releases of one fit, in the order the mechanisms returned them."""

    def __init__(self) -> None:
        self.releases: list[tuple[str, Any, dict[str, Any]]] = []
        self.replaying = False
        self.position = 0
        self.unreplayable: list[str] = []  # why a release could not be replayed

    def release(self, mechanism: str, value: Any, public: dict[str, Any]) -> Any:
        if not self.replaying:
            self.releases.append((mechanism, copy.deepcopy(value), copy.deepcopy(public)))
            return value
        where = f"release {self.position + 1} ({mechanism})"
        if self.position >= len(self.releases):
            raise ReplayMismatch(f"{where} came after the {len(self.releases)} release(s) "
                                 f"of the recorded fit")
        recorded, kept, given = self.releases[self.position]
        if recorded != mechanism:
            raise ReplayMismatch(f"{where} came where the recorded fit released by {recorded}")
        moved = [key for key in given if not _equal(given[key], public.get(key))]
        if moved:
            raise ReplayMismatch(f"{where} was given another {' and '.join(moved)} than in "
                                 f"the recorded fit: a public input of the release taken "
                                 f"from private data")
        self.position += 1
        return copy.deepcopy(kept)

    def cannot_replay(self, reason: str) -> None:
        self.unreplayable.append(reason)

    def mechanisms(self) -> list[str]:
        return list(dict.fromkeys(mechanism for mechanism, _, _ in self.releases))


@contextlib.contextmanager
def record() -> Iterator[Tape]:
    """Keep every release of the layer made in the block on a new tape."""
    with _active(Tape()) as tape:
        yield tape


@contextlib.contextmanager
def replay(tape: Tape) -> Iterator[Tape]:
    """Hand back ``tape``'s releases, in order, in place of the layer's own."""
    replayed = Tape()
    replayed.releases, replayed.replaying = tape.releases, True
    with _active(replayed):
        yield replayed


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, Touches) or isinstance(b, Touches):
        return (type(a) is type(b) and a.field == b.field and a.group == b.group
                and _equal(a.examples, b.examples))
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
