"""LP-MST spends its budget once per label: every true label goes through RRWithPrior
exactly once (parallel composition), and the stage partition ignores the labels."""
import math

import numpy as np
import pytest

from benchmarks import datasets
from benchmarks.contract import Budget, Split
from methods import lp_mst
from methods.lp_mst import LP2ST, LP3ST, per_epsilon_settings


@pytest.fixture(scope="module")
def tiny():
    ds = datasets.load("digits")
    return Split(ds.train.x[:300], ds.train.y[:300])


def recording_rr(monkeypatch):
    """Replace lp_mst's RRWithPrior by a recorder of each call's labels and priors."""
    calls = []
    real = lp_mst.rr_with_prior

    def recording(ledger, labels, priors, epsilon, rng, **charge):
        calls.append((labels.copy(), priors.copy(), epsilon))
        return real(ledger, labels, priors, epsilon, rng, **charge)

    monkeypatch.setattr(lp_mst, "rr_with_prior", recording)
    return calls


def test_every_example_is_randomized_exactly_once_and_charged(tiny, monkeypatch):
    """By example index: the charges' index sets partition the training set, and each
    stage randomizes exactly the labels of the examples its charge names, once."""
    calls = recording_rr(monkeypatch)
    method = LP3ST(Budget(2.0), seed=0, epochs=1, batch_size=64).fit(tiny, 10)
    charges = method.ctx.ledger.charges
    assert len(calls) == len(charges) == 3
    charged = np.concatenate([charge.touches.examples for charge in charges])
    np.testing.assert_array_equal(np.sort(charged), np.arange(len(tiny)))
    for (labels, _, epsilon), charge in zip(calls, charges):
        assert epsilon == charge.cost.epsilon == 2.0
        np.testing.assert_array_equal(labels, tiny.y[charge.touches.examples])
    # Stage 1 uses the uniform prior: plain randomized response.
    np.testing.assert_allclose(calls[0][1], 0.1)
    total = method.spent()
    assert (total.epsilon, total.delta, total.composition) == (2.0, 0.0, "pure")


@pytest.fixture(scope="module")
def honest_fits(tiny):
    """Each LP-MST class fitted once on the true labels, with its RRWithPrior calls."""
    fits = {}

    def honest_fit(method):
        if method not in fits:
            with pytest.MonkeyPatch.context() as patch:
                calls = recording_rr(patch)
                fitted = method(Budget(1.0), seed=0, epochs=1, batch_size=64).fit(tiny, 10)
            fits[method] = fitted, calls
        return fits[method]
    return honest_fit


@pytest.mark.parametrize("method, stage", [(LP2ST, 2), (LP3ST, 2), (LP3ST, 3)])
def test_a_stage_prior_never_reads_the_labels_of_its_stage_or_later(tiny, honest_fits,
                                                                     monkeypatch, method, stage):
    """Stage t's prior is the model trained on the earlier stages' released labels,
    predicting public inputs: changing the true labels of stage t's examples and of every
    later stage's must leave every stage-t prior unchanged (a prior mixed with the true
    label, e.g. 0.05 prior + 0.95 one-hot, at any one stage fails here)."""
    fitted, before = honest_fits(method)
    later = np.concatenate([charge.touches.examples
                            for charge in fitted.ctx.ledger.charges[stage - 1:]])
    relabelled = tiny.y.copy()
    relabelled[later] = (relabelled[later] + 1 + np.arange(len(later)) % 9) % 10
    calls = recording_rr(monkeypatch)
    method(Budget(1.0), seed=0, epochs=1, batch_size=64).fit(Split(tiny.x, relabelled), 10)
    for t in range(stage - 1):  # the earlier stages saw the same labels
        np.testing.assert_array_equal(calls[t][0], before[t][0])
    assert not np.array_equal(calls[stage - 1][0], before[stage - 1][0])  # this one's changed
    np.testing.assert_array_equal(calls[stage - 1][1], before[stage - 1][1])


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
    from benchmarks.metrics import evaluate

    rng = np.random.default_rng(0)
    pairs = np.stack([rng.integers(0, 50, 400), rng.integers(0, 80, 400)], 1)
    ratings = (pairs.sum(1) % 5).astype(np.int64)  # a learnable rule of the ids
    train, test = Split(pairs[:300], ratings[:300]), Split(pairs[300:], ratings[300:])
    method = LP2ST(Budget(4.0), seed=0, model="ncf", epochs=2, batch_size=64,
                   mixup_alpha=0.0, later_mixup_alpha=0.0).fit(train, 5)
    proba = method.predict_proba(test.x)
    metrics = evaluate("ratings", 5, test.y, proba)
    assert proba.shape == (100, 5) and 0 <= metrics["rmse"] <= 4


def test_mixup_on_index_inputs_is_one_clear_error():
    from methods.lp_mst import LP1ST

    pairs = np.zeros((64, 2), dtype=np.int64)
    with pytest.raises(ValueError, match="mixup blends inputs"):
        LP1ST(Budget(1.0), seed=0, model="ncf", epochs=1).fit(
            Split(pairs, np.zeros(64, dtype=np.int64)), 5)


def test_pre_training_on_the_public_set_then_label_dp_fine_tuning(tiny, monkeypatch):
    """Table 1's "pt" rows: non-private training on the public set first; its
    fingerprint is recorded, and only the private labels are charged."""
    from benchmarks import datasets
    from benchmarks.contract import Dataset
    from methods.lp_mst import LP1ST

    rng = np.random.default_rng(0)
    public = Split(rng.random((120, *tiny.x.shape[1:]), dtype=np.float32),
                   rng.integers(0, 4, 120))
    monkeypatch.setattr(datasets, "load", lambda name, data_dir=None: Dataset(
        name, "image", 4, public, public, fingerprint="public-test"))
    method = LP1ST(Budget(2.0), seed=0, epochs=1, batch_size=64, pretrain="cifar100",
                   pretrain_epochs=1).fit(tiny, 10)
    assert method.predict_proba(tiny.x[:5]).shape == (5, 10)
    assert method.ctx.datasets_used == {"cifar100": "public-test"}
    assert method.variant() == "pre-trained on CIFAR-100"
    [charge] = method.ctx.ledger.charges
    assert len(charge.touches.examples) == len(tiny)
