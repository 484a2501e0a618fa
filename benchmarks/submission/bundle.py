"""A submission bundle: what ``privboard submit`` writes and ``privboard report --results
BUNDLE`` renders beside the archive. One folder:

- ``submission.json``: the method, the package that registered it and the sha256 digest
  of each of that package's source files; its accounting mark: charged by construction
  (every charge on its ledgers made by the privacy layer's mechanisms, and its whole fit
  replayed), not replayed where a release could not be, charged as observed and replayed
  (its own DP-SGD charges cover the steps of a watched library, and its fit replayed from
  their noisy gradients), or self-accounted (it charged noise of its own, which only its
  audit checks); every check with its outcome; the environment of the run; and the
  sha256 digest of each record file;
- the public part of each record, runs and audited twins, one JSON file per cell (as in
  the archive: never the private diagnostics), and ``catalogue.json``;
- ``private/``: each cell's private diagnostics, for the submitter alone. No report reads
  it; share the bundle without it.

It is written whole into a staging folder and swapped in, so a failure or a kill leaves
the previous bundle or nothing, never a part. Loading refuses a bundle with a failed
check, one whose files do not match their digests, one whose mark is none of these, and
one whose records contradict its checks (a failed run, an audit above its claim, a
record on shuffled batches under any other mark). A method whose DP-SGD steps in a watched library took shuffled batches is
never charged as observed: its mark, and its records', say that they were accounted as
Poisson with no proven bound.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from benchmarks import catalogue as catalogues
from benchmarks.archive import archived_text, digest, listed_records
from benchmarks.atomic import atomic_folder
from benchmarks.errors import InputError, PrivboardError
from benchmarks.records import CATALOGUE, SHUFFLED_BATCHES, RunRecord

MANIFEST = "submission.json"
PRIVATE = "private"
SCHEMA = 1
CHARGED_BY_CONSTRUCTION = "charged by construction"
SELF_ACCOUNTED = "self-accounted"
NOT_RUN = "not run"  # the method broke the contract: its suite did not run
CHARGED_AS_OBSERVED = "charged as observed and replayed"
NOT_REPLAYED = "charged by the privacy layer, not replayed"


def by_construction(not_replayed: str) -> str:
    """The mark of a method whose every charge the privacy layer's mechanisms made:
    charged by construction when the replay check replayed its whole fit, else the
    releases that it could not replay, named (contract_checks.not_replayed)."""
    return f"{NOT_REPLAYED}: {not_replayed}" if not_replayed else CHARGED_BY_CONSTRUCTION


def charged_as_observed(libraries: list[str]) -> str:
    """The mark of a method whose own charges were checked against the steps that the
    watched DP libraries were seen to run (library_watch), and whose fit was replayed
    from those steps' noisy gradients (library_replay)."""
    return f"{CHARGED_AS_OBSERVED} ({', '.join(libraries)})"


def accounting_note(accounting: str) -> str:
    """What a submission's accounting mark means, beside it on the site."""
    if accounting.startswith(SHUFFLED_BATCHES):
        return ("its DP-SGD steps took shuffled fixed-size batches, and the epsilon is "
                "that of Poisson-sampled batches of the same size: shuffling can leak "
                "more, and no bound of it is proven (Chua et al., \"How Private are DP-SGD "
                "Implementations?\", ICML 2024)")
    if accounting.startswith(CHARGED_AS_OBSERVED):
        return ("its own DP-SGD charges cover every noisy step the library was seen to "
                "run, with the noise it added as its noise multiplier says, and its fit "
                "replayed on altered private data from those steps' noisy gradients "
                "predicted exactly as before")
    if accounting.startswith(NOT_REPLAYED):
        return ("every charge made by the privacy layer's mechanisms, but the releases "
                "named could not be replayed: what the fit read beside the layer on the "
                "data they read is checked by its audit alone")
    return "every charge made by the privacy layer's mechanisms"


def is_mark(accounting: Any) -> bool:
    """Whether ``accounting`` is a mark that submit gives a submission that runs."""
    return isinstance(accounting, str) and (
        accounting in (CHARGED_BY_CONSTRUCTION, SELF_ACCOUNTED, SHUFFLED_BATCHES)
        or accounting.startswith((f"{NOT_REPLAYED}: ", f"{CHARGED_AS_OBSERVED} (",
                                  f"{SHUFFLED_BATCHES} (")))


def shuffled_batches(libraries: list[str]) -> str:
    """The mark of a method whose watched DP-SGD steps ran on shuffled fixed-size batches,
    accounted as Poisson samples: never charged as observed."""
    return f"{SHUFFLED_BATCHES} ({', '.join(libraries)})" if libraries else SHUFFLED_BATCHES


class BundleError(PrivboardError):
    """A bundle that cannot be shown: a failed check, a file that does not match its
    digest, a record that is not one."""


@dataclasses.dataclass(frozen=True)
class Submission:
    folder: Path
    manifest: dict[str, Any]
    records: list[RunRecord]
    catalogue: dict[str, Any]  # the submitted method's facts and its configurations

    @property
    def method(self) -> str:
        return self.manifest["method"]

    @property
    def package(self) -> str:
        plugin = self.manifest["plugin"]
        return f"{plugin['package']} {plugin['version']}"


