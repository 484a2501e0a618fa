"""A Ray worker's TensorFlow takes the threads Ray reserved and GPU memory as it needs
it; setting both again in the same process, after ops have run, is harmless."""
import os
import subprocess
import sys

import pytest

CODE = """
import tensorflow as tf
from benchmarks.tf_runtime import allow_memory_growth, pin_threads
for _ in range(2):  # two cells in one worker process
    allow_memory_growth()
    print(pin_threads())
    tf.reduce_sum(tf.ones((4, 4))).numpy()
threading = tf.config.threading
print(threading.get_intra_op_parallelism_threads(), threading.get_inter_op_parallelism_threads(),
      all(tf.config.experimental.get_memory_growth(g) for g in tf.config.list_physical_devices("GPU")))
"""


@pytest.mark.integration
def test_tensorflow_runs_on_the_threads_ray_reserved_and_grows_gpu_memory():
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-c", CODE], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["1", "1", "1", "1", "True"]
