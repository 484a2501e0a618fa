"""The power of the audits: for honest cells with the quick suite's own settings, the
audited epsilon at the release and from the model, each as a ratio of min(claim,
ceiling), at the default canary count.

Goals (at the release): RR-based cells at least 0.7 at epsilon 1 and 0.8 at epsilon 2.
The release audit reads the labels before any training, so ``--epochs`` may shorten the
training to time the release alone; the model audit then says less.

    python -m speed.bench_audit_power [--methods lp-1st,rr-ssl-prior] [--epsilons 1,2]
        [--epochs N] [--seed S]
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the table, not TensorFlow's start-up

from benchmarks import datasets  # noqa: E402
from benchmarks.audit.training import audit_training  # noqa: E402
from benchmarks.context import RunContext  # noqa: E402
from benchmarks.contract import Budget  # noqa: E402
from benchmarks.suites import load_suite  # noqa: E402


def quick_settings(method: str) -> tuple[str, dict]:
    """The dataset and hyperparameters of ``method``'s first cell in the quick suite."""
    for cell in load_suite("quick").cells:
        if cell.method == method:
            return cell.dataset, dict(cell.hparams)
    raise SystemExit(f"{method} has no cell in the quick suite")


def ratio(bound: float, claim: float, ceiling: float) -> float:
    return bound / min(claim, ceiling)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m speed.bench_audit_power",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods", default="lp-1st,rr-ssl-prior,lp-3st,spread-lr",
                        help="comma-separated methods of the quick suite")
    parser.add_argument("--epsilons", default="1,2", help="claimed epsilons, comma-separated")
    parser.add_argument("--epochs", type=int, default=None,
                        help="train this many epochs instead of the suite's")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(f"{'method':<16} {'eps':>5} {'at release':>11} {'ratio':>6} {'from model':>11} "
          f"{'ratio':>6} {'guesses':>8} {'seconds':>8}")
    for method in args.methods.split(","):
        dataset, hparams = quick_settings(method)
        if args.epochs is not None and "epochs" in hparams:
            hparams["epochs"] = args.epochs
        data = datasets.load(dataset)
        for epsilon in map(float, args.epsilons.split(",")):
            start = time.perf_counter()
            result = audit_training(method, data, Budget(epsilon), hparams,
                                    RunContext(seed=args.seed))
            release = result.release or {}
            at_release = release.get("epsilon_lower_bound", float("nan"))
            release_ratio = (ratio(at_release, epsilon, release["ceiling"]) if release
                             else float("nan"))
            print(f"{method:<16} {epsilon:>5g} {at_release:>11.3f} {release_ratio:>6.2f} "
                  f"{result.epsilon_lower_bound:>11.3f} "
                  f"{ratio(result.epsilon_lower_bound, epsilon, result.ceiling):>6.2f} "
                  f"{release.get('guesses', 0):>8} {time.perf_counter() - start:>8.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
