"""The README's four ways in, followed literally, so that the page cannot drift from the
code: in a fresh copy of the checkout, each way's commands run as a newcomer pastes them
after `make test`, in one shell, and each ends in a row on the site's ranking.

The copy's `.venv/bin` stands in for the one set-up makes: its `activate` puts it on the
PATH; its `privboard` and `python` run this checkout's code with this interpreter; its
`pip` installs an example package as pip does, into a folder of the copy
(plugins/pip_stand_in.py), so no environment changes. The first block's `make bench` and
`make test` are the set-up this environment has had; every other line runs as written,
`make publish` included."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("make") is None or shutil.which("git") is None,
                                 reason="needs make and git")]

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
SET_UP = ("make bench", "make test")
FENCE = re.compile(r"```(\w+)\n(.*?)```", re.S)


def section(heading: str) -> str:
    """The README's text under ``heading`` (a level-3 heading), to the next heading."""
    text = README.split(f"\n### {heading}\n", 1)[1]
    return re.split(r"\n#{2,3} ", text, maxsplit=1)[0]


def shell(text: str) -> list[str]:
    return [block for lang, block in FENCE.findall(text) if lang == "sh"]


def files(text: str) -> dict[str, str]:
    """The blocks that open with their file's path in a comment: the files to write."""
    return {found.group(1): block for _, block in FENCE.findall(text)
            if (found := re.match(r"# ([\w./-]+\.\w+)\n", block))}


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """A copy of the checkout's files (tracked, and new ones not ignored), set up."""
    folder = tmp_path_factory.mktemp("newcomer") / "privboard"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, folder / name)
    venv, site = folder / ".venv" / "bin", folder / ".venv" / "site"
    venv.mkdir(parents=True)
    site.mkdir()
    (venv / "activate").write_text(
        f'export PATH="{venv}:$PATH"\nexport PYTHONPATH="{folder}:{site}"\n'
        f'export PRIVBOARD_TEST_SITE="{site}"\n')
    stand_ins = {"python": "", "privboard": " -m benchmarks.cli",
                 "pip": f" {folder / 'tests' / 'plugins' / 'pip_stand_in.py'}"}
    for name, command in stand_ins.items():
        (venv / name).write_text(f'#!/bin/sh\nexec {sys.executable}{command} "$@"\n')
        (venv / name).chmod(0o755)
    (folder / ".venv" / ".installed").touch()  # after the files it depends on: up to date
    return folder


def follow(clone: Path, heading: str) -> str:
    """Write the section's files and run its commands after the first block's set-up, in
    one shell from the copy's root; its output."""
    first = shell(README)[0].splitlines()
    assert [line.split("#")[0].strip() for line in first
            if line.startswith("make ")] == list(SET_UP)
    text = section(heading)
    for name, content in files(text).items():
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        (clone / name).write_text(content)
    script = "\n".join(["set -eu", *(line for line in first if not line.startswith("make ")),
                        *shell(text)])
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run(["bash", "-c", script], cwd=clone, capture_output=True, text=True,
                          env=env, timeout=3600)
    assert done.returncode == 0, f"{heading}: exit {done.returncode}\n{done.stdout[-3000:]}" \
                                 f"\n{done.stderr[-3000:]}"
    return done.stdout


def ranked(site: Path, dataset: str, family: str, epsilon: str, method: str) -> str:
    """The line of ``method`` in the index's ranking of a dataset, family and epsilon."""
    index = (site / "index.html").read_text()
    card = index[index.index(f'id="rank-{dataset}-{family}-{epsilon}"'):]
    card = card[:card.index("</table>")]
    line = next((row for row in card.split("<tr")
                 if f"<strong>{method}</strong>" in row), None)
    assert line is not None, f"{method} is not ranked at {dataset} {family} ε {epsilon}"
    return line


def test_run_and_read_builds_the_site_from_the_archive(clone):
    follow(clone, "1. Run and read")
    ranked(clone / "reports" / "site", "mnist", "label-dp", "2", "lp-1st")


def test_a_method_in_one_file_runs_reports_and_passes_its_contract_tests(clone):
    out = follow(clone, "2. A method in one file")
    assert re.search(r"\d+ passed", out), out[-2000:]
    site = clone / "reports" / "site"
    for dataset in ("digits", "breast-cancer"):
        for epsilon in ("1", "4"):
            line = ranked(site, dataset, "label-dp", epsilon, "noisy-majority")
            assert "n = 3" in line
    ranked(site, "digits", "label-dp", "1", "lp-1st")


@pytest.mark.skipif(importlib.util.find_spec("opacus") is None,
                    reason="needs the opacus extra (make test installs it)")
def test_a_method_from_another_package_is_ranked_and_a_keras_fit_never_best(clone):
    follow(clone, "3. A method from another package")
    site = clone / "reports" / "site"  # the last report's: the tensorflow-privacy bundle
    for epsilon in ("1", "4"):
        line = ranked(site, "digits", "full-dp", epsilon, "tfp-keras-mlp")
        assert "third-party" in line and "no proven bound" in line
        assert "best-tag" not in line
    for method in ("opacus-mlp", "tfp-keras-mlp"):
        assert (clone / f"{method}.bundle" / "submission.json").is_file()


def test_publish_puts_the_archive_our_runs_and_both_bundles_in_one_site(clone):
    if not (clone / "opacus-mlp.bundle").is_dir():
        pytest.skip("no bundles: the way in of a method from another package was skipped")
    follow(clone, "4. Publish")
    site = clone / "public"
    ranked(site, "mnist", "label-dp", "2", "lp-1st")  # the archive
    ranked(site, "digits", "label-dp", "1", "noisy-majority")  # results/
    best = ranked(site, "digits", "full-dp", "1", "opacus-mlp")
    assert "third-party" in best and "best · honest" in best
    assert "no proven bound" in ranked(site, "digits", "full-dp", "1", "tfp-keras-mlp")
