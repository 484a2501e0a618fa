"""Suites: fixed dataset x method x epsilon x seed grids, read from TOML files in
``benchmarks/suites/``.

A suite file holds a name, a description and ``[[block]]`` tables::

    [[block]]
    datasets = ["mnist"]
    methods = ["lp-1st", "lp-2st"]
    epsilons = [1, 4]          # TOML's inf is allowed: no privacy
    delta = 0.0
    seeds = [0, 1]
    hparams = { epochs = 8 }   # passed to every method of the block; a list of
                               # tables runs each as its own variant
    audit = true               # also run an audited twin of each configuration (its
                               # first seed) with canaries: benchmarks.audit.training
    chosen = "a priori"        # how the settings were chosen: benchmarks.settings_chosen
    [block.search]             # or: chosen by private selection, charged:
    ...                        # benchmarks.tuning

Everything is validated when the suite is loaded, before anything runs.
"""
from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path
from typing import Any

from benchmarks import datasets
from benchmarks.contract import Budget
from benchmarks.errors import PrivboardError
from benchmarks.privacy import PrivacyNotion
from benchmarks.records import cell_identity, config_identity, describe_cell
from benchmarks.registry import get_method, unknown
from benchmarks.settings_chosen import PRIVATE, UNDECLARED, Chosen
from benchmarks.tuning import Search, check_tunable, tuned_notion

SUITES_DIR = Path(__file__).parent / "suites"
BLOCK_KEYS = {"datasets", "methods", "epsilons", "delta", "seeds", "hparams", "audit", "chosen",
              "search"}


class SuiteError(PrivboardError):
    """A suite file that cannot be used as written."""


@dataclasses.dataclass(frozen=True)
class Cell:
    suite: str
    dataset: str
    method: str
    epsilon: float
    delta: float
    seed: int
    hparams: dict[str, Any]  # the method's defaults with the block's overrides applied
    skip: str | None = None  # why the method cannot run this setting
    audit: bool = False  # the audited twin of the configuration: trained with canaries
    search: Search | None = None  # settings chosen by a private selection from this
    chosen: Chosen = Chosen(UNDECLARED)  # how the settings were chosen: not an identity

    @property
    def budget(self) -> Budget:
        return Budget(self.epsilon, self.delta)

    @property
    def notion(self) -> PrivacyNotion:
        """The notion the cell's number carries."""
        notion = get_method(self.method).notion_for(self.budget, self.hparams)
        return notion if self.search is None else tuned_notion(notion)

    @property
    def config_id(self) -> str:
        """What changes the result except the seed (benchmarks.records)."""
        return config_identity(self.method, get_method(self.method).version, self.dataset,
                               datasets.get_spec(self.dataset).fingerprint, self.epsilon,
                               self.delta, self.hparams,
                               None if self.search is None else self.search.as_dict())

    @property
    def audit_protocol(self) -> int:
        """The protocol of the method's audited twin (benchmarks.contract.Method)."""
        return get_method(self.method).audit_protocol

    @property
    def cell_id(self) -> str:
        return cell_identity(self.config_id, self.seed, self.audit, self.audit_protocol)

    def describe(self) -> str:
        return describe_cell(self.dataset, self.method, self.epsilon, self.delta, self.seed,
                             self.audit)


@dataclasses.dataclass(frozen=True)
class Suite:
    name: str
    description: str
    cells: tuple[Cell, ...]


def suite_names() -> list[str]:
    return sorted(p.stem for p in SUITES_DIR.glob("*.toml"))


def load_suite(name: str, seeds: list[int] | None = None,
               grid_for: str | None = None) -> Suite:
    """A suite by name, or from the path of a TOML file of the same format; ``seeds``,
    when given, replace every block's seeds (the audited twins take the first).

    ``grid_for``: that method alone on the suite's grid instead: each block's datasets,
    epsilons and seeds, its delta if the method needs one (else 0), and the method's own
    defaults, since a block's settings are those of its own methods."""
    path = Path(name) if name.endswith(".toml") else SUITES_DIR / f"{name}.toml"
    if not path.is_file():
        if name.endswith(".toml"):
            raise SuiteError(f"suite file {path} does not exist")
        raise unknown("suite", name, suite_names())
    try:
        spec = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise SuiteError(f"{path}: not valid TOML: {err}") from None
    blocks = spec.get("block")
    if not blocks:
        raise SuiteError(f"{path}: no [[block]] tables")
    if grid_for is not None:
        keep = ("datasets", "epsilons", "seeds", "audit", *(
            ("delta",) if get_method(grid_for).needs_delta else ()))
        blocks = [{**{key: block[key] for key in keep if key in block}, "methods": [grid_for]}
                  for block in blocks]
    if seeds is not None:
        blocks = [{**block, "seeds": seeds} for block in blocks]
    cells = [cell for i, block in enumerate(blocks, 1)
             for cell in _expand(spec.get("name", path.stem), block, f"{path.name} block {i}")]
    # A cell that two blocks name (say, once more to audit it) runs and is recorded once.
    unique: dict[str, Cell] = {}
    for cell in cells:
        unique.setdefault(cell.cell_id, cell)
    return Suite(spec.get("name", path.stem), spec.get("description", ""),
                 tuple(unique.values()))


