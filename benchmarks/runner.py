"""Runs the cells of a suite that are not done yet, one record per finished cell.

Resuming is free: a cell is done exactly when its record exists, and records are
written atomically and last, so a kill at any moment (even kill -9) loses at most the
cells in progress and never leaves half a record. Where cells run is the executor's
choice (this process, worker processes of this machine or Ray: benchmarks.executors);
what a record holds is not.
"""
from __future__ import annotations

import benchmarks.numerics  # noqa: F401  (first: see benchmarks/numerics.py)

import collections
import datetime as dt
import os
import sys
import time
import traceback
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
from tqdm import tqdm

from benchmarks import catalogue, cell_costs, code_version, datasets, estimate, host_speed
from benchmarks.audit.training import CONFIDENCE as AUDIT_CONFIDENCE
from benchmarks.context import RunContext
from benchmarks.contract import Dataset, Method, Split
from benchmarks.errors import PrivboardError, one_line, public_error
from benchmarks.metrics import evaluate, prior_quality
from benchmarks.records import Privacy, RunRecord, done_cells, write_record
from benchmarks.registry import get_method
from benchmarks.schedule import Forecast, cached_model
from benchmarks.suites import Cell, Suite
from benchmarks.tf_runtime import cpu_model, numerics, pin_threads, training_device
from benchmarks.tuning import PrivatelyTuned

PACKAGES = ("tensorflow", "keras", "tensorflow-privacy", "dp-accounting", "numpy",
            "scipy", "scikit-learn", "pandas")


def plan(suite: Suite, results: Path, data_dir: Path) -> list[tuple[Cell, str]]:
    """Each cell with its state: done, failed, pending, skipped: <why>, or
    unavailable: <why> when its dataset cannot be loaded here."""
    status = done_cells(results)
    missing = {name: datasets.get_spec(name).missing(data_dir)
               for name in {c.dataset for c in suite.cells}}
    states = []
    for cell in suite.cells:
        if cell.skip:
            state = f"skipped: {cell.skip}"
        elif cell.cell_id in status:
            state = "done" if status[cell.cell_id] == "ok" else "failed"
        elif missing[cell.dataset]:
            state = f"unavailable: {missing[cell.dataset]}"
        else:
            state = "pending"
        states.append((cell, state))
    return states


# An executor runs cells and yields each with its record as it finishes; it decides where
# cells run, never how: every record comes from run_cell. It starts them in the order
# given, calls the bar's ``started`` for each, and runs ``slots`` of them at a time (1 when
# it has no such attribute).
Executor = Callable[[list[Cell], Path, estimate.ForecastBar],
                    Iterator[tuple[Cell, RunRecord]]]


def run(suite: Suite, results: Path, data_dir: Path, retry_failed: bool = False,
        echo: Callable[[str], None] = print, executor: Executor | None = None,
        costs: cell_costs.CostTable | None = None,
        calibrate: Callable[[int], host_speed.HostSpeed] = host_speed.calibrate) -> int:
    """Run every pending cell (and failed ones if asked), in this process or with another
    executor; say first how long that is expected to take (``costs``: the archive's by
    default; ``calibrate`` measures this host). Returns the number of cells that failed
    in this run."""
    states = plan(suite, results, data_dir)
    todo = [c for c, s in states if s == "pending" or (retry_failed and s == "failed")]
    catalogue.write(results, [suite])  # what the site needs beside the records
    for dataset in sorted({c.dataset for c, s in states if s.startswith("unavailable")}):
        echo(f"skipping {dataset}: {datasets.get_spec(dataset).missing(data_dir)}")
    skipped = collections.Counter(c.skip for c, _ in states if c.skip)
    for why, count in sorted(skipped.items()):  # a method's tasks, a budget it cannot run
        echo(f"skipping {count} cell{'s' if count > 1 else ''}: {why}")
    done = sum(s == "done" for _, s in states)
    echo(f"suite {suite.name}: {len(states)} cells, {done} done, {len(todo)} to run")
    expected = estimate.expect(todo, getattr(executor, "slots", 1),
                               worker_each=executor is not None, costs=costs,
                               warm={cached_model(c) for c, s in states if s == "done"},
                               calibrate=calibrate)
    if todo:
        echo(expected.describe())
    if executor is not None:  # cells side by side: the longest first (benchmarks.schedule)
        todo = expected.order
    forecast = Forecast(todo, expected.durations, expected.slots or 1)
    failures = 0
    with estimate.ForecastBar(forecast, total=len(todo), unit="cell", file=sys.stderr,
                              dynamic_ncols=True) as bar:
        # The driver is the only writer: one record per finished cell, whatever ran it.
        for cell, record in (executor or run_locally)(todo, data_dir, bar):
            write_record(results, record)
            bar.finished(cell)
            if not record.ok:
                failures += 1
                bar.write(f"FAILED {cell.describe()}: {record.error}")
    return failures


