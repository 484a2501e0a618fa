"""Speed and accuracy of PATE's T teachers trained as one stacked model.

Partitions the training set at random (labels unseen) into T shards of floor(N / T)
examples and trains the teachers with methods.nn.ensemble, all at once. For comparison,
trains the first few teachers one by one with Keras ``model.fit`` (same architecture,
optimiser, epochs and batch size, after one untimed warm-up fit) and scales their time
to T. Both times include building and tracing. Prints wall-clock and CPU times (the CPU
time of this process: less sensitive to other processes' load), their ratios, the
teachers' test accuracies and that of the plain (noiseless) plurality vote.

    python -m speed.bench_pate_teachers --teachers 250 --epochs 10 --dataset mnist
"""
from __future__ import annotations

import argparse
import os
import time
from typing import Any, Callable

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def timed(run: Callable[[], Any]) -> tuple[Any, float, float]:
    """``run()``, its wall-clock seconds and this process's CPU seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def keras_loop(args: argparse.Namespace, x: np.ndarray, y: np.ndarray,
               shards: list[np.ndarray], num_classes: int
               ) -> tuple[list, np.ndarray]:
    """The first ``--loop-teachers`` teachers, one ``model.fit`` each, and their (wall,
    CPU) seconds."""
    import tensorflow as tf

    from methods.nn import ensemble, models

    def fit(shard: np.ndarray, epochs: int) -> tf.keras.Model:
        model = models.build(args.model, x.shape[1:], num_classes)
        model.compile(ensemble.adam(args.learning_rate),
                      tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x[shard], y[shard], batch_size=args.batch_size, epochs=epochs, verbose=0)
        return model

    fit(shards[0], 1)
    runs = [timed(lambda: fit(shard, args.epochs)) for shard in shards[:args.loop_teachers]]
    return [model for model, _, _ in runs], np.array([[wall, cpu] for _, wall, cpu in runs])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="mnist")
    parser.add_argument("--teachers", type=int, default=250, help="T")
    parser.add_argument("--model", default="teacher_cnn", help="a models.BUILDERS name")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=3e-3, help="Adam's")
    parser.add_argument("--loop-teachers", type=int, default=5,
                        help="teachers trained one by one with model.fit, scaled to T")
    parser.add_argument("--test-size", type=int, default=1000,
                        help="first test images on which accuracies are measured")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import tensorflow as tf

    from benchmarks import datasets
    from benchmarks.tf_runtime import training_device
    from methods.nn import ensemble

    data = datasets.load(args.dataset)
    x, y = data.train.x.astype(np.float32), data.train.y
    test_x, test_y = data.test.x[:args.test_size], data.test.y[:args.test_size]
    num_classes = data.num_classes
    shards = ensemble.equal_shards(len(x), args.teachers, args.seed)
    tf.keras.utils.set_random_seed(args.seed)

    loop_models, loop_seconds = keras_loop(args, x, y, shards, num_classes)
    teachers, *stacked_seconds = timed(lambda: ensemble.train_teachers(
        x, y, shards, num_classes, model=args.model, epochs=args.epochs,
        batch_size=args.batch_size, learning_rate=args.learning_rate, seed=args.seed))
    predictions, *predict_seconds = timed(lambda: teachers.predictions(test_x))

    accuracy = (predictions == test_y).mean(axis=1)
    plurality = (teachers.votes(test_x).argmax(axis=1) == test_y).mean()
    loop_accuracy = [(m.predict(test_x, verbose=0).argmax(axis=1) == test_y).mean()
                     for m in loop_models]
    loop_estimate = loop_seconds.mean(axis=0) * args.teachers
    ratio = loop_estimate / stacked_seconds

    print(f"{args.teachers} {args.model} teachers on {args.dataset}, {len(shards[0])} "
          f"examples each; {args.epochs} epochs, batch {args.batch_size}, Adam lr "
          f"{args.learning_rate}; {os.cpu_count()} CPUs, device {training_device()}")
    print(f"{'':34s} {'wall s':>8s} {'CPU s':>8s}")
    print(f"{'stacked, one model':34s} {stacked_seconds[0]:8.1f} {stacked_seconds[1]:8.1f}")
    print(f"{'loop of model.fit (estimate)':34s} {loop_estimate[0]:8.1f} {loop_estimate[1]:8.1f}"
          f"   {len(loop_seconds)} teachers timed, scaled to {args.teachers}; wall per "
          f"teacher {loop_seconds[:, 0].min():.2f}-{loop_seconds[:, 0].max():.2f} s")
    print(f"{'speed-up, loop / stacked':34s} {ratio[0]:7.1f}x {ratio[1]:7.1f}x")
    print(f"{f'predictions on {len(test_x)} test images':34s} {predict_seconds[0]:8.1f} "
          f"{predict_seconds[1]:8.1f}")
    print(f"teacher accuracy on the first {len(test_x)} test images: mean "
          f"{accuracy.mean():.4f}, min {accuracy.min():.4f}, max {accuracy.max():.4f}; "
          f"the {len(loop_models)} model.fit teachers: mean {np.mean(loop_accuracy):.4f}")
    print(f"plurality vote (no noise) on the first {len(test_x)} test images: "
          f"{plurality:.4f}")


if __name__ == "__main__":
    main()
