"""The power of the audits at the release.

The Gaussian releases (GAUSSIAN_RELEASES: the small CNN on MNIST at epsilon 1 and 4 for
DP-SGD and LabelDP-Pro, at 1 for DP-SGD under label-DP, the quick suite's DP-SGD cell,
ScatterNet on MNIST at epsilon 1): each cell's releases run alone at its suite's own
setting (benchmarks.audit.dp_sgd_release: the same noisy statistics and noisy clipped
sums, phantoms and audit as its audited twin, without a model, which the phantoms never
touch; with ``--simulated``, the same releases simulated exactly,
benchmarks.audit.simulation, in minutes instead of hours), honest and with every
release's noise times 0.7 (the charge unchanged), once per seed. Each run prints the
test of the claimed curve (rejected or not), its empirical epsilon as a ratio of the
claimed curve's epsilon, and the bound of Steinke et al. beside it. The goals (GOALS):
an honest run is never rejected and its ratio is at least 0.6 at epsilon 1 and 0.8 at
epsilon 4; a run at 0.7 times its noise is rejected at every seed.

The label releases (the randomised-response family and ALIBI): the audited twins of the
archive, whose audit at the release (Steinke et al.'s bound on their released labels)
this test leaves as it was, as ratios of min(claim, ceiling), each at least 0.85. With
``--methods`` the quick suite's cells of those methods are audited here again, as ratios
of the same (``--epochs`` shortens their training; the release comes before it).

With ``--evidence``, the phantoms' evidence (the log-likelihood ratio of their steps'
bins, benchmarks.privacy.phantom_canaries) against the log-likelihood ratio of every
step's value itself, on the same simulated releases of 100,000 phantoms step by step
(EVIDENCE_SETTINGS): the share right of the 0.2% strongest guesses, and the share of the
phantoms of coin 1 found at 0.1% false positives.

    python -m speed.bench_audit_power [--seeds 0,1,2] [--releases dp-sgd@1,quick-dp-sgd]
        [--simulated] [--evidence] [--methods lp-1st,alibi --epsilons 1,2 --epochs N]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the table, not TensorFlow's start-up


import numpy as np  # noqa: E402

from benchmarks import archive, datasets  # noqa: E402
from benchmarks.audit import dp_sgd_release, levels  # noqa: E402
from benchmarks.audit.training import PHANTOMS, audit_training  # noqa: E402
from benchmarks.context import RunContext  # noqa: E402
from benchmarks.contract import Budget  # noqa: E402
from benchmarks.privacy import Neighbours  # noqa: E402
from benchmarks.suites import load_suite, suite_names  # noqa: E402

# name -> (suite, method, epsilon): the cell of the suite on MNIST at that epsilon.
GAUSSIAN_RELEASES = {
    "dp-sgd@1": ("label-dp-small", "dp-sgd", 1.0),
    "dp-sgd@4": ("label-dp-small", "dp-sgd", 4.0),
    "labeldp-pro@1": ("label-dp-small", "labeldp-pro", 1.0),
    "labeldp-pro@4": ("label-dp-small", "labeldp-pro", 4.0),
    "dp-sgd-label-dp@1": ("label-dp-small", "dp-sgd-label-dp", 1.0),
    "quick-dp-sgd": ("quick", "dp-sgd", 1.0),
    "scatternet@1": ("label-dp-small", "dp-sgd-scatternet", 1.0),
}
UNDER_NOISED = 0.7
# The least ratio of an honest run's empirical epsilon to the claimed curve's, by epsilon;
# and of a label release's bound to min(claim, ceiling).
GOALS = {1.0: 0.6, 4.0: 0.8}
LABEL_GOAL = 0.85
LABEL_RELEASES = ("lp-1st", "lp-2st", "lp-3st", "rr-ssl-prior", "spread-lr", "alibi")


def suite_cell(suite: str, method: str, epsilon: float):
    """The suite's cell of ``method`` on MNIST at ``epsilon`` (its audited twin, if any)."""
    cells = [c for c in load_suite(suite).cells if c.method == method
             and c.dataset == "mnist" and c.epsilon == epsilon and not c.skip]
    if not cells:
        raise SystemExit(f"{suite} has no {method} cell on mnist at epsilon {epsilon:g}")
    return next((c for c in cells if c.audit), cells[0])


