"""How fast this host trains a cell against the archive's reference host, from a
calibration of a few seconds, and what starting a cell's worker process costs here.

The calibration runs in fresh worker processes side by side, as many as the run's cells
at a time, each on the cells' thread count: the conditions of a cell. Each measures, in
processor time (a moment's load from other programs on a shared host would otherwise
scale a whole run's estimate; the estimate is of this host's speed, not of its load)

- its start-up until the harness, the methods and TensorFlow are loaded: what every cell
  in a worker process of its own pays before its record's clock starts (every cell loads
  TensorFlow, if only to pin its threads);
- a training step of a fixed small network, the CPU CNN's shape (conv 32 5x5 stride 2,
  conv 64 3x3 stride 2, dense 128, SGD) on fixed random 28x28 inputs in batches of 128:
  the median of REPEATS epochs of STEPS steps, after a first epoch that traces it. Most
  of a cell's time is such steps: oneDNN's convolution kernels, Keras's step in Python,
  the optimiser's update. Unlike a matrix product alone, it gains or loses with all
  three, and it is the same computation on every host.

This host's slowdown is that step time over the same measurement on the reference host
(REFERENCE_STEP_SECONDS); the network is defined here, not borrowed from a method, so a
method's change leaves the reference valid.
"""
from __future__ import annotations

import benchmarks.numerics  # noqa: F401  (first: see benchmarks/numerics.py)

import dataclasses
import multiprocessing
import statistics
import time
from multiprocessing.connection import Connection

STEPS, REPEATS, BATCH = 8, 3, 128
# The step on the reference host (AMD EPYC, 2 cores), two calibrations side by side as
# the archive's cells ran: the median of three rounds of the measurement `python -m
# speed.bench_make_bench --calibrate` makes, on 28 November 2026 (15.2, 12.2 and 14.2
# ms), each the calibration's step here (34.8 to 42.2 ms while the host was busy with
# other work) scaled by the quick suite's non-private cell trained just before it (101
# to 104 s of processor time against its archived 36.5 s).
REFERENCE_STEP_SECONDS = 0.0142
# A worker's start-up there: the gap between one worker's consecutive records in the
# make bench of 26 November 2026 (92990db), 4 s each time (timestamps in whole seconds).
REFERENCE_STARTUP_S = 4.0


@dataclasses.dataclass(frozen=True)
class HostSpeed:
    slowdown: float  # a cell's wall time here over its time on the reference host
    startup_s: float  # the start-up of a worker process here
    calibration_s: float  # what the calibration took; 0 if it did not run

    def describe(self) -> str:
        if not self.calibration_s:
            return (f"at its speed (not calibrated: a short run), {self.startup_s:.1f} s "
                    f"to start a worker")
        return (f"scaled by a {self.calibration_s:.0f} s calibration: this host at "
                f"{self.slowdown:.2f}x its time, {self.startup_s:.1f} s to start a worker")


REFERENCE = HostSpeed(1.0, REFERENCE_STARTUP_S, 0.0)


def calibrate(processes: int) -> HostSpeed:
    """Measure this host in ``processes`` worker processes side by side."""
    context = multiprocessing.get_context("spawn")
    start = time.perf_counter()
    running = []
    for _ in range(processes):
        ours, theirs = context.Pipe()
        process = context.Process(target=_measure, args=(theirs,), daemon=True,
                                  name="privboard calibration")
        process.start()
        theirs.close()
        running.append((process, ours))
    startups, steps = zip(*(conn.recv() for _, conn in running))
    for process, _ in running:
        process.join()
    return HostSpeed(statistics.mean(steps) / REFERENCE_STEP_SECONDS,
                     statistics.mean(startups), time.perf_counter() - start)


def _measure(conn: Connection) -> None:
    from benchmarks import runner  # noqa: F401  (what a worker process loads)
    from benchmarks.registry import all_methods
    from benchmarks.tf_runtime import pin_threads

    all_methods()  # a cell's first look-up loads every method
    pin_threads()  # and TensorFlow
    conn.send((time.process_time(), step_seconds()))  # this process's time since it began


def step_seconds() -> float:
    """The median processor time of a training step of the calibration's network in this
    process."""
    import numpy as np
    import tensorflow as tf

    layers = tf.keras.layers
    tf.keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.random((STEPS * BATCH, 28, 28, 1), dtype=np.float32)
    y = rng.integers(0, 10, STEPS * BATCH)
    model = tf.keras.Sequential([
        tf.keras.Input((28, 28, 1)),
        layers.Conv2D(32, 5, strides=2, padding="same", activation="relu"),
        layers.Conv2D(64, 3, strides=2, padding="same", activation="relu"),
        layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dense(10)])
    model.compile(tf.keras.optimizers.SGD(0.01),
                  tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    seconds: list[float] = []
    began: list[float] = []
    timer = tf.keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: began.append(time.process_time()),
        on_epoch_end=lambda epoch, logs: seconds.append(time.process_time() - began[-1]))
    model.fit(x, y, batch_size=BATCH, epochs=1 + REPEATS, shuffle=False, verbose=0,
              callbacks=[timer])
    return statistics.median(seconds[1:]) / STEPS  # the first epoch traces the step
