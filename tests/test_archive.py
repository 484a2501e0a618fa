"""The archive of our own records: what goes in (public parts of clean, finished
records, each listed with its digest), what loading refuses (one line naming the file),
and the site it gives: a cell found in the archive and locally counts once, and a site
from the archive alone needs neither TensorFlow nor the data."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from benchmarks import archive, catalogue
from benchmarks.cli import main
from benchmarks.suites import load_suite
from leaderboard_inputs import rehashed

ROOT = Path(__file__).parent.parent
SMOKE = archive.ARCHIVE / "smoke"
# An archived DP-ERM record of the smoke suite.
CELL = "a072e5ec225ec5e56d54"


@pytest.fixture
def results(tmp_path) -> Path:
    """A results folder holding the archived smoke records (clean, finished runs)."""
    folder = tmp_path / "results"
    folder.mkdir()
    for path in SMOKE.glob("*.json"):
        if path.name != archive.MANIFEST:
            shutil.copy(path, folder)
    return folder


@pytest.fixture
def store(tmp_path, results) -> Path:
    """A scratch archive of the smoke suite, made from ``results``."""
    folder = tmp_path / "archive"
    archive.add(load_suite("smoke"), results, folder)
    return folder


def test_the_committed_archive_loads_and_holds_no_diagnostic():
    records = archive.load()
    assert {"smoke"} <= set(archive.suites())
    assert len({record.cell_id for record in records}) == len(records)
    for path in archive.ARCHIVE.rglob("*.json"):
        assert "diagnostics" not in json.loads(path.read_text()), path


def test_records_round_trip_and_are_never_archived_twice(results, store):
    loaded = {record.cell_id: record for record in archive.load(store)}
    assert set(loaded) == {path.stem for path in results.glob("*.json")}
    original = json.loads((results / f"{CELL}.json").read_text())
    assert loaded[CELL].public_dict() == original
    entry = archive.read_manifest(store / "smoke")["records"][f"{CELL}.json"]
    assert entry["commit"] == original["provenance"]["git_commit"]
    assert {"cpu", "cores", "tensorflow", "device", "threads"} <= set(entry["machine"])
    before = (store / "smoke" / archive.MANIFEST).read_text()
    assert archive.add(load_suite("smoke"), results, store) == (0, len(loaded))
    assert (store / "smoke" / archive.MANIFEST).read_text() == before


def test_the_manifest_command_runs_every_seed_archived(results, store, tmp_path):
    """A seed that the suite does not run, archived with --seeds, puts --seeds in the
    manifest's command; archiving at the suite's own seeds later keeps it."""
    seed_one = rehashed({**json.loads((results / f"{CELL}.json").read_text()), "seed": 1})
    more = tmp_path / "more"
    more.mkdir()
    (more / f"{seed_one['cell_id']}.json").write_text(json.dumps(seed_one))

    def command() -> str:
        return archive.read_manifest(store / "smoke")["command"]
    assert command() == "privboard run --suite smoke"
    assert archive.add(load_suite("smoke", [0, 1]), more, store,
                       own=load_suite("smoke")) == (1, 0)
    assert command() == "privboard run --suite smoke --seeds 0,1"
    archive.add(load_suite("smoke"), results, store)
    assert command() == "privboard run --suite smoke --seeds 0,1"


def test_each_committed_manifest_names_the_command_that_runs_its_seeds():
    for name in archive.suites():
        manifest = archive.read_manifest(archive.ARCHIVE / name)
        assert manifest["command"] == archive.run_command(load_suite(name),
                                                          manifest["records"].values()), name


def test_a_record_measured_with_uncommitted_changes_is_refused(results, tmp_path):
    path = results / f"{CELL}.json"
    record = json.loads(path.read_text())
    record["provenance"]["git_dirty"] = True
    path.write_text(json.dumps(record))
    with pytest.raises(archive.ArchiveError, match=f"{CELL}.json was measured with uncommitted"):
        archive.add(load_suite("smoke"), results, tmp_path / "archive")


def _edit(store: Path, change, keep_digest: bool = False) -> Path:
    """Change the archived DP-ERM record with ``change`` (a function of its JSON);
    unless ``keep_digest``, its manifest entry is updated as if the change were honest."""
    path = store / "smoke" / f"{CELL}.json"
    data = json.loads(path.read_text())
    change(data)
    text = json.dumps(data)
    path.write_text(text)
    if not keep_digest:
        manifest_path = store / "smoke" / archive.MANIFEST
        manifest = json.loads(manifest_path.read_text())
        manifest["records"][path.name]["sha256"] = archive.digest(text)
        manifest_path.write_text(json.dumps(manifest))
    return path


def _refused(store: Path, capsys) -> str:
    """Building a site from ``store`` fails with exit 2 and one line; that line."""
    empty = store.parent / "empty"
    empty.mkdir(exist_ok=True)
    assert main(["report", "--results", str(empty), "--archive", str(store),
                 "--out", str(store.parent / "site")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and not (store.parent / "site").exists()
    return lines[0]


@pytest.mark.parametrize("change, keep_digest, message", [
    (lambda r: r["metrics"].update(accuracy_pct=99.0), True, "does not match its digest"),
    (lambda r: r.pop("privacy"), False, "privacy"),
    (lambda r: r.update(schema=99), False, "schema"),
    (lambda r: r["hparams"].update(epochs=99), False, "hash to"),
    (lambda r: r.update(diagnostics={"noise_norm": 1.0}), False, "private diagnostics"),
])
def test_a_hand_edited_or_corrupt_file_is_refused_naming_it(store, capsys, change,
                                                              keep_digest, message):
    path = _edit(store, change, keep_digest)
    line = _refused(store, capsys)
    assert str(path) in line and message in line


@pytest.mark.parametrize("keep_digest", [True, False], ids=["edited", "honest"])
def test_a_file_listed_without_a_digest_is_refused_naming_it(store, capsys, keep_digest):
    path = _edit(store, lambda r: r["metrics"].update(accuracy_pct=99.0), keep_digest)
    manifest_path = store / "smoke" / archive.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    del manifest["records"][path.name]["sha256"]
    manifest_path.write_text(json.dumps(manifest))
    line = _refused(store, capsys)
    assert str(path) in line and "has no digest" in line


def test_an_unlisted_or_missing_file_is_refused(store, capsys):
    stray = store / "smoke" / "0123456789abcdef0123.json"
    shutil.copy(store / "smoke" / f"{CELL}.json", stray)
    assert "is not listed" in _refused(store, capsys)
    stray.unlink()
    (store / "smoke" / f"{CELL}.json").unlink()
    assert "is missing" in _refused(store, capsys)


def test_a_cell_archived_and_run_here_counts_once(store, results, tmp_path):
    local = tmp_path / "local"
    local.mkdir()
    shutil.copy(results / f"{CELL}.json", local)
    site = tmp_path / "site"
    assert main(["report", "--results", str(local), "--archive", str(store),
                 "--out", str(site)]) == 0
    rows = pd.read_csv(site / "rows.csv", dtype={"cell": str})
    config = json.loads((results / f"{CELL}.json").read_text())["config_id"]
    mine = rows[rows.cell == config]
    assert list(mine.n) == [1] and list(mine.source) == ["both"]
    assert set(rows[rows.suite == "smoke"].source) == {"archived", "both"}


def test_a_cell_two_suites_share_is_loaded_and_counted_once(store, tmp_path):
    shutil.copytree(store / "smoke", store / "smoke-again")
    records = archive.load(store)
    assert len(records) == len({record.cell_id for record in records}) == len(
        archive.read_manifest(store / "smoke")["records"])
    site = tmp_path / "site"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", "--results", str(empty), "--archive", str(store),
                 "--out", str(site)]) == 0
    rows = pd.read_csv(site / "rows.csv", dtype={"cell": str})
    config = json.loads((store / "smoke" / f"{CELL}.json").read_text())["config_id"]
    assert list(rows[rows.cell == config].n) == [1]



def test_the_archive_catalogue_is_that_of_the_suites_of_this_code():
    """Which archived records are current and how their settings were chosen is what
    the suites of this code say: a relabelled declaration changes no identity, so every
    record keeps its place, and reaches the site only through this catalogue."""
    committed, now = catalogue.read(archive.ARCHIVE), catalogue.current()
    rewrite = "rewrite it: privboard archive"
    assert committed["configurations"] == now["configurations"], rewrite
    assert committed["chosen"] == now["chosen"], rewrite

@pytest.mark.integration
def test_a_site_from_the_archive_alone_needs_no_tensorflow_and_no_data(tmp_path):
    """With TensorFlow not importable and an empty data folder, `privboard report` on a
    clean clone (no results folder) shows the archived cells."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "tensorflow.py").write_text("raise ImportError('no TensorFlow here')\n")
    empty = tmp_path / "no-data"
    empty.mkdir()
    site = tmp_path / "site"
    env = {**os.environ, "PRIVBOARD_DATA": str(empty),
           "PYTHONPATH": os.pathsep.join([str(blocker), str(ROOT)])}
    subprocess.run([sys.executable, "-m", "benchmarks.cli", "report", "--out", str(site)],
                   cwd=tmp_path, env=env, check=True, capture_output=True, text=True)
    assert list(empty.iterdir()) == []
    rows = pd.read_csv(site / "rows.csv", dtype={"cell": str})
    smoke = rows[rows.suite == "smoke"]
    assert len(smoke) > 0 and set(smoke.source) == {"archived"}
    page = (site / "cells" / f"{smoke.cell.iloc[0]}.html").read_text()
    assert "archived" in page
