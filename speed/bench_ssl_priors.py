"""Quality of label-DP cluster priors from self-supervised features, against raw pixels.

    python -m speed.bench_ssl_priors [--datasets mnist fashion-mnist] [--seed 0]
        [--clusters 100] [--rr-epsilon 1.0] [--draws 5] [--pca 50] [--plot FILE.png]

For each dataset: trains the SimCLR encoder (or loads it from the cache), clusters its
training features with k-means, releases each cluster's label histogram with
discrete-Laplace noise at several epsilon_p, and reports on the public test split the
share of examples whose label is their prior's top-1 and inside RRWithPrior's top-k* at
--rr-epsilon. The same for raw pixels reduced by PCA, the baseline the encoder must beat.
Figures are means over --draws noise draws; only released (noisy) histograms are scored,
and only against test labels. --plot writes them against epsilon_p (the paper's appendix).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from methods.cluster_priors import Clusters, fit_clusters, prior_quality, release_cluster_priors

EPSILONS_P = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0)


def _timed(fn):
    """(result, wall seconds, process CPU seconds): CPU time estimates an unloaded wall
    time on a shared machine."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def quality_rows(clusters: Clusters, test_clusters: np.ndarray, data, rr_epsilon: float,
                 draws: int, seed: int) -> list[tuple[float, float, float, float]]:
    """(epsilon_p, top-1, top-k*, mean k*) per epsilon_p, means over the noise draws."""
    rows = []
    for epsilon_p in EPSILONS_P:
        rng = np.random.default_rng(seed)  # the same draws for every feature kind
        tables = [release_cluster_priors(data.train.y, clusters.train, len(clusters.centres),
                                         data.num_classes, epsilon_p, rng)
                  for _ in range(draws)]
        figures = [prior_quality(t[test_clusters], data.test.y, rr_epsilon) for t in tables]
        rows.append((epsilon_p, *(float(np.mean([getattr(f, name) for f in figures]))
                                  for name in ("top1", "top_k", "mean_k"))))
    return rows


def pca_features(data, dimensions: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.decomposition import PCA

    flat_train = data.train.x.reshape(len(data.train.x), -1)
    pca = PCA(dimensions, random_state=seed).fit(flat_train)
    return pca.transform(flat_train), pca.transform(data.test.x.reshape(len(data.test.x), -1))


def ssl_features(data, seed: int, progress) -> tuple[np.ndarray, np.ndarray, str]:
    from benchmarks import datasets
    from methods.nn import ssl_encoder

    encoded = ssl_encoder.encoder_features(
        data.train.x, data.test.x, data_dir=datasets.data_dir(),
        settings=ssl_encoder.DEFAULT_SETTINGS, seed=seed, progress=progress)
    s = encoded.settings
    how = "loaded from the cache" if encoded.cached else "trained now"
    note = (f"SimCLR {s['backbone']}, {s['epochs']} epochs, batch {s['batch_size']}: "
            f"training took {encoded.train_seconds:.1f} s wall ({how}), "
            f"fingerprint {encoded.fingerprint[:16]}")
    return encoded.train, encoded.test, note


def plot_quality(curves: dict[str, list], rr_epsilon: float, path: str) -> None:
    """Top-1 and top-k* against epsilon_p (log scale), one line per dataset and features."""
    from reports.plots import plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharex=True)
    for i, (label, rows) in enumerate(curves.items()):
        epsilons = [row[0] for row in rows]
        for ax, column in zip(axes, (1, 2)):
            ax.plot(epsilons, [100 * row[column] for row in rows], "o-", color=f"C{i}",
                    label=label)
    for ax, title in zip(axes, ("label is the prior's top-1 (%)",
                                f"label in the top-k* at epsilon_rr {rr_epsilon:g} (%)")):
        ax.set_xscale("log")
        ax.set_xlabel("epsilon_p of the noisy cluster histograms")
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"\nplot: {path}")


def bench_dataset(name: str, args: argparse.Namespace, curves: dict[str, list]) -> None:
    from benchmarks import datasets

    data = datasets.load(name)
    print(f"\n{name}: {len(data.train.y):,} train, {len(data.test.y):,} test, "
          f"C = {args.clusters} clusters, top-k* at epsilon_rr = {args.rr_epsilon}")
    sources = {
        "ssl encoder": lambda: ssl_features(data, args.seed, lambda m: print("    " + m)),
        f"pixels PCA {args.pca}": lambda: (*pca_features(data, args.pca, args.seed), "PCA"),
    }
    for label, make in sources.items():
        print(f"  {label}")
        (train, test, note), wall, cpu = _timed(make)
        print(f"    {note}; features in {wall:.1f} s wall, {cpu:.1f} s CPU")
        clusters, wall, cpu = _timed(lambda: fit_clusters(train, args.clusters, seed=args.seed,
                                                          n_init=args.n_init))
        print(f"    k-means: {wall:.1f} s wall, {cpu:.1f} s CPU")
        print(f"    {'epsilon_p':>9} {'top-1':>7} {'top-k*':>7} {'mean k*':>8}")
        rows = quality_rows(clusters, clusters.assign(test), data, args.rr_epsilon,
                            args.draws, args.seed)
        for epsilon_p, top1, top_k, mean_k in rows:
            print(f"    {epsilon_p:>9} {top1:>7.4f} {top_k:>7.4f} {mean_k:>8.2f}")
        curves[f"{name}, {label}"] = rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["mnist", "fashion-mnist"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--clusters", type=int, default=100, help="C")
    parser.add_argument("--n-init", type=int, default=1, help="k-means restarts")
    parser.add_argument("--rr-epsilon", type=float, default=1.0,
                        help="the RRWithPrior epsilon that sets k*")
    parser.add_argument("--draws", type=int, default=5, help="noise draws per epsilon_p")
    parser.add_argument("--pca", type=int, default=50, help="PCA dimensions of the pixels")
    parser.add_argument("--plot", metavar="FILE", help="write the figures as a PNG plot")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    curves: dict[str, list] = {}
    for name in args.datasets:
        bench_dataset(name, args, curves)
    if args.plot:
        plot_quality(curves, args.rr_epsilon, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
