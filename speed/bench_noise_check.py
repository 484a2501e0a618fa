"""The Gaussian releases' noise check on honest twins and on real coordinates noised at
half the phantoms' noise, at each suite's release (speed.bench_false_flags.GAUSSIAN).

Each draw is the simulated twins' (benchmarks.audit.simulation.noise_squares: the
probes' and the real coordinates' sums of squares by their exact chi-squared laws), read
by the check's own code (phantom_canaries.Release.check, which reads nothing of the
phantoms) at the level a twin of the family gives each of its checks
(benchmarks.audit.levels). An honest release's p-value is exactly uniform (an F law), so
its rejection rate is the level; each line prints the rate and its 95% Clopper-Pearson
interval.

    nice -n 19 python -m speed.bench_noise_check [--draws 20000] [--halved 200] [--seed 0]
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from benchmarks.audit import levels  # noqa: E402
from benchmarks.audit.dp_sgd_release import simulated_releases  # noqa: E402
from benchmarks.audit.simulation import noise_squares  # noqa: E402
from benchmarks.privacy.phantom_canaries import BINS, Release  # noqa: E402
from benchmarks.suites import load_suite  # noqa: E402
from speed.bench_false_flags import GAUSSIAN, interval  # noqa: E402


def rejections(releases, draws: int, rng: np.random.Generator,
               real_noise: float) -> tuple[np.ndarray, float]:
    """Per release, how many of ``draws`` checks of it fail at their level, and the level."""
    level = levels.noise_check_level({"release": {"claim_test": {}}},
                                     levels.FAMILY_WISE_LEVEL, len(releases))
    found = np.zeros(len(releases), np.int64)
    for _ in range(draws):
        found += [Release(release.sampling_rate, release.noise, np.zeros((BINS, 0)),
                          np.zeros(0), release.steps,
                          *noise_squares(rng, release, real_noise)
                          ).check(release.mechanism).flagged(level)
                  for release in releases]
    return found, level


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m speed.bench_noise_check",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=20_000, help="honest releases a family")
    parser.add_argument("--halved", type=int, default=200,
                        help="releases a family with the real coordinates at half the noise")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    for name, (suite, method, dataset) in GAUSSIAN.items():
        cell = next(c for c in load_suite(suite).cells
                    if c.method == method and c.dataset == dataset and c.audit)
        releases = simulated_releases(cell)[0]
        start = time.perf_counter()
        honest, level = rejections(releases, args.draws, rng, 1.0)
        halved, _ = rejections(releases, args.halved, rng, 0.5)
        print(f"{name} ({suite}, {dataset}): each check at {100 * level:.3g}%", flush=True)
        for release, right, wrong in zip(releases, honest, halved):
            print(f"  {release.mechanism}: honest {right} of {args.draws} rejected, "
                  f"{interval(right, args.draws)}; real coordinates at half the noise "
                  f"{wrong} of {args.halved}", flush=True)
        print(f"  ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
