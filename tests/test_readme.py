"""The README's example method runs as written and meets the method contract, replay
check included: its noise is the privacy layer's."""
import math
import re
import types
from pathlib import Path

import numpy as np
import pytest

from benchmarks import datasets
from benchmarks.contract import _REGISTRY, Budget
from benchmarks.submission.contract_checks import (
    check_replays, check_uncharged_data_has_no_influence, fit)

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_method_registers_fits_and_charges_its_ledger():
    block = re.search(r"```python\n(# methods/.*?)```", README.read_text(), re.S).group(1)
    module = types.ModuleType("readme_example")
    try:
        exec(compile(block, "README.md", "exec"), module.__dict__)
        method = _REGISTRY["noisy-majority"]
        data = datasets.load("digits")
        fitted = method(Budget(1.0), seed=0).fit(data.train, data.num_classes)
        proba = fitted.predict_proba(data.test.x)
        assert proba.shape == (len(data.test), data.num_classes)
        np.testing.assert_allclose(proba.sum(1), 1)
        total = fitted.spent()
        assert (total.epsilon, total.delta, total.composition) == (1.0, 0.0, "pure")
        tiny = fit(method)
        check_uncharged_data_has_no_influence(tiny)
        assert check_replays(tiny).startswith("1 release of noisy label histogram replayed "
                                              "with the labels altered: identical predictions")
        assert math.isinf(method(Budget(math.inf)).fit(data.train, 10).spent().epsilon)
    finally:
        _REGISTRY.pop("noisy-majority", None)


@pytest.fixture(scope="module")
def archive_rows():
    from reports import readme_tables as tables

    return tables.archive_rows()


def test_readme_tables_of_our_results_are_those_the_archive_gives(archive_rows):
    from reports import readme_tables as tables

    results = tables.between(tables.RESULTS.read_text(), tables.START, tables.END)
    assert results == tables.section(archive_rows), "run: python -m reports.readme_tables"
    readme = README.read_text()
    headline = tables.between(readme, tables.HEADLINE_START, tables.HEADLINE_END)
    assert headline == tables.headline(archive_rows), "run: python -m reports.readme_tables"
    best = tables.between(readme, tables.BEST_START, tables.BEST_END)
    assert best == tables.best(archive_rows), "run: python -m reports.readme_tables"


def test_the_readmes_best_so_far_is_the_sites_ranking(archive_rows):
    """A line per dataset and family, a column per epsilon of the site's ranking, each
    cell naming the card's best honest and best test-tuned configurations, as the README
    holds it: the method in bold, its mean, how its settings were chosen; "none" where
    the card has none of a track."""
    from reports import readme_tables as tables
    from reports.ranking import epsilon_text
    from reports.rows import format_number

    table = tables.between(README.read_text(), tables.BEST_START, tables.BEST_END)
    header, _, *lines = [[cell.strip() for cell in line.strip("|").split("|")]
                         for line in table.strip().splitlines()]
    readme = {(line[0], line[1], epsilon): cell for line in lines
              for epsilon, cell in zip(header[2:], line[2:]) if cell}
    cards = tables.best_cards(archive_rows)
    assert header[:2] == ["dataset", "privacy"]
    assert sorted(readme) == sorted((dataset, family, f"ε = {epsilon_text(epsilon)}")
                                    for dataset, family, epsilon, *_ in cards)
    for dataset, family, epsilon, tops, metric in cards:
        cell = readme[dataset, family, f"ε = {epsilon_text(epsilon)}"]
        honest, tuned = cell.split("; test-tuned: ")
        for top, text in zip(tops, (honest.removeprefix("honest: "), tuned), strict=True):
            line = top["line"]
            if line is None:
                assert text == "none", (dataset, family, epsilon, cell)
            else:
                mean = format_number(line["mean"], metric)
                assert text.startswith(f"**{line['method']}**") and f" {mean} " in text, cell
                assert f"_{line['chosen']}_" in text, cell


def test_the_headline_table_reads_as_the_papers_table_4(archive_rows):
    """A row per method, a column per epsilon, each cell mean ± std (n) and the difference
    to the paper's number, with the short notion."""
    from reports import readme_tables as tables

    header, _, *lines = tables.headline(archive_rows).strip().splitlines()
    assert header == "| dataset | method | privacy | ε = 1 | ε = 2 | ε = 3 | ε = 4 | ε = inf |"
    lp = next(line for line in lines if line.startswith("| mnist | lp-1st |"))
    cells = [cell.strip() for cell in lp.strip("|").split("|")]
    assert cells[2] == "label-DP · sub · pure"
    assert re.fullmatch(r"\d+\.\d\d ± \d\.\d\d \(n=3\) \([+-]\d+\.\d\d\)", cells[3])


def test_the_submission_walkthrough_gives_the_readmes_commands():
    """docs/submission.md's commands for the Opacus and tensorflow-privacy examples are
    the README's, which tests/test_readme_paths.py runs."""
    def commands(text: str) -> list[str]:
        return [line.split("  #")[0].strip() for block in re.findall(r"```sh\n(.*?)```",
                                                                      text, re.S)
                for line in block.splitlines()]
    readme = commands(README.read_text())
    walkthrough = commands((README.parent / "docs" / "submission.md").read_text())
    examples = [line for line in walkthrough
                if "opacus" in line or "tfp-keras" in line]
    assert len(examples) == 6 and set(examples) <= set(readme), examples
