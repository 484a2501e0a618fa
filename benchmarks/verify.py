"""``privboard verify CELL_ID``: train a recorded cell again from its record alone and
compare.

The record gives everything a re-run needs: method and version, dataset and
fingerprint, budget, hyperparameters, seed, the thread count it trained on, whether
oneDNN ran and the instruction sets of oneDNN's and OpenBLAS's kernels (results depend
on all of them bit for bit, so the re-run uses them again; they are fixed when
TensorFlow and numpy load, so a re-run that needs others runs in a child process with
the environment that sets them). The verdict is *identical* when every public metric (and, for
an audited twin, the audit's result) is equal to the last digit, else *different*, with
each difference and its probable cause: what differs between the record's provenance and
the re-run's (commit, package versions, device, CPU).

The re-run is written to the results folder as a record of its own (kind
"verification"), which the site shows beside the configuration.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks import archive as archive_store
from benchmarks.numerics import NUMERICS_VARIABLES
from benchmarks.errors import InputError
from benchmarks.records import RunRecord, read_records, verification_identity, write_record
from benchmarks.errors import unknown

ONEDNN = "TF_ENABLE_ONEDNN_OPTS"
# The provenance keys of the kernels' instruction sets and the variables that set them.
# A record without them was measured before they were recorded, on a CPU whose best
# instruction set was AVX2: what the caps of benchmarks/__init__.py give today.
KERNELS = {key: (variable, NUMERICS_VARIABLES[variable])
           for key, variable in (("onednn_isa", "ONEDNN_MAX_CPU_ISA"),
                                 ("openblas", "OPENBLAS_CORETYPE"))}
# Audit results compared between a record and its re-run: everything but the timing.
AUDIT_TIMING = ("seconds",)


def find(cell_id: str, results: Path | None, archive: Path | None) -> tuple[RunRecord, str]:
    """The ok record of a cell and where it was found: the archive first, then results."""
    candidates: list[tuple[RunRecord, str]] = []
    if archive is not None:
        candidates += [(record, "archive") for record in archive_store.load(archive)]
    if results is not None and results.is_dir():
        candidates += [(record, "results") for record in read_records(results)]
    for record, where in candidates:
        if record.cell_id == cell_id and record.ok and not record.is_verification:
            return record, where
    known = sorted({r.cell_id for r, _ in candidates if r.ok and not r.is_verification})
    raise unknown("cell", cell_id, known)


def rerun(record: RunRecord, data_dir: Path | None) -> RunRecord:
    """Train the record's cell again in this process, as the runner trains it."""
    from benchmarks import datasets
    from benchmarks.context import RunContext
    from benchmarks.registry import get_method
    from benchmarks.runner import run_cell
    from benchmarks.settings_chosen import Chosen
    from benchmarks.suites import Cell
    from benchmarks.tuning import Search

    method = get_method(record.method)
    if method.version != record.method_version:
        raise InputError(f"{record.method} is at version {method.version} here and the record "
                         f"at {record.method_version}: that version's code is not here to "
                         f"re-run")
    if record.is_audit and method.audit_protocol != record.audit_protocol:
        raise InputError(f"{record.method}'s audited twins follow audit protocol "
                         f"{method.audit_protocol} here and the record protocol "
                         f"{record.audit_protocol}: that protocol's code is not here to re-run")
    cell = Cell(record.suite, record.dataset, record.method, record.epsilon, record.delta,
                record.seed, record.hparams, audit=record.is_audit,
                search=Search.from_dict(record.search) if record.search else None,
                chosen=Chosen.from_dict(record.settings_chosen))
    data = datasets.load(record.dataset, data_dir)
    if data.fingerprint != record.dataset_fingerprint:
        raise InputError(f"{record.dataset} has fingerprint {data.fingerprint} here and "
                         f"{record.dataset_fingerprint} in the record")
    return run_cell(cell, data, RunContext(seed=record.seed, data_dir=data_dir))


def public_results(record: RunRecord) -> dict[str, Any]:
    """What a re-run must reproduce: the public metrics, the spent epsilon, and an
    audited twin's audit (but its timing), as its record stores them: a fresh run's
    tuples read back as lists."""
    found = {f"metrics.{name}": value for name, value in record.metrics.items()}
    found["privacy.epsilon"] = record.privacy.epsilon
    found.update({f"audit.{name}": value for name, value in record.audit.items()
                  if name not in AUDIT_TIMING})
    return json.loads(json.dumps(found))