def _expand(suite: str, block: dict[str, Any], where: str) -> list[Cell]:
    extra = set(block) - BLOCK_KEYS
    missing = {"datasets", "methods", "epsilons", "seeds"} - set(block)
    if extra or missing:
        raise SuiteError(f"{where}: unknown keys {sorted(extra)}" if extra
                         else f"{where}: missing keys {sorted(missing)}")
    delta = float(block.get("delta", 0.0))
    audit = block.get("audit", False)
    if not isinstance(audit, bool):
        raise SuiteError(f"{where}: audit must be true or false, got {audit!r}")
    search, chosen = _search_and_choice(block, where)
    variants = block.get("hparams", {})
    variants = variants if isinstance(variants, list) else [variants]
    cells = []
    for dataset in block["datasets"]:
        task = datasets.get_spec(dataset).task
        for method_name in block["methods"]:
            method = get_method(method_name)
            for overrides in variants:
                cells += _cells(suite, dataset, task, method, overrides, block["epsilons"],
                                delta, block["seeds"], where, audit, search, chosen)
    return cells


def _search_and_choice(block: dict[str, Any], where: str) -> tuple[Search | None, Chosen]:
    """A block's private search, if it has one, and how its settings were chosen."""
    try:
        if "search" in block:
            if "chosen" in block:
                raise SuiteError(f"{where}: a block with a search is chosen by private "
                                 f"selection; it declares no other choice")
            return Search.from_dict(block["search"], f"{where} search"), Chosen(PRIVATE)
        if "chosen" in block:
            return None, Chosen.from_toml(block["chosen"], where)
        return None, Chosen(UNDECLARED)
    except ValueError as err:
        raise SuiteError(str(err)) from None


def _cells(suite: str, dataset: str, task: str, method: type, overrides: dict[str, Any],
           epsilons: list[float], delta: float, seeds: list[int], where: str,
           audit: bool, search: Search | None, chosen: Chosen) -> list[Cell]:
    unknown_hp = sorted(set(overrides) - set(method.defaults))
    if unknown_hp:
        raise SuiteError(f"{where}: {method.name} has no hyperparameter(s) {unknown_hp}; "
                         f"known: {sorted(method.defaults)}")
    hparams = {**method.defaults, **overrides}
    cells = []
    for eps in epsilons:
        try:
            budget = Budget(eps, delta)
        except ValueError as err:
            raise SuiteError(f"{where}: {err}") from None
        skip = method.skip_reason(task, budget, hparams)
        if skip is None:
            _check_settings(method, budget, overrides, where, search)
        cells += [Cell(suite, dataset, method.name, budget.epsilon, budget.delta, int(seed),
                       hparams, skip, search=search, chosen=chosen) for seed in seeds]
        if audit and skip is None and method.notion_for(budget, hparams).private:
            cells.append(Cell(suite, dataset, method.name, budget.epsilon, budget.delta,
                              int(seeds[0]), hparams, audit=True, search=search,
                              chosen=chosen))
    return cells


def _check_settings(method: type, budget: Budget, overrides: dict[str, Any], where: str,
                    search: Search | None) -> None:
    """Constructing a method validates its settings without training: a typo stops the
    suite with one line before any cell runs, instead of failing every cell."""
    try:
        if search is None:
            method(budget, seed=0, **overrides)
        else:
            check_tunable(method, budget, overrides, search)
    except ValueError as err:
        raise SuiteError(f"{where}: {method.name}: {err}") from None


def only_cells(suite: Suite, text: str) -> Suite:
    """``--cells ID,ID,...``: the suite with only those of its cells."""
    wanted = {part.strip() for part in text.split(",") if part.strip()}
    unknown = sorted(wanted - {cell.cell_id for cell in suite.cells})
    if not wanted or unknown:
        raise SuiteError(f"--cells takes cell identities of suite {suite.name} separated by "
                         f"commas; not of it: {', '.join(unknown) or repr(text)}")
    return dataclasses.replace(suite, cells=tuple(c for c in suite.cells if c.cell_id in wanted))


def parse_seeds(text: str) -> list[int]:
    """``--seeds 0,1,2``: distinct integers >= 0, in the order given."""
    parts = [part.strip() for part in text.split(",")]
    if not all(part.isdigit() for part in parts) or len(set(parts)) != len(parts):
        raise SuiteError(f"--seeds takes distinct integers >= 0 separated by commas, "
                         f"got {text!r}")
    return [int(part) for part in parts]
