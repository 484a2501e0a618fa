"""Finds every registered method: the modules of ``methods/`` and the
``privboard.methods`` entry-point group of installed third-party packages."""
from __future__ import annotations

import difflib
import importlib
import pkgutil
from importlib.metadata import entry_points

from benchmarks.contract import _REGISTRY, Method
from benchmarks.errors import PrivboardError

ENTRY_POINT_GROUP = "privboard.methods"
_discovered = False


class UnknownName(PrivboardError, LookupError):
    """An unknown method, dataset or suite name; the message suggests the closest one."""


def unknown(kind: str, name: str, known: list[str]) -> UnknownName:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(sorted(known))}"
    return UnknownName(f"unknown {kind} {name!r}{hint}")


def discover() -> None:
    """Import every module under methods/ and every entry point, once.

    Importing is what registers a method, so importing the whole folder here is what
    keeps a method file from being silently missing.
    """
    global _discovered
    if _discovered:
        return
    import methods

    for info in pkgutil.iter_modules(methods.__path__, "methods."):
        if not info.ispkg:  # subpackages hold shared Keras code, not methods
            importlib.import_module(info.name)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        ep.load()
    _discovered = True


def all_methods() -> dict[str, type[Method]]:
    discover()
    return dict(sorted(_REGISTRY.items()))


def get_method(name: str) -> type[Method]:
    methods_ = all_methods()
    if name not in methods_:
        raise unknown("method", name, list(methods_))
    return methods_[name]
