"""Audits of trained methods: the canaries of each notion, the guesses and the bound, the
command, and decisive checks against methods broken on purpose. The broken variants live
here only: they are monkeypatched into the real methods for one test at a time."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from benchmarks import datasets
from benchmarks.audit import canaries, training
from benchmarks.privacy.audit_bounds import one_run_lower_bound, saturation
from benchmarks.audit.one_run import GUESS_SHARES, guess_counts, one_run_bound
from benchmarks.cli import main
from benchmarks.context import RunContext
from benchmarks.contract import _REGISTRY, Budget, Method
from benchmarks.privacy import LABEL_DP_PURE, PureEpsilon, labels
from benchmarks.registry import get_method
from charged import randomized_response


@pytest.fixture(scope="module")
def digits():
    return datasets.load("digits")


@pytest.fixture(scope="module")
def breast_cancer():
    return datasets.load("breast-cancer")


def notion_of(method: str, epsilon: float = 1.0, delta: float = 0.0):
    cls = get_method(method)
    return cls.notion_for(Budget(epsilon, delta), cls.defaults)


# ----- canaries -------------------------------------------------------------------------------

@pytest.mark.parametrize("method, kind", [
    ("lp-1st", canaries.LABEL), ("lp-3st", canaries.LABEL),
    ("spread-lr", canaries.LABEL), ("lr-noisy", canaries.LABEL),  # the label flip's epsilon
    ("dp-erm-objective", canaries.LABEL), ("dp-erm-output", canaries.LABEL),  # substitution
    ("dp-sgd", canaries.INCLUSION),  # add/remove
])
def test_the_canary_matches_the_neighbour_relation(method, kind):
    delta = 1e-5 if get_method(method).needs_delta else 0.0
    assert canaries.kind_for(notion_of(method, delta=delta)) == kind


def test_a_non_private_notion_has_no_canary():
    with pytest.raises(ValueError):
        canaries.kind_for(notion_of("non-private", float("inf")))


def test_image_canaries_are_distinct_sparse_bright_patterns(digits):
    planted = canaries.design(notion_of("lp-1st"), digits, 1000, np.random.default_rng(0))
    x = planted.inputs
    assert x.shape == (1000, 8, 8, 1) and x.dtype == digits.train.x.dtype
    assert set(np.unique(x)) == {0.0, 1.0}
    assert np.all(x.reshape(1000, -1).sum(axis=1) == round(canaries.BRIGHT_SHARE * 64))
    assert len(np.unique(x.reshape(1000, -1), axis=0)) == 1000
    first, second = planted.labels.T
    assert np.all(first != second) and planted.labels.min() >= 0 and planted.labels.max() < 10
    # one pair for every canary, drawn with the canaries: another seed, another pair
    assert len({tuple(pair) for pair in planted.labels}) == 1
    pairs = {tuple(canaries.design(notion_of("lp-1st"), digits, 2, np.random.default_rng(seed))
                   .labels[0]) for seed in range(20)}
    assert len(pairs) > 5


def test_tabular_canaries_are_orthonormal_unit_rows_the_data_barely_uses(breast_cancer):
    x = breast_cancer.train.x.astype(np.float64)
    planted = canaries.design(notion_of("dp-erm-objective"), breast_cancer, 30,
                              np.random.default_rng(0))
    rows = planted.inputs.astype(np.float64)
    assert np.all(np.linalg.norm(rows, axis=1) <= 1.0)
    np.testing.assert_allclose(rows @ rows.T, np.eye(30), atol=1e-5)
    use = np.sum((x @ rows.T) ** 2, axis=0)  # how much the training rows lie along each
    np.testing.assert_allclose(use, np.linalg.eigvalsh(x.T @ x), rtol=1e-3, atol=1e-9)
    random_directions = np.random.default_rng(1).standard_normal((100, 30))
    random_directions /= np.linalg.norm(random_directions, axis=1, keepdims=True)
    assert np.median(use) < np.median(np.sum((x @ random_directions.T) ** 2, axis=0)) / 100
    more = canaries.design(notion_of("dp-erm-objective"), breast_cancer, 50,
                           np.random.default_rng(0)).inputs
    assert np.all((np.linalg.norm(more, axis=1) <= 1.0) & (np.linalg.norm(more, axis=1) > 0.99))


def test_label_canaries_keep_every_example_and_take_the_coins_label(digits):
    planted = canaries.design(notion_of("lp-1st"), digits, 50, np.random.default_rng(0))
    coins = np.random.default_rng(1).integers(0, 2, 50).astype(bool)
    train = planted.plant(digits.train, coins)
    n = len(digits.train)
    assert len(train) == n + 50
    np.testing.assert_array_equal(train.x[:n], digits.train.x)
    np.testing.assert_array_equal(train.y[:n], digits.train.y)
    np.testing.assert_array_equal(train.x[n:], planted.inputs)
    np.testing.assert_array_equal(train.y[n:], np.where(coins, planted.labels[:, 1],
                                                        planted.labels[:, 0]))


def test_inclusion_canaries_are_added_only_when_their_coin_says_so(digits):
    planted = canaries.design(notion_of("dp-sgd", delta=1e-5), digits, 50,
                              np.random.default_rng(0))
    coins = np.random.default_rng(1).integers(0, 2, 50).astype(bool)
    train = planted.plant(digits.train, coins)
    n = len(digits.train)
    assert len(train) == n + coins.sum()
    np.testing.assert_array_equal(train.x[n:], planted.inputs[coins])
    np.testing.assert_array_equal(train.y[n:], planted.labels[coins])


def test_evidence_points_to_the_coin_the_model_shows(digits):
    rng = np.random.default_rng(0)
    labelled = canaries.design(notion_of("lp-1st"), digits, 40, rng)
    coins = rng.integers(0, 2, 40).astype(bool)
    shown = np.where(coins, labelled.labels[:, 1], labelled.labels[:, 0])
    proba = np.full((40, 10), 0.05)
    proba[np.arange(40), shown] = 0.55
    assert np.all((labelled.evidence(proba) > 0) == coins)

    member = canaries.design(notion_of("dp-sgd", delta=1e-5), digits, 40, rng)
    proba = np.full((40, 10), 0.1)
    proba[np.arange(40), member.labels] = np.where(coins, 0.9, 0.1) + rng.random(40) * 0.05
    evidence = member.evidence(proba)
    assert sorted(evidence) == list(np.arange(40) - 19.5)  # centred ranks
    strongest = np.argsort(-np.abs(evidence))[:10]  # the best and the worst fitted
    assert np.all((evidence[strongest] > 0) == coins[strongest])


# ----- the guesses and the bound --------------------------------------------------------------

def test_perfect_guesses_reach_the_ceiling_at_the_bonferroni_confidence():
    coins = np.random.default_rng(0).integers(0, 2, 1000).astype(bool)
    result = one_run_bound(np.where(coins, 1.0, -1.0), coins, delta=1e-5)
    each = 1 - 0.05 / len(GUESS_SHARES)
    assert (result.guesses, result.correct, result.canaries) == (1000, 1000, 1000)
    assert result.epsilon == result.ceiling == saturation(1000, 1000, 1e-5, each)
    assert 5.3 < result.ceiling < saturation(1000, 1000, 1e-5, 0.95) < 5.9


def test_each_share_is_judged_at_the_corrected_confidence_and_the_best_is_reported():
    """Strong evidence on a quarter of the canaries, none on the rest: the quarter wins,
    and its bound is the one at confidence 1 - 0.05 / 3, not at 95%."""
    rng = np.random.default_rng(0)
    coins = rng.integers(0, 2, 1000).astype(bool)
    evidence = rng.normal(0, 0.1, 1000)  # no information
    evidence[:250] = np.where(coins[:250], 5.0, -5.0)
    result = one_run_bound(evidence, coins)
    assert (result.guesses, result.correct) == (250, 250)
    assert result.epsilon == one_run_lower_bound(1000, 250, 250, 0.0, 1 - 0.05 / 3)
    assert result.epsilon < one_run_lower_bound(1000, 250, 250, 0.0, 0.95)
    assert result.confidence == 0.95


def test_evidence_unrelated_to_the_coins_gives_no_bound():
    rng = np.random.default_rng(0)
    result = one_run_bound(rng.normal(size=1000), rng.integers(0, 2, 1000).astype(bool))
    assert result.epsilon == 0.0


def test_the_numbers_of_guesses_are_fixed_shares_of_the_canaries():
    assert guess_counts(1000) == [250, 500, 1000]
    assert guess_counts(30) == [7, 15, 30]
    assert guess_counts(2) == [1, 2]


# ----- the pipeline, on stand-in methods that train instantly --------------------------------

class _LabelLookup(Method):
    """Predicts each training input's label exactly: a claim of label-DP it cannot keep."""

    paper = "test stand-in"
    notion = LABEL_DP_PURE
    charged_epsilons = 1.0  # what the ledger is charged, in units of the budget

    def randomise(self, y: np.ndarray, num_classes: int) -> np.ndarray:
        return y

    def fit(self, train, num_classes):
        self.ctx.ledger.charge("label lookup", labels(),
                               PureEpsilon(self.charged_epsilons * self.budget.epsilon))
        released = self.randomise(train.y, num_classes)
        self.num_classes = num_classes
        self.table = {row.tobytes(): label for row, label in zip(train.x, released)}
        return self

    def predict_proba(self, x):
        proba = np.full((len(x), self.num_classes), 1.0 / self.num_classes)
        for i, row in enumerate(x):
            if row.tobytes() in self.table:
                proba[i] = 0.01 / (self.num_classes - 1)
                proba[i, self.table[row.tobytes()]] = 0.99
        return proba


