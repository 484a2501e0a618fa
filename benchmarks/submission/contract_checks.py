"""The checks of the method contract, shared by the contract tests (every registered
method), the README's test and ``privboard submit`` (a method from another package).

A method declares its privacy notion, refuses settings it does not know and budgets no
run can honour, fits a tiny dataset of its task deterministically for a fixed seed,
predicts probabilities, and its privacy is what its ledger composes: within the budget,
of the kind its notion declares, with every mechanism of the privacy layer charged to the
run's ledger, covering every step the known outside DP libraries were seen to run
(library_watch), with no influence from any data that no charge covers, and with its
model a function of what the layer and the watched libraries released alone: refitted on
altered private data while the layer hands back the first fit's releases
(benchmarks.privacy.replay) and the libraries' noisy steps the first fit's noisy
gradients (library_replay), it predicts exactly as before.

Each check returns nothing (or a line saying what it found, when that is worth keeping)
when it holds and raises ContractBreach, one line with the figure that failed, when it
does not.
"""
from __future__ import annotations

import dataclasses
import json
import math
import time
from typing import Callable

import numpy as np

from benchmarks import datasets
from benchmarks.submission import library_replay, library_watch
from benchmarks.contract import Budget, Method, Split
from benchmarks.errors import InputError, public_error
from benchmarks.submission.ledger_watch import Seen, watch
from benchmarks.privacy import Accountant, Kind, Neighbours, PrivacyNotion, Protects, rdp, replay

TINY_TRAIN, TINY_TEST = 240, 60
TINY_DATASETS = {"image": "digits", "tabular": "breast-cancer"}
# The composition a ledger may report for each kind of notion.
COMPOSITION_OF_KIND = {Kind.PURE: {"pure"}, Kind.APPROXIMATE: {"rdp"},
                       Kind.NONE: {"unprotected"}}
# Budgets no run can honour, as a caller that skipped Budget's checks would pass them.
BAD_EPSILONS = (0.0, -1.0, math.nan)
UNKNOWN_SETTING = "no_such_setting"
# The seed of the contract's fits.
SEED = 3


class ContractBreach(Exception):
    """A method that breaks the contract; the message is one line with the figure."""


@dataclasses.dataclass
class Fitted:
    """A method fitted on the tiny data, as the runner would fit it."""

    model: Method
    budget: Budget
    proba: np.ndarray  # on the evaluated test inputs
    num_classes: int
    evaluated: int  # test examples predicted (those not taken as public inputs)
    train: Split
    seen: Seen  # the layer's mechanisms the fit ran, and who charged its ledger
    tape: replay.Tape  # the layer's releases and charges in the fit, in order
    steps: library_replay.Steps  # the noisy gradients of the watched libraries' steps
    seconds: float  # the fit's time, from making the method to its predictions


def tiny_task(method: type[Method]) -> str:
    """The first of the method's tasks that has a tiny dataset."""
    for task in method.tasks:
        if task in TINY_DATASETS:
            return task
    raise ContractBreach(f"handles {', '.join(method.tasks)} data; the contract's tiny "
                         f"datasets are {', '.join(TINY_DATASETS)}")


def tiny_data(task: str, binary: bool) -> tuple[Split, np.ndarray, int]:
    ds = datasets.load(TINY_DATASETS[task])
    train, test = ds.train, ds.test
    if binary and ds.num_classes > 2:  # keep two classes, relabelled 0 and 1
        def two(split: Split) -> Split:
            keep = split.y < 2
            return Split(split.x[keep], split.y[keep])
        train, test = two(train), two(test)
    return (Split(train.x[:TINY_TRAIN], train.y[:TINY_TRAIN]), test.x[:TINY_TEST],
            2 if binary else ds.num_classes)


def budget_for(method: type[Method]) -> Budget | None:
    """A private budget if the method takes one, else no privacy (non-private); None if
    it runs at neither."""
    task = tiny_task(method)
    for budget in (Budget(1.0, 1e-5 if method.needs_delta else 0.0), Budget(math.inf)):
        if method.skip_reason(task, budget) is None:
            return budget
    return None


