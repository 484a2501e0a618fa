"""How often an honest audited twin is flagged, and an honest submission refused.

Each family's release at its suite's setting, exactly as private as its claim, simulated
exactly (benchmarks.audit.simulation) and judged by the audit's own code at the
family-wise level of benchmarks.audit.levels (5%):

- the Gaussian releases (GAUSSIAN: DP-SGD and ScatterNet under add/remove, DP-SGD under
  label-DP under label substitution at 2C, whose release at label-dp-small is
  LabelDP-Pro's there), 500,000 phantoms and a model of 1,000 canaries that shows each
  as the release does;
- the label releases (LABELS: RRWithPrior, binary randomized response, ALIBI's noisy
  one-hot vectors) on 1,000 label canaries, a model that memorises each released label;
- the releases checked by their noise (CHECKED: DP-ERM, PATE), a model that is
  randomized response on each canary's coin at the claim.

Then ``privboard submit``'s refusal (SUBMISSIONS): as many twins as the quick suite's
grid gives a method of the family (LP-1ST's, or DP-SGD's), the same simulated twins
judged at their share of the submission's level, and for a plugin that trains with a
watched library ("opacus": its twins audit the model alone), each record's check of the
noise the library added (its p-value exactly uniform for an honest library).

Each line: the runs flagged, their rate with its 95% Clopper-Pearson interval, and how
often each test rejected.

    nice -n 19 python -m speed.bench_false_flags [--runs 1000] [--families dp-sgd,alibi]
        [--submissions dp-sgd,lp-1st,opacus] [--seed 0]
"""
from __future__ import annotations

import argparse
import collections
import math
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the table, not TensorFlow's start-up

import numpy as np  # noqa: E402

from benchmarks import datasets  # noqa: E402
from benchmarks.audit import levels, simulation  # noqa: E402
from benchmarks.audit.dp_sgd_release import simulated_releases  # noqa: E402
from benchmarks.contract import Budget  # noqa: E402
from benchmarks.privacy import Ledger, randomizers  # noqa: E402
from benchmarks.privacy.audit_bounds import (clopper_pearson_lower,  # noqa: E402
                                             clopper_pearson_upper)
from benchmarks.registry import get_method  # noqa: E402
from benchmarks.suites import load_suite  # noqa: E402

# name -> (suite, method, dataset): the suite's audited cell.
GAUSSIAN = {
    "dp-sgd": ("label-dp-small", "dp-sgd", "mnist"),
    # LabelDP-Pro's release at label-dp-small is this one: the same sampling, noise, steps
    "dp-sgd-label-dp": ("label-dp-small", "dp-sgd-label-dp", "mnist"),
    "dp-sgd-scatternet": ("label-dp-small", "dp-sgd-scatternet", "mnist"),
}
# name -> (classes, epsilon, the release): the quick suite's label releases.
LABELS = {
    "lp-1st": (10, 2.0, lambda ledger, labels, rng, rows: randomizers.rr_with_prior(
        ledger, labels, np.full((len(labels), 10), 0.1), 2.0, rng, examples=rows)),
    "spread-lr": (2, math.log(4), lambda ledger, labels, rng, rows:
                  randomizers.randomized_response(ledger, labels, 2, math.log(4), rng,
                                                  examples=rows)),
    "alibi": (10, 1.0, lambda ledger, labels, rng, rows: randomizers.laplace_one_hot(
        ledger, labels, 10, 1.0, rng, examples=rows)),
}
CHECKED = ("dp-erm-objective", "pate-confident-gnmax")
# A submission of a method of the family's release (its twins and cells in the quick
# suite); "opacus" stands for a plugin whose twins audit the model alone and whose cells
# ran a watched library.
SUBMISSIONS = ("dp-sgd", "lp-1st", "opacus")


def gaussian(name: str):
    """(twin, what): a simulated twin of the suite's cell."""
    suite, method, dataset = GAUSSIAN[name]
    cell = next(c for c in load_suite(suite).cells
                if c.method == method and c.dataset == dataset and c.audit)
    releases, claim, neighbours, _ = simulated_releases(cell)
    claim.tradeoff()  # computed once, before the runs
    what = (f"{cell.suite} {cell.method} on {cell.dataset} at epsilon {cell.epsilon:g} "
            f"({neighbours.value}; claimed curve's epsilon {claim.epsilon():.3f})")
    return (lambda rng: simulation.gaussian_twin(rng, releases, claim, neighbours,
                                                 cell.epsilon)), what


def label(name: str):
    classes, epsilon, release = LABELS[name]
    return (lambda rng: simulation.label_twin(rng, release, classes, epsilon),
            f"quick {name}'s release at epsilon {epsilon:.3g}, {classes} classes")


