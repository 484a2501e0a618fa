"""What ``privboard data status`` reports: each dataset is cached, ready (every source
present and matching its official checksum) or why it cannot be loaded, in one line.

Hashing a large archive takes seconds, so each verdict is kept in
``<data_dir>/cache/verified.json`` beside the path, size and modification time of every
file it covers; the next call hashes again only when one of them changed.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.atomic import atomic_write
from benchmarks.datasets.core import (SPECS, DataError, DatasetSpec, cache_path, get_spec,
                                      resolve_root)

VERDICTS = "verified.json"


def status(data_dir: Path | str | None = None) -> list[tuple[str, str]]:
    """Per dataset: "cached", "ready" (sources verified) or why it cannot be loaded."""
    root = resolve_root(data_dir)
    verdicts = Verdicts(root / "cache" / VERDICTS)
    rows = []
    for name, spec in sorted(SPECS.items()):
        if cache_path(spec, root).is_file():
            rows.append((name, "cached"))
        else:
            rows.append((name, spec.missing(root) or verdicts.problem(spec, root) or "ready"))
    verdicts.save()
    return rows


def _verify_sources(spec: DatasetSpec, root: Path) -> None:
    """Check every source of a dataset against its official checksum (DataError names
    the first bad file). A file with a checksum of its own is hashed; the rest (members
    of an archive, decompressed bytes, a package's arrays) are read as a run reads them,
    and the reader verifies them."""
    files = _source_files(spec)
    expected = dict(spec.checksums)
    if files and all(name in expected for name in files):
        for name in files:
            spec.read_verified(root, name)
    else:
        spec.reader(spec, root)


def _source_files(spec: DatasetSpec) -> tuple[str, ...]:
    return tuple(label for label, _ in spec.checksums) if spec.files is None else spec.files


class Verdicts:
    """Verification verdicts kept between calls, keyed by what they covered."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            table = json.loads(path.read_text())
        except (OSError, ValueError):  # none yet, or unreadable: verify again
            table = {}
        self.table: dict[str, Any] = table if isinstance(table, dict) else {}
        self.changed = False

    def problem(self, spec: DatasetSpec, root: Path) -> str | None:
        """Why a dataset whose files are all present fails verification, or None."""
        if spec.parent is not None:
            parent = get_spec(spec.parent)
            return None if cache_path(parent, root).is_file() else self.problem(parent, root)
        paths = [spec.locate(root, name) for name in _source_files(spec)]
        covered = {"fingerprint": spec.fingerprint,
                   "files": [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in paths]}
        kept = self.table.get(spec.name)
        if isinstance(kept, dict) and kept.get("covered") == covered:
            return kept.get("problem")
        try:
            _verify_sources(spec, root)
            problem = None
        except DataError as error:
            problem = str(error)
        if paths:  # a package's arrays (no files) are cheap to check every time
            self.table[spec.name] = {"covered": covered, "problem": problem}
            self.changed = True
        return problem

    def save(self) -> None:
        if not self.changed:
            return
        try:
            with atomic_write(self.path) as f:
                json.dump(self.table, f, indent=1, sort_keys=True)
        except OSError:  # a read-only data folder: verdicts are only a speed-up
            pass
