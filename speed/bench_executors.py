"""Throughput of table4-cpu cells on this machine: one process on every core against one
cell per core (local worker processes, or Ray), each cell on one thread.

Takes the first ``--cells`` LP cells of the table4-cpu suite, shortened to ``--epochs``
epochs so that every setting finishes in minutes, and runs them three times with
``privboard run`` into fresh results folders:

- ``--workers 1`` with OMP_NUM_THREADS set to the cores: one cell after another,
  TensorFlow and numpy on every core (what a local run did before every cell computed
  on one thread; its numbers differ from the others' in the last digits);
- ``--workers N`` (the default): as many cells at a time as there are cores, each in a
  worker process on one thread;
- ``--executor ray``: the same on Ray.

Prints each setting's wall time (workers' and Ray's start-up included), cells per hour,
the sum of the cells' own run times and each throughput against the first.

    python -m speed.bench_executors --cells 4 --epochs 4
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LP_METHODS = ("lp-1st", "lp-2st", "lp-3st")


def table4_cells(count: int, epochs: int) -> str:
    """A suite file of the first ``count`` LP cells of table4-cpu, at ``epochs`` epochs."""
    from benchmarks.suites import load_suite

    cells = [c for c in load_suite("table4-cpu").cells if c.method in LP_METHODS][:count]
    blocks = [f'[[block]]\ndatasets = ["{c.dataset}"]\nmethods = ["{c.method}"]\n'
              f"epsilons = [{c.epsilon}]\nseeds = [{c.seed}]\n"
              f"hparams = {{ epochs = {epochs}, batch_size = {c.hparams['batch_size']} }}\n"
              for c in cells]
    return 'name = "bench-executors"\n\n' + "\n".join(blocks)


def run(suite: Path, results: Path, flags: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one ``privboard run`` of the suite."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "benchmarks.cli", "run", "--suite", str(suite),
                    "--results", str(results), *flags], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def records(results: Path) -> list[dict]:
    found = [json.loads(p.read_text()) for p in sorted(results.glob("*.json"))]
    failed = [r["error"] for r in found if r["status"] != "ok"]
    if failed:
        sys.exit(f"bench_executors: a cell failed: {failed[0]}")
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=4, help="LP cells of table4-cpu")
    parser.add_argument("--epochs", type=int, default=4,
                        help="epochs per cell (the suite trains 20)")
    args = parser.parse_args(argv)
    cores = len(os.sched_getaffinity(0))
    base = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    settings = {
        f"one process, {cores} threads": (["--workers", "1"],
                                          {**base, "OMP_NUM_THREADS": str(cores)}),
        f"{cores} local workers of 1 thread": ([], base),
        f"Ray, {cores} cells of 1 thread": (["--executor", "ray"], base),
    }
    with tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp, "bench.toml")
        suite.write_text(table4_cells(args.cells, args.epochs))
        print(f"{args.cells} table4-cpu LP cells at {args.epochs} epochs, {cores} cores")
        print(f"{'setting':32s} {'wall s':>8s} {'cells/h':>8s} {'sum of cells s':>15s} threads")
        throughput = []
        for i, (name, (flags, env)) in enumerate(settings.items()):
            results = Path(tmp, f"results-{i}")
            wall = run(suite, results, flags, env)
            found = records(results)
            used = sorted({r["provenance"].get("threads") for r in found})
            throughput.append(len(found) / wall * 3600)
            print(f"{name:32s} {wall:8.1f} {throughput[-1]:8.1f} "
                  f"{sum(r['wall_time_s'] for r in found):15.1f} {used}")
    for name, cells_per_hour in list(zip(settings, throughput))[1:]:
        print(f"throughput ratio, {name} / one process: {cells_per_hour / throughput[0]:.2f}x")


if __name__ == "__main__":
    main()
