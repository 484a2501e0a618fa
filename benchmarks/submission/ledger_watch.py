"""Which of the privacy layer's mechanisms a fit ran, on which ledger, and who charged
the run's ledger: the layer's mechanisms, or the method itself.

Every mechanism of the layer takes a ledger through ``Ledger.of`` and charges it, so a
release is charged to the run only when the ledger it was given is the run's. A method
that hands a mechanism nothing, or a ledger of its own, releases without a charge on the
record. A charge made outside the layer (``ledger.charge`` in the method's own code) is
the method's word for noise it added itself: a run with one is self-accounted, and only
an audit can check it.

``watch`` wraps the two class attributes for the length of a block and restores them,
and watches the steps of the known outside DP libraries (library_watch). The
noise checks of an audit (benchmarks.audit), which rerun a mechanism on probes with
ledgers of their own (benchmarks.privacy.noise_checks), are not calls of the fit; the
same checks run from a method's code are.
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
from typing import Any, Iterator

from benchmarks.submission import library_replay, library_watch
from benchmarks.privacy import noise_checks
from benchmarks.privacy.ledger import Ledger

LAYER = "benchmarks.privacy"
AUDIT = "benchmarks.audit"


@dataclasses.dataclass
class Seen:
    # (mechanism, the ledger it was handed) for every call of a layer mechanism
    calls: list[tuple[str, Any]] = dataclasses.field(default_factory=list)
    # (ledger, mechanism, whether the layer made the charge) for every charge
    charges: list[tuple[Ledger, str, bool]] = dataclasses.field(default_factory=list)
    # the noisy steps of the outside DP libraries
    library: library_watch.Ran = dataclasses.field(default_factory=library_watch.Ran)

    def uncharged(self, ledger: Ledger) -> list[str]:
        """One line per mechanism that ran without charging ``ledger``."""
        lines = []
        for mechanism, given in self.calls:
            if given is ledger:
                continue
            what = ("a ledger that is not the run's" if isinstance(given, Ledger)
                    else f"no ledger ({type(given).__name__})")
            lines.append(f"{mechanism} was handed {what}: its release is charged to no "
                         f"record")
        return list(dict.fromkeys(lines))

    def own_charges(self, ledger: Ledger) -> list[str]:
        """The mechanisms the method charged to ``ledger`` itself, outside the layer."""
        return list(dict.fromkeys(mechanism for charged, mechanism, by_layer in self.charges
                                  if charged is ledger and not by_layer))


@contextlib.contextmanager
def watch(tape: library_replay.Steps | None = None) -> Iterator[Seen]:
    """What the block ran of the layer and of the watched DP libraries, whose noisy
    gradients are recorded onto ``tape`` or handed back from it (library_watch.watch)."""
    seen = Seen()
    of, charge = Ledger.__dict__["of"], Ledger.__dict__["charge"]
    check_ledger, probing = noise_checks.check_ledger, False

    def watched_of(ledger: Any, mechanism: str) -> Ledger:
        if not probing:
            seen.calls.append((mechanism, ledger))
        return of.__func__(ledger, mechanism)

    def unwatched_probes(*args: Any) -> list[noise_checks.NoiseCheck]:
        nonlocal probing
        probing = sys._getframe(1).f_globals.get("__name__", "").startswith(AUDIT + ".")
        try:
            return check_ledger(*args)
        finally:
            probing = False

    def watched_charge(self: Ledger, mechanism: str, *args: Any, **details: Any):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        seen.charges.append((self, mechanism, caller == LAYER or caller.startswith(LAYER + ".")))
        return charge(self, mechanism, *args, **details)

    Ledger.of, Ledger.charge = staticmethod(watched_of), watched_charge
    noise_checks.check_ledger = unwatched_probes
    try:
        with library_watch.watch(tape) as seen.library:
            yield seen
    finally:
        Ledger.of, Ledger.charge = of, charge
        noise_checks.check_ledger = check_ledger
