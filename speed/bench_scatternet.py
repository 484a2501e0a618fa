"""Speed of dp-sgd-scatternet: the ScatterNet features, computed once per dataset and
then loaded from the cache, and a DP-SGD epoch of its linear model against a DP-SGD
epoch of the project's CNN (the dp-sgd method's GroupNorm CNN), each at its method's
default batch size, in one run on the same data.

Features: the training and test images of each dataset are scattered into an empty
cache folder (a temporary one unless ``--cache``), then loaded from it; CPU and wall
seconds of each. Epochs: each model's DP-SGD step (methods.nn.dp_training: Poisson
sampling, fast clipping, the layer's noisy sum) runs a few warm-up steps (tracing,
excluded), then ``--steps`` steps timed; an epoch is N / L steps.

    OMP_NUM_THREADS=1 python -m speed.bench_scatternet --datasets mnist,fashion-mnist
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def timed(run):
    """(result, CPU seconds of this process, wall seconds)."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = run()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def feature_times(name: str, cache: Path) -> np.ndarray:
    """Print the cold and cached feature times of a dataset's splits; return its
    training features."""
    from benchmarks import datasets
    from methods import dp_sgd_scatternet as scatternet

    data = datasets.load(name)
    for split, x in (("test", data.test.x), ("train", data.train.x)):
        cold, cpu, wall = timed(lambda: scatternet.features(x, data_dir=cache))
        warm, cpu_again, wall_again = timed(lambda: scatternet.features(x, data_dir=cache))
        assert not cold.cached and warm.cached, "the cache folder was not empty"
        print(f"{name} {split}: {len(x)} images -> {cold.values.shape[1:]} features: "
              f"computed in {cpu:.1f} s CPU ({wall:.1f} s wall), "
              f"loaded from the cache in {cpu_again:.1f} s CPU ({wall_again:.1f} s wall)",
              flush=True)
    return warm.values


def epoch_seconds(model, x: np.ndarray, y: np.ndarray, batch_size: int, steps: int,
                  warmup: int) -> tuple[float, float]:
    """(CPU, wall) seconds of one DP-SGD epoch (N / L steps) of ``model``."""
    import tensorflow as tf

    from benchmarks.privacy import Ledger
    from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum
    from methods.nn import dp_training

    mechanism = NoisyClippedSum(Ledger(), dataset_size=len(y), sampling_rate=batch_size / len(y),
                                noise_multiplier=1.0, clip_norm=0.1, steps=warmup + steps,
                                seed=0)
    step = dp_training.DPSGDStep(model, x, y, mechanism=mechanism,
                                 optimizer=tf.keras.optimizers.SGD(0.1, momentum=0.9))
    for _ in range(warmup):
        step.step()
    _, cpu, wall = timed(lambda: [step.step() for _ in range(steps)])
    per_epoch = len(y) / batch_size / steps
    return cpu * per_epoch, wall * per_epoch


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="mnist",
                        help="comma-separated datasets whose features to time (the "
                             "epochs run on the first)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="an empty folder for the feature cache (default: a temporary "
                             "one, removed at the end)")
    parser.add_argument("--steps", type=int, default=10, help="timed DP-SGD steps per model")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps")
    args = parser.parse_args(argv)

    from benchmarks import datasets
    from benchmarks.tf_runtime import pin_threads
    from methods.dp_sgd import DPSGD
    from methods.dp_sgd_scatternet import DPSGDScatterNet

    threads = pin_threads()
    names = args.datasets.split(",")
    with tempfile.TemporaryDirectory() as scratch:
        cache = args.cache or Path(scratch)
        print(f"threads {threads}; feature cache {cache}")
        features = [feature_times(name, cache) for name in names][0]
    from methods.dp_sgd_scatternet import group_normalise

    features = group_normalise(features, 27).reshape(len(features), -1)

    import tensorflow as tf

    from methods.nn import models

    train = datasets.load(names[0]).train
    y = train.y.astype(np.int32)
    linear_batch = DPSGDScatterNet.defaults["batch_size"]
    inputs = tf.keras.Input(features.shape[1:])
    linear = tf.keras.Model(inputs, tf.keras.layers.Dense(10)(inputs))
    scatter_cpu, scatter_wall = epoch_seconds(linear, features, y, linear_batch,
                                              args.steps, args.warmup)
    cnn_batch = DPSGD.defaults["batch_size"]
    cnn = models.build("cnn", train.x.shape[1:], 10, norm=DPSGD.defaults["norm"])
    cnn_cpu, cnn_wall = epoch_seconds(cnn, train.x.astype(np.float32), y, cnn_batch,
                                      args.steps, args.warmup)
    print(f"{names[0]} DP-SGD epoch, ScatterNet + linear (batch {linear_batch}): "
          f"{scatter_cpu:.1f} s CPU ({scatter_wall:.1f} s wall)")
    print(f"{names[0]} DP-SGD epoch, CNN (batch {cnn_batch}): "
          f"{cnn_cpu:.1f} s CPU ({cnn_wall:.1f} s wall)")
    print(f"ScatterNet epoch / CNN epoch: {scatter_cpu / cnn_cpu:.3f} (CPU), "
          f"{scatter_wall / cnn_wall:.3f} (wall)")


if __name__ == "__main__":
    main()
