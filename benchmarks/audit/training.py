"""Audit a trained method in one run: train it once, through the same API the runner uses,
on its training set with canaries planted (``canaries``), guess each canary's coin from
the model's predictions, and turn the right guesses into a lower bound on epsilon
(``one_run``, Steinke, Nasr, Jagielski 2023).

Nothing is trained but the audited run: its cost is one training run on the training set
plus the canaries. With m canaries the bound cannot exceed a ceiling (about 5.5 for
m = 1000, 1.9 for m = 30), so an audit can refute a small claimed epsilon but never
confirm a large one.

The command: privboard audit --method M --dataset D --epsilon E [--delta D]
[--canaries N] [--seed S] [--hparams JSON] [--json].
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import numbers
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.audit import canaries as canary_designs, levels
from benchmarks.audit.claim_audit import NOISE_SCALES, audit_claim
from benchmarks.audit.one_run import one_run_bound
from benchmarks.privacy.audit_bounds import one_run_lower_bound, saturation
from benchmarks.context import RunContext
from benchmarks.contract import Budget, Dataset, Method
from benchmarks.errors import InputError
from benchmarks.privacy import Kind, noise_checks
from benchmarks.privacy.claimed_profile import ClaimedProfile
from benchmarks.privacy.phantom_canaries import PhantomCanaries
from benchmarks.registry import get_method

# One minus the family-wise level of a twin's verdict (benchmarks.audit.levels).
CONFIDENCE = 1 - levels.FAMILY_WISE_LEVEL
MIN_CANARIES = 2
# Phantom canaries for the Gaussian releases. The test of the claimed curve reads all of
# them. In simulations of the suites' releases, at 10^5 a release with 0.7 times its noise
# passed it at one seed of two; an exact release at 0.7 times its noise is expected to be
# rejected from 0.90 of the claim's noise down with 10^5 (epsilon 1, the best share of
# guesses), from 0.86 with 5 x 10^5, and from 0.85 with 10^6, at twice the cost. The
# bound of Steinke et al., kept beside it as the archive's earlier audits computed it,
# reads the first STEINKE_PHANTOMS with one share of guesses fixed in advance: 1,000
# guesses on 100,000 canaries (ceiling 3.5 at delta 1e-5); past 1e5 its 2 m delta term
# outgrows the gain.
PHANTOMS = 500_000
STEINKE_PHANTOMS, PHANTOM_GUESS_SHARE = 100_000, 0.01
_CERTAIN = 1e300


class BudgetExceeded(RuntimeError):
    """The audited run's own ledger composes to more than its budget."""


@dataclasses.dataclass(frozen=True)
class TrainingAudit:
    """One audited training run; ``as_dict`` is JSON-serialisable."""

    method: str
    dataset: str
    seed: int
    notion: str
    canary_kind: str
    claimed_epsilon: float
    claimed_delta: float  # the delta the bound allows: 0 for a pure claim
    epsilon_lower_bound: float  # the model's bound, at ``confidence`` alone
    # One minus the verdict's family-wise level, at which each one-run bound is also
    # stored; the verdict splits the level across its tests (benchmarks.audit.levels).
    confidence: float
    canaries: int
    guesses: int
    correct: int
    ceiling: float
    training_examples: int  # without the canaries
    seconds: float  # the audited training and the predictions on the canaries
    # The audit at the release: what the privacy layer's mechanisms released for the
    # canaries (epsilon_lower_bound, guesses: the canaries released as one of their two
    # classes, correct, ceiling, where: the releases; for the Gaussian releases also
    # claim_test, benchmarks.audit.claim_audit.ClaimAudit), or None when no release of a
    # canary went through them.
    release: dict[str, Any] | None = None
    # The noise checks, as dicts: where a release carries too little per record for a
    # one-run bound (DP-ERM, PATE), of its mechanisms at the charged setting
    # (benchmarks.privacy.noise_checks); of a Gaussian release, its real coordinates'
    # noise against its phantoms' (benchmarks.privacy.phantom_canaries).
    noise_checks: tuple[dict[str, Any], ...] = ()

    @property
    def verdict(self) -> levels.Verdict:
        """Its tests, each at its share of the family-wise level: flagged when a bound
        exceeds the claim, the claimed curve is rejected, or a noise check fails."""
        return levels.judge(dataclasses.asdict(self))

    @property
    def flagged(self) -> bool:
        return self.verdict.flagged

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"flagged": self.flagged}


