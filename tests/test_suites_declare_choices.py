"""Every block of every built-in suite says how its settings were chosen
(benchmarks.settings_chosen): a priori, on public data, on the test split (uncharged), or
by a charged private search. The declaration is not part of any identity."""
from __future__ import annotations

import re
import tomllib

import pytest

from benchmarks.settings_chosen import UNDECLARED
from benchmarks.suites import SUITES_DIR, load_suite, suite_names


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


@pytest.mark.parametrize("name", ["smoke", "label-dp-small"])
def test_the_declaration_changes_no_identity(name, tmp_path):
    text = (SUITES_DIR / f"{name}.toml").read_text()
    silent = tmp_path / f"{name}.toml"
    silent.write_text(re.sub(r"(?m)^chosen = .*\n", "", text))
    assert tomllib.loads(silent.read_text()) != tomllib.loads(text)
    declared, undeclared = load_suite(name).cells, load_suite(str(silent)).cells
    assert [c.cell_id for c in declared] == [c.cell_id for c in undeclared]
    assert {c.chosen.how for c in undeclared} == {UNDECLARED}
