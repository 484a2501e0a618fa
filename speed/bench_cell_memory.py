"""Peak memory of the cells that train a cached model: PATE's 250 stacked teachers (with
a student) and RR with SSL priors' encoder, so that ``privboard run --workers N`` can run
such cells side by side.

Takes the suite's first cell of each method named, shortened to one epoch of each of its
trainings (the peak is reached in the first steps of each: more epochs add time, not
memory), and trains it from a cold cache (a fresh data folder that links the dataset
arrays, so that the teachers and the encoder are trained, not loaded) in a fresh
process, as a worker would, on the cells' thread count. Prints each cell's peak resident
memory (the process's maximum RSS, TensorFlow and the dataset included), twice that, and
whether two fit in this machine's memory.

    python -m speed.bench_cell_memory --suite quick
"""
from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import resource
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

GIB = 2 ** 30
# The cells and how each is shortened to one epoch of every training it does.
SHORTENED = {"pate-confident-gnmax": {"teacher_epochs": 1, "student_epochs": 1},
             "pate-plus-plus": {"teacher_epochs": 1, "student_epochs": 1},
             "rr-ssl-prior": {"encoder_epochs": 1, "epochs": 1}}


def cold_data_folder(folder: Path, dataset: str) -> Path:
    """A data folder with the dataset's verified arrays and no trained caches."""
    from benchmarks import datasets
    from benchmarks.datasets.core import cache_path

    arrays = cache_path(datasets.get_spec(dataset), datasets.data_dir())
    (folder / "cache").mkdir(parents=True)
    (folder / "cache" / arrays.name).symlink_to(arrays)
    return folder


def measure(cell, data_dir: Path, answers) -> None:
    """In a fresh process: train the cell, then send its peak RSS (bytes), whether it
    finished and its wall time."""
    from benchmarks.runner import train_in_worker

    start = time.perf_counter()
    record = train_in_worker(cell, data_dir)
    answers.put((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                 record.error or "ok", time.perf_counter() - start))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="quick")
    parser.add_argument("--methods", nargs="+", default=list(SHORTENED),
                        choices=list(SHORTENED))
    args = parser.parse_args(argv)
    import psutil

    from benchmarks.suites import load_suite
    from benchmarks.tf_runtime import cpu_threads

    total = psutil.virtual_memory().total
    context = multiprocessing.get_context("spawn")
    print(f"suite {args.suite}, one epoch of each training, {cpu_threads()} thread(s) a "
          f"cell, {total / GIB:.1f} GiB on this machine")
    print(f"{'cell':60s} {'peak GiB':>9s} {'twice':>7s} {'fits twice':>10s} {'wall s':>7s}")
    for method in args.methods:
        cell = next(c for c in load_suite(args.suite).cells
                    if c.method == method and not c.audit and not c.skip)
        cell = dataclasses.replace(cell, hparams={**cell.hparams, **SHORTENED[method]})
        with tempfile.TemporaryDirectory() as tmp:
            answers = context.Queue()
            process = context.Process(target=measure, args=(
                cell, cold_data_folder(Path(tmp), cell.dataset), answers))
            process.start()
            peak, status, wall = answers.get()
            process.join()
        if status != "ok":
            raise SystemExit(f"bench_cell_memory: {cell.describe()} failed: {status}")
        print(f"{cell.describe():60s} {peak / GIB:9.2f} {2 * peak / GIB:7.2f} "
              f"{'yes' if 2 * peak < total else 'no':>10s} {wall:7.1f}")


if __name__ == "__main__":
    main()