def is_bundle(folder: Path) -> bool:
    return (Path(folder) / MANIFEST).is_file()


def check_writable(out: Path) -> None:
    """InputError, before anything runs, when ``out`` is a folder that a bundle would
    replace but that is not a bundle."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not is_bundle(out):
        raise InputError(f"{out} exists and is not a bundle: give --out a new folder "
                         f"(an earlier bundle there is replaced)")


def source_digests(package_dir: Path) -> dict[str, Any]:
    """The sha256 of each Python source file under ``package_dir`` (or of that one file),
    and one digest over them all."""
    package_dir = Path(package_dir)
    files = [package_dir] if package_dir.is_file() else sorted(
        path for path in package_dir.rglob("*.py") if "__pycache__" not in path.parts)
    root = package_dir.parent
    each = {path.relative_to(root).as_posix(): "sha256:" + hashlib.sha256(
        path.read_bytes()).hexdigest() for path in files}
    return {"files": each, "sha256": digest("".join(f"{name} {value}\n"
                                                    for name, value in each.items()))}


def write(out: Path, manifest: dict[str, Any], records: list[RunRecord], suite) -> Path:
    """Write the bundle of ``records`` (run and audit records of ``suite``) with
    ``manifest`` into ``out``, whole or not at all; returns its manifest's path."""
    check_writable(out)
    with atomic_folder(out) as staging:
        listed = {}
        for record in records:
            name = f"{record.cell_id}.json"
            text = archived_text(record)
            (staging / name).write_text(text)
            listed[name] = {"cell_id": record.cell_id, "config_id": record.config_id,
                            "seed": record.seed, "kind": record.kind, "sha256": digest(text)}
            if record.diagnostics:
                (staging / PRIVATE).mkdir(exist_ok=True)
                (staging / PRIVATE / name).write_text(
                    json.dumps(record.diagnostics, indent=1, sort_keys=True, default=str))
        catalogues.write(staging, [suite])
        (staging / MANIFEST).write_text(json.dumps({**manifest, "schema": SCHEMA,
                                                    "records": listed},
                                                   indent=1, sort_keys=True) + "\n")
    return out / MANIFEST


def load(folder: Path) -> Submission:
    """The bundle in ``folder``, checked; BundleError (one line) when it is refused."""
    folder = Path(folder)
    path = folder / MANIFEST
    try:
        manifest = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise BundleError(f"bundle manifest {path} is not a JSON object ({err})") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != SCHEMA or not all(
            key in manifest for key in ("method", "plugin", "checks", "passed", "records")):
        raise BundleError(f"{path} is not a bundle manifest of schema {SCHEMA}")
    failed = [check["line"] for check in manifest["checks"] if not check["passed"]]
    if failed or manifest["passed"] is not True:
        raise BundleError(f"bundle {folder} is refused: {len(failed)} check(s) of its "
                          f"submission failed: " + " | ".join(failed or ["none passed"]))
    records = list(listed_records(folder, manifest["records"], path, "bundle file",
                                  BundleError))
    _check_records(folder, manifest, records)
    return Submission(folder, manifest, records, _catalogue(folder, manifest, records))


def _check_records(folder: Path, manifest: dict[str, Any], records: list[RunRecord]) -> None:
    """What the records show themselves must agree with the checks that passed and with
    the mark."""
    method = manifest["method"]
    if not is_mark(manifest.get("accounting")):
        raise BundleError(f"bundle {folder} is refused: its accounting mark "
                          f"{manifest.get('accounting')!r} is none that privboard submit "
                          f"gives")
    for record in records:
        if record.method != method:
            raise BundleError(f"bundle {folder} is refused: {record.path} is a record of "
                              f"{record.method}, not of the submitted {method}")
        if not record.ok:
            raise BundleError(f"bundle {folder} is refused: {record.path} is a failed run "
                              f"({record.error})")
        if record.is_audit and record.audit.get("flagged", True):
            raise BundleError(f"bundle {folder} is refused: the audit {record.path} "
                              f"exceeds its claim")
        if record.no_proven_bound and not manifest["accounting"].startswith(
                (SHUFFLED_BATCHES, SELF_ACCOUNTED)):
            raise BundleError(f"bundle {folder} is refused: {record.path} ran on shuffled "
                              f"batches, but the submission says {manifest.get('accounting')}")
    if not any(record.kind == "run" for record in records):
        raise BundleError(f"bundle {folder} is refused: it holds no run")


def _catalogue(folder: Path, manifest: dict[str, Any],
               records: list[RunRecord]) -> dict[str, Any]:
    """Of the bundle's catalogue: the submitted method's facts and the configurations of
    its records. The rest (privboard's own methods and datasets) is the archive's word."""
    found = catalogues.read(folder)
    if found is None or manifest["method"] not in found["methods"]:
        raise BundleError(f"bundle {folder} is refused: its {CATALOGUE} does not describe "
                          f"{manifest['method']}")
    suite = manifest.get("suite", "")
    return {"written_at": found.get("written_at", ""),
            "methods": {manifest["method"]: found["methods"][manifest["method"]]},
            "datasets": {},
            "configurations": {record.config_id: [suite] for record in records}}
