"""The dp-sgd method and its training loop: the ledger charges what the loop runs,
sampling, noise, refusals."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.contract import Budget, Split
from benchmarks.privacy import Ledger, Neighbours, SampledGaussian
from benchmarks.privacy.phantom_canaries import PhantomCanaries
from methods.dp_sgd import DPSGD

tf = pytest.importorskip("tensorflow")

from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum  # noqa: E402
from benchmarks.privacy import fast_clipping  # noqa: E402
from methods.nn import dp_training, models  # noqa: E402

dp_accounting = pytest.importorskip("dp_accounting")


def tiny_split(n=300, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = rng.random((n, 8, 8, 1), dtype=np.float32) * 0.5
    x[np.arange(n), y * 2, y * 2, 0] += 1.0  # a learnable mark per class
    return Split(x, y)


def independent_epsilon(sigma, rate, steps, delta):
    accountant = dp_accounting.rdp.RdpAccountant()
    accountant.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(rate, dp_accounting.GaussianDpEvent(sigma)), steps))
    return accountant.get_epsilon(delta)


class ObservedStep(dp_training.DPSGDStep):
    """The training loop's step, watched: how often it runs, the batches it samples and
    the noise it adds."""

    seen: list["ObservedStep"] = []

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.batch_sizes: list[int] = []
        compiled = self.step

        def counted():
            size, loss = compiled()
            self.batch_sizes.append(int(size))
            return size, loss

        self.step = counted
        ObservedStep.seen.append(self)


def test_the_ledger_charges_what_the_loop_runs(monkeypatch):
    """Recompute epsilon from what the loop did (steps run, realised sampling rate, noise
    added), independently of what it was told: a loop that runs more steps, samples at
    a higher rate or adds less noise than its charge says fails here."""
    ObservedStep.seen.clear()
    monkeypatch.setattr(dp_training, "DPSGDStep", ObservedStep)
    method = DPSGD(Budget(2.0, 1e-4), seed=3, epochs=3.0, batch_size=30)
    method.fit(tiny_split(), 3)
    [charge] = method.ctx.ledger.charges
    [step] = ObservedStep.seen
    assert isinstance(charge.cost, SampledGaussian)
    assert len(step.batch_sizes) == charge.cost.steps == 30
    realised = np.mean(step.batch_sizes) / 300
    spread = np.sqrt(charge.cost.sampling_rate * (1 - charge.cost.sampling_rate) / (300 * 30))
    assert abs(realised - charge.cost.sampling_rate) < 5 * spread
    mechanism = step.mechanism
    assert mechanism.noise_std == pytest.approx(charge.cost.noise_multiplier * mechanism.clip_norm)
    observed = independent_epsilon(mechanism.noise_std / mechanism.clip_norm, 30 / 300,
                                   len(step.batch_sizes), 1e-4)
    total = method.spent()
    assert total.epsilon == pytest.approx(observed, rel=1e-9)
    assert total.epsilon <= 2.0 and total.delta == 1e-4
    assert total.details["epsilon_pld"] <= total.epsilon
    assert method.privacy_details()["clip_norm"] == 1.0


def test_poisson_coins_are_float64():
    """A float32 uniform would round the sampling rate up slightly."""
    step = make_step(1.0)
    graph = tf.function(step.mechanism.batch).get_concrete_function().graph
    uniforms = [op for op in graph.get_operations() if "Uniform" in op.type]
    assert uniforms and all(op.get_attr("dtype") == tf.float64 for op in uniforms)


@pytest.mark.parametrize("budget, hparams, message", [
    (Budget(1.0, 1e-2), {}, "1/N"),  # delta >= 1/N for N = 300
    (Budget(1e-3, 1e-4), {"epochs": 50.0, "batch_size": 150}, "unmeetable"),
    (Budget(1.0, 1e-4), {"batch_size": 301}, "batch size"),
])
def test_unmeetable_budgets_stop_before_training(budget, hparams, message, monkeypatch):
    def no_training(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(dp_training, "fit", no_training)
    method = DPSGD(budget, seed=0, **hparams)
    with pytest.raises(ValueError, match=message):
        method.fit(tiny_split(), 3)
    assert method.ctx.ledger.charges == []


def test_batchnorm_is_refused_with_a_reason():
    with pytest.raises(ValueError, match="BatchNorm mixes the examples"):
        DPSGD(Budget(1.0, 1e-5), norm="batch")


def test_non_private_budget_is_skipped():
    assert "finite epsilon" in DPSGD.skip_reason("image", Budget(float("inf"), 1e-5))
    assert DPSGD.skip_reason("image", Budget(1.0, 1e-5)) is None


def make_step(noise_multiplier, sampling_rate=0.25, n=400, seed=0, steps=1000):
    split = tiny_split(n)
    tf.keras.utils.set_random_seed(seed)
    model = models.build("cnn", (8, 8, 1), 3, norm="group")
    mechanism = NoisyClippedSum(Ledger(), dataset_size=n, sampling_rate=sampling_rate,
                                noise_multiplier=noise_multiplier, clip_norm=0.5, steps=steps,
                                seed=seed)
    return dp_training.DPSGDStep(model, split.x, split.y, mechanism=mechanism,
                                 optimizer=tf.keras.optimizers.SGD(0.1))


def test_batches_are_poisson_samples():
    step = make_step(1.0, sampling_rate=0.25, n=400)
    draws = [step.mechanism.batch().numpy() for _ in range(400)]
    sizes = np.array([len(d) for d in draws])
    # Binomial(400, 0.25): mean 100, variance 75; a fixed-size sampler has variance 0.
    assert abs(sizes.mean() - 100) < 3 * np.sqrt(75 / len(sizes)) + 0.5
    assert 50 < sizes.var() < 110
    inclusion = np.bincount(np.concatenate(draws), minlength=400) / len(draws)
    assert abs(inclusion.mean() - 0.25) < 0.01
    assert all(len(np.unique(d)) == len(d) for d in draws)  # no example twice in a step


def test_update_is_noised_clipped_sum_over_the_expected_batch_size():
    step = make_step(noise_multiplier=4.0, sampling_rate=0.25, n=400)
    index = tf.range(37)  # a realised batch unlike the expected 100
    clipped, _, _ = tf.function(fast_clipping.clipped_gradient_sum)(
        step.model, step.mechanism.registry, tf.gather(step.x, index),
        tf.gather(step.labels, index),
        step.mechanism.clip_weights)
    noisy, _ = tf.function(step.noisy_mean_gradient)(index)
    noise = np.concatenate([(n.numpy() * 100 - c.numpy()).ravel()
                            for n, c in zip(noisy, clipped)])
    # The divisor is the expected batch 100, so the noise left is N(0, (sigma C)^2).
    assert abs(noise.mean()) < 0.01
    assert noise.std() == pytest.approx(4.0 * 0.5, rel=0.01)


@pytest.mark.integration  # pretrains, then fine-tunes: 9 s
def test_public_pretraining_then_private_fine_tuning(monkeypatch):
    from benchmarks import datasets
    from benchmarks.contract import Dataset

    public = tiny_split(200, seed=5)
    public = Split(public.x, (public.y + np.arange(200)) % 4)  # four public classes
    monkeypatch.setattr(datasets, "load", lambda name, data_dir=None: Dataset(
        name, "image", 4, public, public, fingerprint="public-test"))
    method = DPSGD(Budget(2.0, 1e-4), seed=0, epochs=1.0, batch_size=30,
                   pretrain="cifar100", pretrain_epochs=1)
    method.fit(tiny_split(), 3)
    assert method.predict_proba(tiny_split(4, seed=2).x).shape == (4, 3)
    assert method.privacy_details()["public_pretraining"] == "cifar100"
    assert method.ctx.datasets_used == {"cifar100": "public-test"}
    assert "pre-trained on cifar100" in method.variant()


def test_the_mechanism_charges_on_creation_and_runs_no_step_beyond_its_charge():
    ledger = Ledger()
    mechanism = NoisyClippedSum(ledger, dataset_size=40, sampling_rate=0.25,
                                noise_multiplier=2.0, clip_norm=0.5, steps=3, seed=0)
    [charge] = ledger.charges
    assert charge.cost == SampledGaussian(2.0, 0.25, 3)
    assert charge.details == {"clip_norm": 0.5, "sensitivity": 0.5, "dataset_size": 40}
    batch = tf.function(mechanism.batch)
    for _ in range(3):
        batch()
    with pytest.raises(tf.errors.InvalidArgumentError, match="more steps than its ledger"):
        batch()
    with pytest.raises(ValueError, match="needs the run's privacy ledger"):
        NoisyClippedSum(None, dataset_size=40, sampling_rate=0.25, noise_multiplier=2.0,
                        clip_norm=0.5, steps=3, seed=0)


def test_clip_weights_bound_every_examples_contribution_by_the_charged_norm():
    """The clipping and the charge read one C: no example's weighted gradient exceeds it."""
    mechanism = NoisyClippedSum(Ledger(), dataset_size=10, sampling_rate=0.5,
                                noise_multiplier=1.0, clip_norm=0.5, steps=1, seed=0)
    norms = tf.constant([0.0, 0.1, 0.5, 0.7, 2.0, 1e6])
    weighted = (mechanism.clip_weights(norms) * norms).numpy()
    assert weighted.max() <= 0.5 * (1 + 1e-6)
    np.testing.assert_allclose(weighted, [0.0, 0.1, 0.5, 0.5, 0.5, 0.5], rtol=1e-6)


