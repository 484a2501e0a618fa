"""The power of the audits: for honest cells with the quick suite's own settings, the
audited epsilon at the release and from the model, each as a ratio of min(claim,
ceiling), at the default canary count.

Each row prints its goal and whether it is met (GOALS): at the release, RR-based cells and
ALIBI at least 0.7 at epsilon 1 and 0.8 at epsilon 2, DP-SGD at least 0.3 at epsilon 2;
DP-ERM, whose released weights are its model, at least 0.5 at epsilon 1 from its audit of
the weights on the canary directions. The release audit reads the labels before any training,
so ``--epochs`` may shorten the training to time the release alone; the model audit then
says less. DP-SGD's release audit needs no model (its phantom canaries touch none of the
model's weights), so ``--dp-sgd-seeds`` runs DP-SGD's release alone, at the quick suite's
setting, once per seed; a model audit of DP-SGD is the audited twin of its cell.

    python -m speed.bench_audit_power [--methods lp-1st,alibi] [--epsilons 1,2]
        [--epochs N] [--seed S] [--dp-sgd-seeds 0,1,2,3,4]
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the table, not TensorFlow's start-up

import numpy as np  # noqa: E402

from benchmarks import datasets  # noqa: E402
from benchmarks.audit import dp_sgd_release  # noqa: E402
from benchmarks.audit.training import audit_training  # noqa: E402
from benchmarks.context import RunContext  # noqa: E402
from benchmarks.contract import Budget  # noqa: E402
from benchmarks.registry import get_method  # noqa: E402
from benchmarks.suites import load_suite  # noqa: E402


# The power goals: (the audit that must reach it, {epsilon: the least ratio}).
RR_GOAL = ("at release", {1.0: 0.7, 2.0: 0.8})
GOALS = {"lp-1st": RR_GOAL, "lp-2st": RR_GOAL, "lp-3st": RR_GOAL, "rr-ssl-prior": RR_GOAL,
         "spread-lr": RR_GOAL, "alibi": RR_GOAL, "dp-sgd": ("at release", {2.0: 0.3}),
         "dp-erm-objective": ("from model", {1.0: 0.5}),
         "dp-erm-output": ("from model", {1.0: 0.5})}


def verdict(method: str, audit: str, epsilon: float, value: float) -> str:
    """The goal of ``method``'s ``audit`` at ``epsilon`` and whether ``value`` meets it."""
    where, goals = GOALS.get(method, (None, {}))
    if where != audit or epsilon not in goals:
        return ""
    return f"goal {goals[epsilon]:.1f}: {'met' if value >= goals[epsilon] else 'NOT MET'}"


def quick_cell(method: str):
    """``method``'s audited cell in the quick suite, or its first cell."""
    cells = [cell for cell in load_suite("quick").cells if cell.method == method]
    if not cells:
        raise SystemExit(f"{method} has no cell in the quick suite")
    return next((cell for cell in cells if cell.audit), cells[0])


def dp_sgd_release_power(epsilons: list[float], seeds: list[int]) -> None:
    cell = quick_cell("dp-sgd")
    h = get_method("dp-sgd").defaults | cell.hparams
    n = len(datasets.load(cell.dataset).train.y)
    print(f"\nDP-SGD at the release alone ({cell.dataset}, {n} examples, batch "
          f"{h['batch_size']}, {h['epochs']:g} epochs, delta {cell.delta:g}; "
          f"{dp_sgd_release.PHANTOMS} phantom canaries)")
    print(f"{'eps':>5} {'seed':>5} {'at release':>11} {'ratio':>6} {'correct':>8} "
          f"{'seconds':>8}")
    for epsilon in epsilons:
        ratios = []
        for seed in seeds:
            start = time.perf_counter()
            release = dp_sgd_release.audit_cell_release(cell, epsilon=epsilon, seed=seed)
            ratios.append(ratio(release["epsilon_lower_bound"], epsilon, release["ceiling"]))
            print(f"{epsilon:>5g} {seed:>5} {release['epsilon_lower_bound']:>11.3f} "
                  f"{ratios[-1]:>6.2f} {release['correct']:>4}/{release['guesses']:<3} "
                  f"{time.perf_counter() - start:>8.1f}", flush=True)
        print(f"{epsilon:>5g} median ratio {np.median(ratios):.2f}, lowest {min(ratios):.2f} "
              f"{verdict('dp-sgd', 'at release', epsilon, min(ratios))}")


def ratio(bound: float, claim: float, ceiling: float) -> float:
    return bound / min(claim, ceiling)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m speed.bench_audit_power",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--methods",
                        default="lp-1st,rr-ssl-prior,lp-3st,spread-lr,dp-erm-objective",
                        help="comma-separated methods of the quick suite")
    parser.add_argument("--epsilons", default="1,2", help="claimed epsilons, comma-separated")
    parser.add_argument("--epochs", type=int, default=None,
                        help="train this many epochs instead of the suite's")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dp-sgd-seeds", default="0,1,2,3,4",
                        help="seeds of DP-SGD's release alone (empty: skip it)")
    args = parser.parse_args(argv)
    epsilons = [float(e) for e in args.epsilons.split(",")]
    print(f"{'method':<16} {'eps':>5} {'at release':>11} {'ratio':>6} {'from model':>11} "
          f"{'ratio':>6} {'guesses':>8} {'seconds':>8}  goal")
    for method in filter(None, args.methods.split(",")):
        cell = quick_cell(method)
        dataset, hparams = cell.dataset, dict(cell.hparams)
        if args.epochs is not None and "epochs" in hparams:
            hparams["epochs"] = args.epochs
        data = datasets.load(dataset)
        for epsilon in epsilons:
            start = time.perf_counter()
            result = audit_training(method, data, Budget(epsilon, cell.delta), hparams,
                                    RunContext(seed=args.seed))
            release = result.release or {}
            at_release = release.get("epsilon_lower_bound", float("nan"))
            release_ratio = (ratio(at_release, epsilon, release["ceiling"]) if release
                             else float("nan"))
            model_ratio = ratio(result.epsilon_lower_bound, epsilon, result.ceiling)
            goal = (verdict(method, "at release", epsilon, release_ratio)
                    or verdict(method, "from model", epsilon, model_ratio))
            print(f"{method:<16} {epsilon:>5g} {at_release:>11.3f} {release_ratio:>6.2f} "
                  f"{result.epsilon_lower_bound:>11.3f} {model_ratio:>6.2f} "
                  f"{release.get('guesses', 0):>8} {time.perf_counter() - start:>8.1f}  {goal}",
                  flush=True)
    if args.dp_sgd_seeds:
        dp_sgd_release_power(epsilons, [int(s) for s in args.dp_sgd_seeds.split(",")])


if __name__ == "__main__":
    main()
