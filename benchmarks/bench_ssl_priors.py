"""Quality of label-DP cluster priors from self-supervised features, against raw pixels.

    python -m benchmarks.bench_ssl_priors [--datasets mnist fashion-mnist] [--seed 0]
        [--clusters 100] [--rr-epsilon 1.0] [--draws 5] [--pca 50]

For each dataset: trains the SimCLR encoder (or loads it from the cache), clusters its
training features with k-means, releases each cluster's label histogram with
discrete-Laplace noise at several epsilon_p, and reports on the public test split the
share of examples whose label is their prior's top-1 and inside RRWithPrior's top-k* at
--rr-epsilon. The same for raw pixels reduced by PCA, the baseline the encoder must beat.
epsilon_p = inf is the noiseless histogram: not private, the reference for what the noise
costs. Figures at a finite epsilon_p are means over --draws noise draws.
"""
from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np

from methods.cluster_priors import Clusters, fit_clusters, prior_quality, release_cluster_priors

EPSILONS_P = (0.01, 0.05, 0.1, 0.5, math.inf)


def _timed(fn):
    """(result, wall seconds, process CPU seconds): CPU time estimates an unloaded wall
    time on a shared machine."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def noiseless_priors(train_labels: np.ndarray, train_clusters: np.ndarray,
                     num_clusters: int, num_classes: int) -> np.ndarray:
    """Each cluster's exact label histogram, normalised. NOT private: the reference."""
    counts = np.zeros((num_clusters, num_classes))
    np.add.at(counts, (train_clusters, train_labels), 1)
    totals = counts.sum(axis=1, keepdims=True)
    return np.divide(counts, totals, out=np.full_like(counts, 1.0 / num_classes),
                     where=totals > 0)


def quality_rows(clusters: Clusters, test_clusters: np.ndarray, data, rr_epsilon: float,
                 draws: int, seed: int) -> list[tuple[float, float, float, float]]:
    """(epsilon_p, top-1, top-k*, mean k*) per epsilon_p, means over the noise draws."""
    rows = []
    for epsilon_p in EPSILONS_P:
        if math.isinf(epsilon_p):
            tables = [noiseless_priors(data.train.y, clusters.train, len(clusters.centres),
                                       data.num_classes)]
        else:
            rng = np.random.default_rng(seed)  # the same draws for every feature kind
            tables = [release_cluster_priors(data.train.y, clusters.train,
                                             len(clusters.centres), data.num_classes,
                                             epsilon_p, rng) for _ in range(draws)]
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


def bench_dataset(name: str, args: argparse.Namespace) -> None:
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
        for epsilon_p, top1, top_k, mean_k in quality_rows(
                clusters, clusters.assign(test), data, args.rr_epsilon, args.draws, args.seed):
            print(f"    {epsilon_p:>9} {top1:>7.4f} {top_k:>7.4f} {mean_k:>8.2f}")

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
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name in args.datasets:
        bench_dataset(name, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