def checked(name: str):
    """The quick suite's audited cell's charges: DP-ERM's from a fit, PATE's from its
    aggregation of stand-in votes (its noise checks read the charges alone)."""
    if name == "opacus":
        return (lambda rng: simulation.checked_twin(rng, Ledger(), 1.0, 1e-5, 1000),
                "a plugin's DP-SGD through Opacus at epsilon 1: its model audited alone")
    cell = next(c for c in load_suite("quick").cells if c.method == name and c.audit)
    model = get_method(name)(Budget(cell.epsilon, cell.delta), **cell.hparams)
    data = datasets.load(cell.dataset)
    if name.startswith("pate"):
        model._aggregate(np.tile([150, 100] + [0] * 8, (cell.hparams["queries"], 1)))
        canaries = 1000
    else:
        model.fit(data.train, data.num_classes)
        canaries = data.train.x.shape[1]
    ledger = model.ctx.ledger
    return (lambda rng: simulation.checked_twin(rng, ledger, cell.epsilon, cell.delta,
                                                canaries),
            f"quick {name} on {cell.dataset} at epsilon {cell.epsilon:g}")


def family(name: str):
    if name in GAUSSIAN:
        return gaussian(name)
    if name in LABELS:
        return label(name)
    if name in CHECKED or name == "opacus":
        return checked(name)
    raise SystemExit(f"unknown family {name}; known: "
                     f"{', '.join([*GAUSSIAN, *LABELS, *CHECKED, 'opacus'])}")


def submission(name: str) -> tuple[int, int]:
    """The twins and the records (cells and twins) of a submission of the quick suite's
    grid for a method of the family (a DP-SGD one for "opacus")."""
    method = "lp-1st" if name in LABELS else "dp-sgd"
    cells = [c for c in load_suite("quick", grid_for=method).cells
             if c.method == method and not c.skip]
    twins = len({c.config_id for c in cells
                 if get_method(method).notion_for(c.budget, c.hparams).private})
    return twins, len(cells) + twins


def interval(flagged: int, runs: int) -> str:
    """The rate and its two-sided 95% Clopper-Pearson interval."""
    low = clopper_pearson_lower(flagged, runs, 0.975)
    high = clopper_pearson_upper(flagged, runs, 0.975)
    return f"{100 * flagged / runs:.2f}% [{100 * low:.2f}%, {100 * high:.2f}%]"


def simulate(name: str, runs: int, submitted: bool, seed: int) -> None:
    """``runs`` twins of the family judged at the family-wise level; when ``submitted``,
    the same twins judged at their share of a submission's level too: its k twins are
    independent runs, so it is refused by them with probability 1 - (1 - p)^k, p the rate
    measured at that share (its interval from p's), and, for "opacus", by its records'
    noise checks, whose p-values are exactly uniform, with probability their level."""
    make, what = family(name)
    count, records = submission(name) if submitted else (1, 0)
    twin_level, library_level = levels.submission_levels(count, records)
    rng, start = np.random.default_rng(seed), time.perf_counter()
    rejected, flagged, shared = collections.Counter(), 0, 0
    for _ in range(runs):
        twin = make(rng)
        verdict = twin(levels.FAMILY_WISE_LEVEL)
        flagged += verdict.flagged
        rejected.update({test.test for test in verdict.tests if test.rejects})
        shared += submitted and twin(twin_level).flagged
    tests = "; ".join(f"{test} {rejected[test]}" for test in levels.SHARES[verdict.kind]
                      if test in {t.test for t in verdict.tests})
    print(f"{name}: {what}\n  flagged {flagged} of {runs}: {interval(flagged, runs)} "
          f"(rejections: {tests})", flush=True)
    if submitted:
        libraries = records if name == "opacus" else 0

        def refused(p: float) -> float:
            return 1 - (1 - p) ** count * (1 - library_level) ** libraries

        low = refused(clopper_pearson_lower(shared, runs, 0.975))
        high = refused(clopper_pearson_upper(shared, runs, 0.975))
        print(f"  at {100 * twin_level:.3g}% (a submission of {count} twins"
              + (f" and {records} library checks at {100 * library_level:.3g}% each"
                 if libraries else "")
              + f"): flagged {shared} of {runs}; the submission refused "
                f"{100 * refused(shared / runs):.2f}% [{100 * low:.2f}%, {100 * high:.2f}%]",
              flush=True)
    print(f"  ({time.perf_counter() - start:.0f} s)", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m speed.bench_false_flags",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000, help="simulated runs per line")
    parser.add_argument("--families", default=",".join([*GAUSSIAN, *LABELS, *CHECKED]),
                        help="the twins' families (empty: none)")
    parser.add_argument("--submissions", default=",".join(SUBMISSIONS),
                        help=f"the families whose submissions are simulated too, of "
                             f"{', '.join(SUBMISSIONS)}")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    submitted = [n for n in args.submissions.split(",") if n]
    print(f"Honest audited twins, simulated exactly, judged at the family-wise level "
          f"{levels.FAMILY_WISE_LEVEL:.0%}; rate [95% Clopper-Pearson interval]")
    names = [n for n in args.families.split(",") if n]
    for name in [*names, *(n for n in submitted if n not in names)]:
        simulate(name, args.runs, name in submitted, args.seed)


if __name__ == "__main__":
    main()
