"""Variants of the example Opacus method (examples/opacus-plugin), registered by a package
of their own (tests/plugins/installed.py puts it on the path): one that hands Opacus a
quarter of the noise it charges, and one that never charges its ledger."""
from __future__ import annotations

from benchmarks.contract import Split
from benchmarks.contract_checks import TINY_TRAIN
from opacus_plugin import OpacusMLP


class OpacusAtAQuarter(OpacusMLP):
    name = "opacus-quarter-mlp"
    noise_share = 0.25


class OpacusUncharged(OpacusMLP):
    """Trains as the example does but never charges its ledger."""

    name = "opacus-uncharged-mlp"

    def fit(self, train: Split, num_classes: int) -> "OpacusUncharged":
        charge = self.ctx.ledger.charge
        self.ctx.ledger.charge = lambda *args, **kwargs: None
        try:
            return super().fit(train, num_classes)
        finally:
            self.ctx.ledger.charge = charge


class OpacusAtAQuarterBeyondTheContract(OpacusMLP):
    """Honest on the method contract's tiny data, a quarter of its charge on any larger
    training set: only the watch of its cells can see it."""

    name = "opacus-quarter-beyond-tiny-mlp"

    def fit(self, train: Split, num_classes: int) -> "OpacusAtAQuarterBeyondTheContract":
        self.noise_share = 1.0 if len(train) <= TINY_TRAIN else 0.25
        return super().fit(train, num_classes)
