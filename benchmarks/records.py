"""The run record, written down once: the typed record the runner writes and that
``status``, the report and the exports read. One JSON file per finished cell, written
atomically and last.

Identity: ``config_id`` is a hash of everything that changes a result except the seed
(method and its version, dataset and its fingerprint, epsilon, delta, hyperparameters);
``cell_id`` is that plus the seed. Seeds are grouped by ``config_id``.

What is published and what is not: ``metrics`` (public test data), ``privacy`` (the
notion, the ledger's total and entries, public accounting details) and the provenance
are published. ``diagnostics`` holds statistics computed from private training data
(solver traces, noise norms, private tuning counts, tracebacks); no epsilon covers them,
so they are kept for debugging and never rendered, exported or copied to a site.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Iterator

from benchmarks.atomic import atomic_write
from benchmarks.errors import PrivboardError
from benchmarks.metrics import METRICS
from benchmarks.privacy import PrivacyNotion

SCHEMA = 2
STATUSES = ("ok", "failed")
KINDS = ("run", "audit", "verification")
# Files a results folder holds beside the records.
CATALOGUE = "catalogue.json"
# The mark ``privboard submit`` gives a record whose DP-SGD steps ran on shuffled
# fixed-size batches and were accounted as Poisson samples, under privacy.details'
# SAMPLING: no proven bound (Chua et al., "How Private are DP-SGD Implementations?",
# ICML 2024).
SAMPLING = "sampling"
SHUFFLED_BATCHES = "accounted as Poisson; batches were shuffled: no proven bound"


class RecordError(PrivboardError):
    """A file in a results folder that is not a whole record of this schema."""


def encode_epsilon(eps: float) -> float | str:
    return "inf" if math.isinf(eps) else float(eps)


def decode_epsilon(value: float | str) -> float:
    return math.inf if value == "inf" else float(value)


def _hash(identity: Any) -> str:
    blob = json.dumps(identity, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:20]


def config_identity(method: str, method_version: int, dataset: str, dataset_fingerprint: str,
                    epsilon: float, delta: float, hparams: dict[str, Any],
                    search: dict[str, Any] | None = None) -> str:
    """A hash of what changes a result except the seed, never of paths or hosts; a
    private search of the settings (benchmarks.tuning) is part of it."""
    return _hash({"method": method, "method_version": method_version, "dataset": dataset,
                  "dataset_fingerprint": dataset_fingerprint,
                  "epsilon": encode_epsilon(epsilon), "delta": float(delta),
                  "hparams": hparams, **({"search": search} if search else {})})


def cell_identity(config_id: str, seed: int, audit: bool = False,
                  audit_protocol: int = 1) -> str:
    """The configuration and the seed; an audited twin (trained with canaries) is a cell
    of its own, linked to its configuration by config_id, and a twin of a later audit
    protocol (the method's ``audit_protocol``) is another cell again."""
    identity = {"config_id": config_id, "seed": int(seed)}
    if not audit:
        return _hash(identity)
    protocol = {"audit_protocol": int(audit_protocol)} if audit_protocol > 1 else {}
    return _hash({**identity, "audit": True, **protocol})


def describe_cell(dataset: str, method: str, epsilon: float, delta: float, seed: int,
                  audit: bool = False) -> str:
    """A cell in words, for progress bars and messages."""
    eps = "inf" if math.isinf(epsilon) else f"{epsilon:g}"
    delta_text = f" delta={delta:g}" if delta else ""
    return f"{dataset} {method} eps={eps}{delta_text} seed={seed}" + (" (audit)" if audit else "")


def verification_identity(verified_cell: str, started_at: str) -> str:
    """A re-run of a recorded cell (privboard verify) is a record of its own, one per
    re-run: the cell it re-ran and when."""
    return _hash({"verifies": verified_cell, "started_at": started_at})


@dataclasses.dataclass
class Privacy:
    """The privacy a record's number carries: its notion, what the ledger composed to,
    the ledger's entries, and public accounting details."""

    notion: PrivacyNotion
    epsilon: float | None = None  # None for a run that failed before the ledger closed
    delta: float | None = None
    composition: str = ""
    ledger: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    details: dict[str, Any] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        spent = {} if self.epsilon is None else {
            "epsilon": encode_epsilon(self.epsilon), "delta": self.delta}
        return {**self.notion.as_dict(), **spent, "composition": self.composition,
                "ledger": self.ledger, "details": self.details}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Privacy":
        epsilon = data.get("epsilon")
        return cls(PrivacyNotion.from_dict(data),
                   None if epsilon is None else decode_epsilon(epsilon),
                   None if epsilon is None else float(data.get("delta", 0.0)),
                   str(data.get("composition", "")), list(data.get("ledger", [])),
                   dict(data.get("details", {})))


@dataclasses.dataclass
class RunRecord:
    cell_id: str
    config_id: str
    suite: str
    status: str
    method: str
    method_version: int
    dataset: str
    dataset_fingerprint: str
    seed: int
    epsilon: float  # the cell's budget
    delta: float
    hparams: dict[str, Any]
    privacy: Privacy
    variant: str = ""  # a display label only
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    # How the test set was used: {"public_inputs": k, "evaluated": n}; the first k test
    # examples were the method's public unlabelled inputs, the other n its evaluation.
    test_split: dict[str, int] = dataclasses.field(default_factory=dict)
    datasets_used: dict[str, str] = dataclasses.field(default_factory=dict)
    wall_time_s: float = 0.0
    started_at: str = ""
    finished_at: str = ""
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    error: str = ""  # failed records: one line
    # "run"; "audit" for a configuration's audited twin (trained with canaries), whose
    # result (benchmarks.audit.training.TrainingAudit.as_dict) is ``audit``; or
    # "verification" for a re-run of a recorded cell, whose verdict is ``verification``
    # (benchmarks.verify). Neither counts towards the accuracy columns.
    kind: str = "run"
    # A private search of the settings (benchmarks.tuning.Search.as_dict), part of the
    # configuration's identity; and how the settings were chosen (benchmarks.
    # settings_chosen), which is not.
    search: dict[str, Any] = dataclasses.field(default_factory=dict)
    settings_chosen: dict[str, str] = dataclasses.field(default_factory=dict)
    audit: dict[str, Any] = dataclasses.field(default_factory=dict)
    # The audit protocol of an audited twin, or of the twin a verification re-ran
    # (benchmarks.contract.Method.audit_protocol); 1 in records from before protocols.
    audit_protocol: int = 1
    verification: dict[str, Any] = dataclasses.field(default_factory=dict)
    diagnostics: dict[str, Any] = dataclasses.field(default_factory=dict)  # PRIVATE
    path: Path | None = None  # where it was read from; not stored

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def no_proven_bound(self) -> bool:
        """Its DP-SGD steps ran on shuffled batches accounted as Poisson samples."""
        return self.privacy.details.get(SAMPLING) == SHUFFLED_BATCHES

    @property
    def is_audit(self) -> bool:
        return self.kind == "audit"

    @property
    def is_verification(self) -> bool:
        return self.kind == "verification"

    @property
    def audits(self) -> bool:
        """An audited twin, or a re-run of one."""
        return self.is_audit or bool(self.verification.get("audit"))

    @property
    def cold_wall_time_s(self) -> float:
        """Its wall seconds as if nothing were cached. An SSL prior's encoder is cached by
        its training inputs, so a cell reuses it and its twin, whose planted set differs,
        trains its own. A run that took less time than its encoder's recorded training
        loaded the encoder, and is charged that training as a cold run would be. (PATE's
        records do not say whether their teachers came from the cache.)"""
        encoder = self.privacy.details.get("encoder") or {}
        trained = encoder.get("train_seconds", 0.0)
        return self.wall_time_s + (trained if self.wall_time_s < trained else 0.0)

    def describe(self) -> str:
        return describe_cell(self.dataset, self.method, self.epsilon, self.delta, self.seed,
                             self.audits)

    @property
    def expected_config_id(self) -> str:
        """The configuration identity this record's contents hash to."""
        return config_identity(self.method, self.method_version, self.dataset,
                               self.dataset_fingerprint, self.epsilon, self.delta,
                               self.hparams, self.search or None)

    @property
    def expected_cell_id(self) -> str:
        """The cell identity this record's contents hash to."""
        if self.is_verification:
            return verification_identity(self.verification.get("cell_id", ""), self.started_at)
        return cell_identity(self.expected_config_id, self.seed, self.is_audit,
                             self.audit_protocol)

    def public_dict(self) -> dict[str, Any]:
        """The record as published: everything but the private diagnostics."""
        return {
            "schema": SCHEMA, "cell_id": self.cell_id, "config_id": self.config_id,
            "suite": self.suite, "status": self.status, "method": self.method,
            "method_version": self.method_version, "dataset": self.dataset,
            "dataset_fingerprint": self.dataset_fingerprint, "seed": self.seed,
            "epsilon": encode_epsilon(self.epsilon), "delta": self.delta,
            "hparams": self.hparams, "variant": self.variant,
            "privacy": self.privacy.as_dict(), "metrics": self.metrics,
            "test_split": self.test_split, "datasets_used": self.datasets_used, "wall_time_s": self.wall_time_s,
            "started_at": self.started_at, "finished_at": self.finished_at,
            "provenance": self.provenance, **({"error": self.error} if self.error else {}),
            "kind": self.kind, **({"search": self.search} if self.search else {}),
            **({"settings_chosen": self.settings_chosen} if self.settings_chosen else {}),
            **({"audit": self.audit} if self.audit else {}),
            **({"audit_protocol": self.audit_protocol}
               if self.audits and self.audit_protocol > 1 else {}),
            **({"verification": self.verification} if self.verification else {}),
        }

    def stored_dict(self) -> dict[str, Any]:
        return {**self.public_dict(), "diagnostics": self.diagnostics}

    @classmethod
    def from_dict(cls, data: Any, path: Path | None = None) -> "RunRecord":
        """A record from its JSON object; RecordError (one line) if it is not one."""
        where = f"record {path}" if path else "record"
        if not isinstance(data, dict):
            raise RecordError(f"{where} is not a JSON object")
        if data.get("schema") != SCHEMA:
            raise RecordError(f"{where}: schema {data.get('schema')!r}, expected {SCHEMA}")
        required = ("cell_id", "config_id", "suite", "status", "method", "dataset", "seed",
                    "epsilon", "delta", "privacy")
        missing = [name for name in required if name not in data]
        if missing:
            raise RecordError(f"{where}: missing {', '.join(missing)}")
        if data["status"] not in STATUSES:
            raise RecordError(f"{where}: status {data['status']!r} is neither 'ok' nor 'failed'")
        try:
            epsilon, delta = decode_epsilon(data["epsilon"]), float(data["delta"])
            privacy = Privacy.from_dict(data["privacy"])
        except (TypeError, ValueError, AttributeError) as error:
            raise RecordError(f"{where}: {error}") from None
        if math.isnan(epsilon) or epsilon <= 0 or not 0 <= delta < 1:
            raise RecordError(f"{where}: epsilon {epsilon} must be > 0 and delta {delta} in [0, 1)")
        metrics = data.get("metrics") or {}
        kind = data.get("kind", "run")
        if kind not in KINDS:
            raise RecordError(f"{where}: kind {kind!r} is not one of {', '.join(KINDS)}")
        if data["status"] == "ok":
            if privacy.epsilon is None:
                raise RecordError(f"{where}: an ok record needs privacy.epsilon")
            # The relative slack is for float rounding only, as in Budget.covers.
            if privacy.epsilon > epsilon * (1 + 1e-12) or (privacy.delta or 0.0) > delta:
                raise RecordError(f"{where}: its ledger composes to epsilon "
                                  f"{privacy.epsilon:.6g}, delta {privacy.delta:g}, beyond "
                                  f"its budget (epsilon {epsilon:g}, delta {delta:g})")
            for name, value in metrics.items():
                if isinstance(value, bool) or not isinstance(value, (int, float)):
                    raise RecordError(f"{where}: metrics.{name} is {value!r}, not a number")
            if kind == "audit" and not data.get("audit"):
                raise RecordError(f"{where}: an ok audit record needs its audit result")
            if kind == "verification" and not data.get("verification"):
                raise RecordError(f"{where}: an ok verification record needs its verdict")
            audited = kind == "audit" or (data.get("verification") or {}).get("audit")
            if not audited and not any(name in METRICS for name in metrics):
                raise RecordError(f"{where}: an ok record needs one of the metrics "
                                  f"{sorted(METRICS)}")
        record = cls(
            cell_id=str(data["cell_id"]), config_id=str(data["config_id"]),
            suite=str(data["suite"]), status=data["status"], method=str(data["method"]),
            method_version=int(data.get("method_version", 1)), dataset=str(data["dataset"]),
            dataset_fingerprint=str(data.get("dataset_fingerprint", "")),
            seed=int(data["seed"]), epsilon=epsilon, delta=delta,
            hparams=dict(data.get("hparams") or {}), privacy=privacy,
            variant=str(data.get("variant", "")), metrics=dict(metrics),
            test_split=dict(data.get("test_split") or {}),
            datasets_used=dict(data.get("datasets_used") or {}),
            wall_time_s=float(data.get("wall_time_s", 0.0)),
            started_at=str(data.get("started_at", "")),
            finished_at=str(data.get("finished_at", "")),
            provenance=dict(data.get("provenance") or {}), error=str(data.get("error", "")),
            kind=kind, search=dict(data.get("search") or {}),
            settings_chosen=dict(data.get("settings_chosen") or {}),
            audit=dict(data.get("audit") or {}),
            audit_protocol=int(data.get("audit_protocol", 1)),
            verification=dict(data.get("verification") or {}),
            diagnostics=dict(data.get("diagnostics") or {}), path=path)
        record.check_identity(where)
        return record

    def check_identity(self, where: str = "record") -> None:
        """RecordError unless the record's identities are what its contents hash to: a
        record cannot claim another cell, nor keep its cell after its settings changed."""
        config = self.expected_config_id
        if self.config_id != config:
            raise RecordError(f"{where}: claims configuration {self.config_id}, but its "
                              f"method, version, dataset, fingerprint, budget and "
                              f"hyperparameters hash to {config}")
        if self.is_verification and self.verification.get("cell_id") != cell_identity(
                config, self.seed, bool(self.verification.get("audit")), self.audit_protocol):
            raise RecordError(f"{where}: verifies cell {self.verification.get('cell_id')!r}, "
                              f"which is not its configuration's seed {self.seed}")
        if self.cell_id != self.expected_cell_id:
            raise RecordError(f"{where}: claims cell {self.cell_id}, but its contents hash "
                              f"to {self.expected_cell_id}")


def record_path(results: Path, cell_id: str, status: str) -> Path:
    suffix = ".json" if status == "ok" else ".failed.json"
    return results / f"{cell_id}{suffix}"


def write_record(results: Path, record: RunRecord) -> Path:
    """Write atomically, so a kill at any moment leaves either no record or a whole one.
    A successful record replaces an earlier failure of the same cell."""
    path = record_path(results, record.cell_id, record.status)
    with atomic_write(path) as f:
        json.dump(record.stored_dict(), f, indent=1, sort_keys=True, allow_nan=False)
    if record.ok:
        record_path(results, record.cell_id, "failed").unlink(missing_ok=True)
    return path


def _record_files(results: Path) -> Iterator[Path]:
    if results.is_dir():
        # Temp files of interrupted writes start with ".tmp-" and are never records.
        yield from (p for p in sorted(results.glob("*.json"))
                    if not p.name.startswith(".") and p.name != CATALOGUE)


def read_records(results: Path) -> Iterator[RunRecord]:
    """Every record under ``results``; RecordError names the first file that is not one."""
    for path in _record_files(results):
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise RecordError(f"record {path} is not a JSON object ({err})") from None
        yield RunRecord.from_dict(data, path)


def done_cells(results: Path) -> dict[str, str]:
    """cell_id -> status of every recorded cell; "ok" wins over "failed"."""
    status: dict[str, str] = {}
    for path in _record_files(results):
        cell, _, rest = path.name.partition(".")
        if rest == "json" or cell not in status:
            status[cell] = "ok" if rest == "json" else "failed"
    return status
