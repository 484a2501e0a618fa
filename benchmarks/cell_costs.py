"""What a cell is expected to cost: its own wall time on the archive's reference host,
from the archive's records of its configuration.

A record's wall time is its cell's own (run_cell's, without a worker's start-up), on the
host kind its provenance names. Most of the archive was measured on AMD EPYC hosts, the
reference here; a record of another known host kind is divided by that kind's slowdown,
and a record of a host kind of unknown speed is left out. A cell's cost is the median of
its own records (one in each suite that holds it). Without any, the median of its
configuration's (its other seeds, or an audited twin's twins of earlier audit
protocols): a seed changes little of a cell's work, but archived cells ran beside
different loads, so the cell's own record, measured as its suite ran, comes first.
Without those, it is estimated, and says from what: the median of its method's records
on its dataset, else of its method's time per training example on other datasets times
its dataset's size (the archive's catalogue names the sizes), else of its method's, else
of the whole archive (each of the cell's kind, run or audited twin), else nothing (an
installed copy without the archive).

A cold data folder costs more than records show: a cached model's training. An SSL
prior's record names its encoder's training time, so a record that loaded the encoder is
charged it (``RunRecord.cold_wall_time_s``). PATE's records do not say whether their
teachers came from the cache: COLD_MODEL_SECONDS adds them to the first cell of a dataset
and seed that trains them (benchmarks.schedule).
"""
from __future__ import annotations

import collections
import dataclasses
import functools
import statistics
from pathlib import Path
from typing import Iterable

from benchmarks import archive, catalogue
from benchmarks.records import RunRecord
from benchmarks.registry import get_method
from benchmarks.suites import Cell

REFERENCE_CPU = "AMD EPYC"
# A cell's wall time on each host kind the archive names, over its time on the reference
# host. The Xeon's: the median over the quick suite's cells of a make bench measured on
# it against their archived AMD EPYC times, reported in issue 58.
SLOWDOWN = {REFERENCE_CPU: 1.0, "Intel(R) Xeon(R) Processor": 1.97}
# The training of a cached model whose records do not show it, on the reference host,
# paid by the first cell (not an audited twin: each trains its own, with its canaries,
# and its record counts them) of a dataset and seed that asks for it. PATE's 250
# teachers: the quick suite's audited PATE twin (160 s, teachers included) less its cell
# (64 s, teachers from the cache).
COLD_MODEL_SECONDS = {"PATE's teachers": 96.0}

BASES = ("their own records", "their configuration's", "their method's on their dataset",
         "their method's per training example", "their method's", "the archive's median cell",
         "no record (counted as nothing: the archive holds none of their kind)")
PER_EXAMPLE = "method per example"


@dataclasses.dataclass(frozen=True)
class Cost:
    seconds: float  # the cell's own wall time on the reference host
    basis: str  # what it is from: one of BASES


@dataclasses.dataclass(frozen=True)
class Timing:
    """An archived record's cell and its wall time on the reference host."""

    cell_id: str
    config_id: str
    audit: bool
    method: str
    dataset: str
    seconds: float

    @classmethod
    def of(cls, record: RunRecord) -> "Timing | None":
        """None for a record that says nothing of its cell's cost: failed, a
        verification, or measured on a host kind of unknown speed."""
        slowdown = SLOWDOWN.get(record.provenance.get("cpu"))
        if not record.ok or record.is_verification or slowdown is None:
            return None
        return cls(record.cell_id, record.config_id, record.is_audit, record.method,
                   record.dataset, record.cold_wall_time_s / slowdown)


class CostTable:
    """Each cell's expected cost, from timings of archived records and the datasets'
    training-set sizes (by name; a method's time on another dataset is scaled by them)."""

    def __init__(self, timings: Iterable[Timing], train_sizes: dict[str, int] = {}) -> None:
        self._sizes = train_sizes
        self._seconds: dict[tuple, list[float]] = collections.defaultdict(list)
        for t in timings:
            keys, size = self._keys(t.cell_id, t.config_id, t.method, t.dataset, t.audit)
            for key in filter(None, keys):
                self._seconds[key].append(t.seconds / (size if key[0] == PER_EXAMPLE else 1))

    def cost(self, cell: Cell) -> Cost:
        keys, size = self._keys(cell.cell_id, cell.config_id, cell.method, cell.dataset,
                                cell.audit)
        for basis, key in zip(BASES, keys):
            if key and self._seconds.get(key):
                median = statistics.median(self._seconds[key])
                return Cost(median * (size if key[0] == PER_EXAMPLE else 1), basis)
        return Cost(0.0, BASES[-1])

    def _keys(self, cell_id: str, config_id: str, method: str, dataset: str,
              audit: bool) -> tuple[tuple, int | None]:
        """The keys of BASES, most specific first (None where the dataset's size is not
        known), and that size."""
        size = self._sizes.get(dataset)
        return ((("cell", cell_id), ("config", config_id, audit),
                 ("method on dataset", method, dataset, audit),
                 (PER_EXAMPLE, method, audit) if size else None, ("method", method, audit),
                 ("any", audit)), size)


@functools.cache
def from_archive(folder: Path = archive.ARCHIVE) -> CostTable:
    """The cost table of the archive's records, with the training-set sizes its catalogue
    names (read once a process)."""
    datasets = (catalogue.read(folder) or {"datasets": {}})["datasets"]
    sizes = {name: facts["sizes"]["train"] for name, facts in datasets.items()
             if facts.get("sizes")}
    return CostTable((t for t in map(Timing.of, archive.every_copy(folder)) if t is not None),
                     sizes)


def cold_model_seconds(cell: Cell) -> float:
    """What the cell adds on the reference host when it is the first to train its cached
    model and its record would not show it (COLD_MODEL_SECONDS)."""
    if cell.audit:
        return 0.0
    return COLD_MODEL_SECONDS.get(get_method(cell.method).cached_model, 0.0)
