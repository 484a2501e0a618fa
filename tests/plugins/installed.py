"""Packages of methods installed as pip installs them, without pip: each package's source
folder on sys.path, and beside it a dist-info folder with its metadata and the entry
points of its pyproject.toml, where importlib.metadata finds them. Discovery then runs
as it does for a package installed from PyPI."""
from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import json
import sys
import tomllib
from pathlib import Path
from typing import Iterator

import pytest

from benchmarks import registry
from benchmarks.cli import main
from benchmarks.contract import _REGISTRY

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLE = ROOT / "examples" / "uniform-rr-plugin"
OPACUS_EXAMPLE = ROOT / "examples" / "opacus-plugin"
TFP_EXAMPLE = ROOT / "examples" / "tfp-keras-plugin"
HERE = Path(__file__).resolve().parent
HAS_OPACUS = importlib.util.find_spec("opacus") is not None
needs_opacus = pytest.mark.skipif(
    not HAS_OPACUS, reason="needs PyTorch and Opacus: pip install -e '.[opacus]'")


def dist_info(site: Path, name: str, version: str, entry_points: dict[str, str]) -> None:
    """The metadata pip writes for an installed distribution, entry points included."""
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\n"
                                     f"Version: {version}\n")
    (folder / "entry_points.txt").write_text(
        f"[{registry.ENTRY_POINT_GROUP}]\n"
        + "".join(f"{key} = {value}\n" for key, value in entry_points.items()))


def example_metadata(example: Path = EXAMPLE) -> tuple[str, str, dict[str, str]]:
    """An example package's name, version and privboard entry points, from its pyproject."""
    project = tomllib.loads((example / "pyproject.toml").read_text())["project"]
    return (project["name"], project["version"],
            project["entry-points"][registry.ENTRY_POINT_GROUP])


def dp_library_packages() -> dict[str, tuple[str, str, dict[str, str]]]:
    """The two DP-library examples and their variants (tests/plugins/tfp_plugin and
    opacus_variants), as ``installed`` takes them: Opacus' only where it is installed."""
    variants = {"tfp": "tfp_plugin", **({"opacus": "opacus_variants"} if HAS_OPACUS else {})}
    packages = {str(TFP_EXAMPLE): example_metadata(TFP_EXAMPLE),
                str(HERE): ("privboard-dp-library-tests", "0.0.1", variants)}
    if HAS_OPACUS:
        packages[str(OPACUS_EXAMPLE)] = example_metadata(OPACUS_EXAMPLE)
    return packages


def digits_block(methods: list[str], hparams: str = "{epochs = 2}") -> str:
    """A suite block of ``methods`` on digits at (1, 1e-5), one seed (a run and its
    audited twin each), with the settings ``hparams`` (a TOML inline table)."""
    return (f'[[block]]\ndatasets = ["digits"]\nmethods = {json.dumps(methods)}\n'
            f'epsilons = [1]\ndelta = 1e-5\nseeds = [0]\nhparams = {hparams}\n')


@contextlib.contextmanager
def installed(site: Path, packages: dict[str, tuple[str, str, dict[str, str]]]
              ) -> Iterator[None]:
    """``packages`` (source folder -> name, version, entry points) installed into
    ``site`` for the length of the block; the registry forgets their methods after."""
    modules = set(sys.modules)
    with pytest.MonkeyPatch.context() as patch:
        for source, (name, version, entry_points) in packages.items():
            dist_info(site, name, version, entry_points)
            patch.syspath_prepend(source)
        patch.syspath_prepend(str(site))
        patch.setattr(registry, "_discovered", False)
        try:
            yield
        finally:
            theirs = {name for name in set(sys.modules) - modules if any(
                Path(getattr(sys.modules[name], "__file__", None) or "").is_relative_to(source)
                for source in packages)}
            for name in theirs:
                del sys.modules[name]
            for name, method in list(_REGISTRY.items()):
                if method.__module__ in theirs:
                    del _REGISTRY[name]


@contextlib.contextmanager
def installed_suite(folder: Path, suite: str,
                    packages: dict[str, tuple[str, str, dict[str, str]]]) -> Iterator[Path]:
    """The suite file of text ``suite`` written into ``folder``, and ``packages``
    installed beside it (as ``installed``) for the length of the block."""
    path = folder / "tiny.toml"
    path.write_text(suite)
    with installed(folder / "site", packages):
        yield path


@dataclasses.dataclass(frozen=True)
class Submitted:
    code: int
    failed: list[str]  # the FAILED lines, without the word
    err: str  # stderr: the progress bar
    bundle: Path


def submit(method: str, suite: Path | str, out: Path) -> Submitted:
    """``privboard submit`` of ``method`` on ``suite`` (a path or a name) into ``out``."""
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(["submit", "--method", method, "--suite", str(suite), "--out", str(out)])
    failed = [line[len("FAILED "):] for line in stdout.getvalue().splitlines()
              if line.startswith("FAILED ")]
    return Submitted(code, failed, stderr.getvalue(), out)
