"""Every registered method gets these tests automatically: it fits a tiny dataset of its
task, predicts the right shape, spends no more than its budget, and is deterministic
for a fixed seed."""
import math

import numpy as np
import pytest

from benchmarks import datasets
from benchmarks.contract import Budget, Split
from benchmarks.registry import all_methods

TINY_TRAIN, TINY_TEST = 240, 60


def tiny_data(task: str, binary: bool):
    name = {"image": "digits", "tabular": "breast-cancer"}[task]
    ds = datasets.load(name)
    train, test = ds.train, ds.test
    if binary and ds.num_classes > 2:  # keep two classes, relabelled 0 and 1
        def two(split: Split) -> Split:
            keep = split.y < 2
            return Split(split.x[keep], split.y[keep])
        train, test = two(train), two(test)
    return (Split(train.x[:TINY_TRAIN], train.y[:TINY_TRAIN]), test.x[:TINY_TEST],
            2 if binary else ds.num_classes)


def budget_for(method) -> Budget:
    """A private budget if the method takes one, else no privacy (non-private)."""
    for budget in (Budget(1.0, 1e-5 if method.needs_delta else 0.0), Budget(math.inf)):
        if method.skip_reason(method.tasks[0], budget) is None:
            return budget
    pytest.skip(f"{method.name} runs neither at epsilon 1 nor inf")


def fit(method, seed: int):
    task = method.tasks[0]
    train, test_x, k = tiny_data(task, binary=getattr(method, "binary_only", False))
    budget = budget_for(method)
    m = method(budget, seed=seed, **method.tiny_hparams)
    m.fit(train, k)
    return m, budget, m.predict_proba(test_x), k, len(test_x)


@pytest.fixture(scope="module", params=sorted(all_methods()))
def fitted(request):
    method = all_methods()[request.param]
    return method, fit(method, seed=3)


def test_predicts_probabilities_of_the_right_shape(fitted):
    _, (_, _, proba, k, n) = fitted
    assert proba.shape == (n, k)
    assert np.all(proba >= 0) and np.allclose(proba.sum(1), 1, atol=1e-4)


def test_spends_no_more_than_its_budget(fitted):
    _, (m, budget, _, _, _) = fitted
    spent = m.spent()
    assert spent.epsilon <= budget.epsilon * (1 + 1e-9)
    assert spent.delta <= budget.delta


def test_is_deterministic_for_a_fixed_seed(fitted):
    method, (_, _, proba, _, _) = fitted
    _, _, again, _, _ = fit(method, seed=3)
    np.testing.assert_array_equal(proba.argmax(1), again.argmax(1))
    np.testing.assert_allclose(proba, again, atol=1e-6)


def test_declares_its_privacy_notion(fitted):
    method, _ = fitted
    notion = method.notion
    assert notion.protects and notion.neighbours and notion.kind and notion.accountant
    assert method.paper
