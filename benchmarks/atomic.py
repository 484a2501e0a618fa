"""Atomic writes of files and folders: a reader sees the old one or the whole new one, never
a part. And a lock for building a cached file once, however many processes want it."""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Iterator

from benchmarks.errors import InputError


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


@contextlib.contextmanager
def atomic_folder(path: Path) -> Iterator[Path]:
    """Fill a staging folder beside ``path``, then swap it in whole: a reader sees the old
    folder or the whole new one, and a failure leaves the old one (or nothing).

    A kill at any moment leaves at most a hidden ``.NAME.staging-*`` folder beside it.
    """
    if path.exists() and not path.is_dir():
        raise InputError(f"{path} exists and is not a directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.staging-"))
    try:
        yield staging
        os.chmod(staging, 0o755)  # mkdtemp makes it private; the folder is meant to be read
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        if path.exists():
            path.rename(old)
        staging.rename(path)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


@contextlib.contextmanager
def building(path: Path) -> Iterator[None]:
    """Hold the lock of building ``path`` (a cache entry): a process that looks for the
    entry, and builds and writes it when it is missing, does it inside, so that two
    processes never build the same entry at once; the one that waited finds it built.

    The lock is a hidden ``.NAME.lock`` file beside the entry, locked with flock: the
    lock dies with its process, so a killed builder never leaves it held. Where no lock
    file can be made (a read-only folder, where nothing can be built either), reading
    goes on without it.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = open(path.with_name(f".{path.name}.lock"), "a")
    except OSError:
        yield
        return
    with lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        yield
