"""LP-MST spends its budget once per label: every true label goes through RRWithPrior
exactly once (parallel composition), and the stage partition ignores the labels."""
import math

import numpy as np
import pytest

from benchmarks import datasets
from benchmarks.contract import Budget, Split
from methods import lp_mst
from methods.lp_mst import LP3ST, per_epsilon_settings


@pytest.fixture(scope="module")
def tiny():
    ds = datasets.load("digits")
    return Split(ds.train.x[:300], ds.train.y[:300])


def test_every_label_is_randomized_exactly_once(tiny, monkeypatch):
    calls = []
    real = lp_mst.rr_with_prior

    def recording(labels, priors, epsilon, rng):
        calls.append((labels.copy(), priors.copy(), epsilon))
        return real(labels, priors, epsilon, rng)

    monkeypatch.setattr(lp_mst, "rr_with_prior", recording)
    method = LP3ST(Budget(2.0), seed=0, epochs=1, batch_size=64).fit(tiny, 10)
    assert len(calls) == 3
    assert all(eps == 2.0 for _, _, eps in calls)
    queried = np.concatenate([labels for labels, _, _ in calls])
    assert len(queried) == len(tiny)  # no label is queried twice or skipped
    np.testing.assert_array_equal(np.sort(queried), np.sort(tiny.y))
    # Stage 1 uses the uniform prior: plain randomized response.
    np.testing.assert_allclose(calls[0][1], 0.1)
    assert method.spent().epsilon == 2.0 and method.spent().delta == 0.0


def test_partition_covers_every_example_once_and_ignores_labels():
    method = LP3ST(Budget(1.0), seed=0)
    parts = method._partition(1000, np.random.default_rng(0), 0.5)
    assert [len(p) for p in parts] == [500, 250, 250]
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(1000))


@pytest.mark.parametrize("epsilon, row", [(0.5, 1), (1, 1), (3, 2), (4, 4), (7.9, 4),
                                          (8, 8), (math.inf, 8)])
def test_per_epsilon_settings_use_the_largest_row_not_above(epsilon, row):
    assert per_epsilon_settings(epsilon) == lp_mst.PER_EPSILON[row]


def test_hyperparameters_override_the_per_epsilon_table():
    method = LP3ST(Budget(1.0), seed=0, mixup_alpha=2.0, prior_temperature=1.0)
    settings = method._settings()
    assert settings["mixup_alpha"] == 2.0 and settings["prior_temperature"] == 1.0
    assert settings["stage1_share"] == lp_mst.PER_EPSILON[1][2]


def test_ratings_train_the_collaborative_filtering_model_and_report_rmse():
    from benchmarks.contract import Dataset
    from benchmarks.runner import evaluate
    from methods.lp_mst import LP2ST

    rng = np.random.default_rng(0)
    pairs = np.stack([rng.integers(0, 50, 400), rng.integers(0, 80, 400)], 1)
    ratings = (pairs.sum(1) % 5).astype(np.int64)  # a learnable rule of the ids
    train, test = Split(pairs[:300], ratings[:300]), Split(pairs[300:], ratings[300:])
    method = LP2ST(Budget(4.0), seed=0, model="ncf", epochs=2, batch_size=64,
                   mixup_alpha=0.0, later_mixup_alpha=0.0).fit(train, 5)
    proba = method.predict_proba(test.x)
    metrics = evaluate(Dataset("ratings-demo", "ratings", 5, train, test, "x"), proba)
    assert proba.shape == (100, 5) and 0 <= metrics["rmse"] <= 4


def test_mixup_on_index_inputs_is_one_clear_error():
    from methods.lp_mst import LP1ST

    pairs = np.zeros((64, 2), dtype=np.int64)
    with pytest.raises(ValueError, match="mixup blends inputs"):
        LP1ST(Budget(1.0), seed=0, model="ncf", epochs=1).fit(
            Split(pairs, np.zeros(64, dtype=np.int64)), 5)
