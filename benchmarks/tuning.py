"""Hyperparameter search paid for in epsilon: a suite block's ``[block.search]`` makes its
cells privately tuned (Papernot and Steinke, ICLR 2022).

A tuned cell of total budget (epsilon, delta) carves a validation split from its training
set (never from the test split), then runs the privacy layer's private selection
(benchmarks.privacy.selection): K candidates, K truncated negative binomial with the
block's mean and shape; each candidate draws its settings uniformly from the block's
grid, trains the method on the rest of the training set at the candidate budget, and
scores itself by a Laplace count of its correct predictions on the validation split. The
best score's model is released, with its settings and score.

The candidate budget is the largest epsilon whose selection, computed from the
candidates' RDP curves (every grid point's, each known before training:
``Method.planned_curve``), stays within the cell's epsilon at its delta. The cell's
number then carries the method's notion, approximate and RDP-accounted: what the
selection's theorem gives.

    [[block]]
    datasets = ["mnist"]
    methods = ["dp-sgd"]
    epsilons = [1]
    delta = 1e-5
    seeds = [0]
    hparams = { model = "small-cnn", batch_size = 1024 }   # fixed settings
    [block.search]
    space = { peak_lr = [0.1, 0.2], epochs = [10, 30] }      # the grid
    mean_candidates = 3
    shape = 0                 # 0 logarithmic, 1 geometric
    validation_share = 0.1
    validation_split = "coins"  # each row held out by its own coin (needed under add/remove)
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
import json
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from benchmarks import code_version
from benchmarks.atomic import atomic_write
from benchmarks.context import RunContext
from benchmarks.contract import Budget, Method, Split
from benchmarks.errors import InputError
from benchmarks.privacy import (Accountant, Field, Kind, Ledger, Neighbours, PrivacyNotion,
                                Protects, Touches, rdp)
from benchmarks.privacy import selection
from benchmarks.tf_runtime import numerics

SEARCH_KEYS = {"space", "mean_candidates", "shape", "validation_share"}
# How the validation rows are drawn: "fixed share", a seeded permutation's last
# round(share x N) rows; or "coins", each row by an independent coin of probability share.
# Only coins keep the two parts independent of the other records under add/remove
# neighbours (adding a record to a fixed-size split moves another between the parts).
FIXED_SHARE, COINS = "fixed share", "coins"
# The candidate budget is searched to this relative precision.
_PRECISION = 1e-3


@dataclasses.dataclass(frozen=True)
class Search:
    """A grid of settings, the law of the number of candidates, and the share of the
    training set kept for validation."""

    space: tuple[tuple[str, tuple[Any, ...]], ...]
    mean_candidates: float
    shape: float
    validation_share: float
    validation_split: str = FIXED_SHARE

    @classmethod
    def from_dict(cls, data: Any, where: str = "search") -> "Search":
        if not isinstance(data, dict) or not SEARCH_KEYS <= set(data) <= SEARCH_KEYS | {
                "validation_split"}:
            raise InputError(f"{where}: a search needs exactly the keys "
                             f"{', '.join(sorted(SEARCH_KEYS))}, and may have "
                             f"validation_split")
        space = data["space"]
        if not isinstance(space, dict) or not space or not all(
                isinstance(values, list) and values and len(set(map(repr, values))) == len(values)
                for values in space.values()):
            raise InputError(f"{where}: space must map each searched setting to a list of "
                             f"distinct values")
        share = data["validation_share"]
        if not (isinstance(share, (int, float)) and 0 < share < 1):
            raise InputError(f"{where}: validation_share must be in (0, 1), got {share!r}")
        split = data.get("validation_split", FIXED_SHARE)
        if split not in (FIXED_SHARE, COINS):
            raise InputError(f"{where}: validation_split must be {FIXED_SHARE!r} or "
                             f"{COINS!r}, got {split!r}")
        search = cls(tuple(sorted((key, tuple(values)) for key, values in space.items())),
                     data["mean_candidates"], data["shape"], float(share), split)
        search.law()  # its checks
        return search

    def law(self) -> selection.Repetitions:
        return selection.Repetitions(self.mean_candidates, self.shape)

    def grid(self) -> list[dict[str, Any]]:
        """Every combination of the searched values, in a fixed order."""
        keys = [key for key, _ in self.space]
        return [dict(zip(keys, values))
                for values in itertools.product(*(values for _, values in self.space))]

    def as_dict(self) -> dict[str, Any]:
        """The search as a configuration's identity holds it; a fixed-share split, the
        first kind, is left unnamed so that its identities stay those it was archived
        with."""
        split = {} if self.validation_split == FIXED_SHARE else {
            "validation_split": self.validation_split}
        return {"space": {key: list(values) for key, values in self.space},
                "mean_candidates": self.mean_candidates, "shape": self.shape,
                "validation_share": self.validation_share, **split}


def tuned_notion(notion: PrivacyNotion) -> PrivacyNotion:
    """The notion of a privately tuned number: the method's, approximate, RDP-accounted."""
    return PrivacyNotion(notion.protects, notion.neighbours, Kind.APPROXIMATE, Accountant.RDP)


