"""What ``privboard run`` says before it starts: the expected wall time of the pending
cells on this host, and a progress bar whose time left comes from the same costs.

Each cell's cost on the reference host (benchmarks.cell_costs) is scaled by this host's
slowdown (benchmarks.host_speed, a calibration of a few seconds, skipped for a run
expected to take less than CALIBRATE_ABOVE_S), plus a worker's start-up for each cell
that runs in a process of its own; the run's wall time is the schedule's
(benchmarks.schedule.simulate) on as many cells at a time as the executor runs. It is an
estimate, and says from what.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Callable

from tqdm import tqdm

from benchmarks import cell_costs, host_speed
from benchmarks.schedule import Durations, Forecast, cached_model, longest_first, simulate
from benchmarks.suites import Cell

CALIBRATE_ABOVE_S = 300.0


@dataclasses.dataclass
class Estimate:
    order: list[Cell]  # longest first
    durations: Durations  # on this host
    slots: int | None  # cells at a time; None: a Ray cluster's size decides
    seconds: float  # the expected wall time of every cell (None slots: one at a time)
    speed: host_speed.HostSpeed
    bases: collections.Counter  # cells by what their cost is from

    def describe(self) -> str:
        where = (f"on {self.slots} worker(s)" if self.slots else
                 "of cell time (the Ray cluster's size decides the wall time)")
        return (f"expected: {_minutes(self.seconds)} {where}, an estimate from the "
                f"archive's wall times ({describe_bases(self.bases)}, on the reference "
                f"host, {cell_costs.REFERENCE_CPU}) {self.speed.describe()}")


def describe_bases(bases: collections.Counter) -> str:
    """How many cells' costs come from each basis (cell_costs.BASES), in its order."""
    ordered = sorted(bases.items(), key=lambda item: cell_costs.BASES.index(item[0]))
    return ", ".join(f"{count} cell(s) from {basis}" for basis, count in ordered)


def expect(cells: list[Cell], slots: int | None, worker_each: bool, warm: set,
           costs: cell_costs.CostTable | None = None,
           calibrate: Callable[[int], host_speed.HostSpeed] = host_speed.calibrate
           ) -> Estimate:
    """The estimate for ``cells`` run ``slots`` at a time, each in a worker process of its
    own if ``worker_each``, from ``costs`` (default: the archive's); the cached models in
    ``warm`` are trained already."""
    if cells and costs is None:
        costs = cell_costs.from_archive()
    found = {cell.cell_id: costs.cost(cell) for cell in cells}
    order = longest_first(cells, lambda cell: found[cell.cell_id].seconds)
    at_a_time, speed = slots or 1, host_speed.REFERENCE
    if cells and simulate(order, on_host(cells, found, speed, worker_each, warm),
                          at_a_time) >= CALIBRATE_ABOVE_S:
        speed = calibrate(at_a_time)
    durations = on_host(cells, found, speed, worker_each, warm)
    return Estimate(order, durations, slots, simulate(order, durations, at_a_time), speed,
                    collections.Counter(cost.basis for cost in found.values()))


def on_host(cells: list[Cell], costs: dict[str, cell_costs.Cost],
            speed: host_speed.HostSpeed, worker_each: bool, warm: set) -> Durations:
    """The cells' durations on a host of ``speed`` from their ``costs`` (by cell_id): a
    worker's start-up each if ``worker_each``, and the training of the cached models not
    in ``warm`` that their records do not show."""
    startup = speed.startup_s if worker_each else 0.0
    return Durations(
        {cell.cell_id: costs[cell.cell_id].seconds * speed.slowdown + startup
         for cell in cells},
        {cell.cell_id: cell_costs.cold_model_seconds(cell) * speed.slowdown
         for cell in cells if cached_model(cell) not in warm})


class ForecastBar(tqdm):
    """The run's progress bar: finished cells, and the time left from the forecast
    (benchmarks.schedule.Forecast) instead of tqdm's running mean. Executors call
    ``started`` when a cell starts."""

    def __init__(self, forecast: Forecast, **kwargs) -> None:
        self.forecast = forecast  # before tqdm's first display
        super().__init__(bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} "
                                    "[{elapsed}, about {left} left{postfix}]", **kwargs)

    @property
    def format_dict(self) -> dict:
        return {**super().format_dict,
                "left": self.format_interval(self.forecast.left())}

    def started(self, cell: Cell) -> None:
        self.forecast.started(cell)

    def finished(self, cell: Cell) -> None:
        self.forecast.finished(cell)
        self.update()


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
