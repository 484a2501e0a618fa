"""Longest first: the local workers and Ray start the pending cells by their expected
cost, the longest first (fake cost tables, no training); the schedule's arithmetic and the
progress bar's time left. That the order changes no record is tests/test_smoke_suite.py's
and tests/test_ray_executor.py's: their runs start cells in this order."""
from __future__ import annotations

import collections
import io
import multiprocessing
import threading
import types

import psutil
import pytest

from benchmarks import datasets, estimate, host_speed, ray_executor, runner, worker_pool
from benchmarks.cell_costs import COLD_MODEL_SECONDS, CostTable, Timing
from benchmarks.host_speed import HostSpeed
from benchmarks.ray_executor import RayExecutor
from benchmarks.schedule import Durations, Forecast, longest_first, next_cell, simulate
from benchmarks.suites import load_suite
from benchmarks.worker_pool import WorkerPool
from test_runner import write_suite  # the runner tests' 4-cell suite


def fake_costs(cells: list, seconds: list[float]) -> CostTable:
    """A cost table that knows exactly these cells, each at its seconds."""
    return CostTable(Timing(cell.cell_id, cell.config_id, cell.audit, cell.method,
                            cell.dataset, s) for cell, s in zip(cells, seconds))


def not_trained(cell, data_dir, progress=None):
    """A worker's task that trains nothing: the failed record of a lost cell."""
    return runner.lost_cell(cell, "not trained: a test of the order")


class InThread:
    """A local worker serving its cell in a thread of this process: the pool's dispatch,
    without a process to start."""

    def __init__(self, task, data_dir) -> None:
        self.conn, theirs = multiprocessing.Pipe()

        def serve() -> None:
            cell = theirs.recv()
            theirs.send(("record", task(cell, data_dir)))

        threading.Thread(target=serve, daemon=True).start()

    def stop(self, now: bool) -> None:
        self.conn.close()


class FakeRay:
    """The Ray calls the executor makes, in this process; tasks end in the order they
    were submitted."""

    def __init__(self) -> None:
        self.submitted, self.tasks = [], []

    def remote(self, **options):
        return lambda task: types.SimpleNamespace(
            remote=lambda cell, data_dir: self._submit(task, cell, data_dir))

    def _submit(self, task, cell, data_dir) -> int:
        self.submitted.append(cell)
        self.tasks.append((task, cell, data_dir))
        return len(self.tasks) - 1  # the task's reference

    def is_initialized(self) -> bool:
        return True

    def cluster_resources(self) -> dict:
        return {"CPU": 2.0}

    def wait(self, refs, num_returns):
        return refs[:num_returns], refs[num_returns:]

    def get(self, ref):
        task, cell, data_dir = self.tasks[ref]
        return task(cell, data_dir)


SECONDS = (10.0, 40.0, 20.0, 30.0)  # the four cells' fake costs, out of suite order


@pytest.fixture
def suite(tmp_path):
    """The runner tests' suite of four cells."""
    return load_suite(write_suite(tmp_path))


def by_cost(cells) -> list:
    """The cells at SECONDS, the longest first."""
    cost = dict(zip((c.cell_id for c in cells), SECONDS))
    return sorted(cells, key=lambda cell: cost[cell.cell_id], reverse=True)


def durations(cells, seconds=SECONDS) -> Durations:
    return Durations({cell.cell_id: s for cell, s in zip(cells, seconds)}, {})


@pytest.fixture
def starts(monkeypatch):
    """The cells in the order executors say they start them."""
    started = []
    monkeypatch.setattr(estimate.ForecastBar, "started",
                        lambda bar, cell: started.append(cell))
    return started


def no_calibration(slots):
    raise AssertionError("a run expected to be this short is not calibrated")


def test_the_local_workers_start_the_longest_cells_first(tmp_path, monkeypatch, suite,
                                                          starts):
    monkeypatch.setattr(worker_pool, "_Worker", InThread)
    assert runner.run(suite, tmp_path / "results", datasets.data_dir(), echo=print,
                      executor=WorkerPool(2, task=not_trained),
                      costs=fake_costs(suite.cells, SECONDS), calibrate=no_calibration) == 4
    assert starts == by_cost(suite.cells) != list(suite.cells)


def test_ray_is_given_the_longest_cells_first(tmp_path, monkeypatch, suite, starts):
    ray = FakeRay()
    monkeypatch.setattr(ray_executor, "_ray", lambda: ray)
    assert runner.run(suite, tmp_path / "results", datasets.data_dir(), echo=print,
                      executor=RayExecutor(task=not_trained),
                      costs=fake_costs(suite.cells, SECONDS), calibrate=no_calibration) == 4
    assert ray.submitted == starts == by_cost(suite.cells)


def test_one_worker_keeps_the_suite_order(tmp_path, monkeypatch, suite, starts):
    """In this process the order cannot shorten the run, and consecutive cells of a
    dataset share its arrays."""
    monkeypatch.setattr(runner, "run_cell",
                        lambda cell, data, context: not_trained(cell, data_dir=None))
    runner.run(suite, tmp_path / "results", datasets.data_dir(), echo=print,
               costs=fake_costs(suite.cells, SECONDS), calibrate=no_calibration)
    assert starts == list(suite.cells)