@contextlib.contextmanager
def noise_times(factor: float):
    """Every Gaussian release of the privacy layer adds ``factor`` times the noise it is
    charged for (the charge stays as it was)."""
    from benchmarks.privacy.noisy_clipped_mean import NoisyClippedMean
    from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum

    originals = {cls: cls.__init__ for cls in (NoisyClippedSum, NoisyClippedMean)}

    def scaled(real):
        def init(self, *args, **kwargs):
            real(self, *args, **kwargs)
            self.noise_std *= factor
        return init

    for cls, real in originals.items():
        cls.__init__ = scaled(real)
    try:
        yield
    finally:
        for cls, real in originals.items():
            cls.__init__ = real


def gaussian_power(names: list[str], seeds: list[int], simulated: bool) -> None:
    level = levels.test_levels(levels.GAUSSIAN, levels.FAMILY_WISE_LEVEL, 1)[levels.CLAIM]
    print(f"Gaussian releases alone at their suites' settings"
          f"{', simulated exactly' if simulated else ''}, {PHANTOMS:,} phantom canaries; the "
          f"claimed curve tested at level {level:.1%}; ratio: empirical epsilon over the "
          f"claimed curve's (PLD), both at delta")
    print(f"{'release':<15} {'noise':>5} {'seed':>4} {'claim':>6} {'verdict':>12} "
          f"{'empirical':>9} {'ratio':>6} {'Steinke':>8} {'seconds':>8}")
    for name in names:
        cell = suite_cell(*GAUSSIAN_RELEASES[name])
        found = {1.0: [], UNDER_NOISED: []}
        for factor in found:
            for seed in seeds:
                start = time.perf_counter()
                if simulated:
                    release = dp_sgd_release.audit_simulated_release(cell, seed=seed,
                                                                     noise=factor)
                else:
                    with noise_times(factor):
                        release = dp_sgd_release.audit_cell_release(cell, seed=seed)
                tested = release["claim_test"]
                ratio = tested["empirical_epsilon"] / tested["claimed_epsilon"]
                found[factor].append((tested["rejected"], ratio))
                print(f"{name:<15} {factor:>5g} {seed:>4} {tested['claimed_epsilon']:>6.3f} "
                      f"{'REJECTED' if tested['rejected'] else 'not rejected':>12} "
                      f"{tested['empirical_epsilon']:>9.3f} {ratio:>6.2f} "
                      f"{release['epsilon_lower_bound']:>8.3f} "
                      f"{time.perf_counter() - start:>8.1f}", flush=True)
        honest, under = found[1.0], found[UNDER_NOISED]
        goal = GOALS[cell.epsilon]
        lowest = min(ratio for _, ratio in honest)
        print(f"{name:<15} honest: rejected {sum(r for r, _ in honest)} of {len(honest)}, "
              f"lowest ratio {lowest:.2f} (goal {goal}: "
              f"{met(lowest >= goal and not any(r for r, _ in honest))}); noise x "
              f"{UNDER_NOISED}: rejected {sum(r for r, _ in under)} of {len(under)} "
              f"({met(all(r for r, _ in under))})", flush=True)


# (name, noise multiplier, sampling rate, steps): the suites' DP-SGD releases.
EVIDENCE_SETTINGS = [("label-dp-small, epsilon 1", 3.0254882227785145, 0.017066666666666667, 1758),
                     ("label-dp-small, epsilon 4", 1.1026624455032488, 0.017066666666666667, 1758),
                     ("quick, epsilon 1", 1.064975552551225, 0.004266666666666667, 1172)]
EVIDENCE_PHANTOMS = 100_000


def evidence_power(seed: int) -> None:
    print(f"\nThe phantoms' evidence from the bins against every step's log-likelihood "
          f"ratio, {EVIDENCE_PHANTOMS:,} phantoms: right of the 0.2% strongest; found at "
          f"0.1% false positives")
    for name, sigma, q, steps in EVIDENCE_SETTINGS:
        for neighbours in (Neighbours.ADD_REMOVE, Neighbours.SUBSTITUTION):
            (a, b), (c, d) = _evidences(sigma, q, steps, neighbours, seed)
            print(f"{name}, {neighbours.value}: every step {a:.3f}, {100 * b:.2f}%; the bins "
                  f"{c:.3f}, {100 * d:.2f}%", flush=True)


