"""Private selection (benchmarks.privacy.selection) and the privately tuned cell
(benchmarks.tuning): the accounting is Papernot and Steinke's Theorem 2, recomputed here
from the theorem's statement; the law of K is the truncated negative binomial, drawn as
stated; the guarantee holds exactly on a small mechanism over all its outputs and both
neighbours, where a fixed K breaks it; the validation count is epsilon-DP exactly; and a
tuned fit is charged the selection alone, keeps K private, stops a candidate that spends
more than it was charged for, and replays; an interrupted selection resumes and releases
what the uninterrupted one releases."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest
from scipy import optimize, special, stats

from benchmarks.context import RunContext
from benchmarks.contract import Budget, Method, Split
from benchmarks.submission.contract_checks import tiny_data
from benchmarks.errors import InputError
from benchmarks.privacy import LABEL_DP_PURE, Ledger, Touches, labels, rdp, replay
from benchmarks.privacy.notions import Field
from benchmarks import tuning
from benchmarks.privacy.selection import (Progress, Repetitions, noisy_correct_count, select,
                                          selection_curve)
from benchmarks.tuning import PrivatelyTuned, Search, validation_split
from methods.lp_mst import LP1ST

ORDERS = rdp.ORDERS
LAWS = [Repetitions(2, 0), Repetitions(3, 0), Repetitions(5, 0.5), Repetitions(3, 1)]


def gamma_of(mean: float, eta: float) -> float:
    """The law's gamma from its mean, solved here from the mean's closed form."""
    if eta == 0:
        def mean_at(g): return (1 - g) / (g * math.log(1 / g))
    else:
        def mean_at(g): return eta * (1 - g) / (g * (1 - g ** eta))
    return optimize.brentq(lambda g: mean_at(g) - mean, 1e-12, 1 - 1e-12, xtol=1e-15)


def theorem_2(curve: np.ndarray, mean: float, eta: float) -> np.ndarray:
    """Papernot and Steinke 2022, Theorem 2, at every order of ORDERS, the inner order
    taken over ORDERS too; then RDP's monotonicity in the order."""
    gamma = gamma_of(mean, eta)
    inner = min((1 - 1 / mu) * e_mu + math.log(1 / gamma) / mu
                for mu, e_mu in zip(ORDERS, curve))
    bound = np.array([e + (1 + eta) * inner + math.log(mean) / (lam - 1)
                      for lam, e in zip(ORDERS, curve)])
    return np.minimum.accumulate(bound[::-1])[::-1]


CURVES = {"pure 0.5": rdp.pure_rdp(0.5),
          "DP-SGD": rdp.sampled_gaussian_rdp(1.1, 0.02, 500)}


@pytest.mark.parametrize("law", LAWS, ids=lambda law: f"mean {law.mean} shape {law.shape}")
@pytest.mark.parametrize("curve", CURVES.values(), ids=list(CURVES))
def test_the_selection_curve_is_theorem_2(law, curve):
    # dp_accounting's gamma is conservative (slightly small): at most a hair above.
    np.testing.assert_allclose(selection_curve(curve, law),
                               theorem_2(curve, law.mean, law.shape), rtol=1e-6, atol=1e-9)
    assert np.all(selection_curve(curve, law) >= theorem_2(curve, law.mean, law.shape) - 1e-12)


def test_the_selection_curve_is_dp_accountings_repeat_and_select_event():
    import dp_accounting

    event = dp_accounting.dp_event.RepeatAndSelectDpEvent(
        dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(
            0.02, dp_accounting.GaussianDpEvent(1.1)), 500), 3, 0)
    accountant = dp_accounting.rdp.RdpAccountant(orders=list(ORDERS))
    accountant.compose(event)
    ours = rdp.epsilon_from_rdp(selection_curve(CURVES["DP-SGD"], Repetitions(3, 0)), 1e-5)
    assert ours[0] == pytest.approx(accountant.get_epsilon(1e-5), rel=1e-12)


@pytest.mark.parametrize("law", LAWS, ids=lambda law: f"mean {law.mean} shape {law.shape}")
def test_the_number_of_candidates_has_the_truncated_negative_binomial_law(law):
    k = np.arange(0, 5000)
    pmf = law.pmf(k)
    gamma, eta = gamma_of(law.mean, law.shape), law.shape
    assert pmf[0] == 0 and pmf.sum() == pytest.approx(1, abs=1e-9)
    assert (k * pmf).sum() == pytest.approx(law.mean, rel=1e-6)
    # P[K = k] proportional to (1 - gamma)^k prod_{l<k} (l + eta) / (l + 1), k >= 1.
    first = np.arange(1, 30)
    weights = np.array([(1 - gamma) ** j * np.prod([(l + eta) / (l + 1) for l in range(j)])
                        if eta else (1 - gamma) ** j / j for j in first])
    np.testing.assert_allclose(pmf[1:30] / pmf[1], weights / weights[0], rtol=1e-6)


