"""What the code says about each method and dataset: the facts of their pages that do
not come from run records (the method registry and the dataset specs)."""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from benchmarks.datasets import SPECS, DatasetSpec, data_dir
from benchmarks.datasets.core import cache_path
from benchmarks.registry import all_methods
from reports.presentation import describe_notion


def method_facts() -> dict[str, dict]:
    """Per registered method: its paper, version, default hyperparameters and the notion
    it gives at a finite budget with those defaults."""
    return {name: {"paper": cls.paper, "version": cls.version, "tasks": ", ".join(cls.tasks),
                   "defaults": cls.defaults,
                   "notion": describe_notion(cls.default_notion())}
            for name, cls in all_methods().items()}


def dataset_facts() -> dict[str, dict]:
    """Per registered dataset: where it comes from, its licence and fingerprint, and its
    split sizes if its verified arrays are cached in this machine's data folder."""
    root = data_dir()
    return {name: {"citation": spec.citation, "obtain": spec.obtain, "licence": spec.licence,
                   "fingerprint": spec.fingerprint, "task": spec.task,
                   "num_classes": spec.num_classes, "version": spec.version,
                   "parent": spec.parent, "offline": spec.offline,
                   "sizes": cached_sizes(spec, root)}
            for name, spec in sorted(SPECS.items())}


def cached_sizes(spec: DatasetSpec, root: Path) -> dict[str, int] | None:
    """{"train": n, "test": m} read from the headers of the cached label arrays (the
    cache is named by the fingerprint, so these are the arrays of this fingerprint);
    None if the dataset is not cached here."""
    try:
        with zipfile.ZipFile(cache_path(spec, root)) as cached:
            return {split: _length(cached, f"{split}_y.npy") for split in ("train", "test")}
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None


def _length(archive: zipfile.ZipFile, member: str) -> int:
    with archive.open(member) as array:
        version = np.lib.format.read_magic(array)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, _, _ = read_header(array)
    return int(shape[0])