# ----- the clipping is the mechanism's: a caller cannot rescale the norms -------------

class RescalesTheNorms(dp_training.DPSGDStep):
    """Broken on purpose, as a training step could once be: its own clip weights of a
    quarter of each norm (clipping at 4C, while the noise and the charge stay at C),
    handed to the mechanism."""

    def noisy_mean_gradient(self, index):
        grads, _, losses = fast_clipping.clipped_gradient_sum(
            self.model, self.mechanism.registry, tf.gather(self.x, index),
            tf.gather(self.labels, index),
            lambda norms: self.mechanism.clip_weights(norms / 4))
        return self.mechanism.noisy_mean(grads), tf.reduce_sum(losses)


def test_a_training_step_cannot_hand_the_mechanism_its_own_clipping():
    step = make_step(1.0, n=40)
    step.__class__ = RescalesTheNorms
    with pytest.raises(AttributeError, match="noisy_mean"):
        tf.function(step.noisy_mean_gradient)(tf.range(8))


class Watched(PhantomCanaries):
    """Phantom canaries that keep every step's release of their coordinates, in clip
    norms."""

    def __init__(self, coins, neighbours):
        super().__init__(coins, neighbours)
        self.released = []

    def observe(self, mechanism, released, sampling_rate, clip_norm, *noise):
        self.released.append(np.asarray(released)[:len(self)] / clip_norm)
        super().observe(mechanism, released, sampling_rate, clip_norm, *noise)