def fit(method: type[Method], seed: int = SEED, train: Split | None = None,
        releases: replay.Tape | None = None, steps: library_replay.Steps | None = None
        ) -> Fitted:
    """Fit on the tiny data as the runner would: a method that takes public inputs gets
    the leading test inputs and is evaluated on the rest. Its releases and the noisy
    gradients of its watched steps are recorded, or, given ``releases`` and ``steps``,
    replayed from them."""
    task = tiny_task(method)
    tiny_train, test_x, k = tiny_data(task, binary=getattr(method, "binary_only", False))
    budget = budget_for(method)
    if budget is None:
        raise ContractBreach("runs neither at epsilon 1 nor at inf")
    train = tiny_train if train is None else train
    start = time.perf_counter()
    taped = replay.record() if releases is None else replay.replay(releases)
    noisy = library_replay.Steps(recorded=steps)
    with watch(noisy) as seen, taped as tape:
        m = method(budget, seed=seed, **method.tiny_hparams)
        public = m.public_part(TINY_DATASETS[task], len(test_x))
        m.fit(train, k, **({"public_x": test_x[:public]} if public else {}))
        proba = m.predict_proba(test_x[public:])
    return Fitted(m, budget, proba, k, len(test_x) - public, train, seen, tape, noisy,
                  time.perf_counter() - start)


# ----- checks on the class -------------------------------------------------------------

def check_declares_notion(method: type[Method]) -> None:
    """Its notion is made of the notions' enumerations, private at a finite budget only
    if it says so, and non-private at epsilon = inf; it names its paper."""
    if not getattr(method, "paper", ""):
        raise ContractBreach("names no paper (the class attribute paper is empty)")
    for budget in (Budget(1.0, 1e-5 if method.needs_delta else 0.0), Budget(math.inf)):
        notion = method.notion_for(budget, method.defaults)
        fields = [getattr(notion, name, None) for name in
                  ("protects", "neighbours", "kind", "accountant")]
        if [type(value) for value in fields] != [Protects, Neighbours, Kind, Accountant]:
            raise ContractBreach(f"notion_for(epsilon {budget.epsilon:g}) is {notion!r}, "
                                 f"not a PrivacyNotion of benchmarks.privacy.notions")
        if not budget.private and notion.private:
            raise ContractBreach(f"claims {notion.short} at epsilon = inf, where nothing "
                                 f"is protected")