@pytest.mark.parametrize("law", LAWS, ids=lambda law: f"mean {law.mean} shape {law.shape}")
def test_the_drawn_numbers_of_candidates_follow_the_law(law):
    rng = np.random.default_rng(11)
    draws = np.array([law.draw(rng) for _ in range(4000)])
    bins = np.arange(1, 9)
    observed = [np.sum(draws == b) for b in bins] + [np.sum(draws > bins[-1])]
    expected = np.append(law.pmf(bins), 1 - law.pmf(bins).sum()) * len(draws)
    assert stats.chisquare(observed, expected).pvalue > 1e-3


def best_of_k_rr_divergences(epsilon: float, pmf: np.ndarray) -> np.ndarray:
    """The exact Renyi divergences, both ways and at every order of ORDERS, between the
    releases of the best of K randomised responses to one bit (1 or 0), K with ``pmf``
    over 0, 1, 2, ...: a candidate answers the bit with probability e^eps / (1 + e^eps)
    and scores its answer, so the release is 1 unless every answer is 0."""
    k = np.arange(len(pmf))
    truthful = math.exp(epsilon) / (1 + math.exp(epsilon))
    zero_if_one = np.sum(pmf * (1 - truthful) ** k)
    zero_if_zero = np.sum(pmf * truthful ** k)
    one, zero = np.array([1 - zero_if_one, zero_if_one]), np.array([1 - zero_if_zero, zero_if_zero])
    out = []
    for p, q in ((one, zero), (zero, one)):
        terms = [special.logsumexp(lam * np.log(p) + (1 - lam) * np.log(q)) / (lam - 1)
                 for lam in ORDERS]
        out.append(terms)
    return np.max(out, axis=0)


@pytest.mark.parametrize("law", LAWS, ids=lambda law: f"mean {law.mean} shape {law.shape}")
@pytest.mark.parametrize("epsilon", [0.3, 1.0, 2.0])
def test_the_best_of_k_candidates_stays_within_its_charge_exactly(law, epsilon):
    pmf = law.pmf(np.arange(4000))
    charged = selection_curve(rdp.pure_rdp(epsilon), law)
    assert np.all(best_of_k_rr_divergences(epsilon, pmf) <= charged + 1e-9)


def test_a_fixed_number_of_candidates_breaks_that_charge():
    """Why K is random: the best of exactly 3 responses leaks about 3 epsilon, beyond
    what the best of a random K of mean 3 is charged."""
    law = Repetitions(3, 0)
    fixed = np.zeros(4000)
    fixed[3] = 1.0
    charged = selection_curve(rdp.pure_rdp(1.0), law)
    assert np.any(best_of_k_rr_divergences(1.0, fixed) > charged + 0.5)


def test_the_validation_count_is_epsilon_dp_exactly_and_charged_to_its_rows():
    epsilon, rows = 0.4, np.array([7, 8, 9])
    ledger = Ledger()
    with replay.record() as tape:
        noisy_correct_count(ledger, np.array([True, False, True]), epsilon,
                            np.random.default_rng(0), labels(rows, "validation"))
    (charge,) = ledger.charges
    assert charge.cost.epsilon == epsilon and list(charge.touches.examples) == list(rows)
    assert [release.mechanism for release in tape.releases] == [charge.mechanism]
    # Neighbouring inputs move the count by one: the release's densities (Laplace of
    # scale 1 / epsilon around 2 and around 3) differ by at most e^epsilon, attained.
    grid = np.linspace(-20, 25, 90_001)
    law = stats.laplace(scale=1 / epsilon)
    ratio = law.logpdf(grid - 2) - law.logpdf(grid - 3)
    assert np.max(np.abs(ratio)) == pytest.approx(epsilon, abs=1e-12)
    draws = [noisy_correct_count(Ledger(), np.ones(2, bool), epsilon,
                                 np.random.default_rng(s), labels(np.arange(2)))
             for s in range(2000)]
    assert stats.kstest(np.array(draws) - 2, law.cdf).pvalue > 1e-3


def test_a_validation_count_without_its_examples_is_refused():
    with pytest.raises(InputError, match="touches exactly its examples"):
        noisy_correct_count(Ledger(), np.ones(3, bool), 1.0, np.random.default_rng(0),
                            labels())


