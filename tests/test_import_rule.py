"""The layers' import rule, checked on the source (every import statement, those inside
functions too):
- the privacy layer (benchmarks/privacy/) imports nothing else of the project;
- methods/ imports only the privacy layer, the method contract and each other;
- benchmarks/ (but discovery, benchmarks/registry.py) and reports/ never import methods/.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = ("benchmarks", "methods", "reports", "baselines", "speed")
# What a method may import of the harness: the contract and what it hands a method.
CONTRACT = ("benchmarks.contract", "benchmarks.context", "benchmarks.errors",
            "benchmarks.atomic", "benchmarks.tf_runtime")
DISCOVERY = ROOT / "benchmarks" / "registry.py"


def imported(path: Path) -> set[str]:
    """The project modules ``path`` imports: ``from benchmarks import x`` names
    benchmarks.x, since x may be a module; relative imports are resolved, and a literal
    name given to importlib.import_module or __import__ counts too."""
    package = path.relative_to(ROOT).parent.parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, *([node.module] if node.module else [])])
            found |= {f"{module}.{alias.name}" for alias in node.names}
        elif (isinstance(node, ast.Call) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None))
              in ("import_module", "__import__")):
            found.add(node.args[0].value)
    return {name for name in found if name.split(".")[0] in OURS}


def _within(name: str, allowed: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in allowed)


def breaches(path: Path) -> list[str]:
    """The imports of ``path`` that its layer forbids."""
    part = path.relative_to(ROOT).parts
    if part[:2] == ("benchmarks", "privacy"):
        allowed = lambda name: _within(name, ("benchmarks.privacy",))  # noqa: E731
    elif part[0] == "methods":
        allowed = lambda name: _within(name, ("benchmarks.privacy", "methods", *CONTRACT))  # noqa: E731
    elif part[0] in ("benchmarks", "reports") and path != DISCOVERY:
        allowed = lambda name: not _within(name, ("methods",))  # noqa: E731
    else:
        return []
    return sorted(name for name in imported(path) if not allowed(name))


def sources() -> list[Path]:
    return sorted(p for folder in ("benchmarks", "methods", "reports")
                  for p in (ROOT / folder).rglob("*.py"))


def test_every_layer_imports_only_what_it_may():
    found = {str(p.relative_to(ROOT)): breaches(p) for p in sources()}
    assert {path: names for path, names in found.items() if names} == {}


@pytest.mark.parametrize("folder, line", [
    ("benchmarks/privacy", "from benchmarks.datasets import data_dir"),
    ("benchmarks/privacy", "import methods.lp_mst"),
    ("methods", "from benchmarks import datasets"),
    ("methods", "from benchmarks.runner import run_cell"),
    ("benchmarks", "from methods.cluster_priors import fit_clusters"),
    ("reports", "import methods"),
    ("benchmarks/privacy", "from ..datasets import data_dir"),
    ("benchmarks/privacy", "from .. import runner"),
    ("benchmarks", "importlib.import_module('methods.lp_mst')"),
])
def test_a_planted_import_breaks_the_rule(folder, line):
    planted = ROOT / folder / "planted_import_test.py"
    planted.write_text(f"def f():\n    {line}\n")
    try:
        assert breaches(planted), line
    finally:
        planted.unlink()
