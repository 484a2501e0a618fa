"""The Ray executor: every pending cell runs as a Ray task with the resources asked for,
on a local Ray instance or on a cluster.

Who writes: the driver. A worker returns its cell's record and the driver writes it with
``write_record``, exactly as the local executor's records are written (atomically, last,
into the driver's results folder). So a results folder has one writer, workers need no
access to it, and a task that Ray retries after its worker died cannot have written
anything: a cell is recorded once. A kill of the driver loses only the cells in flight
(Ray stops its tasks with it), as a kill of a local run loses the cells in progress.

Workers read the datasets from the driver's data folder path, so on a cluster that
folder must be at the same path on every node (shared storage, or installed on each).
"""
from __future__ import annotations

from benchmarks.numerics import NUMERICS_VARIABLES  # first: see benchmarks/numerics.py

import collections
import dataclasses
import math
import os
import socket
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

from benchmarks.errors import InputError, PrivboardError, one_line
from benchmarks.estimate import ForecastBar
from benchmarks.executors import DEFAULT_RETRIES
from benchmarks.records import RunRecord
from benchmarks.runner import lost_cell, train_in_worker
from benchmarks.suites import Cell
from benchmarks.tf_runtime import cpu_threads


def train_cell(cell: Cell, data_dir: Path) -> RunRecord:
    """A cell in a Ray worker: the same run_cell as the local executor."""
    # TensorFlow's C++ start-up messages are noise here, as in the command itself.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return train_in_worker(cell, data_dir)


