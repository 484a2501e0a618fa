"""Speed of RRWithPrior, vectorised, against a per-example Python loop; and the time of
an LP-1ST epoch against the same model and training on the true labels.

    python -m speed.bench_rr_with_prior [--n 1000000] [--num-classes 100]
                                             [--epoch-dataset mnist] [--epochs 2]

The loop is timed on a subset of rows and extrapolated linearly to N (its cost per row does
not depend on N). The epoch comparison trains LP-1ST and the non-private method with the
same model, batch, schedule and mixup, so only the privacy machinery differs; it is
skipped with --epochs 0. Only that part imports TensorFlow.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from benchmarks.privacy import Ledger
from benchmarks.privacy.randomizers import rr_with_prior


def rr_with_prior_loop(labels, priors, epsilon, rng) -> np.ndarray:
    """RRWithPrior one example at a time, written from the definition (the baseline)."""
    out = np.empty(len(labels), dtype=np.intp)
    for i, (label, prior) in enumerate(zip(labels, priors)):
        order = np.argsort(-prior, kind="stable")
        steps = np.arange(len(prior))
        w = np.cumsum(prior[order]) / (1.0 + steps * np.exp(-epsilon))
        k = len(prior) - np.argmax(w[::-1])  # largest maximiser, as in the mechanism
        top = order[:k]
        dist = np.zeros(len(prior))
        if label in top:
            dist[top] = 1.0 / (np.exp(epsilon) + k - 1)
            dist[label] = np.exp(epsilon) / (np.exp(epsilon) + k - 1)
        else:
            dist[top] = 1.0 / k
        out[i] = rng.choice(len(prior), p=dist)
    return out


def _timed_runs(fn, repeats: int) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each of `repeats` runs, in order: the first is the cold one.

    On a shared machine the process's CPU time is the better estimate of an unloaded wall
    time (the mechanism is single-threaded numpy).
    """
    runs = []
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        runs.append((time.perf_counter() - wall, time.process_time() - cpu))
    return runs


def time_rr_with_prior(n: int, k: int, seed: int, epsilon: float = 2.0,
                       loop_rows: int = 20_000, repeats: int = 3) -> dict:
    """Time rr_with_prior on n Dirichlet(1) float32 priors over k classes (the dtype a
    model's softmax gives): its first call in this process and its best, and the loop on
    loop_rows."""
    if n < 1 or k < 2 or not 1 <= loop_rows <= n or repeats < 1:
        raise ValueError(f"need n >= 1, k >= 2, 1 <= loop_rows <= n and repeats >= 1; "
                         f"got n={n}, k={k}, loop_rows={loop_rows}, repeats={repeats}")
    rng = np.random.default_rng(seed)
    priors = rng.dirichlet(np.ones(k), size=n).astype(np.float32)
    labels = rng.integers(0, k, n)
    everyone = np.arange(n)
    runs = _timed_runs(lambda: rr_with_prior(Ledger(), labels, priors, epsilon, rng,
                                             examples=everyone), repeats)
    (first, first_cpu), (vectorised, vectorised_cpu) = runs[0], min(runs)
    [(loop, loop_cpu)] = _timed_runs(
        lambda: rr_with_prior_loop(labels[:loop_rows], priors[:loop_rows], epsilon, rng), 1)
    scale = n / loop_rows
    return {"n": n, "num_classes": k, "epsilon": epsilon, "seed": seed, "repeats": repeats,
            "first_call_seconds": first, "first_call_cpu_seconds": first_cpu,
            "vectorised_seconds": vectorised, "vectorised_cpu_seconds": vectorised_cpu,
            "loop_rows": loop_rows, "loop_seconds": loop, "loop_cpu_seconds": loop_cpu,
            "loop_seconds_extrapolated": loop * scale,
            "loop_cpu_seconds_extrapolated": loop_cpu * scale,
            "speedup": loop * scale / vectorised}


