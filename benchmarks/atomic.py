"""Atomic file writes: a reader sees the old file or the whole new one, never a part."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator


@contextlib.contextmanager
def atomic_write(path: Path, mode: str = "w") -> Iterator[IO]:
    """Write to a temp file in the same folder, fsync, then rename over ``path``.

    A kill at any moment leaves at most a ``.tmp-*`` file, which readers skip.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, mode) as f:
            os.fchmod(f.fileno(), 0o644)  # mkstemp's 0600 would hide a shared file
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
