"""Every registered method gets these tests automatically: it fits a tiny dataset of its
task, predicts the right shape, is deterministic for a fixed seed, and its privacy is
what its ledger composes: within the budget, of the kind its notion declares, and with
no influence from any data that no charge covers."""
import numpy as np
import pytest

from benchmarks.contract import Budget, Method, Split
from benchmarks.privacy import LABEL_DP_PURE
from benchmarks.registry import all_methods
from contract_checks import (COMPOSITION_OF_KIND, budget_for,  # tests/contract_checks.py
                             check_uncharged_data_has_no_influence, fit)

@pytest.fixture(scope="module", params=sorted(all_methods()))
def fitted(request):
    method = all_methods()[request.param]
    return method, fit(method, seed=3)


def test_predicts_probabilities_of_the_right_shape(fitted):
    _, (_, _, proba, k, n, _) = fitted
    assert proba.shape == (n, k)
    assert np.all(proba >= 0) and np.allclose(proba.sum(1), 1, atol=1e-4)


def test_the_ledger_spends_no_more_than_the_budget(fitted):
    _, (m, budget, _, _, _, _) = fitted
    total = m.spent()
    assert budget.covers(total), (total, budget)


def test_the_ledger_composes_the_kind_the_notion_declares(fitted):
    _, (m, budget, _, _, _, _) = fitted
    notion = m.notion_for(budget, m.hparams)
    assert m.spent().composition in COMPOSITION_OF_KIND[notion.kind]


def test_is_deterministic_for_a_fixed_seed(fitted):
    method, (_, _, proba, _, _, _) = fitted
    _, _, again, _, _, _ = fit(method, seed=3)
    np.testing.assert_array_equal(proba.argmax(1), again.argmax(1))
    np.testing.assert_allclose(proba, again, atol=1e-6)


def test_declares_its_privacy_notion(fitted):
    method, (m, budget, _, _, _, _) = fitted
    notion = method.notion_for(budget, m.hparams)
    assert {type(v).__name__ for v in (notion.protects, notion.neighbours, notion.kind,
                                      notion.accountant)} == {
        "Protects", "Neighbours", "Kind", "Accountant"}
    assert method.paper


def test_data_no_charge_covers_has_no_influence(fitted):
    method, result = fitted
    check_uncharged_data_has_no_influence(method, result)


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


def test_the_contract_catches_a_method_that_does_not_charge_its_ledger():
    assert budget_for(UnchargedLabels) == Budget(1.0)
    m, budget, _, _, _, _ = fit(UnchargedLabels, seed=0)
    assert budget.covers(m.spent())  # "spends no more than its budget" alone passes
    with pytest.raises(AssertionError, match="no ledger charge covers"):
        check_uncharged_data_has_no_influence(UnchargedLabels)