def run_locally(cells: list[Cell], data_dir: Path,
                bar: estimate.ForecastBar) -> Iterator[tuple[Cell, RunRecord]]:
    """The local executor with one worker: one cell after another in this process."""
    slot = DatasetSlot()
    for cell in cells:
        bar.started(cell)
        yield cell, run_cell(cell, slot.get(cell.dataset, data_dir),
                             local_context(cell, data_dir, bar))


def local_context(cell: Cell, data_dir: Path, bar: tqdm) -> RunContext:
    """The context of a cell trained in this process, its progress shown on ``bar``."""
    bar.set_description(cell.describe())
    return RunContext(seed=cell.seed, data_dir=data_dir,
                      progress=lambda m: bar.set_postfix_str(m))


class BudgetExceeded(PrivboardError):
    """A run whose ledger composes to more than its cell's budget: never published."""


class DatasetSlot:
    """One dataset in memory at a time: consecutive cells of a suite share it, and the
    next dataset replaces it."""

    def __init__(self) -> None:
        self._key: tuple[str, Path] | None = None
        self._data: Dataset | None = None

    def get(self, name: str, data_dir: Path) -> Dataset:
        if self._key != (name, data_dir):
            self._key, self._data = None, None  # free the old arrays before loading
            self._data = datasets.load(name, data_dir)
            self._key = (name, data_dir)
        return self._data


# The datasets a worker process (local or Ray) keeps between its cells.
_worker_data = DatasetSlot()


def train_in_worker(cell: Cell, data_dir: Path,
                    progress: Callable[[str], None] | None = None) -> RunRecord:
    """A cell in a worker process, local or Ray: the same run_cell as in the command's own
    process."""
    from benchmarks.tf_runtime import allow_memory_growth

    allow_memory_growth()  # before the cell's first TensorFlow op; run_cell pins the threads
    return run_cell(cell, _worker_data.get(cell.dataset, data_dir),
                    RunContext(seed=cell.seed, data_dir=data_dir,
                               **({"progress": progress} if progress else {})))


def lost_cell(cell: Cell, error: str) -> RunRecord:
    """The failed record of a cell whose worker never returned: no device trained it."""
    record = new_record(cell, datasets.get_spec(cell.dataset).fingerprint,
                        RunContext(seed=cell.seed))
    record.error = error
    record.finished_at = now()
    record.provenance = provenance({}, device="unknown: the worker died")
    return record


def run_cell(cell: Cell, data: Dataset, context: RunContext,
             audit_confidence: float = AUDIT_CONFIDENCE) -> RunRecord:
    """Train and evaluate one cell, or audit it when it is an audited twin (its bounds at
    ``audit_confidence``). Errors become a failed record; an interrupt (Ctrl-C)
    propagates and writes nothing."""
    pin_threads()  # before the cell's first TensorFlow op
    context.datasets_used[data.name] = data.fingerprint
    record = new_record(cell, data.fingerprint, context)
    start = time.perf_counter()
    try:
        method = make_method(cell, context)
        record.variant = method.variant()
        if cell.audit:
            _audit(cell, data, method, record, audit_confidence)
        else:
            _train_and_evaluate(cell, data, method, record)
        record.status = "ok"
    except Exception as err:  # one bad cell must not stop the suite
        record.metrics = {}  # no epsilon covers the numbers of a failed run
        record.error = public_error(err)
        context.diagnose(error=one_line(err), traceback=traceback.format_exc())
    record.wall_time_s = round(time.perf_counter() - start, 3)
    record.finished_at = now()
    record.provenance = provenance(numerics())
    return record


def make_method(cell: Cell, context: RunContext) -> Method:
    """The cell's method, or its private selection when the cell searches its settings."""
    method_cls = get_method(cell.method)
    if cell.search is not None:
        return PrivatelyTuned(method_cls, cell.budget, cell.search, context=context,
                              **cell.hparams)
    return method_cls(cell.budget, context=context, **cell.hparams)