def _evidences(sigma, q, steps, neighbours, seed):
    """Both evidences on one release step by step (noise sigma C, at 2C under
    substitution), scored."""
    from benchmarks.privacy.phantom_canaries import PROBES, PhantomCanaries

    rng, m = np.random.default_rng(seed), EVIDENCE_PHANTOMS
    replaced = neighbours is Neighbours.SUBSTITUTION
    s = sigma * (2 if replaced else 1)
    planted = PhantomCanaries(rng.integers(0, 2, m).astype(bool), neighbours)
    coins, values = planted.coins, np.zeros(m)

    def log_ratio(u):
        return np.log1p(q * np.expm1((2 * u - 1) / (2 * s * s)))

    for _ in range(steps):
        sampled = rng.random(m) < q
        u = (np.where(coins, 1.0, -1.0) if replaced else coins) * sampled \
            + s * rng.standard_normal(m)
        values += log_ratio(u) - log_ratio(-u) if replaced else log_ratio(u)
        planted.observe("step", np.concatenate([u, s * rng.standard_normal(PROBES)]), q,
                        1.0, s, 0.0, 0)
    scores = []
    for evidence in (values, planted.evidence()):
        strongest = np.argsort(-np.abs(evidence))[:int(0.002 * m)]
        threshold = np.quantile(evidence[~coins], 0.999)
        scores.append((((evidence[strongest] > 0) == coins[strongest]).mean(),
                       (evidence[coins] > threshold).mean()))
    return scores


def met(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def archived_label_releases() -> None:
    print(f"\nLabel releases: the archive's audited twins of the suites' cells, their bound "
          f"at the release over min(claim, ceiling) (goal {LABEL_GOAL})")
    current = {cell.cell_id for name in suite_names() for cell in load_suite(name).cells}
    twins = sorted((r for r in archive.load() if r.ok and r.is_audit and r.cell_id in current
                    and r.method in LABEL_RELEASES and r.audit.get("release")),
                   key=lambda r: (r.suite, r.describe()))
    for record in twins:
        release = record.audit["release"]
        share = ratio(release["epsilon_lower_bound"], record.epsilon, release["ceiling"])
        print(f"{record.suite:<15} {record.describe():<45} {share:>5.2f} "
              f"{met(share >= LABEL_GOAL)}")


def live_label_releases(methods: list[str], epsilons: list[float], epochs: int | None,
                        seed: int) -> None:
    print(f"\nThe quick suite's cells audited here (seed {seed}): at the release and from "
          f"the model, each over min(claim, ceiling)")
    for method in methods:
        cells = [c for c in load_suite("quick").cells if c.method == method]
        if not cells:
            raise SystemExit(f"{method} has no cell in the quick suite")
        cell = next((c for c in cells if c.audit), cells[0])
        hparams = dict(cell.hparams)
        if epochs is not None and "epochs" in hparams:
            hparams["epochs"] = epochs
        for epsilon in epsilons:
            start = time.perf_counter()
            result = audit_training(method, datasets.load(cell.dataset),
                                    Budget(epsilon, cell.delta), hparams,
                                    RunContext(seed=seed))
            release = result.release or {}
            at_release = (ratio(release["epsilon_lower_bound"], epsilon, release["ceiling"])
                          if release else float("nan"))
            print(f"{method:<15} eps {epsilon:g}: at release {at_release:.2f}, from model "
                  f"{ratio(result.epsilon_lower_bound, epsilon, result.ceiling):.2f} "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)


def ratio(bound: float, claim: float, ceiling: float) -> float:
    return bound / min(claim, ceiling)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m speed.bench_audit_power",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2", help="seeds of each Gaussian release")
    parser.add_argument("--releases", default=",".join(GAUSSIAN_RELEASES),
                        help=f"Gaussian releases, of {', '.join(GAUSSIAN_RELEASES)} "
                             f"(empty: none)")
    parser.add_argument("--simulated", action="store_true",
                        help="simulate the Gaussian releases exactly instead of running them")
    parser.add_argument("--evidence", action="store_true",
                        help="compare the phantoms' evidence with every step's")
    parser.add_argument("--methods", default="",
                        help="label-release methods of the quick suite to audit here too")
    parser.add_argument("--epsilons", default="1,2", help="their claimed epsilons")
    parser.add_argument("--epochs", type=int, default=None,
                        help="train them this many epochs instead of the suite's")
    args = parser.parse_args(argv)
    names = [name for name in args.releases.split(",") if name]
    unknown = sorted(set(names) - set(GAUSSIAN_RELEASES))
    if unknown:
        parser.error(f"unknown release(s) {unknown}; known: {', '.join(GAUSSIAN_RELEASES)}")
    if names:
        gaussian_power(names, [int(s) for s in args.seeds.split(",")], args.simulated)
    if args.evidence:
        evidence_power(seed=0)
    archived_label_releases()
    if args.methods:
        live_label_releases(args.methods.split(","), [float(e) for e in args.epsilons.split(",")],
                            args.epochs, seed=0)


if __name__ == "__main__":
    main()