@pytest.fixture
def stand_ins():
    """Three stand-ins, registered for one test: a lookup of the true labels, the same
    after randomised response at the budget (honest), and one that over-charges."""

    class Leaky(_LabelLookup):
        name = "audit-test-leaky"

    class Honest(_LabelLookup):
        name = "audit-test-honest"

        def randomise(self, y, num_classes):
            return randomized_response(y, num_classes, self.budget.epsilon, self.ctx.rng("rr"))

    class OverBudget(_LabelLookup):
        name = "audit-test-over-budget"
        charged_epsilons = 2.0

    yield Leaky, Honest, OverBudget
    for cls in (Leaky, Honest, OverBudget):
        _REGISTRY.pop(cls.name, None)


def test_a_leaky_method_is_flagged_near_the_ceiling_and_an_honest_one_is_not(stand_ins, digits):
    leaky = training.audit_training("audit-test-leaky", digits, Budget(1.0), {},
                                    RunContext(seed=0))
    assert leaky.flagged and leaky.correct == leaky.guesses == 1000
    assert leaky.epsilon_lower_bound == leaky.ceiling
    assert (leaky.canaries, leaky.canary_kind) == (1000, "label")
    assert leaky.training_examples == len(digits.train)
    for epsilon in (0.5, 1.0, 2.0):
        honest = training.audit_training("audit-test-honest", digits, Budget(epsilon), {},
                                         RunContext(seed=0))
        assert not honest.flagged, honest
    # randomised response at the budget, memorised exactly: the audit comes close to it
    assert honest.epsilon_lower_bound > 1.5


