"""ALIBI's training: the loss is the cross-entropy with the posterior of each label given
its release, under the model's own prediction held fixed; the fit charges one release of
every label. (That it reads the labels only through the release is the contract's replay
check.)"""
import math

import numpy as np
import pytest
import scipy.special

from benchmarks.contract import Budget, Split
from benchmarks.submission.contract_checks import tiny_data
from benchmarks.privacy import Ledger
from benchmarks.privacy.randomizers import laplace_one_hot, one_hot_log_likelihood
from methods.alibi import Alibi, posterior_cross_entropy

TINY = {"epochs": 1, "batch_size": 16}


def test_the_loss_is_cross_entropy_with_the_posterior_held_fixed():
    import tensorflow as tf

    rng = np.random.default_rng(0)
    released = laplace_one_hot(Ledger(), rng.integers(0, 5, 8), 5, 1.0, rng,
                               examples=np.arange(8))
    log_likelihood = one_hot_log_likelihood(released, 1.0).astype(np.float32)
    logits = tf.constant(rng.normal(size=(8, 5)).astype(np.float32))
    with tf.GradientTape() as tape:
        tape.watch(logits)
        loss = posterior_cross_entropy(tf.constant(log_likelihood), logits)
    log_p = scipy.special.log_softmax(logits.numpy().astype(np.float64), axis=1)
    posterior = scipy.special.softmax(log_p + log_likelihood, axis=1)
    np.testing.assert_allclose(loss.numpy(), -(posterior * log_p).sum(axis=1), rtol=1e-5)
    # With the target held fixed, the gradient of the cross-entropy is p - q; a gradient
    # through the prior would add terms.
    np.testing.assert_allclose(tape.gradient(loss, logits).numpy(),
                               np.exp(log_p) - posterior, atol=1e-6)


def tiny_fit(train: Split, k: int, epsilon: float = 1.0) -> Alibi:
    return Alibi(Budget(epsilon), seed=0, **TINY).fit(train, k)


def test_the_fit_charges_one_release_of_every_label():
    train, _, k = tiny_data("image", binary=False)
    model = tiny_fit(train, k)
    [charge] = model.ctx.ledger.charges
    assert charge.mechanism == "Laplace one-hot labels"
    np.testing.assert_array_equal(np.sort(charge.touches.examples), np.arange(len(train)))
    assert model.spent().epsilon == 1.0
    assert model.privacy_details() == {"laplace_scale": 2.0}


def test_at_infinite_epsilon_it_trains_on_the_one_hot_labels():
    train, test_x, k = tiny_data("image", binary=False)
    model = tiny_fit(train, k, epsilon=math.inf)
    proba = model.predict_proba(test_x)
    assert np.isfinite(proba).all()
    assert model.spent().epsilon == math.inf
    assert model.privacy_details() == {"laplace_scale": 0.0}


@pytest.mark.parametrize("name", ["epochs", "batch_size", "peak_lr", "momentum",
                                  "weight_decay"])
def test_the_papers_settings_are_the_defaults(name):
    assert Alibi.defaults[name] == {"epochs": 10, "batch_size": 1024, "peak_lr": 0.1,
                                    "momentum": 0.9, "weight_decay": 1e-4}[name]