def test_the_validation_rows_are_a_seeded_part_of_the_training_rows():
    keep, held_out = validation_split(100, 0.1, np.random.default_rng(0))
    assert len(held_out) == 10 and not set(keep) & set(held_out)
    assert sorted([*keep, *held_out]) == list(range(100))
    again = validation_split(100, 0.1, np.random.default_rng(0))
    assert [list(a) for a in again] == [list(keep), list(held_out)]


SEARCH = Search.from_dict({"space": {"peak_lr": [0.05, 0.1]}, "mean_candidates": 2,
                           "shape": 0, "validation_share": 0.25})
BUDGET = Budget(2.0, 1e-5)


def tuned(method_cls=LP1ST, seed=0) -> PrivatelyTuned:
    return PrivatelyTuned(method_cls, BUDGET, SEARCH, context=RunContext(seed=seed),
                          **method_cls.tiny_hparams)


@pytest.fixture(scope="module")
def tiny():
    train, test_x, k = tiny_data("image", binary=False)
    return train, test_x, k


@pytest.fixture(scope="module")
def fitted(tiny):
    train, test_x, k = tiny
    with replay.record() as tape:
        model = tuned().fit(train, k)
        proba = model.predict_proba(test_x)
    return model, proba, tape


def test_a_tuned_fit_is_charged_the_selection_alone_within_its_budget(fitted):
    model, _, _ = fitted
    (charge,) = model.ctx.ledger.charges
    assert charge.mechanism == "private selection" and charge.touches == Touches(Field.LABELS)
    total = model.spent()
    assert total.composition == "rdp" and BUDGET.covers(total)
    # The candidates got the largest budget that keeps the selection within it.
    epsilon = model.details["candidate_epsilon"]
    assert model.total_epsilon(epsilon * 1.003, model.details["training_rows"]) > BUDGET.epsilon
    assert model.notion.kind.value == "approximate" and model.notion.protects.value == "labels"
    assert model.details["selected_hparams"] in SEARCH.grid()


def test_the_number_of_candidates_is_a_diagnostic_never_published(fitted):
    model, _, _ = fitted
    assert set(model.ctx.diagnostics["selection"]) == {"candidates", "selected"}
    def keys(value):
        if isinstance(value, dict):
            return {*value, *(k for v in value.values() for k in keys(v))}
        return set()

    assert not {"candidates", "selected"} & keys(model.privacy_details())


def test_a_tuned_fit_replays_from_its_releases(fitted, tiny):
    model, proba, tape = fitted
    train, test_x, k = tiny
    altered = Split(train.x, (train.y + 1) % k)
    with replay.replay(tape) as again:
        other = tuned().fit(altered, k)
        assert np.array_equal(other.predict_proba(test_x), proba)
    assert again.position == len(tape.releases)


class ReadsValidationLabels(LP1ST):
    """Broken on purpose: predicts the majority of the true labels it is given, beside
    an honest release. Not registered (no ``name`` in its body)."""

    def fit(self, train, num_classes):
        super().fit(train, num_classes)
        self.majority = np.bincount(train.y, minlength=num_classes).argmax()
        return self

    def predict_proba(self, x):
        return np.tile(np.eye(self.model.output_shape[-1])[self.majority], (len(x), 1))


def test_a_candidate_that_reads_labels_beside_the_layer_fails_the_replay(tiny):
    train, test_x, k = tiny
    with replay.record() as tape:
        proba = tuned(ReadsValidationLabels).fit(train, k).predict_proba(test_x)
    altered = Split(train.x, (train.y + 3) % k)
    with replay.replay(tape):
        again = tuned(ReadsValidationLabels).fit(altered, k).predict_proba(test_x)
    assert not np.array_equal(again, proba)


class Understated(LP1ST):
    """Broken on purpose: states half the curve its fit charges."""

    def planned_curve(self, train_size):
        return super().planned_curve(train_size) / 2


def test_a_candidate_that_spends_more_than_it_was_charged_for_stops_the_selection(tiny):
    """Its error, which the record publishes, names no candidate: an index would tell
    how many ran."""
    train, _, k = tiny
    with pytest.raises(InputError, match="^a candidate of the private selection spent more "
                                         "than the curve") as stopped:
        tuned(Understated).fit(train, k)
    assert not re.search(r"\d", str(stopped.value))


class Silent(Method):
    """Reads nothing private: a candidate whose only release is its validation score.
    Not registered (no ``name`` in its body)."""

    paper = "test"
    notion = LABEL_DP_PURE
    defaults = {"peak_lr": 0.1, "epochs": 1, "batch_size": 64}

    def fit(self, train, num_classes):
        self.k = num_classes
        return self

    def planned_curve(self, train_size):
        return np.zeros(ORDERS.shape)  # its training charges nothing

    def predict_proba(self, x):
        return np.full((len(x), self.k), 1 / self.k)