def audit_training(method: str, data: Dataset, budget: Budget, hparams: dict[str, Any],
                   context: RunContext, canaries: int | None = None,
                   confidence: float = CONFIDENCE, model: Method | None = None) -> TrainingAudit:
    """Audit ``method`` at ``budget`` on ``data`` with ``canaries`` canaries (default: per
    task, see ``canaries.default_count``). Every random draw comes from ``context``.
    ``model`` is the instance to train (the runner's, whose record reports its privacy);
    by default a new one.

    Raises InputError for settings no audit can run, BudgetExceeded when the run's ledger
    exceeds the budget."""
    method_cls = get_method(method)
    unknown = sorted(set(hparams) - set(method_cls.defaults))
    if unknown:
        raise InputError(f"{method}: unknown hyperparameter(s) {unknown}; "
                         f"known: {sorted(method_cls.defaults)}")
    # A given model states its own notion: a private selection's is approximate.
    notion = (model or method_cls).notion_for(budget, {**method_cls.defaults, **hparams})
    if not notion.private:
        raise InputError(f"{method} is not private at epsilon {budget.epsilon:g}: it "
                         f"claims no epsilon, so there is nothing to audit")
    why = method_cls.skip_reason(data.task, budget, hparams)
    if why:
        raise InputError(why)
    if getattr(method_cls, "binary_only", False) and data.num_classes != 2:
        raise InputError(f"{method} is a binary classifier and {data.name} has "
                         f"{data.num_classes} classes")
    count = canary_designs.default_count(data) if canaries is None else canaries
    if isinstance(count, bool) or not isinstance(count, numbers.Integral) \
            or count < MIN_CANARIES:
        raise InputError(f"canaries must be an integer >= {MIN_CANARIES}, got {count!r}")
    if model is None:
        model = method_cls(budget, context=context, **hparams)
    planted = canary_designs.design(notion, data, int(count), context.rng("audit canaries"))
    coins = context.rng("audit coins").integers(0, 2, size=len(planted)).astype(bool)

    context.datasets_used[data.name] = data.fingerprint
    public = model.public_part(data.name, len(data.test))
    first_row = len(data.train)  # the canaries follow the training rows
    model.ctx.ledger.watch(np.arange(first_row, first_row + len(planted)))
    # Phantom gradients for any method whose release is Gaussian (DP-SGD's noisy clipped
    # sums, LabelDP-Pro's, noisy clipped means); other mechanisms never read them.
    model.ctx.ledger.phantoms = PhantomCanaries(
        context.rng("audit phantom coins").integers(0, 2, size=PHANTOMS).astype(bool),
        notion.neighbours)
    start = time.perf_counter()
    model.fit(planted.plant(data.train, coins), data.num_classes,
              **({"public_x": data.test.x[:public]} if public else {}))
    evidence = planted.evidence(model.predict_proba(planted.inputs))
    seconds = time.perf_counter() - start

    spent = model.spent()
    if not budget.covers(spent):
        raise BudgetExceeded(f"{method}'s ledger composes to epsilon {spent.epsilon:.6g}, "
                             f"delta {spent.delta:g}, beyond its budget (epsilon "
                             f"{budget.epsilon:g}, delta {budget.delta:g})")
    delta = budget.delta if notion.kind is Kind.APPROXIMATE else 0.0
    bound = one_run_bound(evidence, coins, delta, confidence)
    release = planted.release_evidence(model.ctx.ledger.observed, first_row)
    phantoms = model.ctx.ledger.phantoms
    checks = noise_checks.check_ledger(model.ctx.ledger, context.rng("audit noise checks"))
    if phantoms is not None:
        checks += phantoms.noise_checks()
    if release is not None:
        release = release_audit(*release, coins, delta, confidence)
    elif phantoms is not None and phantoms.steps:
        release = phantom_audit(phantoms,
                                ClaimedProfile.of(model.ctx.ledger, notion, budget.delta),
                                confidence, len(checks))
    elif model.ctx.ledger.model_releases:
        release = model_release_audit(bound, model.ctx.ledger.model_releases)
    level = levels.noise_check_level({"release": release}, 1 - confidence, len(checks))
    return TrainingAudit(
        method=method, dataset=data.name, seed=context.seed, notion=notion.short,
        canary_kind=planted.kind, claimed_epsilon=budget.epsilon, claimed_delta=delta,
        epsilon_lower_bound=bound.epsilon, confidence=bound.confidence,
        canaries=bound.canaries, guesses=bound.guesses, correct=bound.correct,
        ceiling=bound.ceiling, training_examples=len(data.train),
        seconds=round(seconds, 3), release=release,
        noise_checks=tuple(check.as_dict(level) for check in checks))


