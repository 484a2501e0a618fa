"""``privboard doctor``: what this installation trains with. The versions of the stack,
the GPUs TensorFlow sees, the data folder, and each dataset's verified state."""
from __future__ import annotations

import argparse
import sys

STACK = ("tensorflow", "keras", "tensorflow-privacy", "ray")
GPU_INSTALL = "on a GPU machine: make bench GPU=1, or pip install -c constraints.txt -e '.[gpu]'"


def run(args: argparse.Namespace) -> int:
    from benchmarks import datasets
    from benchmarks.tf_runtime import cuda_build, gpus
    from benchmarks.runner import package_version

    def show(what: str, value: str) -> None:
        print(f"{what:<20} {value}")

    show("python", sys.version.split()[0])
    for package in STACK:
        show(package, package_version(package))
    found = gpus()
    for i, gpu in enumerate(found or [f"none ({GPU_INSTALL})"]):
        show("gpu" if i == 0 else "", gpu)
    show("cuda", cuda_build())
    data_dir = args.data or datasets.data_dir()
    show("data folder", str(data_dir))
    rows = datasets.status(data_dir)
    usable = [name for name, state in rows if state in ("cached", "ready")]
    show("datasets ready", ", ".join(usable) or "none")
    for name, state in rows:
        if name not in usable:
            show(f"  {name}", state)
    return 0
