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

from benchmarks.submission import contract_checks as checks
from benchmarks.submission.contract_checks import ContractBreach, fit
from benchmarks.contract import Split
from benchmarks.privacy import Ledger, PureEpsilon, inputs, labels, records, replay
from benchmarks.privacy.erm_noise import objective_perturbation_noise
from benchmarks.privacy.noisy_clipped_mean import NoisyClippedMean
from benchmarks.privacy.randomizers import randomized_response
from methods import dp_erm, lp_mst, pate

MOVED = r"reads private data beside the layer's releases: with .* altered and the " \
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


@pytest.mark.integration  # teachers and a student, replayed
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


class MinimisesItself(dp_erm.DpErmObjective):
    """Objective perturbation with the minimiser computed outside the layer: the release
    cannot be replayed, and it reads every record."""

    def _train_private(self, features, signs, regularization, rng, touched):
        n, dim = features.shape
        noise, calibration = objective_perturbation_noise(
            self.ctx.ledger, dim, epsilon=self.budget.epsilon, regularization=regularization,
            curvature_bound=self.loss.curvature_bound, rng=rng, touches=touched)
        solution = self._minimise(features, signs,
                                  regularization + calibration.extra_regularization, noise / n)
        return dp_erm._Fit(solution.weights, {}, solution, regularization, noise)


MinimisesItself.name = "minimises-itself"


def test_a_fit_that_cannot_be_replayed_says_why():
    assert checks.check_replays(fit(SelfAccounted)) == (
        "not replayable: self-accounted (it charges own randomized response itself, with "
        "noise drawn outside the layer and outside any watched DP library)")
    fitted = fit(MinimisesItself)
    assert checks.check_replays(fitted) == (
        "not replayable: the records of all 240 examples are read by releases that cannot "
        "be replayed: objective perturbation (its minimiser is computed outside the layer)")
    assert checks.not_replayed(fitted) == ("objective perturbation (its minimiser is "
                                           "computed outside the layer)")


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
    (2.0, 3, r"charge 1 \(randomized response\) had another cost than in the recorded "
             r"fit: a charge taken from private data"),
    (1.0, 4, r"release 1 \(randomized response\) was given another num_classes than in the "
             r"recorded fit"),
])
def test_a_replay_refuses_other_public_inputs(epsilon, classes, message):
    y = np.arange(6) % 3
    with replay.record() as tape:
        randomized_response(Ledger(), y, 3, 1.0, np.random.default_rng(0),
                            examples=np.arange(6))
    with pytest.raises(replay.ReplayMismatch, match=message), replay.replay(tape):
        randomized_response(Ledger(), y, classes, epsilon, np.random.default_rng(0),
                            examples=np.arange(6))


def test_a_replay_refuses_a_release_and_a_charge_the_recorded_fit_did_not_make():
    with replay.record() as tape:
        pass
    with pytest.raises(replay.ReplayMismatch, match=r"after the 0 charge\(s\)"), \
            replay.replay(tape):
        randomized_response(Ledger(), np.zeros(2, int), 2, 1.0, np.random.default_rng(0),
                            examples=np.arange(2))
    with pytest.raises(replay.ReplayMismatch, match=r"release 1 \(a count\) came after the "
                                                    r"0 release\(s\)"), replay.replay(tape):
        Ledger().released("a count", 3)


# ----- every record altered under full DP ---------------------------------------------

class CalibratesOnTheLastRecords(dp_erm.DpErmOutput):
    """Broken on purpose: a validation split taken from the end of the training set sets
    how far its probabilities lean towards the split's majority class."""

    def fit(self, train, num_classes):
        self.lean = 0.1 * np.eye(num_classes)[np.bincount(train.y[-20:]).argmax()]
        return super().fit(train, num_classes)

    def predict_proba(self, x):
        return 0.9 * super().predict_proba(x) + self.lean


CalibratesOnTheLastRecords.name = "calibrates-on-the-last-records"


class LastInputsAsPublicData(dp_erm.DpErmOutput):
    """Broken on purpose: the last training inputs taken as "public" data, to shrink the
    probabilities of test inputs far from them."""

    def fit(self, train, num_classes):
        self.public = train.x[-20:].mean(axis=0)
        return super().fit(train, num_classes)

    def predict_proba(self, x):
        near = np.exp(-np.linalg.norm(x - self.public, axis=1))[:, None]
        return near * super().predict_proba(x) + (1 - near) / 2


LastInputsAsPublicData.name = "last-inputs-as-public-data"


class LeansByAHair(dp_erm.DpErmOutput):
    """Broken on purpose: its probabilities move by about 1e-9, far below any tolerance
    of float rounding, with its last records' mean input: predictions that the replay
    must see move, as it asks them to be the same bit for bit."""

    def fit(self, train, num_classes):
        self.lean = 1e-9 * abs(float(train.x[-20:].mean()))
        return super().fit(train, num_classes)

    def predict_proba(self, x):
        proba = np.asarray(super().predict_proba(x), np.float64) + self.lean
        return proba / proba.sum(axis=1, keepdims=True)


