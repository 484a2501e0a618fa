"""The Ray executor: every pending cell runs as a Ray task with the resources asked for,
on a local Ray instance or on a cluster.

Who writes: the driver. A worker returns its cell's record and the driver writes it with
``write_record``, exactly as the local executor's records are written (atomically, last,
into the driver's results folder). So a results folder has one writer, workers need no
access to it, and a task that Ray retries after its worker died cannot have written
anything: a cell is recorded once. A kill of the driver loses only the cells in flight
(Ray stops its tasks with it), as a kill of a local run loses the cell in progress.

Workers read the datasets from the driver's data folder path, so on a cluster that
folder must be at the same path on every node (shared storage, or installed on each).
"""
from __future__ import annotations

import argparse
import dataclasses
import math
import os
import socket
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator

from tqdm import tqdm

from benchmarks import NUMERICS_VARIABLES, datasets
from benchmarks.context import RunContext
from benchmarks.errors import InputError, PrivboardError, one_line
from benchmarks.records import RunRecord
from benchmarks.runner import DatasetSlot, new_record, now, provenance, run_cell
from benchmarks.suites import Cell

DEFAULT_RETRIES = 3  # Ray's own default for tasks whose worker dies

# The datasets a worker process keeps between its cells.
_worker_data = DatasetSlot()


def train_cell(cell: Cell, data_dir: Path) -> RunRecord:
    """A cell in a Ray worker: the same run_cell as the local executor."""
    # TensorFlow's C++ start-up messages are noise here, as in the command itself.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from benchmarks.tf_runtime import allow_memory_growth

    allow_memory_growth()  # before the cell's first TensorFlow op; run_cell pins the threads
    return run_cell(cell, _worker_data.get(cell.dataset, data_dir),
                    RunContext(seed=cell.seed, data_dir=data_dir))


@dataclasses.dataclass
class RayExecutor:
    """Runs cells as Ray tasks on the cluster at ``address``, or on a new local Ray
    instance when there is no address (neither given nor in RAY_ADDRESS)."""

    address: str | None = None
    cpus_per_cell: float = 1.0
    gpus_per_cell: float = 0.0
    max_retries: int = DEFAULT_RETRIES
    task: Callable[[Cell, Path], RunRecord] = train_cell  # what a worker runs

    def __post_init__(self) -> None:
        for flag, value, least in (("--cpus-per-cell", self.cpus_per_cell, "> 0"),
                                   ("--gpus-per-cell", self.gpus_per_cell, ">= 0")):
            if not math.isfinite(value) or value < 0 or (value == 0 and least == "> 0"):
                raise InputError(f"{flag} must be a number {least}, got {value:g}")
        if self.max_retries < 0:
            raise InputError(f"--max-retries must be >= 0, got {self.max_retries}")
        # Like any Ray driver, a run inside `ray job submit` joins the job's cluster.
        self._address = self.address or os.environ.get("RAY_ADDRESS") or "local"
        _check_reachable(self._address)
        self._remote = self._ray_task()

    def _ray_task(self) -> Any:
        # Each cell's worker starts with the threads of the CPUs reserved for it and the
        # driver's oneDNN setting and kernel caps: results depend on them bit for bit, and
        # they are fixed when TensorFlow and numpy load. A runtime environment of its own
        # keeps Ray from reusing a worker started for other resources (Ray's own
        # OMP_NUM_THREADS is the first task's) and gives every node of a cluster the same
        # setting.
        env = {"OMP_NUM_THREADS": str(max(1, int(self.cpus_per_cell))),
               **{name: os.environ[name] for name in NUMERICS_VARIABLES}}
        try:
            return _ray().remote(num_cpus=self.cpus_per_cell, num_gpus=self.gpus_per_cell,
                                 max_retries=self.max_retries,
                                 runtime_env={"env_vars": env})(self.task)
        except ValueError as err:  # Ray's own checks, such as at most 4 decimals
            raise InputError(f"Ray refuses the resources: {one_line(err)}") from None

    def __call__(self, cells: list[Cell], data_dir: Path,
                 bar: tqdm) -> Iterator[tuple[Cell, RunRecord]]:
        if not cells:
            return
        ray = _ray()
        started = self._connect(ray)
        try:
            pending = {self._remote.remote(cell, data_dir): cell for cell in cells}
            bar.set_description("on Ray")
            while pending:
                [ref], _ = ray.wait(list(pending), num_returns=1)
                cell = pending.pop(ref)
                bar.set_postfix_str(f"{len(pending)} left; done {cell.describe()}")
                yield cell, self._record(ray, ref, cell)
        finally:
            if started:
                ray.shutdown()

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


def lost_cell(cell: Cell, error: str) -> RunRecord:
    """The failed record of a cell whose worker never returned: no device trained it."""
    record = new_record(cell, datasets.get_spec(cell.dataset).fingerprint,
                        RunContext(seed=cell.seed))
    record.error = error
    record.finished_at = now()
    record.provenance = provenance({}, device="unknown: the worker died")
    return record


RAY_OPTIONS = ("--address", "--cpus-per-cell", "--gpus-per-cell", "--max-retries")


def add_executor_arguments(run: argparse.ArgumentParser) -> None:
    where = run.add_argument_group("where cells run")
    where.add_argument("--executor", choices=("local", "ray"), default="local",
                       help="local: one cell after another in this process (default); "
                            "ray: every cell as a Ray task")
    where.add_argument("--address", metavar="ADDR",
                       help="join the Ray cluster at ADDR (host:port, ray://host:port or "
                            "auto); default: $RAY_ADDRESS, else a new local Ray instance")
    where.add_argument("--cpus-per-cell", type=float, metavar="C",
                       help="CPUs Ray reserves for each cell (default: 1)")
    where.add_argument("--gpus-per-cell", type=float, metavar="G",
                       help="GPUs Ray reserves for each cell, fractions allowed (default: 0)")
    where.add_argument("--max-retries", type=int, metavar="N",
                       help="times Ray runs a cell again when its worker dies, before the "
                            f"cell is recorded as failed (default: {DEFAULT_RETRIES})")


def executor_from(args: argparse.Namespace) -> RayExecutor | None:
    """The executor the command line asks for; None is the local one."""
    given = {flag: getattr(args, flag[2:].replace("-", "_")) for flag in RAY_OPTIONS}
    given = {flag: value for flag, value in given.items() if value is not None}
    if args.executor == "local":
        if given:
            raise InputError(f"{next(iter(given))} needs --executor ray")
        return None
    return RayExecutor(**{flag[2:].replace("-", "_"): value for flag, value in given.items()})


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