def check_refuses_unknown_settings(method: type[Method]) -> None:
    """An unknown hyperparameter stops with InputError, and the defaults are JSON values
    (every record keeps its settings as JSON)."""
    try:
        json.dumps(method.defaults, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ContractBreach(f"its defaults are not JSON values ({err})") from None
    try:
        method(Budget(1.0, 1e-5 if method.needs_delta else 0.0), seed=0,
               **method.tiny_hparams, **{UNKNOWN_SETTING: 1})
    except InputError:
        return
    raise ContractBreach(f"accepted the unknown hyperparameter {UNKNOWN_SETTING!r} "
                         f"instead of raising InputError")


def check_refuses_bad_epsilon(method: type[Method]) -> None:
    """A budget of epsilon <= 0 or NaN stops with InputError when the method is made,
    even one that skipped Budget's own checks."""
    for epsilon in BAD_EPSILONS:
        forged = object.__new__(Budget)
        object.__setattr__(forged, "epsilon", epsilon)
        object.__setattr__(forged, "delta", 1e-5 if method.needs_delta else 0.0)
        try:
            method(forged, seed=0, **method.tiny_hparams)
        except InputError:
            continue
        raise ContractBreach(f"was made at epsilon {epsilon:g} instead of raising "
                             f"InputError")


# ----- checks on a fit ---------------------------------------------------------------------

def check_probabilities(fitted: Fitted) -> None:
    proba = np.asarray(fitted.proba)
    expected = (fitted.evaluated, fitted.num_classes)
    if proba.shape != expected:
        raise ContractBreach(f"predicted an array of shape {proba.shape}, expected "
                             f"{expected}")
    sums = proba.sum(axis=1)
    if not (np.all(proba >= 0) and np.allclose(sums, 1, atol=1e-4)):
        raise ContractBreach(f"predicted rows that are not probabilities (smallest value "
                             f"{proba.min():.3g}, row sums from {sums.min():.4g} to "
                             f"{sums.max():.4g})")


def check_within_budget(fitted: Fitted) -> None:
    total = fitted.model.spent()
    if not fitted.budget.covers(total):
        raise ContractBreach(f"its ledger composes to epsilon {total.epsilon:.6g}, delta "
                             f"{total.delta:g}, beyond the budget (epsilon "
                             f"{fitted.budget.epsilon:g}, delta {fitted.budget.delta:g})")


def check_composition(fitted: Fitted) -> None:
    notion = fitted.model.notion_for(fitted.budget, fitted.model.hparams)
    composition = fitted.model.spent().composition
    allowed = COMPOSITION_OF_KIND[notion.kind]
    if composition not in allowed:
        raise ContractBreach(f"its ledger composes by {composition!r}, but its notion is "
                             f"{notion.kind.value} (expected {' or '.join(sorted(allowed))})")


def check_mechanisms_charge_the_run(fitted: Fitted) -> None:
    uncharged = fitted.seen.uncharged(fitted.model.ctx.ledger)
    if uncharged:
        raise ContractBreach("; ".join(uncharged))


def check_libraries_charged(fitted: Fitted) -> None:
    """The steps of Opacus or tensorflow-privacy that the fit ran compose to no more
    than its ledger's epsilon."""
    m = fitted.model
    notion = m.notion_for(fitted.budget, m.hparams)
    line = library_watch.compare(fitted.seen.library, m.spent().epsilon,
                                 bool(m.ctx.ledger.relevant(notion)), fitted.budget.delta)
    if line:
        raise ContractBreach(line)


def check_planned_curve(fitted: Fitted) -> str:
    """The RDP curve a method states before its fit (what a private selection of its
    settings is charged for) bounds what the fit's ledger charged its worst example."""
    m = fitted.model
    notion = m.notion_for(fitted.budget, m.hparams)
    if not notion.private:
        return "non-private: nothing to plan"
    try:
        planned = m.planned_curve(len(fitted.train))
    except InputError as err:
        return public_error(err)
    spent = m.ctx.ledger.curve(notion)
    over = np.flatnonzero(spent > planned * (1 + 1e-9) + 1e-12)
    if over.size:
        i = int(over[0])
        raise ContractBreach(f"its fit charged RDP {spent[i]:.6g} at order "
                             f"{rdp.ORDERS[i]:g}, above the {planned[i]:.6g} it planned")
    return "its planned RDP curve bounds its fit's"


def check_deterministic(fitted: Fitted) -> None:
    """Two fits with one seed predict alike; if not, the line names the likely cause
    when the fit ran a watched library's steps (library_watch)."""
    again = fit(type(fitted.model), seed=fitted.model.seed).proba
    cause = fitted.seen.library.likely_nondeterminism()
    if again.shape != fitted.proba.shape:
        raise ContractBreach(f"two fits with seed {fitted.model.seed} predicted shapes "
                             f"{fitted.proba.shape} and {again.shape}"
                             + (f"; {cause}" if cause else ""))
    gap = float(np.max(np.abs(again - fitted.proba), initial=0.0))
    if gap > 1e-6 or not np.array_equal(again.argmax(1), fitted.proba.argmax(1)):
        raise ContractBreach(f"two fits with seed {fitted.model.seed} predicted "
                             f"probabilities up to {gap:.3g} apart"
                             + (f"; {cause}" if cause else ""))


def check_uncharged_data_has_no_influence(fitted: Fitted) -> None:
    """Change whatever no charge of the run's ledger covers (labels under label-DP,
    whole records under full DP) and refit with the same seed: the predictions must not
    move. A method that trains on private data without charging the ledger fails."""
    m, train, k = fitted.model, fitted.train, fitted.num_classes
    notion = m.notion_for(fitted.budget, m.hparams)
    if not notion.private:
        return  # a non-private number claims nothing
    free = m.ctx.ledger.uncovered(notion, len(train))
    if free.size == 0:
        return
    y = train.y.copy()
    y[free] = (y[free] + 1) % k
    x = train.x.copy()
    if notion.protects is Protects.RECORDS:
        x[free] = x[free[::-1]]
    again = fit(type(m), seed=m.seed, train=Split(x, y)).proba
    gap = float(np.max(np.abs(again - fitted.proba), initial=0.0))
    if gap > 1e-6:
        what = "records" if notion.protects is Protects.RECORDS else "labels"
        raise ContractBreach(f"data that no ledger charge covers changed the predictions: "
                             f"with the {what} of the {free.size} of {len(train)} examples "
                             f"no charge touches changed, a probability moved by {gap:.3g}")


def check_replays(fitted: Fitted) -> str:
    """Refit with the same seed on altered private data (every label under label-DP,
    every record under full DP, but for the rows a release that cannot be replayed
    reads), the layer's mechanisms handing back the first fit's releases in order and
    the watched libraries' noisy steps the first fit's noisy gradients: the refit must
    make the recorded releases, charges and noisy steps, and every prediction must be
    exactly the same. A method that reads private data beside the layer or beside its
    watched steps fails, on the first prediction that moved or the first release,
    charge or noisy gradient that departed. Returns what was replayed and its time, or
    why the fit cannot be replayed."""
    m = fitted.model
    notion = m.notion_for(fitted.budget, m.hparams)
    why = not_replayable(fitted, notion)
    if why:
        return f"not replayable: {why}"
    kept = kept_rows(fitted.tape.not_replayed(), notion, len(fitted.train))
    altered, what = altered_private_data(fitted.train, notion, fitted.num_classes, kept)
    beside = "its watched DP steps" if fitted.steps.gradients else "the layer's releases"
    try:
        again = fit(type(m), seed=m.seed, train=altered, releases=fitted.tape,
                    steps=fitted.steps)
    except (replay.ReplayMismatch, library_replay.StepMismatch) as err:
        if isinstance(err, library_replay.StepMismatch):  # a library's step, unrecorded
            beside = "its watched DP steps"
        raise ContractBreach(f"reads private data beside {beside}: with {what} altered, "
                             f"{err}") from None
    leak = f"reads private data beside {beside}: with {what} altered"
    moved = np.flatnonzero(np.any(again.proba != fitted.proba, axis=1))
    if moved.size:
        i = int(moved[0])
        raise ContractBreach(
            f"{leak} and the {_replayed(fitted)} replayed, the prediction for test input {i} "
            f"moved from {_rounded(fitted.proba[i])} to {_rounded(again.proba[i])} "
            f"({moved.size} of {len(fitted.proba)} moved)")
    exempt = not_replayed(fitted)
    return (f"{_replayed(fitted, named=True)} replayed with {what} altered: identical "
            f"predictions"
            + (f"; not replayed: {exempt}" if exempt else "")
            + f" (the replayed fit took {again.seconds:.1f} s, the fit "
              f"{fitted.seconds:.1f} s)")


def _replayed(fitted: Fitted, named: bool = False) -> str:
    """What the replay hands back, in words: "1 release", "8 noisy steps", or both; with
    ``named``, of what ("1 release of randomized response", "8 noisy steps of Opacus (24
    noisy gradients)")."""
    count = len(fitted.tape.releases) - len(fitted.tape.not_replayed())
    releases = f"{count} release{'' if count == 1 else 's'}" + (
        f" of {', '.join(fitted.tape.mechanisms()) or 'no mechanism'}" if named else "")
    if not fitted.steps.gradients:
        return releases
    steps = sum(fitted.seen.library.steps.values())
    noisy = f"{steps} noisy step{'' if steps == 1 else 's'}" + (
        f" of {', '.join(fitted.steps.libraries())} ({len(fitted.steps.gradients)} noisy "
        f"gradients)" if named else "")
    return f"{releases} and {noisy}" if count else noisy


def replayed_libraries(fitted: Fitted) -> list[str]:
    """The watched libraries whose noisy steps the replay check hands back."""
    notion = fitted.model.notion_for(fitted.budget, fitted.model.hparams)
    return [] if not_replayable(fitted, notion) else fitted.steps.libraries()


def not_replayable(fitted: Fitted, notion: PrivacyNotion) -> str:
    """Why the fit's model need not be a function of the layer's releases and of its
    watched steps alone, or ""."""
    if not notion.private:
        return "non-private, it claims nothing"
    if fitted.steps.unrecorded:
        return f"its watched steps could not be recorded: {fitted.steps.unrecorded[0]}"
    own = fitted.seen.own_charges(fitted.model.ctx.ledger)
    if own and not fitted.steps.gradients:
        return (f"self-accounted (it charges {', '.join(own)} itself, with noise drawn "
                f"outside the layer and outside any watched DP library)")
    size = len(fitted.train)
    if kept_rows(fitted.tape.not_replayed(), notion, size).size == size:
        return (f"the {_private_part(notion)} of all {size} examples are read by releases "
                f"that cannot be replayed: {not_replayed(fitted)}")
    return ""


def not_replayed(fitted: Fitted) -> str:
    """The releases of a private fit that could not be replayed and read its protected
    data, each with why, in one line; "" when there are none."""
    notion = fitted.model.notion_for(fitted.budget, fitted.model.hparams)
    if not notion.private:
        return ""
    return "; ".join(dict.fromkeys(
        f"{release.mechanism} ({release.not_replayed})"
        for release in fitted.tape.not_replayed()
        if kept_rows([release], notion, len(fitted.train)).size))


def kept_rows(releases: list[replay.Release], notion: PrivacyNotion, size: int
              ) -> np.ndarray:
    """The examples (of ``size``) whose protected data the ``releases`` that cannot be
    replayed read: the replay check keeps them as they were."""
    kept = np.zeros(size, dtype=bool)
    for release in releases:
        touches = release.touches
        if touches.field in notion.protects.fields:
            kept[slice(None) if touches.examples is None else
                 touches.examples[touches.examples < size]] = True
    return np.flatnonzero(kept)


def altered_private_data(train: Split, notion: PrivacyNotion, k: int, kept: np.ndarray
                         ) -> tuple[Split, str]:
    """The training set with what ``notion`` protects changed on every example but
    ``kept``: the label shifted by one class, and, under full DP, the input replaced by
    that of example (n/2 + 1 + i/2) mod n (i/2 rounded down). No example keeps its own
    input, and any stretch of examples loses half of its inputs and gets others twice, so
    that whatever a fit reads of any part of the records beside the layer moves."""
    n = len(train)
    altered = np.setdiff1d(np.arange(n), kept)
    x, y = train.x.copy(), train.y.copy()
    y[altered] = (y[altered] + 1) % k
    if notion.protects is Protects.RECORDS:
        source = (n // 2 + 1 + np.arange(n) // 2) % n
        x[altered] = train.x[source[altered]]
    if kept.size:
        return Split(x, y), f"the {_private_part(notion)} of {altered.size} of the {n} examples"
    return Split(x, y), f"all {n} records" if notion.protects is Protects.RECORDS else "the labels"


def _private_part(notion: PrivacyNotion) -> str:
    return "records" if notion.protects is Protects.RECORDS else "labels"


def _rounded(proba: np.ndarray) -> str:
    return "[" + ", ".join(f"{p:.4g}" for p in proba) + "]"


ON_THE_CLASS: tuple[tuple[str, Callable[[type[Method]], None]], ...] = (
    ("declares its privacy notion", check_declares_notion),
    ("refuses unknown hyperparameters", check_refuses_unknown_settings),
    ("refuses epsilon <= 0 and NaN", check_refuses_bad_epsilon),
)
ON_A_FIT: tuple[tuple[str, Callable[[Fitted], None]], ...] = (
    ("predicts probabilities", check_probabilities),
    ("spends within its budget", check_within_budget),
    ("composes as its notion declares", check_composition),
    ("charges the run's ledger for every mechanism of the privacy layer",
     check_mechanisms_charge_the_run),
    ("charges every step of the watched DP libraries", check_libraries_charged),
    ("charges no more than the RDP curve it plans", check_planned_curve),
    ("is deterministic for a fixed seed", check_deterministic),
    ("gives no influence to data that no charge covers",
     check_uncharged_data_has_no_influence),
    ("depends on private data only through the privacy layer's releases and its watched "
     "DP steps", check_replays),
)


def run_all(method: type[Method]) -> tuple[list[tuple[str, str, str]], Fitted | None]:
    """Every check on ``method``: (check, "" when it holds, else the line that failed,
    what a check that held found), and the fit they checked (None if it raised). An
    exception the method raises fails the check it broke, by its public line; the checks
    on a fit stop at a fit that raises."""
    outcomes = [(name, *_outcome(check, method)) for name, check in ON_THE_CLASS]
    try:
        fitted = fit(method)
    except library_watch.Unwatched:  # a noisy step the watch cannot see stops the checks
        raise
    except Exception as err:  # noqa: BLE001 (anything the method raises is a failure)
        return outcomes + [("fits the tiny data", _failure(err), "")], None
    return outcomes + [("fits the tiny data", "", "")] + [
        (name, *_outcome(check, fitted)) for name, check in ON_A_FIT], fitted


def _outcome(check: Callable, argument) -> tuple[str, str]:
    try:
        found = check(argument)
    except library_watch.Unwatched:
        raise
    except Exception as err:  # noqa: BLE001
        return _failure(err), ""
    return "", found or ""


def _failure(err: Exception) -> str:
    return str(err) if isinstance(err, ContractBreach) else f"raised {public_error(err)}"
