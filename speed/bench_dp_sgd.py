"""Speed of DP-SGD's per-example clipping on the project's CNN, against non-private training.

Measures, in one run on the same model, batch size and data: non-private Keras
``model.fit``; non-private SGD in the same hand-written loop DP-SGD uses; stock
tensorflow-privacy DPSequential (per-example clipping by vectorised Jacobians); and the
project's DP-SGD (Poisson sampling, fast clipping: methods.nn.dp_training). Each setup
runs a few warm-up steps (tracing, excluded), then is timed ``--rounds`` times,
alternating setups so that load from other processes hits all of them alike; the best
round counts. Prints samples/s and each setup's time ratio to non-private model.fit.

    python -m speed.bench_dp_sgd --steps 200 --stock-steps 40
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Callable

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def images(dataset: str, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``size`` training images of a real dataset, or random 28x28 images ("random")."""
    if dataset == "random":
        rng = np.random.default_rng(seed)
        return (rng.random((size, 28, 28, 1), dtype=np.float32),
                rng.integers(0, 10, size).astype(np.int32))
    from benchmarks import datasets

    train = datasets.load(dataset).train
    return train.x[:size].astype(np.float32), train.y[:size].astype(np.int32)


def setups(args: argparse.Namespace, x: np.ndarray, y: np.ndarray
           ) -> dict[str, tuple[Callable[[int], int], int]]:
    """name -> (run ``n`` steps and return the examples processed, steps per round)."""
    import tensorflow as tf
    import tensorflow_privacy

    from benchmarks.privacy import Ledger
    from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum
    from methods.nn import dp_training, models

    def build() -> tf.keras.Model:
        return models.build("cnn", x.shape[1:], 10, norm=args.norm)

    batch, rate = args.batch_size, args.batch_size / len(x)
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    fixed = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=args.seed)
    fixed = fixed.repeat().batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    def keras_fit(model: tf.keras.Model) -> Callable[[int], int]:
        data = iter(fixed)

        def run(steps: int) -> int:
            model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
            return steps * batch
        return run

    plain = build()
    plain.compile(tf.keras.optimizers.SGD(0.01, momentum=0.9), loss)

    stock = tensorflow_privacy.DPSequential(
        l2_norm_clip=1.0, noise_multiplier=1.1,
        layers=[tf.keras.Input(x.shape[1:])] + build().layers[1:])
    stock.compile(tf.keras.optimizers.SGD(0.01, momentum=0.9), loss)

    loop_model, loop_opt = build(), tf.keras.optimizers.SGD(0.01, momentum=0.9)
    loop_data = tf.constant(x), tf.constant(y)
    sampler = tf.random.Generator.from_seed(args.seed)

    @tf.function
    def loop_step() -> tf.Tensor:
        index = tf.reshape(tf.where(sampler.uniform([len(x)]) < rate), [-1])
        xb, yb = tf.gather(loop_data[0], index), tf.gather(loop_data[1], index)
        with tf.GradientTape() as tape:
            mean = tf.reduce_sum(loss(yb, loop_model(xb, training=True))) / (rate * len(x))
        grads = tape.gradient(mean, loop_model.trainable_variables)
        loop_opt.apply_gradients(zip(grads, loop_model.trainable_variables))
        return tf.size(index)

    mechanism = NoisyClippedSum(Ledger(), dataset_size=len(y), sampling_rate=rate,
                                noise_multiplier=1.1, clip_norm=1.0,
                                steps=args.rounds * args.steps + args.warmup_steps,
                                seed=args.seed)
    dp_step = dp_training.DPSGDStep(build(), x, y, mechanism=mechanism,
                                    optimizer=tf.keras.optimizers.SGD(0.01, momentum=0.9))

    def looped(step: Callable[[], tuple]) -> Callable[[int], int]:
        def run(steps: int) -> int:
            seen = 0
            for _ in range(steps):
                out = step()
                seen += int(out[0] if isinstance(out, tuple) else out)
            return seen
        return run

    found = {
        "non-private, Keras model.fit": (keras_fit(plain), args.steps),
        "non-private, same loop as DP-SGD": (looped(loop_step), args.steps),
        "DP-SGD, project (Poisson, fast clipping)": (looped(dp_step.step), args.steps),
    }
    if args.stock_steps:
        found["DP-SGD, stock DPSequential"] = (keras_fit(stock), args.stock_steps)
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="random",
                        help="random (28x28 noise, default) or a dataset name, e.g. mnist")
    parser.add_argument("--size", type=int, default=60_000, help="training examples N")
    parser.add_argument("--batch-size", type=int, default=256,
                        help="batch size (DP-SGD: expected Poisson batch)")
    parser.add_argument("--norm", default="none", choices=("none", "group"),
                        help="normalisation of the CNN")
    parser.add_argument("--steps", type=int, default=200,
                        help="timed steps per round for the non-private and project setups")
    parser.add_argument("--stock-steps", type=int, default=40,
                        help="timed steps per round for DPSequential (0 skips it)")
    parser.add_argument("--warmup-steps", type=int, default=5, help="untimed steps first")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import tensorflow as tf

    tf.keras.utils.set_random_seed(args.seed)
    x, y = images(args.dataset, args.size, args.seed)
    runs = setups(args, x, y)
    for run, _ in runs.values():
        run(args.warmup_steps)
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for name, (run, steps) in runs.items():
            start = time.perf_counter()
            seen = run(steps)
            rate = seen / (time.perf_counter() - start)
            best[name] = max(best.get(name, 0.0), rate)

    reference = best["non-private, Keras model.fit"]
    print(f"CNN ({args.norm} norm), {args.dataset} N={len(x)}, batch {args.batch_size}, "
          f"{args.steps} steps per round ({args.stock_steps} for DPSequential), "
          f"best of {args.rounds} rounds; {os.cpu_count()} CPUs")
    print(f"{'setup':45s} {'samples/s':>10s} {'time ratio to model.fit':>24s}")
    for name, rate in best.items():
        print(f"{name:45s} {rate:10.0f} {reference / rate:24.2f}")


if __name__ == "__main__":
    main()
