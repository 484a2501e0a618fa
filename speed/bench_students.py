"""Accuracy and time of PATE's student in each mode (methods.nn.ssgan) on Fashion-MNIST,
with synthetic noisy labels standing in for the teachers' aggregator.

The PATE++ setup: the student trains on the first 9,000 test images, of which 2,200 (a
seeded random subset) are labelled, and is tested on the last 1,000. Each label is flipped
to a uniformly drawn other class with probability ``--flip`` (0.2): label noise of the
order the paper's aggregator produces, for measurement only. The paper reports 76-79% at
its noise level (PATE++ Tables 1-2). Prints, per mode: test accuracy of D1, D2 and their
averaged probabilities, wall and CPU time, and for PATE++ how many moved labels were wrong.

    python -m speed.bench_students [--epochs 10] [--modes pate co-teaching ...]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

MODES = ("pate", "co-teaching", "co-teaching-plus", "pate-plus-plus")


def noisy_split(flip: float, labelled: int, public: int, seed: int):
    """(x_labelled, noisy labels, true labels, x_unlabelled, x_test, y_test)."""
    from benchmarks import datasets

    test = datasets.load("fashion-mnist").test
    rng = np.random.default_rng(seed)
    queried = np.sort(rng.choice(public, labelled, replace=False))
    rest = np.setdiff1d(np.arange(public), queried)
    truth = test.y[queried]
    flipped = rng.random(labelled) < flip
    noisy = np.where(flipped, (truth + rng.integers(1, 10, labelled)) % 10, truth)
    return (test.x[queried], noisy, truth, test.x[rest], test.x[public:public + 1000],
            test.y[public:public + 1000])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--epochs", type=int, default=10, help="per phase (PATE++ has two)")
    parser.add_argument("--learning-rate", type=float, default=0.003)
    parser.add_argument("--beta", type=float, default=0.2)
    parser.add_argument("--ramp-epochs", type=int, default=15)
    parser.add_argument("--tau", type=float, default=0.2)
    parser.add_argument("--flip", type=float, default=0.2)
    parser.add_argument("--labelled", type=int, default=2200)
    parser.add_argument("--public", type=int, default=9000)
    parser.add_argument("--width", default="paper", choices=("paper", "small"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose", action="store_true", help="print every epoch")
    args = parser.parse_args(argv)

    from methods.nn import ssgan

    x_l, y_l, truth, x_u, x_test, y_test = noisy_split(args.flip, args.labelled,
                                                       args.public, args.seed)
    print(f"Fashion-MNIST student: {len(x_l)} labelled ({np.mean(y_l != truth):.1%} wrong), "
          f"{len(x_u)} unlabelled, {len(x_test)} test; {args.epochs} epochs per phase, "
          f"lr {args.learning_rate}, beta {args.beta}, ramp {args.ramp_epochs}, "
          f"tau {args.tau}, width {args.width}; {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{'mode':18s} {'D1':>6s} {'D2':>6s} {'avg':>6s} {'wall s':>7s} {'cpu s':>7s}  notes")
    for mode in args.modes:
        wall, cpu = time.perf_counter(), time.process_time()
        student = ssgan.train_student(
            x_l, y_l, x_u, 10, mode=mode, epochs=args.epochs,
            learning_rate=args.learning_rate, beta=args.beta, ramp_epochs=args.ramp_epochs,
            tau=args.tau, seed=args.seed, width=args.width,
            progress=print if args.verbose else lambda message: None)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        reports = ("d1",) if mode == "pate" else ssgan.REPORTS
        accuracy = {r: np.mean(dataclasses.replace(student, report=r).predict_proba(x_test)
                               .argmax(1) == y_test) for r in reports}
        cells = " ".join(f"{accuracy[r]:6.1%}" if r in accuracy else f"{'-':>6s}"
                         for r in ssgan.REPORTS)
        notes = ""
        if len(student.moved_to_unlabelled):
            moved = student.moved_to_unlabelled
            left = np.delete(np.arange(len(x_l)), moved)
            notes = (f"moved {len(moved)}, {np.mean(y_l[moved] != truth[moved]):.0%} of them "
                     f"wrong; labels left {np.mean(y_l[left] != truth[left]):.1%} wrong")
        print(f"{mode:18s} {cells} {wall:7.0f} {cpu:7.0f}  {notes}", flush=True)


if __name__ == "__main__":
    main()
