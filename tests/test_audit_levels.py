"""The Bonferroni split of a verdict's family-wise level (benchmarks.audit.levels): each
release's shares as docs/audits.md tables them, every test of a verdict at its share,
the shares adding up to the verdict's level, and a submission's twins and library checks
adding up to its 5%."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.audit import levels, simulation
from benchmarks.audit.levels import CLAIM, MODEL, NOISE, RELEASE
from benchmarks.audit.training import phantom_audit
from benchmarks.privacy import Ledger, Neighbours, SampledGaussian, records
from benchmarks.privacy.claimed_profile import ClaimedProfile
from benchmarks.privacy.phantom_canaries import PhantomCanaries

# docs/audits.md, "One level per verdict": each test's level at 5%.
TABLE = {
    levels.GAUSSIAN: {CLAIM: 0.025, RELEASE: 0.01, MODEL: 0.01, NOISE: 0.005},
    levels.LABELS: {RELEASE: 0.025, MODEL: 0.025},
    levels.WEIGHTS: {MODEL: 0.04, NOISE: 0.01},
    levels.NOTHING: {MODEL: 0.04, NOISE: 0.01},
}


@pytest.mark.parametrize("kind", TABLE)
def test_each_release_splits_five_percent_as_documented(kind):
    checks = 0 if kind == levels.LABELS else 2
    assert levels.test_levels(kind, 0.05, checks) == pytest.approx(TABLE[kind], abs=1e-12)


def test_a_label_release_with_a_noise_check_leaves_the_rest_in_proportion():
    split = levels.test_levels(levels.LABELS, 0.05, 1)
    assert split[NOISE] == pytest.approx(0.05 * 0.1 / 1.1)  # 0.45%
    assert split[RELEASE] == split[MODEL] == pytest.approx(0.05 * 0.5 / 1.1)  # 2.27%
    assert levels.test_levels(levels.NOTHING, 0.05, 0) == {MODEL: pytest.approx(0.05)}


def audit(release, p_values, confidence=0.95):
    """A twin's record whose every test passes but for its noise checks' p-values."""
    return {"claimed_epsilon": 1.0, "claimed_delta": 1e-5, "confidence": confidence,
            "canaries": 1000, "guesses": 500, "correct": 250, "release": release,
            "noise_checks": [{"mechanism": f"check {i}", "p_value": p}
                             for i, p in enumerate(p_values)]}


GAUSSIAN = {"canaries": 100_000, "guesses": 1000, "correct": 500,
            "claim_test": {"rejected": False}}
LABELS = {"canaries": 1000, "guesses": 600, "correct": 300, "observed": "labels"}


@pytest.mark.parametrize("release", [None, GAUSSIAN, LABELS], ids=["nothing", "gaussian",
                                                                    "labels"])
@pytest.mark.parametrize("checks", [1, 2, 3])
def test_every_test_of_a_verdict_runs_at_its_share_and_the_shares_add_up(release, checks):
    """The verdict's tests are at levels that sum to its family-wise level (no test at
    the whole level, none left out of the split), its noise checks sharing theirs
    equally, and a noise check is judged at exactly its level."""
    for family_wise in (0.05, 0.05 / 7):
        record = audit(release, [0.5] * checks, 1 - family_wise)
        verdict = levels.judge(record)
        assert not verdict.flagged
        assert len(verdict.all_of(NOISE)) == checks
        assert sum(t.level for t in verdict.tests) == pytest.approx(family_wise, rel=1e-12)
        share = levels.test_levels(levels.release_kind(record), family_wise, checks)[NOISE]
        each = share / checks
        assert [t.level for t in verdict.all_of(NOISE)] == pytest.approx([each] * checks)
        assert levels.noise_check_level(record, family_wise, checks) == pytest.approx(each)
        for p, flagged in ((each * 0.999, True), (each * 1.001, False)):
            record["noise_checks"][-1]["p_value"] = p
            assert levels.judge(record).flagged is flagged, (p, each)


@pytest.mark.parametrize("twins, cells", [(1, 1), (3, 8), (7, 21)])
def test_a_submissions_twins_and_library_checks_share_its_five_percent(twins, cells):
    twin, library = levels.submission_levels(twins, cells)
    assert twin * twins == pytest.approx(0.04)
    assert library * cells == pytest.approx(0.01)


def test_a_gaussian_twins_claimed_curve_is_tested_at_its_share():
    """The release audit of the phantoms tests the claimed curve at its 2.5% of the twin's
    5% (beside one noise check), not at the whole level."""
    release = simulation.GaussianRelease("simulated", noise=2.0, sampling_rate=0.2, steps=5,
                                         real_values=5 * 100)
    ledger = Ledger()
    ledger.charge("simulated", records(), SampledGaussian(2.0, 0.2, 5))
    rng = np.random.default_rng(0)
    planted = PhantomCanaries(rng.integers(0, 2, 5_000).astype(bool), Neighbours.ADD_REMOVE)
    simulation.add_release(rng, planted, release)
    audited = phantom_audit(planted, ClaimedProfile(tuple(ledger.charges), 1e-5), 0.95,
                            len(planted.noise_checks()))
    assert audited["claim_test"]["confidence"] == pytest.approx(1 - TABLE[levels.GAUSSIAN][CLAIM])
