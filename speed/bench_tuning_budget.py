"""What a private selection leaves each candidate: for label-dp-small-tuned's grids, the
candidate budget (the largest epsilon whose selection stays within the total) at each
law of the number of candidates, for a Gaussian candidate (DP-SGD on the small CNN) and
a pure one (LP-1ST). No training: the budget follows from the planned curves alone.

    python -m speed.bench_tuning_budget [--totals 1,4] [--means 2,3,5] [--shapes 0,0.5,1]
"""
from __future__ import annotations

import argparse
import time

from benchmarks.context import RunContext
from benchmarks.contract import Budget
from benchmarks.registry import get_method
from benchmarks.suites import load_suite
from benchmarks.tuning import PrivatelyTuned, Search

SUITE = "label-dp-small-tuned"
METHODS = ("dp-sgd", "lp-1st")
TRAINING_ROWS = 54_000  # 60,000 MNIST training rows less the 10% held out


def candidate_budget(method: str, total: float, mean: float, shape: float) -> float:
    cell = next(c for c in load_suite(SUITE).cells if c.method == method)
    search = Search(cell.search.space, mean, shape, cell.search.validation_share)
    tuned = PrivatelyTuned(get_method(method), Budget(total, cell.delta), search,
                           context=RunContext(), **cell.hparams)
    return tuned.candidate_epsilon(TRAINING_ROWS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--totals", default="1,4")
    parser.add_argument("--means", default="2,3,5")
    parser.add_argument("--shapes", default="0,0.5,1")
    args = parser.parse_args()
    floats = lambda text: [float(part) for part in text.split(",")]  # noqa: E731
    print(f"{'method':8} {'total':>5} {'mean':>4} {'shape':>5} {'candidate eps':>13} "
          f"{'share':>6}")
    start = time.perf_counter()
    for method in METHODS:
        for total in floats(args.totals):
            for mean in floats(args.means):
                for shape in floats(args.shapes):
                    budget = candidate_budget(method, total, mean, shape)
                    print(f"{method:8} {total:5g} {mean:4g} {shape:5g} {budget:13.3f} "
                          f"{budget / total:6.2f}", flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