LeansByAHair.name = "leans-by-a-hair"


@pytest.mark.parametrize("method", [CalibratesOnTheLastRecords, LastInputsAsPublicData,
                                    LeansByAHair])
def test_under_full_dp_a_read_of_the_last_records_is_flagged(method):
    with pytest.raises(ContractBreach, match=r"with all 240 records altered and the 1 "
                                             r"release replayed, the prediction"):
        checks.check_replays(fit(method))


def test_under_full_dp_every_record_is_altered_and_every_stretch_of_inputs_moves():
    train = Split(np.arange(240, dtype=float)[:, None], np.arange(240) % 3)
    notion = dp_erm.DpErmOutput.notion
    altered, what = checks.altered_private_data(train, notion, 3, np.array([5]))
    assert what == "the records of 239 of the 240 examples"
    changed = altered.x[:, 0] != train.x[:, 0]
    assert changed.sum() == 239 and not changed[5] and altered.y[5] == train.y[5]
    assert np.all((altered.y != train.y) == changed)
    altered, what = checks.altered_private_data(train, notion, 3, np.empty(0, int))
    assert what == "all 240 records"
    for start in range(240):  # each stretch of 1 to 40 records has other inputs
        for stop in range(start + 1, min(start + 40, 240) + 1):
            assert sorted(altered.x[start:stop, 0]) != sorted(train.x[start:stop, 0])


# ----- a release that cannot be replayed exempts only itself --------------------------

class OneRowExempt(dp_erm.DpErmOutput):
    """Objective perturbation's noise at a tiny epsilon on one row, its minimiser its
    own; and, broken on purpose, a read of the last records beside the layer."""

    leaks = True

    def fit(self, train, num_classes):
        self.noise, _ = objective_perturbation_noise(
            self.ctx.ledger, 1, epsilon=1e-6, regularization=1.0, curvature_bound=0.25,
            rng=self.ctx.rng("one row"), touches=records(np.array([0])))
        self.lean = np.zeros(num_classes)
        self.lean[train.y[0]] = 0.1  # the one row's own release, computed here
        if self.leaks:
            self.lean += 0.01 * train.x[-20:].mean()
        return super().fit(train, num_classes)

    def predict_proba(self, x):
        proba = super().predict_proba(x) + self.lean
        return proba / proba.sum(axis=1, keepdims=True)


OneRowExempt.name = "one-row-exempt"


class OneRowExemptHonest(OneRowExempt):
    leaks = False


OneRowExemptHonest.name = "one-row-exempt-honest"


def test_a_release_that_cannot_be_replayed_exempts_only_its_own_rows():
    with pytest.raises(ContractBreach, match=r"with the records of 239 of the 240 examples "
                                             r"altered and the 1 release replayed, the "
                                             r"prediction"):
        checks.check_replays(fit(OneRowExempt))
    fitted = fit(OneRowExemptHonest)
    found = checks.check_replays(fitted)
    assert found.startswith(
        "1 release of output perturbation replayed with the records of 239 of the 240 "
        "examples altered: identical predictions; not replayed: objective perturbation "
        "(its minimiser is computed outside the layer) (the replayed fit took "), found
    assert checks.not_replayed(fitted) == ("objective perturbation (its minimiser is "
                                           "computed outside the layer)")


class ExemptsInputsOnly(lp_mst.LP1ST):
    """Under label-DP the inputs are public: a release that cannot be replayed on inputs
    keeps no label, and the fit is replayed whole."""

    def fit(self, train, num_classes):
        objective_perturbation_noise(self.ctx.ledger, 1, epsilon=1.0, regularization=1.0,
                                     curvature_bound=0.25, rng=self.ctx.rng("inputs"),
                                     touches=inputs(np.arange(len(train))))
        return super().fit(train, num_classes)


ExemptsInputsOnly.name = "exempts-inputs-only"


def test_a_release_that_cannot_be_replayed_on_public_data_exempts_no_label():
    fitted = fit(ExemptsInputsOnly)
    assert checks.check_replays(fitted).startswith(
        "1 release of RRWithPrior replayed with the labels altered: identical predictions "
        "(the replayed fit took ")
    assert checks.not_replayed(fitted) == ""


# ----- releases and charges match in number and order ---------------------------------