def check_tunable(method_cls: type[Method], budget: Budget, hparams: dict[str, Any],
                  search: Search) -> None:
    """InputError (one line) unless every grid point is a valid setting of a central-DP
    method at a finite budget with a delta."""
    fixed = sorted(set(hparams) & {key for key, _ in search.space})
    if fixed:
        raise InputError(f"{', '.join(fixed)} both fixed and searched")
    unknown = sorted({key for key, _ in search.space} - set(method_cls.defaults))
    if unknown:
        raise InputError(f"{method_cls.name} has no hyperparameter(s) {unknown}")
    if not budget.private or not 0 < budget.delta < 1:
        raise InputError(f"private selection needs a finite epsilon and a delta in "
                         f"(0, 1), got epsilon {budget.epsilon:g}, delta {budget.delta:g}")
    if method_cls.public_part is not Method.public_part:
        raise InputError(f"{method_cls.name} takes public test inputs, which a "
                         f"private selection does not hand on")
    notion = method_cls.notion_for(budget, {**hparams, **search.grid()[0]})
    if notion.protects not in (Protects.LABELS, Protects.RECORDS):
        raise InputError(f"{method_cls.name} protects {notion.protects.value}; "
                         f"private selection covers central label-DP and full DP")
    if notion.neighbours is Neighbours.ADD_REMOVE and search.validation_split != COINS:
        raise InputError(f"under add/remove neighbours a validation split of fixed "
                         f"size is not parallel to training (adding a record moves another "
                         f"between the parts); set validation_split = \"{COINS}\"")
    for point in search.grid():
        method_cls(budget, seed=0, **hparams, **point)


def validation_split(size: int, share: float, rng: np.random.Generator,
                     split: str = FIXED_SHARE) -> tuple[np.ndarray, np.ndarray]:
    """(training rows, validation rows), drawn without looking at the data: with a fixed
    share, a seeded permutation's last round(share x size) rows; with coins, each row
    by its own coin of probability ``share`` (row i's coin is the stream's i-th draw, so
    a record added at the end leaves every other row's part as it was)."""
    if split == COINS:
        held = rng.random(size) < share
    else:
        held = np.zeros(size, bool)
        held[rng.permutation(size)[size - int(round(share * size)):]] = True
    if held.all() or not held.any():
        raise InputError(f"a validation share of {share:g} leaves no rows on one side of "
                         f"{size}")
    return np.flatnonzero(~held), np.flatnonzero(held)


class Candidate(NamedTuple):
    """A trained candidate: its model, the settings it drew and its own ledger."""

    model: Method
    settings: dict[str, Any]
    ledger: Ledger


def watch_candidate(ledger: Ledger, candidate: Ledger, rows: np.ndarray) -> None:
    """An audit's watch of the selection's ``ledger`` (its canary rows and phantom
    canaries), handed on to a candidate trained on the training rows ``rows``: every
    candidate trains on the same data, canaries included."""
    candidate.watch(np.flatnonzero(np.isin(rows, ledger.watched)))
    candidate.phantoms = copy.deepcopy(ledger.phantoms)


