"""RR with self-supervised priors: the budget splits into the histogram release and the
randomisation, both on the ledger; the prior is a function of the inputs and the noisy
histograms only; the runner scores the priors on the test split."""
import math

import numpy as np
import pytest

from benchmarks import datasets
from benchmarks.context import RunContext
from benchmarks.contract import Budget, Split
from benchmarks.errors import InputError
from benchmarks.runner import prior_metrics
from methods import cluster_priors, lp_mst
from methods.ssl_priors import LP2STSSLPrior, RRSSLPrior

TINY = {"epochs": 1, "batch_size": 64, "clusters": 8, "encoder_epochs": 1}


@pytest.fixture(scope="module")
def digits():
    ds = datasets.load("digits")
    return Split(ds.train.x[:300], ds.train.y[:300]), Split(ds.test.x, ds.test.y)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """One data folder for the module, so the encoder trains once and is then loaded."""
    return tmp_path_factory.mktemp("data")


def fitted(method_class, train, data_dir, epsilon=2.0, **hparams):
    context = RunContext(seed=0, data_dir=data_dir)
    return method_class(Budget(epsilon), context=context, **{**TINY, **hparams}).fit(train, 10)


def recorded_priors(monkeypatch):
    """The priors of every RRWithPrior call LP-MST makes, in order."""
    calls = []
    real = lp_mst.rr_with_prior

    def recording(ledger, labels, priors, epsilon, rng, **charge):
        calls.append((priors.copy(), epsilon))
        return real(ledger, labels, priors, epsilon, rng, **charge)

    monkeypatch.setattr(lp_mst, "rr_with_prior", recording)
    return calls


@pytest.mark.parametrize("method_class", [RRSSLPrior, LP2STSSLPrior])
def test_both_parts_of_the_budget_are_charges_that_sum_to_the_epsilon(
        method_class, digits, data_dir):
    method = fitted(method_class, digits[0], data_dir, epsilon=2.0, epsilon_prior=0.25)
    histogram, *randomisations = method.ctx.ledger.charges
    assert histogram.mechanism == "noisy cluster histograms"
    np.testing.assert_array_equal(histogram.touches.examples, np.arange(300))
    assert histogram.cost.epsilon == 0.25
    assert len(randomisations) == method.stages
    assert all(charge.cost.epsilon == 1.75 for charge in randomisations)
    stages = np.sort(np.concatenate([charge.touches.examples for charge in randomisations]))
    np.testing.assert_array_equal(stages, np.arange(300))  # each label randomised once
    details = method.privacy_details()
    assert details["epsilon_prior"] + details["epsilon_rr"] == method.spent().epsilon == 2.0
    assert details["encoder"]["fingerprint"] and details["encoder"]["settings"]["epochs"] == 1


def test_the_prior_reads_the_noisy_histograms_not_the_labels(digits, data_dir, monkeypatch):
    """With the release replaced by a label-free table, other training labels must give
    bit-identical first-stage priors. A prior built from the noiseless histograms, or
    mixed with an example's own label, changes with the labels and fails here."""
    def release(ledger, labels, clusters, num_clusters, num_classes, epsilon, rng):
        return np.random.default_rng(7).dirichlet(np.ones(num_classes), num_clusters)

    monkeypatch.setattr(cluster_priors, "release_cluster_priors", release)
    calls = recorded_priors(monkeypatch)
    train = digits[0]
    method = fitted(RRSSLPrior, train, data_dir)
    garbage = np.random.default_rng(1).permutation(train.y)
    fitted(RRSSLPrior, Split(train.x, garbage), data_dir)
    (honest, _), (scrambled, _) = calls
    np.testing.assert_array_equal(honest, scrambled)
    # Each example's prior is its cluster's row of the released table.
    [stage_one] = [charge.touches.examples for charge in method.ctx.ledger.charges
                   if charge.mechanism == "RRWithPrior"]
    np.testing.assert_array_equal(honest, method.prior_table[method.clusters.train[stage_one]])


def test_the_histograms_are_released_at_epsilon_prior_from_the_training_labels(
        digits, data_dir, monkeypatch):
    seen = []
    real = cluster_priors.release_cluster_priors

    def spying(ledger, labels, clusters, num_clusters, num_classes, epsilon, rng):
        seen.append((labels.copy(), epsilon))
        return real(ledger, labels, clusters, num_clusters, num_classes, epsilon, rng)

    monkeypatch.setattr(cluster_priors, "release_cluster_priors", spying)
    fitted(LP2STSSLPrior, digits[0], data_dir, epsilon_prior=0.1)
    ((labels, epsilon),) = seen
    np.testing.assert_array_equal(labels, digits[0].y)
    assert epsilon == 0.1


def test_the_runner_scores_the_priors_on_the_evaluated_test_labels(digits, data_dir):
    method = fitted(RRSSLPrior, digits[0], data_dir)
    test = digits[1]
    metrics = prior_metrics(method, test)
    priors, rr_epsilon = method.public_priors(test.x)
    assert priors.shape == (len(test), 10) and rr_epsilon == method._rr_epsilon()
    top1 = 100 * np.mean(priors.argmax(1) == test.y)
    assert metrics["prior_top1_pct"] == pytest.approx(top1)
    assert metrics["prior_top1_pct"] <= metrics["prior_top_k_pct"] <= 100


@pytest.mark.parametrize("epsilon_prior", [0.0, 2.0, 3.0, -0.1, math.nan])
def test_epsilon_prior_must_leave_part_of_the_budget(epsilon_prior):
    with pytest.raises(InputError, match="epsilon_prior"):
        RRSSLPrior(Budget(2.0), epsilon_prior=epsilon_prior)


@pytest.mark.parametrize("hparams, word", [({"encoder": "vit"}, "encoder"),
                                           ({"clusters": 0}, "clusters")])
def test_bad_settings_are_refused(hparams, word):
    with pytest.raises(InputError, match=word):
        RRSSLPrior(Budget(2.0), **hparams)
