"""Every registered method gets these tests automatically (the checks are
benchmarks.submission.contract_checks, which privboard submit runs on a method from another
package): it declares its notion, refuses unknown settings and budgets no run can
honour, fits a tiny dataset of its task, predicts the right shape, is deterministic for a
fixed seed, and its privacy is what its ledger composes: within the budget, of the kind
its notion declares, every mechanism of the privacy layer charged to the run's ledger,
no influence from any data that no charge covers, and a model that is a function of
the layer's releases alone (the replay check; its planted breaks are in
tests/test_replay.py)."""
import numpy as np
import pytest

from benchmarks.submission import contract_checks as checks
from benchmarks.contract import Budget, Method, Split
from benchmarks.submission.contract_checks import ContractBreach, budget_for, fit
from benchmarks.privacy import LABEL_DP_PURE, Ledger
from benchmarks.privacy.randomizers import randomized_response
from benchmarks.registry import all_methods


@pytest.fixture(scope="module", params=sorted(all_methods()))
def fitted(request):
    method = all_methods()[request.param]
    if budget_for(method) is None:
        pytest.skip(f"{method.name} runs neither at epsilon 1 nor inf")
    return fit(method)


@pytest.mark.parametrize("name", sorted(all_methods()))
@pytest.mark.parametrize("check", [checks.check_declares_notion,
                                   checks.check_refuses_unknown_settings,
                                   checks.check_refuses_bad_epsilon],
                         ids=lambda check: check.__name__)
def test_the_class_meets_the_contract(name, check):
    check(all_methods()[name])


@pytest.mark.parametrize("check", [check for _, check in checks.ON_A_FIT],
                         ids=lambda check: check.__name__)
def test_a_fit_meets_the_contract(fitted, check):
    found = check(fitted)
    if check is checks.check_replays:  # each of our private methods is replayed whole
        notion = fitted.model.notion_for(fitted.budget, fitted.model.hparams)
        assert found.startswith("not replayable: non-private") != notion.private, found
        assert not checks.not_replayed(fitted), found


class UnchargedLabels(Method):
    """Broken on purpose: a nearest-centroid classifier on the private labels that claims
    label-DP but never charges the ledger. Not registered (no ``name`` in its body)."""

    paper = "test"
    notion = LABEL_DP_PURE

    def fit(self, train: Split, num_classes: int) -> "UnchargedLabels":
        flat = train.x.reshape(len(train), -1)
        self.centres = np.stack([flat[train.y == c].mean(0) if np.any(train.y == c)
                                 else np.zeros(flat.shape[1]) for c in range(num_classes)])
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        scores = -((x.reshape(len(x), 1, -1) - self.centres[None]) ** 2).sum(-1)
        scores = np.exp(scores - scores.max(1, keepdims=True))
        return scores / scores.sum(1, keepdims=True)


UnchargedLabels.name = "uncharged-labels"


class ChargesAScratchLedger(UnchargedLabels):
    """Broken on purpose: releases the labels by randomized response on a ledger of its
    own, so the run's ledger never sees the charge."""

    def fit(self, train: Split, num_classes: int) -> "ChargesAScratchLedger":
        released = randomized_response(Ledger(), train.y, num_classes, self.budget.epsilon,
                                       self.ctx.rng("rr"), examples=np.arange(len(train)))
        return super().fit(Split(train.x, released), num_classes)


class SkipsTheBaseInit(UnchargedLabels):
    """Broken on purpose: its own constructor, which checks nothing it is given."""

    def __init__(self, budget, seed=0, **hparams):
        self.budget, self.hparams = budget, hparams


def test_the_contract_catches_a_method_that_does_not_charge_its_ledger():
    assert budget_for(UnchargedLabels) == Budget(1.0)
    fitted = fit(UnchargedLabels)
    checks.check_within_budget(fitted)  # "spends no more than its budget" alone passes
    with pytest.raises(ContractBreach, match="no ledger charge covers"):
        checks.check_uncharged_data_has_no_influence(fitted)


def test_the_contract_catches_a_mechanism_charged_to_another_ledger():
    with pytest.raises(ContractBreach, match="randomized response was handed a ledger "
                                             "that is not the run's"):
        checks.check_mechanisms_charge_the_run(fit(ChargesAScratchLedger))


@pytest.mark.parametrize("check, reason", [
    (checks.check_refuses_unknown_settings, "accepted the unknown hyperparameter"),
    (checks.check_refuses_bad_epsilon, "was made at epsilon 0 instead of raising"),
])
def test_the_contract_catches_a_constructor_that_checks_nothing(check, reason):
    with pytest.raises(ContractBreach, match=reason):
        check(SkipsTheBaseInit)