@dataclasses.dataclass
class RayExecutor:
    """Runs cells as Ray tasks on the cluster at ``address``, or on a new local Ray
    instance when there is no address (neither given nor in RAY_ADDRESS)."""

    address: str | None = None
    cpus_per_cell: float | None = None  # None: the threads a cell computes on
    gpus_per_cell: float = 0.0
    max_retries: int = DEFAULT_RETRIES
    task: Callable[[Cell, Path], RunRecord] = train_cell  # what a worker runs

    def __post_init__(self) -> None:
        if self.cpus_per_cell is None:
            self.cpus_per_cell = float(cpu_threads())
        for flag, value, least in (("--cpus-per-cell", self.cpus_per_cell, "> 0"),
                                   ("--gpus-per-cell", self.gpus_per_cell, ">= 0")):
            if not math.isfinite(value) or value < 0 or (value == 0 and least == "> 0"):
                raise InputError(f"{flag} must be a number {least}, got {value:g}")
        # Like any Ray driver, a run inside `ray job submit` joins the job's cluster.
        self._address = self.address or os.environ.get("RAY_ADDRESS") or "local"
        _check_reachable(self._address)
        self._remote = self._ray_task()

    def _ray_task(self) -> Any:
        # Each cell's worker starts with the driver's thread count, oneDNN setting and
        # kernel caps, whatever CPUs Ray reserved: results depend on them bit for bit, and
        # they are fixed when TensorFlow and numpy load. A runtime environment of its own
        # keeps Ray from giving the worker its own OMP_NUM_THREADS (the CPUs reserved) and
        # gives every node of a cluster the same setting. A fresh worker process for each
        # cell (max_calls=1), as locally: what a process computed before can change a
        # cell's bits (PATE's teachers).
        env = {name: os.environ[name] for name in NUMERICS_VARIABLES}
        try:
            return _ray().remote(num_cpus=self.cpus_per_cell, num_gpus=self.gpus_per_cell,
                                 max_retries=self.max_retries, max_calls=1,
                                 runtime_env={"env_vars": env})(self.task)
        except ValueError as err:  # Ray's own checks, such as at most 4 decimals
            raise InputError(f"Ray refuses the resources: {one_line(err)}") from None

    @property
    def slots(self) -> int | None:
        """The cells a local instance runs at a time; None on a cluster (its size
        decides)."""
        if self._address != "local":
            return None
        return max(1, int((os.cpu_count() or 1) // self.cpus_per_cell))

    def __call__(self, cells: list[Cell], data_dir: Path,
                 bar: ForecastBar) -> Iterator[tuple[Cell, RunRecord]]:
        if not cells:
            return
        ray = _ray()
        started = self._connect(ray)
        try:
            # Submitted in the order given (the runner's: the longest first), and Ray
            # starts tasks of one kind in about the order they come: the first ones are
            # taken to start now, and one more each time one ends.
            pending = {self._remote.remote(cell, data_dir): cell for cell in cells}
            waiting = collections.deque(cells)
            bar.forecast.slots = self._cells_at_a_time(ray)  # a cluster's, once joined
            for _ in range(bar.forecast.slots):
                if waiting:
                    bar.started(waiting.popleft())
            bar.set_description("on Ray")
            while pending:
                [ref], _ = ray.wait(list(pending), num_returns=1)
                cell = pending.pop(ref)
                if waiting:
                    bar.started(waiting.popleft())
                bar.set_postfix_str(f"{len(pending)} left; done {cell.describe()}")
                yield cell, self._record(ray, ref, cell)
        finally:
            if started:
                ray.shutdown()

    def _cells_at_a_time(self, ray: Any) -> int:
        have = ray.cluster_resources()
        fits = [have.get("CPU", 0) // self.cpus_per_cell]
        if self.gpus_per_cell:
            fits.append(have.get("GPU", 0) // self.gpus_per_cell)
        return max(1, int(min(fits)))

    def _connect(self, ray: Any) -> bool:
        """Join the cluster or start a local instance; True if this run must stop Ray."""
        if ray.is_initialized():  # a notebook or a test that started Ray keeps it
            return False
        address = self._address
        with warnings.catch_warnings():
            # Ray's notice of a future change to CUDA_VISIBLE_DEVICES for tasks without
            # GPUs: today's behaviour (they see none) is the one a cell needs.
            warnings.simplefilter("ignore", FutureWarning)
            try:
                # A local instance starts without the dashboard: its nine processes
                # compete with the cells for a small machine's cores.
                ray.init(address=address, **({"include_dashboard": False}
                                             if address == "local" else {}))
            except ConnectionError as err:
                raise InputError(f"cannot join the Ray cluster at {address}: "
                                 f"{one_line(err)}") from None
        if address == "local":
            self._check_fits(ray)
        return True

    def _check_fits(self, ray: Any) -> None:
        """No node ever joins a local instance, so a cell that asks for more than this
        machine has would wait forever: refuse it now."""
        have = ray.cluster_resources()
        for flag, name, asked in (("--cpus-per-cell", "CPU", self.cpus_per_cell),
                                  ("--gpus-per-cell", "GPU", self.gpus_per_cell)):
            if asked > have.get(name, 0):
                ray.shutdown()
                raise InputError(f"{flag} {asked:g} is more than this machine's Ray instance "
                                 f"has ({name}: {have.get(name, 0):g})")

    def _record(self, ray: Any, ref: Any, cell: Cell) -> RunRecord:
        try:
            return ray.get(ref)
        except ray.exceptions.RayTaskError as err:
            # run_cell makes a cell's own errors into failed records, so this is the
            # harness failing (a bad dataset file stops the run as it does locally).
            if isinstance(err.cause, PrivboardError):
                raise err.cause from None
            raise
        except ray.exceptions.RayError as err:  # the worker died, on every retry too
            return lost_cell(cell, f"lost on Ray (retries allowed: {self.max_retries}): "
                                   f"{one_line(err)}")


def _check_reachable(address: str) -> None:
    """Fail in seconds when nothing listens at a host:port address; Ray itself retries
    for minutes before it gives up."""
    host, colon, port = address.removeprefix("ray://").rpartition(":")
    if not colon or not port.isdigit():  # "local", "auto"
        return
    try:
        socket.create_connection((host, int(port)), timeout=10).close()
    except OSError as err:
        raise InputError(f"cannot join the Ray cluster at {address}: "
                         f"{err.strerror or type(err).__name__}") from None


def _ray() -> Any:
    try:
        import ray
    except ModuleNotFoundError:
        raise InputError("--executor ray needs Ray: pip install -c constraints.txt "
                         "-e '.[ray]'") from None
    return ray