def _train_and_evaluate(cell: Cell, data: Dataset, method, record: RunRecord) -> None:
    public = method.public_part(data.name, len(data.test))
    method.fit(data.train, data.num_classes,
               **({"public_x": data.test.x[:public]} if public else {}))
    evaluated = Split(data.test.x[public:], data.test.y[public:])
    proba = method.predict_proba(evaluated.x)
    record.test_split = {"public_inputs": public, "evaluated": len(evaluated)}
    record.metrics = {**evaluate(data.task, data.num_classes, evaluated.y, proba),
                      **released_label_metrics(method, data.test.y[:public]),
                      **prior_metrics(method, evaluated),
                      **method.extra_metrics()}
    record.privacy = spent_privacy(method, cell)


def _audit(cell: Cell, data: Dataset, method, record: RunRecord, confidence: float) -> None:
    """The audited twin: the same training with canaries planted (``method`` is the
    instance whose context the audit trains in); its ledger must cover the budget."""
    from benchmarks.audit.training import audit_training

    result = audit_training(cell.method, data, cell.budget, cell.hparams, method.ctx,
                            confidence=confidence, model=method)
    record.audit = result.as_dict()
    record.privacy = spent_privacy(method, cell)


def new_record(cell: Cell, fingerprint: str, context: RunContext) -> RunRecord:
    """A cell's record before it has a result: failed, with the privacy notion its
    number would have carried."""
    method_cls = get_method(cell.method)
    return RunRecord(
        cell_id=cell.cell_id, config_id=cell.config_id, suite=cell.suite, status="failed",
        method=cell.method, method_version=method_cls.version, dataset=cell.dataset,
        dataset_fingerprint=fingerprint, seed=cell.seed, epsilon=cell.epsilon,
        delta=cell.delta, hparams=cell.hparams, privacy=Privacy(cell.notion),
        search=cell.search.as_dict() if cell.search else {},
        settings_chosen=cell.chosen.as_dict(),
        datasets_used=context.datasets_used, diagnostics=context.diagnostics,
        kind="audit" if cell.audit else "run",
        audit_protocol=cell.audit_protocol if cell.audit else 1, started_at=now())


def released_label_metrics(method, public_labels) -> dict[str, float]:
    """The accuracy of the labels a method released for public inputs (PATE's
    aggregated labels), scored here so that no method ever reads a public label."""
    released = method.released_public_labels()
    if released is None:
        return {}
    index, labels = released
    if not len(index):
        return {"released_labels": 0}
    return {"released_labels": len(index),
            "released_label_accuracy_pct": 100.0 * float(np.mean(labels == public_labels[index]))}


def prior_metrics(method, evaluated: Split) -> dict[str, float]:
    """How well a method's released priors predict the evaluated test labels: the share
    whose label is the prior's top class, and inside RRWithPrior's top-k* set."""
    released = method.public_priors(evaluated.x)
    if released is None:
        return {}
    quality = prior_quality(released[0], evaluated.y, released[1])
    return {"prior_top1_pct": 100.0 * quality.top1, "prior_top_k_pct": 100.0 * quality.top_k,
            "prior_mean_k": quality.mean_k}


def spent_privacy(method, cell: Cell) -> Privacy:
    """The record's privacy: the ledger's total, which must stay within the budget."""
    notion = method.notion_for(cell.budget, method.hparams)
    total = method.spent()
    if not cell.budget.covers(total):
        raise BudgetExceeded(f"the ledger's total (epsilon {total.epsilon:.6g}, delta "
                           f"{total.delta:g}) exceeds the budget (epsilon {cell.epsilon:g}, "
                           f"delta {cell.delta:g})")
    details = {**method.privacy_details(), **total.details}
    return Privacy(notion, total.epsilon, total.delta, total.composition,
                   method.ctx.ledger.entries(cell.delta), details)


def provenance(numerics: dict[str, Any], device: str | None = None) -> dict[str, Any]:
    """Where a record comes from: the code, the stack and the machine. The device is
    where Keras trained unless given; ``numerics`` (tf_runtime.numerics: the thread count
    and oneDNN) is what a re-run needs besides the record's settings to give the same
    bits."""
    if device is None:
        device = training_device()
    return {"git_commit": code_version.commit(), "git_dirty": code_version.dirty(),
            "packages": {p: package_version(p) for p in PACKAGES},
            "python": sys.version.split()[0], "device": device,
            "cpu": cpu_model(), "cores": os.cpu_count(), **numerics}


def package_version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