Silent.name = "test-silent"


def test_the_validation_score_is_within_what_the_selection_was_charged_for(tiny):
    """A candidate whose training charges nothing still spends its score's epsilon, which
    the selection's curve must cover: charged for the training alone, it stops."""
    train, _, k = tiny
    model = tuned(Silent).fit(train, k)
    assert model.spent().epsilon > 0



class OneClass(Silent):
    """Predicts one class for every input, class 1 at the larger learning rate and 0
    else: candidates whose validation counts differ. Not registered."""

    def predict_proba(self, x):
        return np.tile(np.eye(self.k)[int(self.hparams["peak_lr"] > 0.07)], (len(x), 1))


class PlansByRate(OneClass):
    """Plans a pure curve of its budget at the larger learning rate, of half of it at the
    smaller: grid points whose curves differ. Not registered."""

    def planned_curve(self, train_size):
        return rdp.pure_rdp(self.budget.epsilon * (1 if self.hparams["peak_lr"] > 0.07 else 0.5))


def test_the_candidates_curve_bounds_every_grid_points_training_and_the_score():
    """The curve the selection is charged for covers every candidate it may draw: each
    grid point's planned training, whichever comes first in the grid, and the score."""
    model = tuned(PlansByRate)
    envelope = model.envelope(1.0, 240)
    curves = [model.candidate(1.0, point).planned_curve(240) for point in SEARCH.grid()]
    assert curves[0][-1] < curves[1][-1]  # the grid's first point plans the less
    for curve in [*curves, rdp.pure_rdp(tuning.selection.score_epsilon(1.0))]:
        assert np.all(curve <= envelope)


def test_the_best_candidate_is_the_best_by_its_released_noisy_score(tiny, monkeypatch):
    """The selection ranks the candidates by the scores the layer released, never by the
    counts they noise: with a noise that reverses the counts' order, the released best
    is the candidate with the fewest correct validation predictions."""
    released = []
    real = tuning.selection.noisy_correct_count

    def reversing(ledger, correct, epsilon, rng, touches):
        real(ledger, correct, epsilon, rng, touches)  # charged as ever
        released.append(-float(np.sum(correct)))
        return released[-1]

    monkeypatch.setattr(tuning.selection, "noisy_correct_count", reversing)
    train, _, k = tiny
    search = Search.from_dict({**SEARCH.as_dict(), "mean_candidates": 8, "shape": 1})
    model = PrivatelyTuned(OneClass, BUDGET, search, context=RunContext(seed=0)).fit(train, k)
    _, held_out = validation_split(len(train), search.validation_share,
                                   RunContext(seed=0).rng("validation split"))
    counts = {lr: np.sum(train.y[held_out] == int(lr > 0.07)) for lr in (0.05, 0.1)}
    assert len(set(released)) == 2 and counts[0.05] != counts[0.1]  # both ran, unequal
    assert model.selected.score == max(released)
    fewest = min(counts, key=counts.get)
    assert model.details["selected_hparams"] == {"peak_lr": fewest}



class RecordsItsRows(OneClass):
    """Keeps the inputs each candidate trains on. Not registered."""

    trained_on: list[np.ndarray] = []

    def fit(self, train, num_classes):
        RecordsItsRows.trained_on.append(train.x)
        return super().fit(train, num_classes)


def test_a_tuned_fit_holds_out_the_rows_its_searchs_coins_give(tiny):
    """A search with validation_split = "coins" holds out each row by its own coin, not a
    fixed share of the rows, and every candidate trains on the other rows alone: the
    split that keeps training and scoring parallel under add/remove neighbours
    (tests/test_selection_split.py)."""
    train, _, k = tiny
    search = Search.from_dict({**SEARCH.as_dict(), "validation_split": tuning.COINS})
    RecordsItsRows.trained_on = []
    model = PrivatelyTuned(RecordsItsRows, BUDGET, search,
                           context=RunContext(seed=0)).fit(train, k)
    held = RunContext(seed=0).rng("validation split").random(len(train)) < 0.25
    assert held.sum() != round(0.25 * len(train))  # the two splits differ in size here
    assert (model.details["validation_rows"], model.details["training_rows"]) == (
        held.sum(), len(train) - held.sum())
    assert RecordsItsRows.trained_on and all(
        np.array_equal(x, train.x[~held]) for x in RecordsItsRows.trained_on)


# --- resuming an interrupted selection ---------------------------------------------------

