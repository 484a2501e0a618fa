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
    assert len(text.splitlines()) <= 200
    first_block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    assert first_block.startswith("make bench") and "\nmake test" in first_block
    assert "Python 3.11" in text and "below\n3.12" in text
    # Every page of docs/ is linked from the README.
    linked = {Path(link.partition("#")[0]).name for link in LINK.findall(text)}
    assert {page.name for page in PAGES[1:]} <= linked
