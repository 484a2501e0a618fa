"""Every block of every built-in suite says how its settings were chosen
(benchmarks.settings_chosen): a priori, from a paper for the same dataset, on public
data, on the test split (uncharged), or by a charged private search. "A priori" means
fixed before any data of this task was seen, so it never covers a paper's setting for the
block's own dataset. The declaration is not part of any identity."""
from __future__ import annotations

import re
import tomllib

import pytest

from benchmarks import datasets
from benchmarks.settings_chosen import UNDECLARED
from benchmarks.suites import SUITES_DIR, load_suite, suite_names
from reports.presentation import DATASET_TITLES

# Words by which a declaration cites published work: its authors, a table, figure,
# section or appendix, a paper, or someone's setting.
CITES = re.compile(r"et al\.|\b(Table|Figure|Section|Appendix)s? \d|\bpaper\b|"
                   r"'s (\w+ )?settings?\b", re.IGNORECASE)


def _named(text: str) -> set[str]:
    """The registered datasets a text names, by name or title ("CIFAR-10"); "MNIST" is
    not named by "Fashion-MNIST" or "KMNIST"."""
    return {name for name in datasets.SPECS for word in {name, DATASET_TITLES.get(name, name)}
            if re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text, re.IGNORECASE)}


def _same_test_split(names: list[str]) -> set[str]:
    """The datasets whose test split is one of ``names``' (a derived dataset shares its
    parent's)."""
    family = {*names, *(datasets.SPECS[name].parent for name in names)} - {None}
    return family | {name for name, spec in datasets.SPECS.items() if spec.parent in family}


def a_priori_problem(detail: str, block_datasets: list[str]) -> str:
    """Why an "a priori" declaration with this detail does not hold for a block of these
    datasets; "" when it does. It must say what it is; a setting of another dataset must
    name that dataset, and a paper's setting for the block's own dataset (or its test
    split) is `published`, not a priori."""
    if not detail:
        return "says nothing of where its settings came from"
    own = _named(detail) & _same_test_split(block_datasets)
    if own:
        return f"names its own dataset ({', '.join(sorted(own))}): declare it `published`"
    if CITES.search(detail) and not _named(detail):
        return ("cites published work and names no other dataset it was set for: "
                "name it, or declare `published`")
    return ""


@pytest.mark.parametrize("detail, block_datasets, refused", [
    ("a test fixture, sized for speed", ["digits"], False),
    ("the method's default Lambda 1e-3; nothing else to set", ["adult"], False),
    ("inside LabelDP-Pro's Table 8 grid; momentum of ALIBI's CIFAR-10 code", ["mnist"], False),
    ("Tramer and Boneh's Fashion-MNIST setting at epsilon 3", ["mnist"], False),
    ("Tramer and Boneh's MNIST setting at epsilon 3", ["mnist"], True),
    ("Tramer and Boneh's MNIST setting at epsilon 3", ["mnist-7v9"], True),
    ("Barber's Figure 3 setting (MNIST 7 vs 9)", ["mnist-7v9-small"], True),
    ("the label-DP paper's Table 4 setting", ["kmnist"], True),
    ("", ["mnist"], True),
])
def test_a_priori_is_refused_on_a_papers_setting_for_the_blocks_own_data(
        detail, block_datasets, refused):
    assert bool(a_priori_problem(detail, block_datasets)) == refused


@pytest.mark.parametrize("name", suite_names())
def test_every_block_declares_how_its_settings_were_chosen(name):
    blocks = tomllib.loads((SUITES_DIR / f"{name}.toml").read_text())["block"]
    silent = [f"block {i} ({', '.join(block['methods'])} on {', '.join(block['datasets'])})"
              for i, block in enumerate(blocks, 1) if "chosen" not in block and "search" not in block]
    assert not silent, (f"benchmarks/suites/{name}.toml: {'; '.join(silent)}: no `chosen` "
                        f"(how the settings were chosen) and no search")
    undeclared = [cell.describe() for cell in load_suite(name).cells
                  if cell.chosen.how == UNDECLARED]
    assert not undeclared, f"benchmarks/suites/{name}.toml: undeclared cells {undeclared}"
    wrong = [f"block {i} ({', '.join(block['datasets'])}): {problem}"
             for i, block in enumerate(blocks, 1)
             if block.get("chosen") == "a priori" or "a_priori" in (block.get("chosen") or {})
             if (problem := a_priori_problem(
                 "" if block["chosen"] == "a priori" else block["chosen"]["a_priori"],
                 block["datasets"]))]
    assert not wrong, f"benchmarks/suites/{name}.toml: \"a priori\" {'; '.join(wrong)}"


@pytest.mark.parametrize("name", suite_names())
def test_the_declaration_changes_no_identity(name, tmp_path):
    text = (SUITES_DIR / f"{name}.toml").read_text()
    silent = tmp_path / f"{name}.toml"
    silent.write_text(re.sub(r"(?m)^chosen = .*\n", "", text))
    declared, undeclared = load_suite(name).cells, load_suite(str(silent)).cells
    assert [c.cell_id for c in declared] == [c.cell_id for c in undeclared]
    assert {c.chosen.how for c in undeclared if c.search is None} <= {UNDECLARED}