def print_rr_with_prior(result: dict) -> None:
    print(f"rr_with_prior, N = {result['n']:,}, K = {result['num_classes']}, "
          f"epsilon = {result['epsilon']}, Dirichlet(1) float32 priors, seed {result['seed']}")
    print(f"  first call:        {result['first_call_seconds']:8.3f} s wall, "
          f"{result['first_call_cpu_seconds']:8.3f} s CPU (the call LP-MST makes per stage)")
    print(f"  vectorised:        {result['vectorised_seconds']:8.3f} s wall, "
          f"{result['vectorised_cpu_seconds']:8.3f} s CPU (best of {result['repeats']})")
    print(f"  per-example loop:  {result['loop_seconds_extrapolated']:8.3f} s wall, "
          f"{result['loop_cpu_seconds_extrapolated']:8.3f} s CPU, extrapolated linearly "
          f"from {result['loop_seconds']:.3f} s wall on {result['loop_rows']:,} rows")
    print(f"  speed-up:          {result['speedup']:8.1f} x (wall)")
    print(f"  load average:      {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def time_lp1st_epoch(dataset: str, epochs: int, epsilon: float, seed: int,
                     repeats: int) -> dict:
    """Seconds per epoch of LP-1ST and of non-private training with the same settings:
    steady state (epoch 2 on, after graph tracing) and the whole fit per epoch (model
    build, RRWithPrior and tracing included)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    from benchmarks import datasets
    from benchmarks.contract import Budget, Split
    from methods.lp_mst import LP1ST, per_epsilon_settings
    from methods.non_private import NonPrivate

    data = datasets.load(dataset)
    mixup = per_epsilon_settings(epsilon)[0]
    # TensorFlow's one-time start-up would otherwise be charged to the first method.
    NonPrivate(Budget(float("inf")), seed=seed, epochs=1).fit(
        Split(data.train.x[:256], data.train.y[:256]), data.num_classes)
    steady: dict[str, float] = {}
    whole: dict[str, float] = {}
    for _ in range(repeats):  # alternate the two, keep each one's best: the machine is noisy
        for label, method in (("non-private", NonPrivate(Budget(float("inf")), seed=seed)),
                              ("lp-1st", LP1ST(Budget(epsilon), seed=seed))):
            method.hparams.update(epochs=epochs, mixup_alpha=mixup)
            epoch_ends: list[float] = []
            method.progress = lambda message: epoch_ends.append(time.perf_counter())
            start = time.perf_counter()
            method.fit(data.train, data.num_classes)
            whole[label] = min(whole.get(label, np.inf), (time.perf_counter() - start) / epochs)
            steady[label] = min(steady.get(label, np.inf),
                                (epoch_ends[-1] - epoch_ends[0]) / (len(epoch_ends) - 1))
    return {"dataset": dataset, "epochs": epochs, "epsilon": epsilon, "mixup_alpha": mixup,
            "repeats": repeats,
            "steady": steady, "whole": whole,
            "ratio_steady": steady["lp-1st"] / steady["non-private"],
            "ratio_whole": whole["lp-1st"] / whole["non-private"]}


def print_lp1st_epoch(result: dict) -> None:
    steady, whole = result["steady"], result["whole"]
    print(f"training epochs on {result['dataset']}, same model, batch, schedule and mixup "
          f"(alpha {result['mixup_alpha']}), {result['epochs']} epochs each, best of "
          f"{result['repeats']} alternating runs")
    print("                               steady s/epoch   whole fit s/epoch")
    print(f"  non-private, true labels:    {steady['non-private']:10.2f} {whole['non-private']:18.2f}")
    print(f"  LP-1ST, epsilon {result['epsilon']:<5}:       {steady['lp-1st']:10.2f} {whole['lp-1st']:18.2f}")
    print(f"  ratio LP-1ST / non-private:  {result['ratio_steady']:10.3f} {result['ratio_whole']:18.3f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="rows (examples)")
    parser.add_argument("--num-classes", type=int, default=100, help="classes K")
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loop-rows", type=int, default=20_000,
                        help="rows on which the per-example loop is timed")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of the vectorised call; the best is reported")
    parser.add_argument("--epoch-dataset", default="mnist",
                        help="dataset of the LP-1ST epoch comparison")
    parser.add_argument("--epochs", type=int, default=3,
                        help="epochs timed per method, at least 2 (0 skips the comparison)")
    args = parser.parse_args(argv)
    if args.epochs == 1:
        parser.error("--epochs must be 0 or at least 2 (epoch 1 includes graph tracing)")
    print_rr_with_prior(time_rr_with_prior(args.n, args.num_classes, args.seed, args.epsilon,
                                           args.loop_rows, args.repeats))
    if args.epochs > 0:
        print_lp1st_epoch(time_lp1st_epoch(args.epoch_dataset, args.epochs, args.epsilon,
                                           args.seed, args.repeats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
