"""The order in which cells side by side start, and the wall time a run is expected to take.

Longest first: the local workers and Ray start the pending cells in the order of their
expected cost (benchmarks.cell_costs), longest first, so that a run does not end with one
long cell alone while the other workers idle (list scheduling by longest processing
time: within 4/3 of the shortest possible wall time). The order changes no record: every
cell runs in a fresh process of its own, whatever ran before. Two cells that would train
the same cached model still do not start side by side while anything else is left
(``next_cell``).

``simulate`` replays that schedule on expected durations; ``Forecast`` replays what is
left of a run while it runs, for the progress bar's time left.
"""
from __future__ import annotations

import collections
import heapq
import time
from typing import Callable, Iterable

from benchmarks.registry import get_method
from benchmarks.suites import Cell


def longest_first(cells: Iterable[Cell], seconds: Callable[[Cell], float]) -> list[Cell]:
    """The cells by expected cost, longest first; equal costs keep their order."""
    return sorted(cells, key=seconds, reverse=True)


def next_cell(todo: collections.deque, running: list[Cell]) -> tuple[Cell, int]:
    """Take the first cell to run that shares no cached model with a cell in progress,
    else the first: a worker would wait for the other's training (its lock:
    benchmarks.atomic.building) instead of computing. ``todo`` holds (cell, anything)."""
    taken = {cached_model(cell) for cell in running} - {None}
    for index, (cell, deaths) in enumerate(todo):
        if cached_model(cell) not in taken:
            del todo[index]
            return cell, deaths
    return todo.popleft()


def cached_model(cell: Cell) -> tuple[str, str, int] | None:
    """The cached model a cell trains or loads, by its dataset and seed; None if none."""
    model = get_method(cell.method).cached_model
    return (model, cell.dataset, cell.seed) if model else None


class Durations:
    """Each cell's expected wall time on this host: its own time and, when it is the first
    to train a cached model its record would not show, that training
    (cell_costs.cold_model_seconds) once for its dataset and seed."""

    def __init__(self, own: dict[str, float], cold: dict[str, float]) -> None:
        self.own, self.cold = own, cold  # by cell_id

    def of(self, cell: Cell, built: set) -> float:
        """The cell's time when the cached models in ``built`` exist; adds its own to
        ``built`` when it trains one."""
        extra = self.cold.get(cell.cell_id, 0.0)
        if extra and cached_model(cell) not in built:
            built.add(cached_model(cell))
            return self.own[cell.cell_id] + extra
        return self.own[cell.cell_id]


def simulate(order: list[Cell], durations: Durations, slots: int,
             running: Iterable[tuple[float, Cell]] = (), built: set | None = None) -> float:
    """The expected seconds until the last cell ends, ``slots`` cells at a time, each free
    slot taking the next cell as the local workers do (``next_cell``), after ``running``
    (each cell with its seconds left) and with the cached models in ``built``."""
    built = set(built or ())
    ends = [(left, index, cell) for index, (left, cell) in enumerate(running)]
    heapq.heapify(ends)
    todo = collections.deque((cell, None) for cell in order)
    now, count = 0.0, len(ends)
    while todo or ends:
        while todo and len(ends) < slots:
            cell, _ = next_cell(todo, [c for _, _, c in ends])
            heapq.heappush(ends, (now + durations.of(cell, built), count, cell))
            count += 1
        now, _, _ = heapq.heappop(ends)
    return now


class Forecast:
    """The wall time left of a run that starts ``order``'s cells ``slots`` at a time: the
    cells in progress for their expected time less the time they have run (at least
    nothing), then the rest as ``simulate`` schedules them. Executors say when a cell
    starts; the runner says when one finishes."""

    def __init__(self, order: list[Cell], durations: Durations, slots: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.durations, self.slots, self.clock = durations, slots, clock
        self.pending = {cell.cell_id: cell for cell in order}  # in order
        self.running: dict[str, tuple[Cell, float, float]] = {}  # cell, start, duration
        self.built: set = set()

    def started(self, cell: Cell) -> None:
        if self.pending.pop(cell.cell_id, None) is not None:
            self.running[cell.cell_id] = (cell, self.clock(),
                                          self.durations.of(cell, self.built))

    def finished(self, cell: Cell) -> None:
        self.pending.pop(cell.cell_id, None)
        self.running.pop(cell.cell_id, None)

    def left(self) -> float:
        now = self.clock()
        running = [(max(duration - (now - start), 0.0), cell)
                   for cell, start, duration in self.running.values()]
        return simulate(list(self.pending.values()), self.durations, self.slots, running,
                        self.built)