RESUMED_LAW = Repetitions(6, 1)
RESUMED_SEED = 4  # K = 16 under RESUMED_LAW
# The first two of the best are tied and come early, the overall best comes late.
RESUMED_SCORES = [3.0, 7.0, 7.0, 1.0, 5.0, 6.0, 2.0, 9.0, *[0.5] * 8]


def selection_with(progress, stop_at=None):
    """A selection whose candidate j scores RESUMED_SCORES[j]; it is interrupted when it
    starts candidate ``stop_at``. Returns (its result, the candidates it ran)."""
    ran = []

    def candidate(j):
        if j == stop_at:
            raise KeyboardInterrupt
        ran.append(j)
        return f"model {j}", np.zeros(ORDERS.shape), RESUMED_SCORES[j]

    chosen = select(Ledger(), Touches(Field.LABELS), RESUMED_LAW, rdp.pure_rdp(0.5),
                    np.random.default_rng(RESUMED_SEED), candidate, progress)
    return chosen, ran


@pytest.mark.parametrize("stop_at", range(1, 16))
def test_a_resumed_selection_releases_what_the_uninterrupted_one_releases(stop_at):
    whole, ran = selection_with(None)
    assert ran == list(range(16)) and (whole.result, whole.score) == ("model 7", 9.0)
    progress = Progress()
    with pytest.raises(KeyboardInterrupt):
        selection_with(progress, stop_at)
    assert progress.scores == dict(enumerate(RESUMED_SCORES[:stop_at]))
    resumed, ran = selection_with(progress)
    assert (resumed.result, resumed.score, resumed.private) == (
        whole.result, whole.score, whole.private)
    # It runs again only the first of its best scored candidates, for its result.
    best = int(np.argmax(RESUMED_SCORES[:stop_at]))
    assert ran == [best, *range(stop_at, 16)]
    assert progress.scores == {}  # a finished selection leaves nothing to resume


def test_a_resumed_candidate_that_does_not_reproduce_its_score_stops_the_selection():
    progress = Progress()
    progress.scores = {0: 3.0, 1: 8.0}  # candidate 1 scores 7.0 when it runs again
    with pytest.raises(InputError, match="^a candidate did not reproduce the score") as stopped:
        selection_with(progress)
    assert not re.search(r"\d", str(stopped.value))
    assert progress.scores == {}


class Logged(LP1ST):
    """An LP-1ST that logs the seed and settings of each fit, and is interrupted (a stop,
    a Ctrl-C) at its fit number ``stop_at``."""

    fits: list[tuple[int, float]] = []
    stop_at: int | None = None

    def fit(self, train, num_classes):
        Logged.fits.append((self.seed, self.hparams["peak_lr"]))
        if len(Logged.fits) == Logged.stop_at:
            raise KeyboardInterrupt
        return super().fit(train, num_classes)


@pytest.mark.integration  # tunes twice: 17 s
def test_an_interrupted_tuned_fit_resumes_from_its_saved_scores(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(tuning.code_version, "dirty", lambda: False)
    train, test_x, k = tiny

    def fit(data_dir, stop_at=None):
        Logged.fits, Logged.stop_at = [], stop_at
        model = PrivatelyTuned(Logged, BUDGET, SEARCH, context=RunContext(
            seed=6, data_dir=data_dir), **LP1ST.tiny_hparams).fit(train, k)
        return model, model.predict_proba(test_x), Logged.fits

    whole, proba, trained = fit(tmp_path / "whole")
    # Six candidates whose drawn settings alternate: a shifted draw would show.
    assert whole.ctx.diagnostics["selection"]["candidates"] == 6
    rates = [lr for _, lr in trained]
    assert rates[0] != rates[1] and rates == rates[:2] * 3
    with pytest.raises(KeyboardInterrupt):
        fit(tmp_path / "resumed", stop_at=4)
    (saved,) = (tmp_path / "resumed" / "cache" / "private-selection").glob("*.json")
    resumed, again, retrained = fit(tmp_path / "resumed")
    assert np.array_equal(again, proba) and resumed.details == whole.details
    # One scored candidate again, then the unscored ones, each with its own settings.
    assert len(retrained) == 4 and set(retrained) <= set(trained)
    assert retrained[1:] == trained[3:]
    assert not saved.exists()


def test_a_checkout_with_edits_keeps_no_scores(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(tuning.code_version, "dirty", lambda: True)
    model = PrivatelyTuned(LP1ST, BUDGET, SEARCH, context=RunContext(seed=0, data_dir=tmp_path),
                           **LP1ST.tiny_hparams)
    assert type(model.progress_of_selection(tiny[0])) is Progress