def release_audit(evidence: np.ndarray, where: list[str], observed: str, coins: np.ndarray,
                  delta: float, confidence: float) -> dict[str, Any]:
    """The one-run bound from the canaries' releases. The auditor guesses each canary
    whose release points to one of its two classes (that class's coin side: released as
    it, or a noisy one-hot vector at that class's largest likelihood ratio) and abstains
    on the rest.
    Which canaries it guesses depends on the release alone, never on a coin, and the
    one-run bound holds given the guesses (Steinke, Nasr, Jagielski 2023, Theorem 3.1), so
    a data-dependent number of guesses needs no correction."""
    guessed = evidence != 0
    guesses = int(guessed.sum())
    correct = int(((evidence > 0) == coins)[guessed].sum())
    m = len(evidence)
    bound = one_run_lower_bound(m, guesses, correct, delta, confidence) if guesses else 0.0
    return {"epsilon_lower_bound": bound, "guesses": guesses, "correct": correct,
            "ceiling": saturation(m, m, delta, confidence), "where": where, "canaries": m,
            "observed": observed}


def model_release_audit(bound, mechanisms: list[str]) -> dict[str, Any]:
    """Where a mechanism releases the model itself (DP-ERM's weights), the model audit
    reads the release: each canary's prediction is its projection on the released
    weights."""
    return {"epsilon_lower_bound": bound.epsilon, "guesses": bound.guesses,
            "correct": bound.correct, "ceiling": bound.ceiling,
            "where": list(dict.fromkeys(mechanisms)), "canaries": bound.canaries,
            "observed": canary_designs.RELEASED_WEIGHTS}


def phantom_audit(phantoms: PhantomCanaries, claim: ClaimedProfile, confidence: float,
                  checks: int) -> dict[str, Any]:
    """The release audit from the phantom canaries' coordinates of every Gaussian
    release: the test of the claimed curve on all of them (``claim_test``) at its share
    of the family-wise level 1 - ``confidence`` (beside the twin's ``checks`` noise
    checks), and beside it the one-run bound of Steinke et al. on the first
    STEINKE_PHANTOMS, which guesses "in" for the strongest evidence above its median and
    "out" for the strongest below it."""
    evidence = phantoms.evidence()
    claim_level = levels.test_levels(levels.GAUSSIAN, 1 - confidence, checks)[levels.CLAIM]
    tested = audit_claim(evidence, phantoms.coins, claim, 1 - claim_level)
    bound = steinke_bound(evidence, phantoms.coins, claim.delta, confidence)
    return {"epsilon_lower_bound": bound.epsilon, "guesses": bound.guesses,
            "correct": bound.correct, "ceiling": bound.ceiling, "where": list(phantoms.where),
            "canaries": bound.canaries,
            "observed": f"each phantom canary's coordinate of the {phantoms.steps} noisy "
                        f"releases", "claim_test": tested.as_dict()}


