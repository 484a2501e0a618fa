"""Finds every registered method: the modules of ``methods/`` and the
``privboard.methods`` entry-point group of installed third-party packages."""
from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from importlib.metadata import EntryPoint, entry_points

from benchmarks.contract import _REGISTRY, Method
from benchmarks.errors import PrivboardError, one_line, unknown

ENTRY_POINT_GROUP = "privboard.methods"
_discovered = False


class PluginError(PrivboardError):
    """An installed package whose entry point in the privboard.methods group fails to
    load."""


@dataclasses.dataclass(frozen=True)
class Plugin:
    """The installed package that registered a method through the entry point."""

    package: str  # the distribution's name, as pip knows it
    version: str
    entry_point: str  # "name = module"
    module: str  # the top-level import package of the method's code


def discover() -> None:
    """Import every module under methods/ and every entry point, once.

    Importing is what registers a method, so importing the whole folder here is what
    keeps a method file from being silently missing. A package whose entry point fails
    to import stops every command with one line naming the package.
    """
    global _discovered
    if _discovered:
        return
    import methods

    for info in pkgutil.iter_modules(methods.__path__, "methods."):
        if not info.ispkg:  # subpackages hold shared Keras code, not methods
            importlib.import_module(info.name)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            ep.load()
        except Exception as err:  # noqa: BLE001 (whatever a plugin raises, name it)
            raise PluginError(f"the plugin package {_package(ep)} failed to import its "
                              f"entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}): "
                              f"{one_line(err)}") from None
    _discovered = True


def _package(ep: EntryPoint) -> str:
    dist = ep.dist
    return f"{ep.module!r}" if dist is None else f"{dist.name} {dist.version}"


def all_methods() -> dict[str, type[Method]]:
    discover()
    return dict(sorted(_REGISTRY.items()))


def get_method(name: str) -> type[Method]:
    methods_ = all_methods()
    if name not in methods_:
        raise unknown("method", name, list(methods_))
    return methods_[name]


def plugin_of(method: type[Method]) -> Plugin | None:
    """The installed package whose entry point registered ``method`` (the one whose
    module is the top-level package of the method's code); None for privboard's own."""
    top = method.__module__.split(".")[0]
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.module.split(".")[0] == top:
            dist = ep.dist
            return Plugin(dist.name if dist else top, dist.version if dist else "unknown",
                          f"{ep.name} = {ep.value}", top)
    return None
