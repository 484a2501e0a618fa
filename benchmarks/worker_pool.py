"""The local executor with several workers: cells side by side on this machine, each in
a worker process of its own.

Every cell runs in a fresh worker process of its own (spawn, never a fork of a process
that may have loaded TensorFlow), so numpy and TensorFlow load there with the cells'
thread count (OMP_NUM_THREADS, inherited from the command), and nothing a process
computed before changes a cell's bits: PATE's 250 teachers trained in a process that
had run another cell first came out different from those of a fresh process. So a cell
computes the same bits as in `privboard verify`'s process or on Ray, whatever order the
cells start in. The driver hands each worker one cell, in the order given (the runner
gives the longest first: benchmarks.schedule), so two workers never run the same cell,
and the driver alone writes records, as with Ray: a worker sends back its cell's
record, and its progress messages for the bar. Two cells
that would train the same cached model (PATE's teachers) start side by side only when
no other cell is left: the second would wait for the first's cache entry. A worker
that dies (killed, out of memory) is replaced and its cell runs again, up to
``max_retries`` times, then is recorded as failed with one line. Workers end with the
driver, even when it is killed with kill -9 (each watches it), so a resumed run never
shares the machine with the workers of the killed one.
"""
from __future__ import annotations

import benchmarks.numerics  # noqa: F401  (first: see benchmarks/numerics.py)

import collections
import dataclasses
import multiprocessing
import os
import pickle
import signal
import threading
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Callable, Iterator

from benchmarks.errors import one_line
from benchmarks.estimate import ForecastBar
from benchmarks.executors import DEFAULT_RETRIES
from benchmarks.records import RunRecord
from benchmarks.runner import lost_cell, train_in_worker
from benchmarks.schedule import next_cell
from benchmarks.suites import Cell

# What a worker runs for a cell: (cell, data folder, progress) -> its record. Sent to the
# worker by pickle, so a module's function or an instance of a module's class.
Task = Callable[[Cell, Path, Callable[[str], None]], RunRecord]


@dataclasses.dataclass
class WorkerPool:
    """Runs cells in ``workers`` worker processes at a time, a fresh one for each cell."""

    workers: int
    max_retries: int = DEFAULT_RETRIES
    task: Task = train_in_worker

    @property
    def slots(self) -> int:
        return self.workers

    def __call__(self, cells: list[Cell], data_dir: Path,
                 bar: ForecastBar) -> Iterator[tuple[Cell, RunRecord]]:
        todo = collections.deque((cell, 0) for cell in cells)  # each with its deaths so far
        busy: dict[Connection, tuple[_Worker, Cell, int]] = {}
        try:
            while todo or busy:
                while todo and len(busy) < self.workers:
                    cell, deaths = next_cell(todo, [cell for _, cell, _ in busy.values()])
                    worker = _Worker(self.task, data_dir)
                    worker.conn.send(cell)
                    bar.started(cell)
                    busy[worker.conn] = (worker, cell, deaths)
                bar.set_description(f"{len(busy)} worker(s)")
                for conn in wait(list(busy)):
                    worker, cell, deaths = busy[conn]
                    try:
                        kind, value = conn.recv()
                    except EOFError:  # the worker died in its cell
                        del busy[conn]
                        why = worker.death()
                        if deaths < self.max_retries:
                            todo.appendleft((cell, deaths + 1))
                        else:
                            yield cell, lost_cell(cell, f"lost in a local worker (retries "
                                                        f"allowed: {self.max_retries}): its "
                                                        f"process {why}")
                    else:
                        if kind == "progress":
                            bar.set_postfix_str(f"{cell.describe()}: {value}")
                            continue
                        if kind == "error":  # the harness failed (a bad dataset file):
                            raise value     # the run stops, as it does in this process
                        del busy[conn]
                        worker.stop(now=False)
                        bar.set_postfix_str(f"done {cell.describe()}")
                        yield cell, value
        finally:
            for worker, _, _ in busy.values():  # interrupted: their cells are lost
                worker.stop(now=True)


class _Worker:
    def __init__(self, task: Task, data_dir: Path) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, theirs = context.Pipe()
        self.process = context.Process(target=_serve, args=(theirs, task, data_dir),
                                       daemon=True, name="privboard worker")
        self.process.start()
        theirs.close()  # the worker's end: once it dies, reading ours ends (EOFError)

    def death(self) -> str:
        """How the worker's process ended."""
        self.process.join()
        code = self.process.exitcode
        return (f"was killed by {signal.Signals(-code).name}" if code < 0
                else f"exited with code {code}")

    def stop(self, now: bool) -> None:
        self.conn.close()  # a worker still waiting for its cell reads the end and returns
        if now:
            self.process.kill()
        self.process.join(timeout=30)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


def _serve(conn: Connection, task: Task, data_dir: Path) -> None:
    """A worker's life: a cell from the driver, until it closes the pipe or dies."""
    # Ctrl-C reaches every process of the terminal's group: the driver stops the workers.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _end_with(multiprocessing.parent_process())
    try:
        cell = conn.recv()
    except EOFError:
        return
    try:
        record = task(cell, data_dir, lambda message: conn.send(("progress", message)))
    except Exception as err:  # run_cell records a cell's own errors: the harness's
        conn.send(("error", _sendable(err)))
        return
    conn.send(("record", record))


def _end_with(parent: multiprocessing.process.BaseProcess) -> None:
    """End this process as soon as ``parent`` ends, even in the middle of a cell."""

    def watch() -> None:
        wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _sendable(err: Exception) -> Exception:
    """The error itself when it pickles (the driver raises it again), else its line."""
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:  # noqa: BLE001 (an error of any kind that does not pickle)
        return RuntimeError(one_line(err))