def steinke_bound(evidence: np.ndarray, coins: np.ndarray, delta: float, confidence: float):
    """Steinke et al.'s bound on the first STEINKE_PHANTOMS phantoms' evidence, centred
    on its median; certain evidence (a release without noise: +-inf) as the largest
    finite values."""
    evidence = np.nan_to_num(evidence[:STEINKE_PHANTOMS], posinf=_CERTAIN, neginf=-_CERTAIN)
    return one_run_bound(evidence - np.median(evidence), coins[:STEINKE_PHANTOMS], delta,
                         confidence, shares=(PHANTOM_GUESS_SHARE,))


# ----- the command: privboard audit --method ... -----------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", help="the method to train with canaries "
                                         "(see 'privboard list methods')")
    parser.add_argument("--dataset", help="the dataset (see 'privboard list datasets')")
    parser.add_argument("--epsilon", type=float, help="the claimed epsilon (the cell's budget)")
    parser.add_argument("--delta", type=float, default=0.0,
                        help="the claimed delta (default: %(default)s; DP-SGD needs one)")
    parser.add_argument("--canaries", type=int, default=None,
                        help=f"number of canaries (default: {canary_designs.IMAGE_CANARIES} "
                             f"on images, one per feature on tabular data)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the run, the canaries and their coins "
                             "(default: %(default)s)")
    parser.add_argument("--hparams", default="{}",
                        help="the method's hyperparameters as a JSON object (default: its own)")
    parser.add_argument("--data", type=Path, default=None,
                        help="data folder (default: $PRIVBOARD_DATA or ~/.privboard/data)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def parse_hparams(text: str) -> dict[str, Any]:
    try:
        hparams = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"--hparams is not valid JSON ({err.msg} at character "
                         f"{err.pos}): {text!r}") from None
    if not isinstance(hparams, dict):
        raise InputError(f"--hparams must be a JSON object, got {text!r}")
    return hparams


def report(result: TrainingAudit) -> str:
    verdict = result.verdict
    model = verdict.of(levels.MODEL)
    outcome = ("FLAGGED: the claim is refuted (below, what refutes it)" if verdict.flagged
               else "consistent with the claim")
    reach = ("the claimed epsilon is at or above it, so this audit cannot refute the claim"
             if result.claimed_epsilon >= model.ceiling
             else "an audit can refute a smaller claim, never confirm one")
    delta = f", delta {result.claimed_delta:g}" if result.claimed_delta else ""
    checks = "".join(map(noise_check_report, result.noise_checks, verdict.all_of(levels.NOISE)))
    return (f"{result.method} on {result.dataset}, seed {result.seed}: {result.notion}\n"
            f"claimed epsilon {result.claimed_epsilon:g}{delta}: {outcome}, each test below "
            f"at its share of the family-wise level {percent(verdict.family_wise)} (an honest "
            f"run is flagged at most that often)\n"
            f"  from the model: {result.canaries} "
            f"{canary_designs.DESCRIPTIONS[result.canary_kind]}; {result.correct} of "
            f"{result.guesses} guesses right: lower bound {model.bound:.3f} at "
            f"{percent(1 - model.level)}{rejected(model)}\n"
            f"  ceiling {model.ceiling:.3f} (the bound if every guess were right): {reach}\n"
            f"{release_report(result.release, verdict)}"
            f"{checks}"
            f"  audited training: {result.seconds:.1f} s, on {result.training_examples} "
            f"training examples and up to {result.canaries} canaries (at most "
            f"{result.canaries / result.training_examples:.0%} more examples than the "
            f"cell's own run)")


def percent(level: float) -> str:
    return f"{100 * level:.4g}%"


