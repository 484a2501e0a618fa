"""The replay check (benchmarks.privacy.replay, contract_checks.check_replays): a method
refitted on altered private data, with the privacy layer handing back the first fit's
releases, must predict exactly as before. Each method below is broken on purpose: it
reads private data beside an honest, charged release, which no audit can be relied on
to see; the check names the first prediction that moved, or the release whose public
input moved. The honest methods pass it in the contract tests
(tests/test_method_contract.py)."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks import contract_checks as checks
from benchmarks.contract_checks import ContractBreach, fit
from benchmarks.privacy import Ledger, PureEpsilon, labels, replay
from benchmarks.privacy.randomizers import randomized_response
from methods import dp_erm, lp_mst, pate

MOVED = r"reads private data beside the layer's releases: with the .* altered and the " \
        r"\d+ releases? replayed, the prediction for test input \d+ moved from"


def test_lp_1st_training_on_the_true_labels_beside_an_honest_release_is_flagged(
        monkeypatch):
    real = lp_mst.rr_with_prior

    def released_then_ignored(ledger, true_labels, *args, **kwargs):
        real(ledger, true_labels, *args, **kwargs)  # charged, observed, honest
        return np.asarray(true_labels)

    monkeypatch.setattr(lp_mst, "rr_with_prior", released_then_ignored)
    with pytest.raises(ContractBreach, match=MOVED):
        checks.check_replays(fit(lp_mst.LP1ST))


class PriorFromTrueLabels(lp_mst.LP3ST):
    """Broken on purpose: stage 1's prior for RRWithPrior is the true label, smoothed."""

    def _first_priors(self, train, part, num_classes):
        return 0.5 * np.eye(num_classes)[train.y[part]] + 0.5 / num_classes


PriorFromTrueLabels.name = "prior-from-true-labels"


def test_lp_3st_taking_a_stages_prior_from_the_true_labels_is_flagged():
    with pytest.raises(ContractBreach, match=r"release 1 \(RRWithPrior\) was given another "
                                             r"priors than in the recorded fit"):
        checks.check_replays(fit(PriorFromTrueLabels))


class TunedPrivately(dp_erm.DpErmOutput):
    """DP-ERM with output perturbation, Lambda chosen among three (Algorithm 4)."""

    tiny_hparams = {"tune_lambdas": [1e-3, 1e-2, 1e-1]}


TunedPrivately.name = "tuned-privately"


def test_dp_erm_tuning_on_the_training_labels_without_charging_is_flagged(monkeypatch):
    """The held-out part's mistakes choose Lambda by their argmin, not by the charged
    exponential mechanism: each candidate's model is an honest release."""
    fitted = fit(TunedPrivately)
    assert checks.check_replays(fitted).startswith("4 releases of output perturbation, the "
                                                   "exponential mechanism replayed")
    monkeypatch.setattr(dp_erm, "exponential_mechanism",
                        lambda ledger, mistakes, epsilon, rng, touches: int(np.argmin(mistakes)))
    with pytest.raises(ContractBreach, match=MOVED):
        checks.check_replays(fit(TunedPrivately))


class StudentReadsPrivateLabels(pate.PateGnmax):
    """Broken on purpose: the student also learns from some of the teachers' private
    training records, labels included."""

    def fit(self, train, num_classes, public_x=None):
        self._private = train
        return super().fit(train, num_classes, public_x)

    def _train_student(self, x_labelled, y_labelled, x_unlabelled, num_classes):
        return super()._train_student(
            np.concatenate([x_labelled, self._private.x[:20]]),
            np.concatenate([y_labelled, self._private.y[:20]]), x_unlabelled, num_classes)


StudentReadsPrivateLabels.name = "student-reads-private-labels"


def test_a_pate_student_reading_the_teachers_private_labels_is_flagged():
    with pytest.raises(ContractBreach, match=MOVED):
        checks.check_replays(fit(StudentReadsPrivateLabels))


class SelfAccounted(lp_mst.LP1ST):
    """Charges a randomized response of its own beside the layer's: what it drew
    outside the layer cannot be replayed."""

    def fit(self, train, num_classes):
        self.ctx.ledger.charge("own randomized response", labels(),
                               PureEpsilon(self.budget.epsilon))
        return super().fit(train, num_classes)


SelfAccounted.name = "self-accounted"


def test_a_fit_that_cannot_be_replayed_says_why():
    assert checks.check_replays(fit(SelfAccounted)) == (
        "not replayable: self-accounted (it charges own randomized response itself, with "
        "noise drawn outside the layer)")
    fitted = fit(dp_erm.DpErmOutput)
    fitted.tape.cannot_replay("a minimiser computed outside the layer")
    assert checks.check_replays(fitted) == "not replayable: a minimiser computed outside " \
                                           "the layer"


def test_a_replay_hands_back_the_recorded_releases_and_still_charges():
    y, rng = np.arange(6) % 3, np.random.default_rng(0)
    with replay.record() as tape:
        first = randomized_response(Ledger(), y, 3, 1.0, rng, examples=np.arange(6))
    ledger = Ledger()
    with replay.replay(tape) as again:
        second = randomized_response(ledger, (y + 1) % 3, 3, 1.0, np.random.default_rng(9),
                                     examples=np.arange(6))
    np.testing.assert_array_equal(first, second)
    assert again.position == 1 and len(ledger.charges) == 1
    assert Ledger.tape is None  # the check leaves no tape behind


@pytest.mark.parametrize("epsilon, classes, message", [
    (2.0, 3, r"release 1 \(randomized response\) was given another epsilon than in the "
             r"recorded fit"),
    (1.0, 4, r"another num_classes"),
])
def test_a_replay_refuses_other_public_inputs(epsilon, classes, message):
    y = np.arange(6) % 3
    with replay.record() as tape:
        randomized_response(Ledger(), y, 3, 1.0, np.random.default_rng(0),
                            examples=np.arange(6))
    with replay.replay(tape), pytest.raises(replay.ReplayMismatch, match=message):
        randomized_response(Ledger(), y, classes, epsilon, np.random.default_rng(0),
                            examples=np.arange(6))


def test_a_replay_refuses_a_release_the_recorded_fit_did_not_make():
    with replay.record() as tape:
        pass
    with replay.replay(tape), pytest.raises(replay.ReplayMismatch,
                                            match=r"after the 0 release\(s\)"):
        randomized_response(Ledger(), np.zeros(2, int), 2, 1.0, np.random.default_rng(0),
                            examples=np.arange(2))