def noiseless_step(phantoms, sensitivity=1.0, clip_weights=None):
    """One step at sampling rate 1/2 without noise, the phantoms watched: what it
    released of them, in clip norms."""
    ledger = Ledger()
    ledger.phantoms = phantoms
    mechanism = NoisyClippedSum(ledger, dataset_size=40, sampling_rate=0.5,
                                noise_multiplier=1.0, clip_norm=0.5, steps=1, seed=0,
                                sensitivity=sensitivity)
    mechanism.noise_std = 0.0
    if clip_weights:
        mechanism.clip_weights = clip_weights(mechanism.clip_weights)
    split = tiny_split(40)
    model = tf.keras.Sequential([tf.keras.Input((8, 8, 1)), tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(3)])
    step = dp_training.DPSGDStep(model, split.x, split.y, mechanism=mechanism,
                                 optimizer=tf.keras.optimizers.SGD(0.1))
    step.step()
    [released] = phantoms.released
    return released


@pytest.mark.parametrize("rescaled", [False, True], ids=["honest", "norms-rescaled"])
def test_the_phantom_canaries_are_clipped_by_the_real_examples_path(rescaled):
    """Without noise, a sampled canary's release is its clipped gradient: C, or 4C when
    the clipping that every example goes through rescales the norms, so that the release
    audit reads the real examples' clipping, whatever it is."""
    four_times = (lambda real: lambda norms: real(norms / 4)) if rescaled else None
    released = noiseless_step(Watched(np.ones(200, bool), Neighbours.ADD_REMOVE),
                              clip_weights=four_times)
    assert set(np.round(released, 4)) == {0.0, 4.0 if rescaled else 1.0}


def test_the_phantoms_worlds_are_the_neighbouring_relations_not_the_sensitivity():
    """Under add/remove a phantom is in the set (C when sampled) or not (never sampled);
    under substitution every phantom is in the set and its coin gives its vector's
    direction: +C or -C when sampled. The sensitivity the mechanism is configured with
    (2 here, as under label substitution) moves nothing."""
    coins = np.arange(400) % 2 == 0
    added = noiseless_step(Watched(coins, Neighbours.ADD_REMOVE), sensitivity=2.0)
    assert set(np.round(added[coins], 4)) == {0.0, 1.0}
    assert set(np.round(added[~coins], 4)) == {0.0}
    replaced = noiseless_step(Watched(coins, Neighbours.SUBSTITUTION), sensitivity=2.0)
    assert set(np.round(replaced[coins], 4)) == {0.0, 1.0}
    assert set(np.round(replaced[~coins], 4)) == {0.0, -1.0}