def rejected(test: levels.Judged) -> str:
    return " (EXCEEDS THE CLAIM)" if test.rejects else ""


def release_report(release: dict[str, Any] | None, verdict: levels.Verdict) -> str:
    if release is None:
        return "  at the release: no canary went through the privacy layer's mechanisms\n"
    bound = verdict.of(levels.RELEASE)
    if bound is None:  # the release is the model (DP-ERM's weights): its bound is above
        return f"  at the release ({', '.join(release['where'])}): the model's bound\n"
    tested = release.get("claim_test")
    guesses = ("the strongest of the first canaries' evidence" if tested else
               "a guess per canary released as one of its two classes")
    return (f"  at the release ({', '.join(release['where'])}): {release['correct']} of "
            f"{release['guesses']} guesses right on {release['canaries']} canaries "
            f"({guesses}): lower bound {bound.bound:.3f} at {percent(1 - bound.level)}"
            f"{rejected(bound)}, ceiling {bound.ceiling:.3f}\n"
            f"{claim_test_report(tested) if tested else ''}")


def claim_test_report(tested: dict[str, Any]) -> str:
    verdict = "REJECTED" if tested["rejected"] else "not rejected"
    right = ", ".join(f"{w} of {c}" for c, w in zip(tested["guesses"], tested["correct"]))
    return (f"  the claimed curve ({tested['claim']}; epsilon "
            f"{tested['claimed_epsilon']:.3f} at delta {tested['delta']:g}), tested at the "
            f"release, {tested['test']}: {verdict} at level {percent(1 - tested['confidence'])}"
            f" ({right} guesses right on {tested['canaries']} canaries)\n"
            f"  {empirical_report(tested)}\n")


def empirical_report(tested: dict[str, Any]) -> str:
    """The family of the claim under scaled noise, against the run: not a lower bound on
    epsilon (a mechanism outside the family could differ elsewhere)."""
    if tested["empirical_noise_scale"] is None:
        return (f"empirical epsilon: none, the run rejects no curve of the claim's family "
                f"up to {NOISE_SCALES[1]:g} times its noise (this says nothing of leakage)")
    return (f"empirical epsilon {tested['empirical_epsilon']:.3f}: the claim's family under "
            f"scaled noise is rejected from noise x {tested['empirical_noise_scale']:.2f} "
            f"up (not a lower bound: a mechanism outside the family could differ elsewhere)")


def noise_check_report(check: dict[str, Any], test: levels.Judged) -> str:
    verdict = "TOO LITTLE NOISE" if test.rejects else "consistent"
    return (f"  noise check of {check['mechanism']} ({check['claim']}): {check['measured']}, "
            f"p = {check['p_value']:.3g} at level {percent(test.level)}: {verdict}\n")


def run(args: argparse.Namespace) -> int:
    """Print the audit. Exit code 0 when consistent with the claim, 1 when flagged or when
    the run's own ledger exceeds its budget; bad input raises InputError (exit code 2)."""
    from benchmarks import datasets

    missing = [flag for flag, value in (("--method", args.method), ("--dataset", args.dataset),
                                        ("--epsilon", args.epsilon)) if value is None]
    if missing:
        raise InputError(f"audit needs {', '.join(missing)} (or a subcommand: "
                         f"privboard audit mechanism NAME ...)")
    if args.seed < 0:
        raise InputError(f"seed must be an integer >= 0, got {args.seed}")
    hparams = parse_hparams(args.hparams)
    budget = Budget(args.epsilon, args.delta)
    get_method(args.method)  # an unknown name stops before the dataset loads
    data = datasets.load(args.dataset, args.data)
    context = RunContext(seed=args.seed, data_dir=args.data)
    try:
        result = audit_training(args.method, data, budget, hparams, context, args.canaries)
    except BudgetExceeded as err:
        print(f"privboard: {err}", file=sys.stderr)
        return 1
    print(json.dumps(result.as_dict()) if args.json else report(result))
    return 1 if result.flagged else 0
