"""A fresh clone without Python 3.11: `make bench` and the test targets say so in one
line, naming ways to get it, instead of a shell error. CI runs both test targets."""
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
@pytest.mark.parametrize("target", ["bench", "test", "test-integration"])
def test_a_missing_python_is_one_line_naming_ways_to_get_it(tmp_path, target):
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, tmp_path)
    done = subprocess.run(["make", target, "PYTHON=python3.11-not-here"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    ours = [line for line in done.stderr.splitlines() if not line.startswith("make")]
    assert len(ours) == 1, done.stderr
    assert ours[0].startswith("no python3.11-not-here here: privboard needs Python 3.11")
    for way in ("pyenv", "deadsnakes", "conda", "uv python install", "< 3.12"):
        assert way in ours[0], way
    assert not (tmp_path / ".venv").exists()


def test_the_two_test_targets_split_the_tests_and_ci_runs_the_fast_tier_and_paper_suite():
    makefile = (ROOT / "Makefile").read_text()
    assert "$(PYTEST) -m 'not integration'" in makefile
    assert "$(PYTEST) -m integration" in makefile
    assert "$(PYTEST) -m integration tests/test_paper_suite_settings.py" in makefile
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "make test" in ci and "make test-paper-suite" in ci


@pytest.mark.skipif(shutil.which("make") is None, reason="no make here")
def test_publish_takes_our_runs_and_any_number_of_bundles(tmp_path):
    """make publish is one report of the archive, results/ when there is one, and the
    bundles named in BUNDLES."""
    for name in ("Makefile", "pyproject.toml", "constraints.txt"):
        shutil.copy(ROOT / name, tmp_path)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / ".installed").touch()  # set up already

    def publish(*args: str) -> str:
        done = subprocess.run(["make", "-n", "publish", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, check=True)
        return next(line for line in done.stdout.splitlines() if " report " in line)
    assert publish() == ".venv/bin/privboard report --out public"
    assert publish("BUNDLES=a.bundle b.bundle") == \
        ".venv/bin/privboard report --results a.bundle b.bundle --out public"
    (tmp_path / "results").mkdir()
    assert publish("BUNDLES=a.bundle") == \
        ".venv/bin/privboard report --results results a.bundle --out public"
