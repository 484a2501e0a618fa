"""Where cells run: what every executor shares, and the command line that picks one.

- local, one worker: one cell after another in the command's own process
  (runner.run_locally);
- local, several workers: cells side by side, each in a worker process of its own
  (benchmarks.worker_pool);
- Ray: every cell as a Ray task (benchmarks.ray_executor).

Whatever runs a cell, it computes on the same thread count (OMP_NUM_THREADS, 1 unless
the user sets it: benchmarks/__init__.py), so its record has the same bits; a worker
process trains its cells with runner.train_in_worker; and a cell whose worker died on
every try gets the failed record of runner.lost_cell.
"""
from __future__ import annotations

import argparse
import os

from benchmarks.errors import InputError

DEFAULT_RETRIES = 3  # Ray's own default for tasks whose worker dies
RAY_OPTIONS = ("--address", "--cpus-per-cell", "--gpus-per-cell")


def default_workers() -> int:
    """One worker per core, each computing on the cells' thread count."""
    from benchmarks.tf_runtime import cpu_threads

    return max(1, len(os.sched_getaffinity(0)) // cpu_threads())


def add_executor_arguments(run: argparse.ArgumentParser) -> None:
    where = run.add_argument_group(
        "where cells run", "Every cell computes on one thread (OMP_NUM_THREADS, if set, "
                           "gives another count), whatever runs it: its record has the "
                           "same bits locally, on Ray and in the archive.")
    where.add_argument("--executor", choices=("local", "ray"), default="local",
                       help="local: cells side by side in --workers processes of this "
                            "machine (default); ray: every cell as a Ray task")
    where.add_argument("--workers", type=int, metavar="N",
                       help="cells the local executor runs at a time, each in a worker "
                            "process of its own; 1 runs one after another in this process "
                            f"(default: the cores over the threads a cell, here "
                            f"{default_workers()})")
    where.add_argument("--address", metavar="ADDR",
                       help="join the Ray cluster at ADDR (host:port, ray://host:port or "
                            "auto); default: $RAY_ADDRESS, else a new local Ray instance")
    where.add_argument("--cpus-per-cell", type=float, metavar="C",
                       help="CPUs Ray reserves for each cell (default: the threads a cell)")
    where.add_argument("--gpus-per-cell", type=float, metavar="G",
                       help="GPUs Ray reserves for each cell, fractions allowed (default: 0)")
    where.add_argument("--max-retries", type=int, metavar="N",
                       help="times a cell runs again when its worker process dies (local "
                            "workers or Ray), before it is recorded as failed "
                            f"(default: {DEFAULT_RETRIES})")


def executor_from(args: argparse.Namespace):
    """The executor the command line asks for; None is one cell after another in this
    process."""
    given = {flag: getattr(args, flag[2:].replace("-", "_")) for flag in RAY_OPTIONS}
    given = {flag: value for flag, value in given.items() if value is not None}
    if args.max_retries is not None and args.max_retries < 0:
        raise InputError(f"--max-retries must be >= 0, got {args.max_retries}")
    retries = {} if args.max_retries is None else {"max_retries": args.max_retries}
    if args.executor == "ray":
        if args.workers is not None:
            raise InputError("--workers needs --executor local (Ray runs as many cells at "
                             "a time as its CPUs allow)")
        from benchmarks.ray_executor import RayExecutor

        return RayExecutor(**{flag[2:].replace("-", "_"): value
                              for flag, value in given.items()}, **retries)
    if given:
        raise InputError(f"{next(iter(given))} needs --executor ray")
    workers = default_workers() if args.workers is None else args.workers
    if workers < 1:
        raise InputError(f"--workers must be >= 1, got {workers}")
    if workers == 1:
        if retries:
            raise InputError("--max-retries needs --workers 2 or more, or --executor ray "
                             "(one worker runs cells in this process)")
        return None
    from benchmarks.worker_pool import WorkerPool

    return WorkerPool(workers, **retries)
