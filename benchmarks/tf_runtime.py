"""How TensorFlow uses a process's hardware: the GPUs it sees, how much of a GPU it
takes, and how many threads it runs. TensorFlow is imported inside the functions, so
importing this module stays cheap. The settings only take effect before TensorFlow's
first op in the process, and finding them already set is fine."""
from __future__ import annotations

import os
import platform


def gpus() -> list[str]:
    """One line per GPU TensorFlow sees, with its model when the driver reports it;
    empty on a CPU-only machine. Does not start TensorFlow's runtime."""
    import tensorflow as tf

    found = []
    for gpu in tf.config.list_physical_devices("GPU"):
        details = tf.config.experimental.get_device_details(gpu)
        model = details.get("device_name", "unknown model")
        capability = details.get("compute_capability")
        found.append(f"{gpu.name}: {model}" + (
            f", compute capability {capability[0]}.{capability[1]}" if capability else ""))
    return found


def cuda_build() -> str:
    """The CUDA and cuDNN versions this TensorFlow was built for, which a GPU machine's
    driver must support, or why it uses no GPU at all."""
    import tensorflow as tf

    info = tf.sysconfig.get_build_info()
    if not info.get("is_cuda_build"):
        return "this TensorFlow is built without CUDA"
    return f"built for CUDA {info.get('cuda_version')}, cuDNN {info.get('cudnn_version')}"


def allow_memory_growth() -> None:
    """Let TensorFlow take GPU memory as it needs it instead of all of it at start-up, so
    that cells sharing a GPU (a fractional --gpus-per-cell) fit side by side."""
    import tensorflow as tf

    for gpu in tf.config.list_physical_devices("GPU"):
        if not tf.config.experimental.get_memory_growth(gpu):
            tf.config.experimental.set_memory_growth(gpu, True)


def cpu_threads() -> int:
    """The threads a cell computes on: OMP_NUM_THREADS (1 unless the user sets it:
    benchmarks/__init__.py; numpy's BLAS and oneDNN read it when they load), else every
    core this process may use."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0]  # "4,2": nested levels
    return int(first) if first.isdigit() and int(first) > 0 else len(os.sched_getaffinity(0))


def pin_threads() -> int:
    """Run TensorFlow's ops on cpu_threads() threads and return the count they run on.
    Results depend on it bit for bit (a reduction split over two threads adds in
    another order), so every record keeps it and a re-run uses it again. Where
    TensorFlow already ran ops in this process, its count stays as it was."""
    import tensorflow as tf

    count, threading = cpu_threads(), tf.config.threading
    if threading.get_intra_op_parallelism_threads() != count:
        try:
            threading.set_intra_op_parallelism_threads(count)
            threading.set_inter_op_parallelism_threads(count)
        except RuntimeError:  # the runtime is initialised: the count can no longer change
            pass
    return threads()


def threads() -> int:
    """The threads TensorFlow's ops run on in this process (its default: every core)."""
    import tensorflow as tf

    return tf.config.threading.get_intra_op_parallelism_threads() or len(os.sched_getaffinity(0))


def onednn() -> bool:
    """Whether TensorFlow runs oneDNN's kernels in this process (TF_ENABLE_ONEDNN_OPTS,
    read when TensorFlow loads)."""
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def openblas_kernels() -> str:
    """The kernels numpy's OpenBLAS runs (by the CPU, or OPENBLAS_CORETYPE when it loaded)."""
    from threadpoolctl import threadpool_info

    found = {info.get("architecture") for info in threadpool_info()
             if info.get("internal_api") == "openblas"}
    return ",".join(sorted(str(a) for a in found)) or "none"


def numerics() -> dict[str, object]:
    """What a trained model depends on bit for bit besides its code, seed and data: the
    thread count, oneDNN and the instruction sets of the kernels (benchmarks/__init__.py
    caps them). Part of every record and of every trained cache's key."""
    return {"threads": threads(), "onednn": onednn(),
            "onednn_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "ALL"),
            "openblas": openblas_kernels()}


def cpu_model() -> str:
    """The processor's model name as the kernel reports it."""
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def training_device() -> str:
    """Where Keras trains: the first GPU if TensorFlow sees one, else the CPU. Imports
    TensorFlow: call it once a run has loaded it."""
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    return gpus[0].name if gpus else "CPU"