def observed_selected(ledger: Ledger, selected: Ledger, rows: np.ndarray) -> None:
    """What the selected candidate's releases gave the audit's canaries, back on the
    selection's ledger: its releases are part of the output the selection releases."""
    ledger.observed = {int(rows[i]): seen for i, seen in selected.observed.items()}
    ledger.phantoms = selected.phantoms
    ledger.model_releases = list(selected.model_releases)


class SavedProgress(selection.Progress):
    """A selection's scores kept in a file as they come, so that an interrupted cell
    resumes at its next candidate; the file goes when the selection ends. Like the
    candidates' models, the scores are private: they stay in the data folder's cache."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        if path.exists():
            self.scores = {int(j): float(score)
                           for j, score in json.loads(path.read_text()).items()}

    def record(self, index: int, score: float) -> None:
        super().record(index, score)
        with atomic_write(self.path) as f:
            json.dump({str(j): score for j, score in self.scores.items()}, f)

    def clear(self) -> None:
        super().clear()
        self.path.unlink(missing_ok=True)


class PrivatelyTuned(Method):
    """One method's cell, its settings chosen by private selection from ``search``."""

    def __init__(self, method_cls: type[Method], budget: Budget, search: Search, *,
                 context: RunContext, **hparams: Any) -> None:
        self.method_cls, self.search = method_cls, search
        self.name = method_cls.name
        self.defaults = {**method_cls.defaults}
        super().__init__(budget, context=context, **hparams)
        self.notion = tuned_notion(method_cls.notion_for(budget, self.hparams))
        self.selected: selection.Selected | None = None
        self.details: dict[str, Any] = {}

    def notion_for(self, budget: Budget, hparams: dict[str, Any]) -> PrivacyNotion:
        return self.notion

    def candidate(self, epsilon: float, point: dict[str, Any],
                  context: RunContext | None = None) -> Method:
        return self.method_cls(Budget(epsilon, self.budget.delta),
                               context=context or RunContext(seed=self.seed),
                               **{**self.hparams, **point})

    def envelope(self, epsilon: float, train_size: int) -> np.ndarray:
        """The RDP curve that bounds every candidate at candidate budget ``epsilon``: each
        grid point's training, and the validation score (on other rows: the larger)."""
        curves = [self.candidate(epsilon, point).planned_curve(train_size)
                  for point in self.search.grid()]
        return np.max([*curves, rdp.pure_rdp(selection.score_epsilon(epsilon))], axis=0)

    def total_epsilon(self, epsilon: float, train_size: int) -> float:
        curve = selection.selection_curve(self.envelope(epsilon, train_size), self.search.law())
        return rdp.epsilon_from_rdp(curve, self.budget.delta)[0]

    def candidate_epsilon(self, train_size: int) -> float:
        """The largest candidate epsilon (to _PRECISION) whose selection stays within the
        cell's epsilon."""
        target = self.budget.epsilon
        low, high = 0.0, target  # the selection costs at least one candidate
        while high - low > _PRECISION * high:
            middle = (low + high) / 2
            try:
                fits = self.total_epsilon(middle, train_size) <= target
            except InputError:  # a candidate budget too small to calibrate
                fits = False
            low, high = (middle, high) if fits else (low, middle)
        if low == 0.0:
            raise InputError(f"{self.name}: no candidate budget keeps this selection within "
                             f"epsilon {target:g}")
        return low

    def fit(self, train: Split, num_classes: int) -> "PrivatelyTuned":
        keep, held_out = validation_split(len(train), self.search.validation_share,
                                          self.ctx.rng("validation split"),
                                          self.search.validation_split)
        part = Split(train.x[keep], train.y[keep])
        epsilon = self.candidate_epsilon(len(part))
        score_epsilon = selection.score_epsilon(epsilon)
        grid, draws = self.search.grid(), self.ctx.rng("candidate settings")
        field = Field.LABELS if self.notion.protects is Protects.LABELS else Field.RECORDS
        scored = Touches(field, np.arange(len(held_out)), "validation")
        inner_notion = self.method_cls.notion_for(Budget(epsilon, self.budget.delta),
                                                  self.hparams)

        drawn: list[dict[str, Any]] = []  # in candidate order, whichever candidates run

        def candidate(j: int) -> tuple[Candidate, np.ndarray, float]:
            while len(drawn) <= j:
                drawn.append(grid[int(draws.integers(len(grid)))])
            point = drawn[j]
            context = RunContext(seed=self.ctx.seed_for(f"candidate {j}"),
                                 data_dir=self.ctx.data_dir,
                                 progress=lambda m: self.progress(f"candidate {j + 1}: {m}"),
                                 datasets_used=self.ctx.datasets_used)
            watch_candidate(self.ctx.ledger, context.ledger, keep)
            model = self.candidate(epsilon, point, context).fit(part, num_classes)
            correct = (np.argmax(model.predict_proba(train.x[held_out]), axis=1)
                       == train.y[held_out])
            # The validation rows are not the training's: a ledger of their own, and the
            # candidate's curve is the larger of the two (parallel composition).
            score_ledger = Ledger()
            score = selection.noisy_correct_count(score_ledger, correct, score_epsilon,
                                                  context.rng("validation score"), scored)
            spent = np.maximum(context.ledger.curve(inner_notion),
                               score_ledger.curve(inner_notion))
            return Candidate(model, point, context.ledger), spent, score

        # K's own stream per method and epsilon: the suite's cells of one seed draw
        # different numbers of candidates, so its time stays near its expectation.
        number = self.ctx.rng(f"number of candidates: {self.name} at epsilon "
                              f"{self.budget.epsilon:g}")
        self.selected = selection.select(
            self.ctx.ledger, Touches(field), self.search.law(), self.envelope(epsilon, len(part)),
            number, candidate, self.progress_of_selection(train))
        # K and the other candidates are not covered by the selection's epsilon.
        self.ctx.diagnose(selection=self.selected.private)
        observed_selected(self.ctx.ledger, self.selected.result.ledger, keep)
        self.details = {
            "selection": "Papernot and Steinke 2022, Theorem 2 (dp_accounting)",
            "search": self.search.as_dict(), "candidate_epsilon": epsilon,
            "score_epsilon": score_epsilon, "training_rows": len(keep),
            "validation_rows": len(held_out), "selected_hparams": self.selected.result.settings,
            "selected_noisy_validation_accuracy_pct":
                100.0 * self.selected.score / len(held_out)}
        return self

    def progress_of_selection(self, train: Split) -> selection.Progress:
        """Where the selection keeps its scores: a file keyed by all that its candidates'
        results depend on (the code, the data, the cell's settings and seed, and the
        numerics), or memory alone when the checkout has edits, since its commit no
        longer names its code."""
        if code_version.dirty():
            self.progress("the checkout has edits: an interrupted selection will restart")
            return selection.Progress()
        digest = hashlib.sha256()
        for array in (train.x, train.y):
            digest.update(np.ascontiguousarray(array).data)
        digest.update(json.dumps({
            "code": code_version.commit(), "method": self.name, "seed": self.seed,
            "epsilon": self.budget.epsilon, "delta": self.budget.delta,
            "hparams": self.hparams, "search": self.search.as_dict(), **numerics()},
            sort_keys=True, default=repr).encode())
        path = (self.ctx.data_root() / "cache" / "private-selection"
                / f"{digest.hexdigest()[:32]}.json")
        saved = SavedProgress(path)
        if saved.scores:
            self.progress(f"resuming after {len(saved.scores)} scored candidate(s)")
        return saved

    @property
    def model(self) -> Method:
        if self.selected is None:
            raise RuntimeError(f"{self.name}: call fit before predict_proba")
        return self.selected.result.model

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        return self.model.predict_proba(x)

    def privacy_details(self) -> dict[str, Any]:
        return {**self.details, "selected_model": self.model.privacy_details()}

    def variant(self) -> str:
        text = self.method_cls(self.budget, seed=self.seed, **self.hparams).variant()
        return f"{text}, tuned privately" if text else "tuned privately"

    def extra_metrics(self) -> dict[str, Any]:
        return self.model.extra_metrics()

