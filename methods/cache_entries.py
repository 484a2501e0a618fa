"""The caches of computed artefacts (trained encoders, scattering features): the digest
of strings and arrays that keys and checks an entry (each part hashed with its type,
length, dtype and shape, so that no two different sequences of parts share a digest),
and the reading of an entry that is used only when it passes its check."""
from __future__ import annotations

import hashlib
import warnings
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np

T = TypeVar("T")


def content_digest(*parts: str | np.ndarray) -> str:
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, str):
            h.update(f"str {len(part)}\n{part}".encode())
        else:
            array = np.ascontiguousarray(part)
            h.update(f"array {array.dtype.str} {array.shape}\n".encode())
            h.update(array.data)
    return h.hexdigest()


def read_checked(path: Path, read: Callable[[Any], T], intact: Callable[[Any, T], bool], *,
                 what: str, check: str, otherwise: str) -> T | None:
    """``read(stored)`` of the .npz file at ``path`` if ``intact(stored, entry)``; None
    if there is no file, and None with a warning (naming ``what``, its ``check`` and
    what happens ``otherwise``) if the file is unreadable or fails its check."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as stored:
            entry = read(stored)
            whole = intact(stored, entry)
    except Exception as error:  # any unreadable file is treated like a corrupt one
        reason = f"unreadable ({type(error).__name__})"
        whole = False
    else:
        reason = f"its content does not match its stored {check}"
    if not whole:
        warnings.warn(f"ignoring {what} {path}: {reason}; {otherwise}", stacklevel=3)
        return None
    return entry
