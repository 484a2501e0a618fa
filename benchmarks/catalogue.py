"""The catalogue written beside run records: what the leaderboard needs to know about
the methods and datasets of those records that the records themselves do not say, and
which configurations are current. With it a site is built from records alone, on a
machine without TensorFlow, the datasets or the method code.

One JSON file, ``catalogue.json``, in a results folder (written by every ``privboard
run``) and in the archive (written by ``privboard archive``):

- methods: per registered method, its paper, version, audit protocol, tasks, default
  hyperparameters and the privacy notion it gives at a finite budget with those defaults;
- datasets: per registered dataset, its citation, where it comes from, its licence,
  fingerprint, task, classes, and its split sizes where it was installed;
- configurations: the configuration identities of every cell of the built-in suites
  (and of the suite files run into that folder), each with its suites. A record of
  any other configuration is superseded, and so is an audited twin of an earlier audit
  protocol than its method's;
- chosen: per configuration, how its settings were chosen, as its suite declares it
  (benchmarks.settings_chosen); catalogues written before it lack this section.
"""
from __future__ import annotations

import datetime as dt
import json
import zipfile
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from benchmarks.atomic import atomic_write
from benchmarks.errors import PrivboardError
from benchmarks.records import CATALOGUE
from benchmarks.settings_chosen import UNDECLARED

SCHEMA = 1
SECTIONS = ("methods", "datasets", "configurations")


class CatalogueError(PrivboardError):
    """A catalogue file that is not one of this schema."""


def current(suites: Iterable = ()) -> dict[str, Any]:
    """The catalogue of this code: the registry, the dataset specs, the built-in suites
    and ``suites`` (loaded Suite objects of the user's own files)."""
    from benchmarks import datasets
    from benchmarks.registry import all_methods
    from benchmarks.suites import load_suite, suite_names

    root = datasets.data_dir()
    configurations: dict[str, list[str]] = {}
    chosen: dict[str, dict[str, str]] = {}
    for suite in [*(load_suite(name) for name in suite_names()), *suites]:
        for cell in suite.cells:
            _add(configurations, cell.config_id, suite.name)
            if cell.chosen.how != UNDECLARED:
                chosen.setdefault(cell.config_id, cell.chosen.as_dict())
    return {
        "schema": SCHEMA, "written_at": dt.datetime.now(dt.timezone.utc).isoformat(
            timespec="seconds"),
        "methods": {name: {"paper": cls.paper, "version": cls.version,
                           "audit_protocol": cls.audit_protocol,
                           "tasks": list(cls.tasks), "defaults": cls.defaults,
                           "notion": cls.default_notion().as_dict()}
                    for name, cls in all_methods().items()},
        "datasets": {name: {"citation": spec.citation, "obtain": spec.obtain,
                            "licence": spec.licence, "fingerprint": spec.fingerprint,
                            "task": spec.task, "num_classes": spec.num_classes,
                            "version": spec.version, "parent": spec.parent,
                            "offline": spec.offline, "sizes": cached_sizes(spec, root)}
                     for name, spec in sorted(datasets.SPECS.items())},
        "configurations": dict(sorted(configurations.items())),
        "chosen": dict(sorted(chosen.items())),
    }


def write(folder: Path, suites: Iterable = ()) -> Path:
    """Write the current catalogue into ``folder``. Configurations of other suite files
    run there before stay current; those of a suite of the same name as one of
    ``suites`` are replaced by its own (its settings changed: the old are superseded)."""
    from benchmarks.suites import suite_names

    suites = list(suites)
    catalogue = current(suites)
    replaced = set(suite_names()) | {suite.name for suite in suites}
    previous = read(folder) or {"configurations": {}}
    for config, names in previous["configurations"].items():
        for name in names:
            if name not in replaced:
                _add(catalogue["configurations"], config, name)
                if config in previous.get("chosen", {}):
                    catalogue["chosen"].setdefault(config, previous["chosen"][config])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CATALOGUE
    with atomic_write(path) as f:
        json.dump(catalogue, f, indent=1, sort_keys=True, allow_nan=False)
    return path


def read(folder: Path) -> dict[str, Any] | None:
    """The catalogue in ``folder``; None if there is none; CatalogueError (one line)
    if it is not one."""
    path = folder / CATALOGUE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CatalogueError(f"catalogue {path} is not a JSON object ({err})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise CatalogueError(f"catalogue {path}: not a catalogue of schema {SCHEMA}")
    missing = [name for name in SECTIONS if not isinstance(data.get(name), dict)]
    if missing:
        raise CatalogueError(f"catalogue {path}: missing {', '.join(missing)}")
    return data


def merged(catalogues: Iterable[dict[str, Any] | None]) -> dict[str, Any]:
    """One catalogue from several: the facts of the newest; the configurations of all."""
    found = sorted((c for c in catalogues if c), key=lambda c: c.get("written_at", ""))
    result: dict[str, Any] = {name: {} for name in (*SECTIONS, "chosen")}
    for catalogue in found:
        result["methods"].update(catalogue["methods"])
        result["datasets"].update(catalogue["datasets"])
        result["chosen"].update(catalogue.get("chosen", {}))
        for config, names in catalogue["configurations"].items():
            for name in names:
                _add(result["configurations"], config, name)
    return result


def _add(configurations: dict[str, list[str]], config: str, suite: str) -> None:
    names = configurations.setdefault(config, [])
    if suite not in names:
        names.append(suite)


def cached_sizes(spec, root: Path) -> dict[str, int] | None:
    """{"train": n, "test": m} read from the headers of the cached label arrays (the
    cache is named by the fingerprint, so these are the arrays of this fingerprint);
    None if the dataset is not cached here."""
    from benchmarks.datasets.core import cache_path

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
