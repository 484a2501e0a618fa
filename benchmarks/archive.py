"""The archive: our own run records, committed in the repository under
``reports/archive/<suite>/``, so that the leaderboard shows our results on any clone and
anyone can re-derive them (``privboard verify``).

Each suite's folder holds the public part of its records (``RunRecord.public_dict``:
never the private diagnostics), one JSON file per cell, and ``manifest.json``, which
names for each record the commit that measured it, the machine (CPU model, cores,
TensorFlow version, device, threads) and the sha256 digest of the file. The archive's
``catalogue.json`` (benchmarks.catalogue) describes the methods and datasets.

Loading validates every file: listed in its manifest, its digest, the record schema,
no private diagnostics, and identities that its contents hash to. Anything else stops
with one line naming the file.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable, Iterator

from benchmarks.atomic import atomic_write
from benchmarks.errors import PrivboardError
from benchmarks.records import CATALOGUE, RecordError, RunRecord, read_records

ARCHIVE = Path(__file__).resolve().parent.parent / "reports" / "archive"
MANIFEST = "manifest.json"
SCHEMA = 1


class ArchiveError(PrivboardError):
    """An archive file that is corrupt, hand-edited or not listed; or a record that
    cannot be archived."""


def digest(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def archived_text(record: RunRecord) -> str:
    """The file of an archived record: its public part, in a canonical form."""
    return json.dumps(record.public_dict(), indent=1, sort_keys=True, allow_nan=False) + "\n"


def machine(record: RunRecord) -> dict[str, Any]:
    provenance = record.provenance
    return {"cpu": provenance.get("cpu", "unknown"), "cores": provenance.get("cores"),
            "tensorflow": provenance.get("packages", {}).get("tensorflow", "unknown"),
            "device": provenance.get("device", "unknown"),
            "threads": provenance.get("threads"), "onednn": provenance.get("onednn"),
            **{key: provenance[key] for key in ("onednn_isa", "openblas") if key in provenance}}


def add(suite, results: Path, archive: Path = ARCHIVE, own=None) -> tuple[int, int]:
    """Archive the finished records of ``suite``'s cells (and the verifications of those
    cells) from ``results``. Returns (added, already archived). A record measured on a
    working tree with uncommitted changes cannot be re-derived and is refused. ``own`` is
    the suite at its own seeds, when ``suite`` was given others: the manifest's command
    (run_command) re-runs every seed archived."""
    folder = archive / suite.name
    manifest = read_manifest(folder) or {"schema": SCHEMA, "suite": suite.name,
                                         "records": {}}
    cells = {cell.cell_id for cell in suite.cells}
    added = kept = 0
    for record in read_records(results):
        verified = record.verification.get("cell_id")
        if not record.ok or (record.cell_id not in cells and verified not in cells):
            continue
        name = f"{record.cell_id}.json"
        if name in manifest["records"]:
            kept += 1  # an archived record is never replaced
            continue
        if record.provenance.get("git_dirty", True):
            raise ArchiveError(f"record {record.path} was measured with uncommitted changes "
                               f"(or no git): nobody could re-derive it; run it again from "
                               f"a clean checkout")
        text = archived_text(record)
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_write(folder / name) as f:
            f.write(text)
        manifest["records"][name] = {
            "cell_id": record.cell_id, "config_id": record.config_id, "seed": record.seed,
            "kind": record.kind, "sha256": digest(text),
            "commit": record.provenance.get("git_commit", "unknown"),
            "machine": machine(record), "wall_time_s": record.wall_time_s}
        added += 1
    command = run_command(own or suite, manifest["records"].values())
    if added or manifest.get("command") != command:
        manifest["command"] = command
        manifest["records"] = dict(sorted(manifest["records"].items()))
        with atomic_write(folder / MANIFEST) as f:
            json.dump(manifest, f, indent=1, sort_keys=True)
            f.write("\n")
    return added, kept


def run_command(own, archived: Iterable[dict[str, Any]]) -> str:
    """The command that runs every seed archived (manifest entries) of the suite's current
    configurations: the suite (``own``: at its own seeds) as it is, or with ``--seeds``
    when the archive holds seeds it does not run (the quick suite at seeds 0, 1, 2)."""
    runs = {(cell.config_id, cell.seed) for cell in own.cells}
    current = {config for config, _ in runs}
    held = {(entry["config_id"], entry["seed"]) for entry in archived
            if entry["config_id"] in current}
    command = f"privboard run --suite {own.name}"
    if held <= runs:
        return command
    return command + " --seeds " + ",".join(str(seed) for seed in sorted({s for _, s in held}))


def read_manifest(folder: Path) -> dict[str, Any] | None:
    path = folder / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ArchiveError(f"manifest {path} is not a JSON object ({err})") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA \
            or not isinstance(manifest.get("records"), dict):
        raise ArchiveError(f"manifest {path} is not an archive manifest of schema {SCHEMA}")
    return manifest


def suites(archive: Path = ARCHIVE) -> list[str]:
    return sorted(p.parent.name for p in archive.glob(f"*/{MANIFEST}"))


def load(archive: Path = ARCHIVE) -> list[RunRecord]:
    """Every archived record, each checked against its manifest; ArchiveError (one
    line, naming the file) for anything that is not exactly as archived. A cell that
    two suites share (the quick suite's PATE++ cells are pate-plus-plus-cpu's too) is
    archived in each and loaded once."""
    cells: dict[str, RunRecord] = {}
    for record in every_copy(archive):
        cells.setdefault(record.cell_id, record)
    return list(cells.values())


def every_copy(archive: Path = ARCHIVE) -> Iterator[RunRecord]:
    """Every archived record, checked as ``load`` checks them, with a cell that two suites
    share once in each: each suite's run measured its own wall time."""
    for name in suites(archive):
        yield from _load_suite(archive / name)