def test_the_schedule_replays_the_workers_choice(suite):
    cells = list(suite.cells)  # 10, 40, 20, 30 s
    # Suite order on 2 slots: 10 | 40, then 20 at 10 (ends 30), 30 at 30 (ends 60).
    assert simulate(cells, durations(cells), 2) == 60
    # Longest first: 40 | 30, then 20 at 30 (ends 50), 10 at 40 (ends 50).
    assert simulate(by_cost(cells), durations(cells), 2) == 50
    assert simulate(cells, durations(cells), 1) == 100
    assert simulate(cells, durations(cells), 4) == 40
    # After cells in progress with 5 s and 25 s left: 20 s at 5, 30 s at 25.
    running = [(5.0, cells[0]), (25.0, cells[1])]
    assert simulate(cells[2:], durations(cells), 2, running) == 55
    assert longest_first(cells, lambda cell: 1.0) == cells  # ties keep their order


def test_a_cached_model_is_trained_once_and_its_cells_wait_for_it():
    """PATE's teachers: the first of its dataset and seed's cells to start pays for them,
    and while it runs the other slot takes other work (the local workers' next_cell);
    the audited twin trains its own, which its record already counts."""
    quick = load_suite("quick")
    pate = [c for c in quick.cells if c.method.startswith("pate") and not c.audit][:2]
    twin = next(c for c in quick.cells if c.method.startswith("pate") and c.audit)
    other = next(c for c in quick.cells if c.method == "non-private")
    teachers = COLD_MODEL_SECONDS["PATE's teachers"]
    durations = Durations({pate[0].cell_id: 10.0, pate[1].cell_id: 10.0, twin.cell_id: 10.0,
                           other.cell_id: 200.0}, {c.cell_id: teachers for c in pate})
    assert simulate(pate, durations, 1) == 10 + teachers + 10
    assert simulate([twin, pate[0]], durations, 1) == 10 + 10 + teachers
    built = {("PATE's teachers", pate[0].dataset, pate[0].seed)}
    assert simulate(pate, durations, 1, built=built) == 20
    # On two slots the second PATE cell lets the 200 s cell go first, and starts when
    # the first has trained the teachers: 200 s in all, not 10 + 200.
    assert simulate([pate[0], pate[1], other], durations, 2) == 200


def test_cells_sharing_a_cached_model_start_side_by_side_only_when_nothing_else_is_left():
    quick = load_suite("quick")
    pate = [c for c in quick.cells if c.method.startswith("pate") and not c.audit]
    twin = next(c for c in quick.cells if c.method.startswith("pate") and c.audit)
    other = next(c for c in quick.cells if c.method == "dp-sgd")
    todo = collections.deque([(pate[1], 0), (other, 0), (twin, 0)])
    assert next_cell(todo, [pate[0]]) == (other, 0)  # the teachers are training
    assert next_cell(todo, [pate[0]]) == (pate[1], 0)  # nothing else: it waits for them
    assert next_cell(todo, [other]) == (twin, 0)


def test_the_time_left_counts_down_from_the_costs(suite):
    cells = by_cost(suite.cells)  # 40, 30, 20, 10 s
    now = [0.0]
    forecast = Forecast(cells, durations(suite.cells), 2, clock=lambda: now[0])
    assert forecast.left() == 50
    forecast.started(cells[0])
    forecast.started(cells[1])
    now[0] = 12.0  # 28 s and 18 s left, then 20 s at 30, 10 s at 40
    assert forecast.left() == 38
    now[0] = 31.0  # the 30 s cell finished a second late; the 40 s one has 9 s left
    forecast.finished(cells[1])
    forecast.started(cells[2])
    assert forecast.left() == 20  # 20 s from now, 10 s after the 40 s cell: 19
    now[0] = 100.0  # cells past their expected time are expected to end now
    assert forecast.left() == 10
    bar = estimate.ForecastBar(forecast, total=4, file=io.StringIO())
    assert "about 00:10 left" in bar.format_meter(**bar.format_dict)
    bar.close()


def test_the_estimate_scales_the_costs_by_the_calibration(suite):
    cells = list(suite.cells)
    host = HostSpeed(slowdown=2.0, startup_s=5.0, calibration_s=3.0)
    asked = []

    def calibrate(slots):
        asked.append(slots)
        return host

    costs = fake_costs(cells, [s * 10 for s in SECONDS])  # 100 to 400 s
    found = estimate.expect(cells, 2, worker_each=True, warm=set(), costs=costs,
                            calibrate=calibrate)
    assert asked == [2] and found.order == by_cost(cells)
    # Each cell twice its cost plus a start-up: 805 | 605, 405 at 605, 205 at 805.
    assert found.seconds == 1010
    line = found.describe()
    assert line.startswith("expected: 16.8 min on 2 worker(s), an estimate")
    assert "4 cell(s) from their own records" in line and "2.00x" in line
    # In this process: no worker to start, one cell at a time.
    alone = estimate.expect(cells, 1, worker_each=False, warm=set(), costs=costs,
                            calibrate=calibrate)
    assert alone.seconds == 2 * 1000


def test_a_short_run_is_not_calibrated(suite):
    found = estimate.expect(list(suite.cells), 2, worker_each=False, warm=set(),
                            costs=fake_costs(suite.cells, SECONDS),
                            calibrate=no_calibration)
    assert found.seconds == 50 and "not calibrated" in found.describe()


@pytest.mark.integration
def test_the_calibration_measures_this_host_and_leaves_no_process():
    """Two fresh processes side by side, as two workers would run: a slowdown against the
    reference host and a worker's start-up, both of this machine kind's order."""
    speed = host_speed.calibrate(2)
    assert 0.25 < speed.slowdown < 4 and 0.5 < speed.startup_s < 60
    assert speed.calibration_s > speed.startup_s
    assert not [child for child in psutil.Process().children()  # but multiprocessing's
                if "resource_tracker" not in " ".join(child.cmdline())]  # own helper
