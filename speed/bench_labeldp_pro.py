"""Speed of a LabelDP-Pro step against a DP-SGD step on the small CNN, same batch size.

Both run the privacy layer's noisy clipped sum on a Poisson batch of expected size
``--batch-size`` from ``--size`` images; LabelDP-Pro then builds the (K n2) x P matrix of
per-class gradients of ``--alt-batch`` public inputs and runs ``--projection-steps`` of
projected gradient descent on its Gram matrix. Each setup is traced first (excluded),
then timed ``--rounds`` times, alternating, the best round counting. Prints seconds per
step, the ratio (goal: LabelDP-Pro within 5x of DP-SGD), and LabelDP-Pro's step split
into its noisy sum, its per-class gradient matrix and its projection.

    OMP_NUM_THREADS=1 python -m speed.bench_labeldp_pro --steps 10
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=60_000,
                        help="training images (random 28x28; default: %(default)s, MNIST's)")
    parser.add_argument("--batch-size", type=int, default=1024,
                        help="expected Poisson batch size (default: %(default)s)")
    parser.add_argument("--alt-batch", type=int, default=None,
                        help="LabelDP-Pro's n2 (default: the method's)")
    parser.add_argument("--projection-steps", type=int, default=None,
                        help="projected gradient steps (default: the method's)")
    parser.add_argument("--steps", type=int, default=10, help="steps per round (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=1,
                        help="TensorFlow intra-op threads (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    from benchmarks.privacy import Ledger
    from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum
    from methods import labeldp_pro
    from methods.nn import dp_training, models

    defaults = labeldp_pro.LabelDPPro.defaults
    alt_batch = args.alt_batch or defaults["alt_batch"]
    projection_steps = args.projection_steps or defaults["projection_steps"]
    rng = np.random.default_rng(args.seed)
    x = rng.random((args.size, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, args.size).astype(np.int32)
    rate, steps = args.batch_size / args.size, 10 ** 6

    def model():
        tf.keras.utils.set_random_seed(args.seed)
        return models.build("small-cnn", x.shape[1:], 10)

    dp_sgd = dp_training.DPSGDStep(
        model(), x, y, optimizer=tf.keras.optimizers.SGD(0.1, momentum=0.9),
        mechanism=NoisyClippedSum(Ledger(), dataset_size=args.size, sampling_rate=rate,
                                  noise_multiplier=1.0, clip_norm=1.0, steps=steps, seed=1))
    mechanism = NoisyClippedSum(Ledger(), dataset_size=args.size, sampling_rate=rate,
                                noise_multiplier=1.0, clip_norm=1.0, steps=steps, seed=1,
                                sensitivity=labeldp_pro.SUBSTITUTION_SENSITIVITY)
    pro = labeldp_pro.ProjectedStep(
        model(), x, y, 10, mechanism=mechanism,
        optimizer=tf.keras.optimizers.SGD(0.1, momentum=0.9), alt_batch=alt_batch,
        projection_steps=projection_steps, smoothing=defaults["smoothing"], seed=2)

    public_x = tf.constant(x[:alt_batch])
    parts = {
        "noisy clipped sum": tf.function(lambda: pro.noisy_mean_gradient(mechanism.batch())),
        "per-class gradient matrix": tf.function(lambda: labeldp_pro.per_class_gradients(
            pro.model, public_x, 10)),
    }
    vertices = parts["per-class gradient matrix"]()
    target = tf.reduce_mean(vertices, axis=0)
    parts["projection"] = tf.function(lambda: labeldp_pro.hull_coefficients(
        vertices, target, projection_steps))
    setups = {"DP-SGD step": dp_sgd.step, "LabelDP-Pro step": pro.step, **parts}

    best = {name: np.inf for name in setups}
    for run in setups.values():
        run()  # tracing
    for _ in range(args.rounds):
        for name, run in setups.items():
            start = time.perf_counter()
            for _ in range(args.steps):
                run()  # eager calls of a tf.function return when their ops have run
            best[name] = min(best[name], (time.perf_counter() - start) / args.steps)

    p = sum(int(np.prod(v.shape)) for v in pro.model.trainable_variables)
    print(f"small-cnn ({p} weights), expected batch {args.batch_size} of {args.size}, "
          f"n2 = {alt_batch} (G: {10 * alt_batch} x {p}), {projection_steps} projection "
          f"steps, {args.threads} thread(s); best of {args.rounds} rounds of {args.steps}")
    for name, seconds in best.items():
        print(f"  {name:28s} {seconds * 1000:8.1f} ms")
    ratio = best["LabelDP-Pro step"] / best["DP-SGD step"]
    print(f"LabelDP-Pro step / DP-SGD step: {ratio:.2f}x (goal: within 5x)")


if __name__ == "__main__":
    main()
