"""The error rate of an audit's verdict, and its split across the tests the verdict
combines, fixed here before any audit runs.

An audited twin is flagged when any of its tests rejects the claim. With tests at levels
a_1, ..., a_k, an honest twin is flagged with probability at most a_1 + ... + a_k
(Bonferroni), so each verdict has one family-wise level, FAMILY_WISE_LEVEL, split across
its tests by SHARES: a twin's tests are fixed by its method's mechanisms (which release
the audit reads), never by its data. The noise checks' share is split equally among a
twin's checks. ``privboard submit`` judges all its twins and the watched libraries' noise
together at the same level (``submission_levels``).

A record stores each one-run bound at the record's ``confidence`` (one minus the twin's
family-wise level) with its counts, each noise check's p-value and the claim test's
verdict at its own level; ``judge`` computes the verdict from them, so records audited
before the split are judged by it too (``privboard report`` does).
"""
from __future__ import annotations

import dataclasses
from typing import Any

from benchmarks.audit.canaries import RELEASED_WEIGHTS
from benchmarks.audit.one_run import guess_counts
from benchmarks.privacy.audit_bounds import one_run_lower_bound, saturation

FAMILY_WISE_LEVEL = 0.05

# The tests a verdict combines.
CLAIM = "the claimed curve, at the release"  # benchmarks.audit.claim_audit
RELEASE = "the one-run bound at the release"  # Steinke et al., on the release
MODEL = "the one-run bound from the model"  # Steinke et al., on the model's predictions
NOISE = "the noise checks"  # benchmarks.privacy.noise_checks, and the Gaussian releases'

# The releases a twin's audit reads.
GAUSSIAN = "a Gaussian release, with phantom canaries"
LABELS = "released labels"
WEIGHTS = "released weights (the model audit reads them)"
NOTHING = "no release a one-run audit reads"

# Each test's share of the family-wise level, by the release the twin audits, among the
# tests it runs (a twin with no noise check leaves theirs to the others). The claimed
# curve's test is the most powerful on a Gaussian release and gets half; Steinke et al.'s
# bound there, kept for comparison with earlier audits, a fifth. The noise checks have
# power to spare (millions of values, or tens of thousands of probes). A label release
# has noise checks only where its method also runs a checked mechanism (DP-ERM's noise).
SHARES = {
    GAUSSIAN: {CLAIM: 0.5, RELEASE: 0.2, MODEL: 0.2, NOISE: 0.1},
    LABELS: {RELEASE: 0.5, MODEL: 0.5, NOISE: 0.1},
    WEIGHTS: {MODEL: 0.8, NOISE: 0.2},
    NOTHING: {MODEL: 0.8, NOISE: 0.2},
}

# privboard submit: the audited twins share AUDITS of the family-wise level equally, the
# watched libraries' noise checks the rest, equally per cell.
SUBMISSION_AUDITS = 0.8


def release_kind(audit: dict[str, Any]) -> str:
    release = audit.get("release")
    if release is None:
        return NOTHING
    if "claim_test" in release:
        return GAUSSIAN
    return WEIGHTS if release.get("observed") == RELEASED_WEIGHTS else LABELS


def test_levels(kind: str, family_wise: float, checks: int) -> dict[str, float]:
    """Each test's level in a verdict at ``family_wise`` on a release of ``kind`` with
    ``checks`` noise checks (their level together)."""
    shares = {test: share for test, share in SHARES[kind].items() if test != NOISE or checks}
    return {test: family_wise * share / sum(shares.values()) for test, share in shares.items()}


def noise_check_level(audit: dict[str, Any], family_wise: float, checks: int) -> float:
    """The level of each of a twin's ``checks`` noise checks, its release as in
    ``audit``."""
    return test_levels(release_kind(audit), family_wise, checks).get(NOISE, 0.0) / max(1, checks)


def submission_levels(twins: int, cells: int) -> tuple[float, float]:
    """The family-wise level of each of ``twins`` audited twins, and of the watched
    libraries' noise checks of each of ``cells`` cells, in one submission."""
    return (SUBMISSION_AUDITS * FAMILY_WISE_LEVEL / max(1, twins),
            (1 - SUBMISSION_AUDITS) * FAMILY_WISE_LEVEL / max(1, cells))


@dataclasses.dataclass(frozen=True)
class Judged:
    """One test of a verdict: its level, what it found, whether it rejects the claim."""

    test: str
    level: float
    rejects: bool
    bound: float | None = None  # a one-run bound's epsilon at 1 - level
    ceiling: float | None = None  # that bound had every guess been right
    detail: str = ""  # which noise check

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Verdict:
    family_wise: float
    kind: str
    tests: tuple[Judged, ...]

    @property
    def flagged(self) -> bool:
        return any(test.rejects for test in self.tests)

    def of(self, test: str) -> Judged | None:
        return next(iter(self.all_of(test)), None)

    def all_of(self, test: str) -> list[Judged]:
        return [found for found in self.tests if found.test == test]


def judge(audit: dict[str, Any]) -> Verdict:
    """The verdict of an audited twin's record (``TrainingAudit.as_dict``), at its
    family-wise level 1 - audit["confidence"]."""
    family_wise = 1 - audit["confidence"]
    kind = release_kind(audit)
    checks = audit.get("noise_checks") or ()
    levels = test_levels(kind, family_wise, len(checks))
    claim, delta = audit["claimed_epsilon"], audit["claimed_delta"]
    # The model's bound, of the share of guesses the record kept: each share is tested at
    # the model's level over their number, so any one of them is a valid bound.
    m = audit["canaries"]
    each = 1 - levels[MODEL] / len(guess_counts(m))
    model = one_run_lower_bound(m, audit["guesses"], audit["correct"], delta, each)
    tests = [Judged(MODEL, levels[MODEL], model > claim, model,
                    max(saturation(m, r, delta, each) for r in guess_counts(m)))]
    release = audit.get("release")
    if RELEASE in levels and release is not None:
        m, guesses, confidence = release["canaries"], release["guesses"], 1 - levels[RELEASE]
        bound = (one_run_lower_bound(m, guesses, release["correct"], delta, confidence)
                 if guesses else 0.0)
        # Labels are all guessed when every one is released as one of its classes;
        # phantoms are guessed on one share, fixed before the run.
        most = guesses if kind == GAUSSIAN else m
        tests.append(Judged(RELEASE, levels[RELEASE], bound > claim, bound,
                            saturation(m, most, delta, confidence)))
    if CLAIM in levels and release is not None:
        # The curve is not in the record, so its test is the record's, at the level the
        # twin ran it: this one, or 5% for twins from before the split, where a claim not
        # rejected is not rejected at any lower level either (a rejection there is kept,
        # and the twin must run again to be judged at this level).
        tests.append(Judged(CLAIM, levels[CLAIM], release["claim_test"]["rejected"]))
    for check in checks:
        each = levels[NOISE] / len(checks)
        tests.append(Judged(NOISE, each, check["p_value"] < each, detail=check["mechanism"]))
    return Verdict(family_wise, kind, tuple(tests))
