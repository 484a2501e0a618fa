"""The cost model of ``make bench`` (the quick suite on two workers, then the report):
its expected time at the archive's speed and at half of it, against the 40-minute goal.

From each cell's cost on the reference host (benchmarks.cell_costs: the archive's wall
times of the cell, AMD EPYC) and the schedule the executors follow
(benchmarks.schedule), for the archive's speed (1x) and half of it (0.5x: every cell,
PATE's teachers and every worker's start-up twice as long) prints

- the cells' summed time: their own, a worker's start-up each
  (host_speed.REFERENCE_STARTUP_S at 1x) and PATE's teachers, trained once;
- the schedule's wall time on ``--workers`` in the suite file's order (how the local
  workers started cells before) and longest first (how they start them now);
- the expected ``make bench`` time: longest first, plus SETUP_AND_REPORT_S, and whether
  it fits 40 minutes.

Then the longest cells, with what their cost is from. It is a model: the figures are
estimates from the archived wall times, not measurements.

``--calibrate N`` measures, N times, what host_speed.REFERENCE_STEP_SECONDS is derived
from: the quick suite's non-private MNIST cell (the calibration's network, trained as the
cell trains it) in ``--workers`` fresh processes side by side, in processor time, then
this host's calibration (benchmarks.host_speed) the same way. The calibration's step
times the cell's archived wall time over its processor time here is the step the
archive's host would have measured: a ratio of two measurements under the same load,
so a busy host gives it too.

    python -m speed.bench_make_bench
    python -m speed.bench_make_bench --suite old-quick.toml   # a suite file's model
    python -m speed.bench_make_bench --calibrate 3
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

GOAL_S = 40 * 60
SPEEDS = (1.0, 0.5)  # of the archive's
# Everything in `make bench` but the suite's run: the venv's install from pip's cache,
# the datasets and the report. 122 s on the Xeon host of issue 58 (2,686 s in all, 2,564
# s of them the suite's run); taken as it is at both speeds.
SETUP_AND_REPORT_S = 122.0
REFERENCE_CELL = "non-private"  # the quick suite's cell whose network the calibration's is


def model(suite_name: str, workers: int) -> None:
    import collections

    from benchmarks import cell_costs, host_speed
    from benchmarks.estimate import describe_bases, on_host
    from benchmarks.schedule import longest_first, simulate
    from benchmarks.suites import load_suite

    cells = list(load_suite(suite_name).cells)
    table = cell_costs.from_archive()
    costs = {cell.cell_id: table.cost(cell) for cell in cells}
    bases = collections.Counter(cost.basis for cost in costs.values())
    print(f"suite {suite_name} on {workers} workers: {describe_bases(bases)}, on the "
          f"reference host, {cell_costs.REFERENCE_CPU}; a worker's start-up "
          f"{host_speed.REFERENCE_STARTUP_S:.1f} s at 1x; set-up and report "
          f"{SETUP_AND_REPORT_S:.0f} s\n")
    print(f"{'speed':>5} {'cell time':>10} {'suite order':>12} {'longest first':>14} "
          f"{'make bench':>11}  fits 40 min")
    order = longest_first(cells, lambda cell: costs[cell.cell_id].seconds)
    for speed in SPEEDS:
        host = host_speed.HostSpeed(1 / speed, host_speed.REFERENCE_STARTUP_S / speed, 0.0)
        durations = on_host(cells, costs, host, worker_each=True, warm=set())
        total = simulate(cells, durations, 1)
        in_order, longest = simulate(cells, durations, workers), simulate(order, durations,
                                                                         workers)
        bench = longest + SETUP_AND_REPORT_S
        print(f"{speed:>4g}x {_min(total):>10} {_min(in_order):>12} {_min(longest):>14} "
              f"{_min(bench):>11}  {'yes' if bench <= GOAL_S else 'NO'}")
    print("\nlongest cells at 1x (own time, without start-up):")
    for cell in order[:8]:
        cost = costs[cell.cell_id]
        print(f"  {cost.seconds:6.0f} s  {cell.describe():<60} from {cost.basis}")


def calibrate(rounds: int, workers: int) -> None:
    import multiprocessing

    from benchmarks import cell_costs, host_speed
    from benchmarks.suites import load_suite

    cell = next(c for c in load_suite("quick").cells if c.method == REFERENCE_CELL)
    archived = cell_costs.from_archive().cost(cell)
    print(f"{cell.describe()}: {archived.seconds:.1f} s archived ({archived.basis}); "
          f"{workers} processes side by side, processor time:")
    context = multiprocessing.get_context("spawn")
    implied = []
    for _ in range(rounds):
        conns = []
        for _ in range(workers):
            ours, theirs = context.Pipe()
            context.Process(target=_train, args=(theirs, cell)).start()
            conns.append(ours)
        trained = statistics.mean(conn.recv() for conn in conns)
        speed = host_speed.calibrate(workers)
        step = speed.slowdown * host_speed.REFERENCE_STEP_SECONDS
        implied.append(step * archived.seconds / trained)
        print(f"  the cell {trained:6.1f} s, the calibration's step {step * 1000:5.1f} ms "
              f"(start-up {speed.startup_s:4.1f} s, {speed.calibration_s:4.1f} s of wall "
              f"time): the reference host's step {implied[-1] * 1000:5.1f} ms", flush=True)
    print(f"median: {statistics.median(implied) * 1000:.1f} ms (REFERENCE_STEP_SECONDS: "
          f"{host_speed.REFERENCE_STEP_SECONDS * 1000:.1f} ms)")


def _train(conn, cell) -> None:
    """The cell's processor seconds in this fresh process, TensorFlow loaded first."""
    from benchmarks import datasets, runner
    from benchmarks.context import RunContext

    data = datasets.load(cell.dataset)
    runner.pin_threads()
    start = time.process_time()
    runner.run_cell(cell, data, RunContext(seed=cell.seed))
    conn.send(time.process_time() - start)


def _min(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="quick", help="suite name or TOML file")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--calibrate", type=int, default=0, metavar="N",
                        help="also derive the reference step time N times (see above)")
    args = parser.parse_args(argv)
    model(args.suite, args.workers)
    if args.calibrate:
        print()
        calibrate(args.calibrate, args.workers)


if __name__ == "__main__":
    main()