def differences(recorded: RunRecord, again: RunRecord) -> dict[str, list]:
    before, after = public_results(recorded), public_results(again)
    return {name: [before.get(name), after.get(name)]
            for name in sorted({*before, *after}) if before.get(name) != after.get(name)}


def probable_causes(recorded: RunRecord, again: RunRecord) -> list[str]:
    """What differs between the two runs' provenance, in the order it most often
    explains a difference."""
    old, new = recorded.provenance, again.provenance
    causes = []
    if old.get("git_commit") != new.get("git_commit"):
        causes.append(f"another commit ({str(old.get('git_commit'))[:10]} recorded, "
                      f"{str(new.get('git_commit'))[:10]} re-run)")
    if new.get("git_dirty"):
        causes.append("the re-run's working tree has uncommitted changes")
    for package, version in sorted(old.get("packages", {}).items()):
        if new.get("packages", {}).get(package) != version:
            causes.append(f"another {package} ({version} recorded, "
                          f"{new.get('packages', {}).get(package)} re-run)")
    for key, what in (("device", "device"), ("cpu", "CPU model"), ("threads", "thread count"),
                      ("onednn", "oneDNN setting"), ("onednn_isa", "oneDNN instruction set"),
                      ("openblas", "OpenBLAS kernel")):
        if old.get(key) != new.get(key):
            causes.append(f"another {what} ({old.get(key)} recorded, {new.get(key)} re-run)")
    return causes or ["none that the records show: the same commit, packages, device, CPU "
                      "and threads; the training is not deterministic here"]


def verification_record(recorded: RunRecord, again: RunRecord, found_in: str) -> RunRecord:
    diff = differences(recorded, again)
    again.kind = "verification"
    again.verification = {
        "cell_id": recorded.cell_id, "audit": recorded.is_audit,
        "verdict": "different" if diff or not again.ok else "identical",
        "differences": diff, "found_in": found_in,
        "recorded_commit": recorded.provenance.get("git_commit", "unknown"),
        "causes": probable_causes(recorded, again) if diff else []}
    again.cell_id = verification_identity(recorded.cell_id, again.started_at)
    return again


def run(args) -> int:
    """Re-run, print the verdict, write the verification record. Exit code 0 when
    identical, 1 when different."""
    from benchmarks.datasets import data_dir
    from benchmarks.tf_runtime import cpu_threads

    archive = None if args.no_archive else args.archive
    recorded, found_in = find(args.cell, args.results, archive)
    wanted = numerics_environment(recorded.provenance)
    if wanted != numerics_environment({"threads": cpu_threads(),
                                       "onednn": os.environ.get(ONEDNN) == "1",
                                       **{key: os.environ.get(variable)
                                          for key, (variable, _) in KERNELS.items()}}):
        # Thread pools and oneDNN are fixed when TensorFlow and numpy load: a child process.
        return subprocess.call([sys.executable, "-m", "benchmarks.cli", *sys_argv(args)],
                               env={**os.environ, **wanted})
    print(f"re-running {recorded.describe()} ({recorded.cell_id}, from the {found_in}) with "
          f"{wanted}", file=sys.stderr)
    again = verification_record(recorded, rerun(recorded, args.data or data_dir()), found_in)
    path = write_record(args.results, again)
    verdict = again.verification
    print(f"{verdict['verdict']}: {recorded.describe()} ({recorded.cell_id})")
    if again.error:
        print(f"  the re-run failed: {again.error}")
    for name, (before, after) in verdict["differences"].items():
        print(f"  {name}: {before} recorded, {after} re-run")
    for cause in verdict["causes"]:
        print(f"  probable cause: {cause}")
    print(f"verification record: {path}")
    return 0 if verdict["verdict"] == "identical" else 1


def numerics_environment(provenance: dict[str, Any]) -> dict[str, str]:
    """The environment that gives a process a record's thread count, oneDNN setting and
    kernels (records without a thread count or oneDNN setting ran on every core, with
    oneDNN as the CPU's default)."""
    wanted = {}
    if provenance.get("threads"):
        wanted["OMP_NUM_THREADS"] = str(provenance["threads"])
    if "onednn" in provenance:
        wanted[ONEDNN] = "1" if provenance["onednn"] else "0"
    for key, (variable, before_recorded) in KERNELS.items():
        wanted[variable] = str(provenance.get(key, before_recorded))
    return wanted


def sys_argv(args) -> list[str]:
    """The verify command line again, for the child process."""
    argv = ["verify", args.cell, "--results", str(args.results)]
    if args.data:
        argv += ["--data", str(args.data)]
    return argv + (["--no-archive"] if args.no_archive else ["--archive", str(args.archive)])
