"""The run context a method receives: one seeding scheme, the data it loads (with the
fingerprint of each dataset), the privacy ledger, progress reporting, and a place for
private diagnostics.

Every random stream of a run comes from ``rng(purpose)`` or ``seed_for(purpose)``: a
SeedSequence keyed by (seed, purpose), so adding a stream never shifts the others.
"""
from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any, Callable

import numpy as np

from benchmarks.privacy.ledger import Ledger


def _purpose_key(purpose: str) -> int:
    return int.from_bytes(hashlib.sha256(purpose.encode()).digest()[:8], "little")


@dataclasses.dataclass
class RunContext:
    seed: int = 0
    data_dir: Path | None = None  # None: $PRIVBOARD_DATA or ~/.privboard/data
    progress: Callable[[str], None] = lambda message: None
    ledger: Ledger = dataclasses.field(default_factory=Ledger)
    # name -> fingerprint of every dataset the run loaded, public pre-training sets included
    datasets_used: dict[str, str] = dataclasses.field(default_factory=dict)
    # Statistics of private data, kept for debugging only: never rendered or exported.
    diagnostics: dict[str, Any] = dataclasses.field(default_factory=dict)

    def seed_sequence(self, purpose: str) -> np.random.SeedSequence:
        return np.random.SeedSequence([int(self.seed), _purpose_key(purpose)])

    def rng(self, purpose: str) -> np.random.Generator:
        """The numpy generator of one random stream of the run."""
        return np.random.default_rng(self.seed_sequence(purpose))

    def seed_for(self, purpose: str) -> int:
        """An integer seed (for TensorFlow) of one random stream of the run."""
        return int(self.seed_sequence(purpose).generate_state(1, np.uint32)[0] >> 1)

    def load(self, name: str):
        """A dataset, loaded from the run's data folder; its fingerprint is recorded."""
        from benchmarks import datasets

        data = datasets.load(name, self.data_dir)
        self.datasets_used[name] = data.fingerprint
        return data

    def data_root(self) -> Path:
        """The run's data folder, resolved: where the caches of trained artefacts go."""
        from benchmarks import datasets

        return Path(self.data_dir or datasets.data_dir())

    def diagnose(self, **values: Any) -> None:
        """Keep statistics of private data for debugging; they are never published."""
        self.diagnostics.update(values)
