"""The checks of the method contract, shared by the contract tests and the README test:
fit a tiny dataset of the method's task, and check that data no ledger charge covers
has no influence on the predictions."""
import math

import numpy as np
import pytest

from benchmarks import datasets
from benchmarks.contract import Budget, Split
from benchmarks.privacy import Kind, Protects

TINY_TRAIN, TINY_TEST = 240, 60
TINY_DATASETS = {"image": "digits", "tabular": "breast-cancer"}
# The composition a ledger may report for each kind of notion.
COMPOSITION_OF_KIND = {Kind.PURE: {"pure"}, Kind.APPROXIMATE: {"rdp"},
                       Kind.NONE: {"unprotected"}}


def tiny_data(task: str, binary: bool):
    ds = datasets.load(TINY_DATASETS[task])
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


def fit(method, seed: int, train: Split | None = None):
    """Fit on the tiny data as the runner would: a method that takes public inputs gets
    the leading test inputs and is evaluated on the rest."""
    task = method.tasks[0]
    tiny_train, test_x, k = tiny_data(task, binary=getattr(method, "binary_only", False))
    budget = budget_for(method)
    m = method(budget, seed=seed, **method.tiny_hparams)
    public = m.public_part(TINY_DATASETS[task], len(test_x))
    m.fit(train or tiny_train, k, **({"public_x": test_x[:public]} if public else {}))
    return m, budget, m.predict_proba(test_x[public:]), k, len(test_x) - public, tiny_train


def check_uncharged_data_has_no_influence(method, fitted=None) -> None:
    """Change whatever no charge of the run's ledger covers (labels under label-DP,
    whole records under full DP) and refit with the same seed: the predictions must not
    move. A method that trains on private data without charging the ledger fails.
    ``fitted``: the result of ``fit(method, seed=3)`` if already at hand."""
    m, budget, proba, k, _, train = fitted or fit(method, seed=3)
    notion = m.notion_for(budget, m.hparams)
    if not notion.private:
        return  # a non-private number claims nothing
    free = m.ctx.ledger.uncovered(notion, len(train))
    if free.size == 0:
        return
    y = train.y.copy()
    y[free] = (y[free] + 1) % k
    x = train.x.copy()
    if notion.protects is Protects.RECORDS:
        x[free] = x[free[::-1]]
    _, _, again, _, _, _ = fit(method, seed=m.seed, train=Split(x, y))
    np.testing.assert_allclose(again, proba, atol=1e-6, err_msg=(
        f"{method.name}: data that no ledger charge covers changed the predictions"))
