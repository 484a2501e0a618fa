"""The README is a landing page and the reference is in docs/: every relative link of
either resolves, to a file and to a heading of it."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings (outside code blocks)."""
    anchors, fenced = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", title)))
    return anchors


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_link_resolves(page):
    links = LINK.findall(page.read_text())
    for link in links:
        if "://" in link or link.startswith("mailto:"):
            continue
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        assert target.is_file(), f"{page.name}: {link}"
        if anchor:
            assert anchor in _anchors(target), f"{page.name}: {link} (no such heading)"


def test_the_readme_is_a_landing_page_opening_on_the_two_commands():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 220  # the landing page, with its four ways in
    first_block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    assert first_block.startswith("make bench") and "\nmake test" in first_block
    # after set-up, the first block puts privboard (and the venv's pip) on the PATH
    assert "\n. .venv/bin/activate " in first_block
    assert "Python 3.11" in text and "below 3.12" in " ".join(text.split())
    # Every page of docs/ is linked from the README.
    linked = {Path(link.partition("#")[0]).name for link in LINK.findall(text)}
    assert {page.name for page in PAGES[1:]} <= linked


GLOSSARY = ROOT / "docs" / "glossary.md"
LINK_TEXT = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")


def test_the_readmes_first_use_of_each_glossary_word_links_its_definition():
    """Outside code blocks and tables, the first word of each term of docs/glossary.md
    (singular or plural) is the text of a link to its definition."""
    prose = re.sub(r"```.*?```", "", (ROOT / "README.md").read_text(), flags=re.S)
    prose = "\n".join(line for line in prose.splitlines() if not line.startswith("|"))
    terms = re.findall(r"^### (\w+)$", GLOSSARY.read_text(), re.M)
    assert terms == ["cell", "configuration", "variant", "twin", "notion", "track"]
    links = [(found.span(1), found.group(2)) for found in LINK_TEXT.finditer(prose)]
    for term in terms:
        first = re.search(rf"\b{term}s?\b", prose, re.I)
        assert first, term
        target = next((to for (start, end), to in links
                       if start <= first.start() < end), None)
        assert target == f"docs/glossary.md#{term}", (
            f"the README's first '{term}' is not a link to docs/glossary.md#{term}: "
            f"...{prose[first.start() - 60:first.end() + 20]}...")


def test_the_readmes_times_are_the_measured_ones_of_the_set_up_page():
    """The first block's times, rounded, are those docs/setup.md gives with their dates
    and commits."""
    first_block = (ROOT / "README.md").read_text().split("```sh\n", 1)[1].split("```")[0]
    setup = " ".join((ROOT / "docs" / "setup.md").read_text().split())
    bench = float(re.search(r"`make bench` took ([\d.]+) minutes", setup).group(1))
    test, pytest_s = map(int, re.search(r"`make test` took (\d+) s: .*?then its pytest, "
                                        r"(\d+) s", setup).groups())
    assert f"about {round(bench)} minutes" in first_block.splitlines()[0]
    assert f"about {round(test / 60)} minutes (its pytest under 8)" in first_block
    assert pytest_s < 8 * 60


def test_the_suites_page_counts_each_suites_cells():
    """The first number of cells in each suite's entry of docs/suites.md is the suite's;
    the quick suite's entry also counts its twins and its cells at the archive's seeds."""
    from benchmarks.suites import load_suite

    text = " ".join((ROOT / "docs" / "suites.md").read_text().split())
    entries = dict(re.findall(r" - `([\w-]+)`: (.*?)(?= - `[\w-]+`: |$)", text))
    counted = {name: int(found.group(1)) for name, entry in entries.items()
               if (found := re.search(r"(\d+) cells", entry))}
    assert {"quick", "table4-cpu", "label-dp-small", "label-dp-small-tuned"} <= set(counted)
    for name, count in counted.items():
        assert count == len(load_suite(name).cells), name
    quick, archived = load_suite("quick"), load_suite("quick", [0, 1, 2])
    twins = sum(cell.audit for cell in quick.cells)
    assert f"{len(quick.cells)} cells, {twins} of them audited twins" in entries["quick"]
    assert f"--seeds 0,1,2`, its manifest's command: {len(archived.cells)} cells" in \
        entries["quick"]
