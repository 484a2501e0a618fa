"""Checks of a mechanism's noise level at the setting a run charged.

Some releases carry too little about any one record for a one-run epsilon audit to see:
a PATE canary moves one vote of one query answered with noise in the hundreds of votes,
and a DP-ERM canary one of d noisy weights. For these the audited twin reruns the
mechanism's own code at the parameters its charges name, on probe inputs of the
auditor's (never on private data, and on a ledger of their own: no record is touched),
and tests the noise drawn against the law those parameters claim. A mechanism noised
less than it charges fails the test. It is a test of the noise level, not a lower bound
on epsilon.

Each mechanism registers its check beside its code (``register``), by the name of its
charge. A check fails below the level its verdict gives it (benchmarks.audit.levels).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

import numpy as np

from benchmarks.privacy.ledger import Charge, Ledger

@dataclasses.dataclass(frozen=True)
class NoiseCheck:
    """One check: the charge it checked, what was measured and the p-value of seeing it
    (or anything further from the claim in the direction of too little noise)."""

    mechanism: str
    claim: str
    measured: str
    p_value: float

    def flagged(self, level: float) -> bool:
        """Whether it fails at ``level``: an honest mechanism fails with that probability."""
        return self.p_value < level

    def as_dict(self, level: float) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"flagged": self.flagged(level)}


Check = Callable[[Charge, np.random.Generator], NoiseCheck]
_CHECKS: dict[str, Check] = {}


def register(charge_name: str, check: Check) -> None:
    """``check`` runs on every charge named ``charge_name``."""
    if charge_name in _CHECKS:
        raise ValueError(f"a noise check of {charge_name!r} is registered already")
    _CHECKS[charge_name] = check


def check_ledger(ledger: Ledger, rng: np.random.Generator) -> list[NoiseCheck]:
    """The checks of every charge of ``ledger`` whose mechanism registered one."""
    return [_CHECKS[charge.mechanism](charge, rng) for charge in ledger.charges
            if charge.mechanism in _CHECKS]