def test_an_exactly_private_method_is_flagged_in_at_most_5_percent_of_audits(stand_ins,
                                                                              digits):
    """Randomised response at the budget is tight: a guess on a canary whose released
    label is one of its two classes is right with probability e^eps / (1 + e^eps)
    exactly. Expected flags: at most 5 of 100; more than 12 has probability below 0.2%."""
    flags = sum(training.audit_training("audit-test-honest", digits, Budget(1.0), {},
                                        RunContext(seed=seed), canaries=200).flagged
                for seed in range(100))
    assert flags <= 12


def test_the_audit_is_deterministic_for_a_seed(stand_ins, digits):
    def run(seed):
        return training.audit_training("audit-test-honest", digits, Budget(2.0), {},
                                       RunContext(seed=seed)).as_dict() | {"seconds": 0}

    assert run(3) == run(3) and run(3) != run(4)


def test_a_run_whose_ledger_exceeds_its_budget_is_refused(stand_ins, digits, capsys):
    with pytest.raises(training.BudgetExceeded, match="beyond its budget"):
        training.audit_training("audit-test-over-budget", digits, Budget(1.0), {},
                                RunContext(seed=0), canaries=20)
    assert main(["audit", "--method", "audit-test-over-budget", "--dataset", "digits",
                 "--epsilon", "1", "--canaries", "20"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1


def test_json_output(stand_ins, capsys):
    assert main(["audit", "--method", "audit-test-leaky", "--dataset", "digits",
                 "--epsilon", "1", "--canaries", "200", "--seed", "2", "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert {"claimed_epsilon", "epsilon_lower_bound", "confidence", "canaries", "guesses",
            "correct", "ceiling", "seconds", "method", "dataset"} <= set(printed)
    assert printed["claimed_epsilon"] == 1.0 and printed["canaries"] == 200
    assert printed["flagged"] is True and printed["seed"] == 2
    assert printed["epsilon_lower_bound"] == printed["ceiling"] > 1


def test_text_output_says_what_an_audit_can_and_cannot_show(stand_ins, capsys):
    assert main(["audit", "--method", "audit-test-honest", "--dataset", "digits",
                 "--epsilon", "1", "--canaries", "200"]) == 0
    out = capsys.readouterr().out
    assert ("claimed epsilon 1: consistent with the claim, each test below at its share of "
            "the family-wise level 5%") in out
    # No release a one-run audit reads and no noise check: the model's bound has the
    # whole 5% (benchmarks.audit.levels).
    assert re.search(r"right: lower bound [\d.]+ at 95%\n", out), out
    assert "200 canaries, each labelled with one of two classes" in out
    assert "never confirm one" in out and "audited training:" in out
    assert main(["audit", "--method", "audit-test-honest", "--dataset", "digits",
                 "--epsilon", "8", "--canaries", "200"]) == 0
    assert "at or above it, so this audit cannot refute the claim" in capsys.readouterr().out


# ----- the command's bad input ------------------------------------------------------------------

@pytest.mark.parametrize("argv, message", [
    (["--method", "lp-1s", "--dataset", "digits", "--epsilon", "1"], "did you mean 'lp-1st'?"),
    (["--method", "lp-1st", "--dataset", "digit", "--epsilon", "1"], "did you mean 'digits'?"),
    (["--method", "lp-1st", "--dataset", "digits", "--epsilon", "0"], "epsilon must be > 0"),
    (["--method", "lp-1st", "--dataset", "digits", "--epsilon", "-1"], "epsilon must be > 0"),
    (["--method", "lp-1st", "--dataset", "digits", "--epsilon", "nan"], "epsilon must be > 0"),
    (["--method", "lp-1st", "--dataset", "digits", "--epsilon", "inf"], "nothing to audit"),
    (["--method", "non-private", "--dataset", "digits", "--epsilon", "1"], "nothing to audit"),
    (["--method", "dp-erm-output", "--dataset", "digits", "--epsilon", "1"],
     "handles tabular data, not image"),
    (["--method", "spread-lr", "--dataset", "digits", "--epsilon", "1"], "binary classifier"),
    (["--method", "dp-sgd", "--dataset", "digits", "--epsilon", "1"], "needs delta > 0"),
    (["--method", "lp-1st", "--dataset", "digits", "--epsilon", "1", "--hparams", "{epochs: 2}"],
     "--hparams is not valid JSON"),
    (["--method", "lp-1st", "--dataset", "digits", "--epsilon", "1", "--hparams", "[2]"],
     "--hparams must be a JSON object"),
    (["--method", "lp-1st", "--dataset", "digits", "--epsilon", "1", "--hparams",
      '{"epoch": 2}'], "unknown hyperparameter(s) ['epoch']"),
    (["--method", "lp-1st", "--dataset", "digits", "--epsilon", "1", "--hparams",
      '{"seed": 2}'], "unknown hyperparameter(s) ['seed']"),
    (["--method", "lp-1st", "--dataset", "digits", "--epsilon", "1", "--canaries", "1"],
     "canaries must be an integer >= 2"),
    (["--method", "lp-1st", "--dataset", "digits", "--epsilon", "1", "--seed", "-1"],
     "seed must be an integer >= 0"),
    (["--method", "lp-1st", "--epsilon", "1"], "audit needs --dataset"),
    ([], "audit needs --method, --dataset, --epsilon"),
])
def test_bad_input_exits_2_with_one_error_line(argv, message, capsys):
    assert main(["audit", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("privboard: error: ")
    assert message in lines[0]


# ----- the real methods, honest and broken on purpose ----------------------------------------
# Training long enough for the model to memorise single examples (the power of any
# black-box audit); the audit's own defaults otherwise: 1000 canaries on digits, one per
# feature (30) on breast cancer.

LP_1ST = ("lp-1st", "digits", Budget(1.0), {"epochs": 60, "mixup_alpha": 0.0})
DP_SGD = ("dp-sgd", "digits", Budget(1.0, 1e-5), {"epochs": 30, "batch_size": 64})
DP_ERM = ("dp-erm-objective", "breast-cancer", Budget(1.0), {})


def audited(method, dataset, budget, hparams) -> training.TrainingAudit:
    return training.audit_training(method, datasets.load(dataset), budget, hparams,
                                   RunContext(seed=0))


def labels_never_randomised(monkeypatch):
    import methods.lp_mst

    monkeypatch.setattr(methods.lp_mst, "rr_with_prior",
                        lambda ledger, y, priors, epsilon, rng, **charge: y)


def noise_calibrated_but_never_added(monkeypatch):
    """The mechanism is charged the calibrated noise when it is made; the training step,
    traced at its first call, then takes the clipped sums without it."""
    from methods.nn import dp_training

    class Noiseless(dp_training.DPSGDStep):
        def _step(self):
            self.mechanism.noise_std = 0.0
            return super()._step()

    monkeypatch.setattr(dp_training, "DPSGDStep", Noiseless)


def objective_noise_zero(monkeypatch):
    from benchmarks.privacy import erm_noise

    monkeypatch.setattr(erm_noise, "sample_norm_exponential_noise",
                        lambda dim, beta, rng: np.zeros(dim))


@pytest.mark.parametrize("cell, break_it", [
    pytest.param(LP_1ST, labels_never_randomised,  # trains its twin twice, 18 s
                 marks=pytest.mark.integration),
    pytest.param(DP_SGD, noise_calibrated_but_never_added,  # trains its canaries twice
                 marks=pytest.mark.integration),
    (DP_ERM, objective_noise_zero),
], ids=["lp-1st", "dp-sgd", "dp-erm-objective"])
def test_honest_methods_pass_and_broken_ones_are_flagged(cell, break_it, monkeypatch):
    # The model audit is under test: DP-SGD's release audit (tests/test_release_audit.py)
    # gets few phantoms, which it reads at every step.
    monkeypatch.setattr(training, "PHANTOMS", 1_000)
    honest = audited(*cell)
    assert not honest.flagged, honest
    break_it(monkeypatch)
    broken = audited(*cell)
    assert broken.flagged, broken
    assert broken.epsilon_lower_bound > 1.15 * broken.claimed_epsilon


@pytest.mark.integration  # tunes and audits a twin: 18 s
def test_a_privately_tuned_twin_is_audited_against_the_selections_claim(digits, monkeypatch):
    """The twin of a tuned cell trains every candidate on the canaries and is judged
    against what the selection claims: approximate, at the cell's delta."""
    from benchmarks.tuning import PrivatelyTuned, Search

    method, _, _, hparams = LP_1ST
    budget, search = Budget(1.0, 1e-5), Search.from_dict(
        {"space": {"epochs": [30, 60]}, "mean_candidates": 2, "shape": 0,
         "validation_share": 0.2})

    def audit():
        context = RunContext(seed=0)
        model = PrivatelyTuned(get_method(method), budget, search, context=context,
                               mixup_alpha=0.0)
        return training.audit_training(method, digits, budget, {"mixup_alpha": 0.0},
                                       context, model=model)

    honest = audit()
    assert (honest.notion, honest.claimed_delta) == ("label-DP, substitution "
                                                     "neighbours, approximate", 1e-5)
    assert honest.release is not None and not honest.flagged, honest
    labels_never_randomised(monkeypatch)
    broken = audit()
    assert broken.flagged and broken.epsilon_lower_bound > 1.15 * budget.epsilon, broken