def _load_suite(folder: Path) -> Iterator[RunRecord]:
    manifest = read_manifest(folder)
    yield from listed_records(folder, manifest["records"], folder / MANIFEST, "archive file",
                              ArchiveError)


def listed_records(folder: Path, listed: dict[str, dict[str, Any]], manifest: Path,
                   what: str, error: type[PrivboardError]) -> Iterator[RunRecord]:
    """The records a manifest lists in ``folder`` (file name -> its cell_id and sha256
    digest), each checked: listed, as digested, a record of the schema without private
    diagnostics, and the cell its name and manifest give. ``error`` (one line naming the
    file, ``what`` it is) for anything else."""
    for path in sorted(folder.glob("*.json")):
        if path.name not in (manifest.name, CATALOGUE) and path.name not in listed:
            raise error(f"{what} {path} is not listed in {manifest}")
    for name, entry in listed.items():
        path = folder / name
        try:
            text = path.read_text()
        except OSError:
            raise error(f"{what} {path}, listed in its manifest, is missing "
                        f"or unreadable") from None
        if not entry.get("sha256"):
            raise error(f"{what} {path} has no digest in {manifest}: it cannot be "
                        f"checked, so it is refused")
        if digest(text) != entry["sha256"]:
            raise error(f"{what} {path} does not match its digest in {manifest}: it was "
                        f"changed after it was written")
        try:
            data = json.loads(text)
            if isinstance(data, dict) and "diagnostics" in data:
                raise error(f"{what} {path} holds private diagnostics")
            record = RunRecord.from_dict(data, path)
        except (json.JSONDecodeError, RecordError) as err:
            raise error(str(err) if isinstance(err, RecordError)
                        else f"{what} {path} is not JSON ({err})") from None
        if record.cell_id != entry.get("cell_id") or path.stem != record.cell_id:
            raise error(f"{what} {path} holds cell {record.cell_id}, not the "
                        f"cell its name and manifest give")
        yield record
