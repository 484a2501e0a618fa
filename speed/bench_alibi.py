"""An ALIBI epoch against a non-private epoch of the same model, data, batch and schedule,
side by side in one process: only the target differs (each example's posterior given its
noisy one-hot label, computed inside the compiled train step, against its one-hot label).

    python -m speed.bench_alibi [--model small-cnn] [--dataset mnist] [--epochs 3]
        [--batch-size 1024] [--epsilon 1]

The model defaults to LabelDP-Pro's small CNN when it is registered, else the CPU CNN
(the line printed names it). The first epoch of each run traces the train step; the
figures are medians over the later epochs of ``--rounds`` alternating runs of each, in
wall time and in the process's CPU time (on a shared machine the better estimate of an
unloaded run). The goal: ALIBI within 1.2x of non-private.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the figures, not TensorFlow's start-up

import numpy as np  # noqa: E402

from benchmarks import datasets  # noqa: E402
from benchmarks.privacy import Ledger  # noqa: E402
from benchmarks.privacy.randomizers import (laplace_one_hot,  # noqa: E402
                                            one_hot_log_likelihood)

GOAL = 1.2
SETTINGS = {"peak_lr": 0.1, "warmup": 0.15, "momentum": 0.9, "weight_decay": 1e-4,
            "mixup_alpha": 0.0}


def epoch_seconds(train) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each epoch of ``train(progress)``, from its per-epoch
    progress calls."""
    marks = [(time.perf_counter(), time.process_time())]
    train(lambda message: marks.append((time.perf_counter(), time.process_time())))
    return [(b[0] - a[0], b[1] - a[1]) for a, b in zip(marks, marks[1:])]


def main(argv: list[str] | None = None) -> None:
    from methods.keras_classifier import MODELS
    from methods.alibi import posterior_cross_entropy
    from methods.nn import models, training

    parser = argparse.ArgumentParser(prog="python -m speed.bench_alibi",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="small-cnn" if "small-cnn" in MODELS else "cnn")
    parser.add_argument("--dataset", default="mnist")
    parser.add_argument("--epochs", type=int, default=3, help="per run, at least 2")
    parser.add_argument("--batch-size", type=int, default=1024)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2, help="alternating runs of each")
    args = parser.parse_args(argv)
    if args.epochs < 2:
        parser.error("--epochs must be at least 2: the first epoch traces the step")
    data = datasets.load(args.dataset)
    x, k = data.train.x, data.num_classes
    released = laplace_one_hot(Ledger(), data.train.y, k, args.epsilon,
                               np.random.default_rng(0), examples=np.arange(len(x)))
    log_likelihood = one_hot_log_likelihood(released, args.epsilon).astype(np.float32)
    common = SETTINGS | {"epochs": args.epochs, "batch_size": args.batch_size, "seed": 0}

    def build():
        training.seed_everything(0)
        return models.build(args.model, x.shape[1:], k)

    runs = {
        "non-private": lambda progress: training.fit(build(), x, data.train.y, k,
                                                     progress=progress, **common),
        "alibi": lambda progress: training.fit_targets(
            build(), x, log_likelihood, posterior_cross_entropy, progress=progress, **common),
    }
    print(f"{args.model} on {args.dataset} ({len(x)} examples), batch {args.batch_size}, "
          f"{args.epochs} epochs a run, {args.rounds} rounds; per epoch after the first")
    later: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, train in runs.items():
            later[name] += epoch_seconds(train)[1:]
    medians = {name: (statistics.median(w for w, _ in times),
                      statistics.median(c for _, c in times)) for name, times in later.items()}
    for name, (wall, cpu) in medians.items():
        print(f"{name:<12} {wall:8.2f} s wall  {cpu:8.2f} s CPU", flush=True)
    for i, what in enumerate(("wall", "CPU")):
        ratio = medians["alibi"][i] / medians["non-private"][i]
        print(f"ALIBI / non-private ({what}): {ratio:.2f}x  goal {GOAL}x: "
              f"{'met' if ratio <= GOAL else 'NOT MET'}")


if __name__ == "__main__":
    main()
