"""Finds every registered method: the modules of ``methods/`` and the
``privboard.methods`` entry-point group of installed third-party packages."""
from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from benchmarks.contract import _REGISTRY, Method
from benchmarks.errors import unknown

ENTRY_POINT_GROUP = "privboard.methods"
_discovered = False


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