class ReleasesAgainWhenOdd(lp_mst.LP1ST):
    """Broken on purpose: when the first training label is odd, it releases that label
    once more (the record's epsilon would then say so), and it carries on if the layer
    refuses."""

    def fit(self, train, num_classes):
        super().fit(train, num_classes)
        if train.y[0] % 2:
            try:
                randomized_response(self.ctx.ledger, train.y[:1], num_classes, 1.0,
                                    self.ctx.rng("again"), examples=np.array([0]))
            except Exception:  # noqa: BLE001
                pass
        return self


ReleasesAgainWhenOdd.name = "releases-again-when-odd"


class ReleasesOnlyWhenEven(lp_mst.LP1ST):
    """Broken on purpose: the second release only when the first label is even."""

    def fit(self, train, num_classes):
        super().fit(train, num_classes)
        if train.y[0] % 2 == 0:
            randomized_response(self.ctx.ledger, train.y[:1], num_classes, 1.0,
                                self.ctx.rng("again"), examples=np.array([0]))
        return self


ReleasesOnlyWhenEven.name = "releases-only-when-even"


class NamesItsChargeFromTheLabels(lp_mst.LP1ST):
    """Broken on purpose: a charge whose group, which the record publishes, names the
    most common training label (a release of the layer's Gaussian mean, made and
    charged, but never taken)."""

    def fit(self, train, num_classes):
        NoisyClippedMean(self.ctx.ledger, dataset_size=len(train), clip_norm=1.0,
                         noise_multiplier=1.0, rng=self.ctx.rng("mean"),
                         what=f"mostly label {np.bincount(train.y).argmax()}")
        return super().fit(train, num_classes)


NamesItsChargeFromTheLabels.name = "names-its-charge-from-the-labels"


@pytest.mark.parametrize("method, message", [
    (ReleasesAgainWhenOdd, r"charge 2 \(randomized response\) came after the 1 "
                           r"charge\(s\) of the recorded fit"),
    (ReleasesOnlyWhenEven, r"the replayed fit made 1 of the 2 release\(s\) of the "
                           r"recorded fit"),
    (NamesItsChargeFromTheLabels, r"charge 1 \(Gaussian mean of clipped vectors\) had "
                                  r"another touches than in the recorded fit"),
])
def test_a_replay_must_make_the_recorded_releases_and_charges(method, message):
    assert checks.tiny_data("image", binary=False)[0].y[0] % 2 == 0  # as the plants need
    with pytest.raises(ContractBreach, match=message):
        checks.check_replays(fit(method))


def test_a_replay_compares_each_charge_with_the_examples_it_touches():
    with replay.record() as tape:
        Ledger().charge("a release", labels(np.array([0, 1])), PureEpsilon(1.0))
    with pytest.raises(replay.ReplayMismatch, match=r"charge 1 \(a release\) had another "
                                                    r"touches than in the recorded fit"), \
            replay.replay(tape):
        Ledger().charge("a release", labels(np.array([0, 2])), PureEpsilon(1.0))
    with pytest.raises(replay.ReplayMismatch, match="another cost"), replay.replay(tape):
        Ledger().charge("a release", labels(np.array([0, 1])), PureEpsilon(2.0))
    with replay.replay(tape):
        Ledger().charge("a release", labels(np.array([0, 1])), PureEpsilon(1.0))


def test_a_release_that_cannot_be_replayed_is_compared_with_the_rows_it_reads():
    with replay.record() as tape:
        Ledger().not_replayed("a minimiser", records(np.array([0])), "computed outside")
    assert [r.mechanism for r in tape.not_replayed()] == ["a minimiser"]
    with pytest.raises(replay.ReplayMismatch, match=r"release 1 \(a minimiser\) was given "
                                                    r"another touches"), \
            replay.replay(tape):
        Ledger().not_replayed("a minimiser", records(np.array([1])), "computed outside")
    with replay.replay(tape) as again:
        Ledger().not_replayed("a minimiser", records(np.array([0])), "computed outside")
    assert again.position == 1


def test_a_mechanism_that_runs_several_fits_inside_replays_as_they_do():
    """A private choice among candidate fits, each releasing through the layer, and the
    noisy validation scores it releases: the same seed makes the same releases and
    charges in the same order, so the choice replays whatever the private labels."""
    def choose(y):
        ledger, rng = Ledger(), np.random.default_rng(0)
        candidates = [randomized_response(ledger, y, 3, epsilon, rng, examples=np.arange(30))
                      for epsilon in (0.5, 1.0, 2.0)]
        scores = [np.mean(candidate == y) for candidate in candidates]
        noisy = ledger.released("noisy validation scores",
                                np.asarray(scores) + rng.laplace(0.0, 0.1, 3), candidates=3)
        return candidates[int(np.argmax(noisy))]

    y = np.arange(30) % 3
    with replay.record() as tape:
        chosen = choose(y)
    with replay.replay(tape) as again:
        np.testing.assert_array_equal(choose((y + 1) % 3), chosen)
    assert (again.position, again.charged) == (4, 3)
