"""dp-sgd-scatternet: the scattering transform, its feature cache, the noisy
normalisation statistics (their guarantee over all outputs and neighbouring inputs),
their composition with DP-SGD, and the release audit at the suite's settings."""
from __future__ import annotations

import math
import threading
import warnings

import numpy as np
import pytest
from scipy import stats

from benchmarks.contract import Budget, Split
from benchmarks.context import RunContext
from benchmarks.privacy import Ledger, SampledGaussian, dp_sgd, noisy_clipped_mean, rdp
from benchmarks.privacy.noisy_clipped_mean import NoisyClippedMean, rdp_curve
from methods import dp_sgd_scatternet as scatternet
from methods.dp_sgd_scatternet import DPSGDScatterNet
from test_release_audit import noise_at_half

dp_accounting = pytest.importorskip("dp_accounting")


def images(n=4, side=28, colours=1, seed=0):
    return np.random.default_rng(seed).random((n, side, side, colours), dtype=np.float32)


# --- the transform ---------------------------------------------------------------

def test_the_scattering_of_a_few_images():
    """J = 2, L = 8: 1 + J L + L^2 J (J - 1) / 2 = 81 channels per colour on a grid a
    quarter of the side; a constant image has its value as the order-0 coefficient and
    nothing else; the transform is positively homogeneous (a modulus network with no
    bias); each colour is scattered alone."""
    x = images()
    out = scatternet.scatter(x)
    assert out.shape == (4, 7, 7, 81) and out.dtype == np.float32
    flat = scatternet.scatter(np.full((1, 28, 28, 1), 0.5, np.float32))
    np.testing.assert_allclose(flat[..., 0], 0.5, atol=1e-4)
    np.testing.assert_allclose(flat[..., 1:], 0.0, atol=1e-4)
    np.testing.assert_allclose(scatternet.scatter(0.5 * x), 0.5 * out, rtol=1e-4, atol=1e-6)
    colour = images(2, 16, 3)
    both = scatternet.scatter(colour)
    assert both.shape == (2, 4, 4, 243)
    np.testing.assert_allclose(both[..., 81:162], scatternet.scatter(colour[..., 1:2])[..., :81],
                               rtol=1e-5, atol=1e-7)


def test_batches_of_the_transform_match_one_call(monkeypatch):
    x = images(5)
    whole = scatternet.scatter(x)
    monkeypatch.setattr(scatternet, "_BATCH", 2)
    np.testing.assert_array_equal(scatternet.scatter(x), whole)


# --- the cache -------------------------------------------------------------------

def counting_scatter(monkeypatch):
    calls = []
    real = scatternet.scatter

    def counted(x):
        calls.append(len(x))
        return real(x)

    monkeypatch.setattr(scatternet, "scatter", counted)
    return calls


def test_features_are_computed_once_and_reused(tmp_path, monkeypatch):
    calls = counting_scatter(monkeypatch)
    x = images(3)
    first = scatternet.features(x, data_dir=tmp_path)
    again = scatternet.features(x, data_dir=tmp_path)
    assert calls == [3] and not first.cached and again.cached
    np.testing.assert_array_equal(first.values, again.values)
    assert again.seconds == first.seconds  # the time of the computation that made it
    other = scatternet.features(images(3, seed=1), data_dir=tmp_path)
    assert calls == [3, 3] and not other.cached  # other images, another entry
    assert len(list(scatternet.cache_folder(tmp_path).glob("*.npz"))) == 2


def test_a_set_that_extends_a_cached_one_computes_only_its_last_entries(tmp_path,
                                                                          monkeypatch):
    """An audited twin's training set is its cell's, then its canaries: the entries of
    the cell's images are found, and the features are those of the whole set at once."""
    calls = counting_scatter(monkeypatch)
    monkeypatch.setattr(scatternet, "_CHUNK", 2)
    x, canaries = images(5), images(2, seed=1)
    cell = scatternet.features(x, data_dir=tmp_path)
    assert calls == [2, 2, 1] and not cell.cached
    twin = scatternet.features(np.concatenate([x, canaries]), data_dir=tmp_path)
    assert calls == [2, 2, 1, 2, 1] and not twin.cached  # the last 3 images, in 2 entries
    np.testing.assert_array_equal(twin.values, scatternet.scatter(np.concatenate([x, canaries])))
    assert scatternet.features(x, data_dir=tmp_path).cached


@pytest.mark.integration  # two fits
def test_a_fit_reuses_the_cached_features(tmp_path, monkeypatch):
    calls = counting_scatter(monkeypatch)
    train = Split(images(40, seed=2), np.arange(40) % 2)
    for _ in range(2):
        method = DPSGDScatterNet(Budget(4.0, 1e-3), context=RunContext(data_dir=tmp_path),
                                 epochs=1.0, batch_size=10, norm="group")
        method.fit(train, 2)
        method.predict_proba(images(6, seed=3))
    assert calls == [40, 6]  # training and test images, each computed once


def test_a_corrupt_entry_is_computed_anew(tmp_path, monkeypatch):
    x = images(2)
    first = scatternet.features(x, data_dir=tmp_path)
    [path] = scatternet.cache_folder(tmp_path).glob("*.npz")
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.warns(UserWarning, match="ignoring ScatterNet cache"):
        again = scatternet.features(x, data_dir=tmp_path)
    assert not again.cached
    np.testing.assert_array_equal(again.values, first.values)


def test_two_builders_at_once_compute_one_whole_entry(tmp_path, monkeypatch):
    """Both ask at once: one computes the entry under its lock, the other waits for it
    and loads it; no reader ever finds a partial entry."""
    real, computed = scatternet.scatter, []
    monkeypatch.setattr(scatternet, "scatter", lambda x: computed.append(1) or real(x))
    x = images(2)
    both_asking = threading.Barrier(2)
    results = []

    def ask() -> None:
        both_asking.wait(timeout=30)
        results.append(scatternet.features(x, data_dir=tmp_path))

    workers = [threading.Thread(target=ask) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(r.cached for r in results) == [False, True] and computed == [1]
    assert [p.name for p in scatternet.cache_folder(tmp_path).iterdir()
            if p.name.startswith(".tmp-")] == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert scatternet.features(x, data_dir=tmp_path).cached


# --- the noisy normalisation statistics ------------------------------------------

def gaussian_delta(epsilon: float, sensitivity: float, std: float) -> float:
    """The exact privacy profile of the Gaussian mechanism (Balle and Wang 2018, Thm 8):
    the smallest delta for which N(0, std^2) and N(sensitivity, std^2) are
    (epsilon, delta)-indistinguishable over every set of outputs."""
    a, b = sensitivity / (2 * std), epsilon * std / sensitivity
    return stats.norm.cdf(a - b) - math.exp(epsilon) * stats.norm.cdf(-a - b)


def worst_neighbours(rng, n=50, d=6):
    """Datasets and their add/remove neighbours, with rows far beyond the clip norm,
    inside it, and zero."""
    data = rng.normal(size=(n, d)) * rng.choice([1e-3, 0.3, 1.0, 50.0], size=(n, 1))
    data[0] = 0
    for i in range(n):
        yield data, np.delete(data, i, axis=0)


@pytest.mark.parametrize("sigma", [0.5, 2.0, 8.0])
def test_the_statistics_release_is_dp_over_all_outputs_and_neighbours(sigma):
    """The release is clipped_sum / N + N(0, (sigma C / N)^2): for every pair of
    neighbouring datasets the deterministic parts differ by at most C, so the release is
    the Gaussian mechanism at sensitivity <= C. Its exact profile at the ledger's
    epsilon stays within the ledger's delta, and the RDP charged is that of the Gaussian
    mechanism, alpha / (2 sigma^2), computed here without dp_accounting."""
    clip = 0.7
    ledger = Ledger()
    mechanism = NoisyClippedMean(ledger, dataset_size=50, clip_norm=clip,
                                 noise_multiplier=sigma, rng=np.random.default_rng(0),
                                 what="test")
    worst = max(np.linalg.norm(mechanism.clipped_sum(a) - mechanism.clipped_sum(b))
                for a, b in worst_neighbours(np.random.default_rng(1)))
    assert worst <= clip * (1 + 1e-12)
    [charge] = ledger.charges
    assert charge.cost == SampledGaussian(sigma, 1.0, 1)
    np.testing.assert_allclose(charge.cost.curve(), rdp.ORDERS / (2 * sigma ** 2), rtol=1e-9)
    for delta in (1e-5, 1e-3):
        epsilon = ledger.total(DPSGDScatterNet.notion, delta).epsilon
        assert gaussian_delta(epsilon, worst, mechanism.noise_std) <= delta


def test_the_noise_drawn_is_the_noise_charged():
    n, d, sigma, clip = 20, 4000, 3.0, 0.5
    rng = np.random.default_rng(5)
    data = rng.normal(size=(n, d)) * 0.01
    mechanism = NoisyClippedMean(Ledger(), dataset_size=n, clip_norm=clip,
                                 noise_multiplier=sigma, rng=rng, what="test")
    noise = mechanism.release(data) * n - mechanism.clipped_sum(data)
    assert stats.kstest(noise / (sigma * clip), "norm").pvalue > 1e-3


def test_one_release_per_charge():
    mechanism = NoisyClippedMean(Ledger(), dataset_size=3, clip_norm=1.0,
                                 noise_multiplier=1.0, rng=np.random.default_rng(0), what="t")
    mechanism.release(np.ones((3, 2)))
    with pytest.raises(RuntimeError, match="released already"):
        mechanism.release(np.ones((3, 2)))
    with pytest.raises(ValueError, match="charged for 3 examples"):
        NoisyClippedMean(Ledger(), dataset_size=3, clip_norm=1.0, noise_multiplier=1.0,
                         rng=np.random.default_rng(0), what="t").release(np.ones((4, 2)))


class Unclipped(NoisyClippedMean):
    """Broken on purpose: sums the vectors as they are."""

    def clipped_sum(self, vectors):
        return np.asarray(vectors, dtype=np.float64).sum(axis=0)


def test_the_checks_catch_a_release_without_clipping():
    """Its charge is the honest one's, but a neighbour moves its sum by far more than C:
    the exact profile at the charged epsilon exceeds the charged delta."""
    ledger = Ledger()
    mechanism = Unclipped(ledger, dataset_size=50, clip_norm=0.7, noise_multiplier=1.0,
                          rng=np.random.default_rng(0), what="test")
    worst = max(np.linalg.norm(mechanism.clipped_sum(a) - mechanism.clipped_sum(b))
                for a, b in worst_neighbours(np.random.default_rng(1)))
    assert worst > 0.7
    epsilon = ledger.total(DPSGDScatterNet.notion, 1e-5).epsilon
    assert gaussian_delta(epsilon, worst, mechanism.noise_std) > 1e-5


# --- the method: composition and audit -------------------------------------------

def independent_epsilon(norm_sigma, sigma, rate, steps, delta):
    accountant = dp_accounting.rdp.RdpAccountant(list(rdp.ORDERS))
    accountant.compose(dp_accounting.GaussianDpEvent(norm_sigma), 2)
    accountant.compose(dp_accounting.PoissonSampledDpEvent(
        rate, dp_accounting.GaussianDpEvent(sigma)), steps)
    return accountant.get_epsilon(delta)


def tiny(n=200, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    x = rng.random((n, 12, 12, 1), dtype=np.float32) * 0.3
    x[y == 1, 2:6, 2:6] += 0.7
    return Split(x, y)


def test_data_normalisation_is_charged_and_composed_with_dp_sgd(tmp_path):
    """Two statistics released, then DP-SGD calibrated to what they leave: the ledger
    composes the three charges to the budget, as dp_accounting does on its own."""
    method = DPSGDScatterNet(Budget(3.0, 1e-5), context=RunContext(data_dir=tmp_path),
                             epochs=2.0, batch_size=40, peak_lr=1.0)
    method.fit(tiny(), 2)
    charges = method.ctx.ledger.charges
    assert [c.mechanism for c in charges] == ["Gaussian mean of clipped vectors"] * 2 + [
        "DP-SGD (Poisson-sampled Gaussian)"]
    sigma = charges[2].cost.noise_multiplier
    total = method.spent()
    assert total.epsilon <= 3.0
    assert total.epsilon == pytest.approx(
        independent_epsilon(8.0, sigma, 40 / 200, 10, 1e-5), rel=1e-6)
    alone = dp_sgd.calibrate(3.0, 1e-5, 200, 40, 2.0)["noise_multiplier"]
    assert sigma > alone  # the statistics took part of the budget
    proba = method.predict_proba(tiny(30, seed=1).x)
    assert proba.shape == (30, 2)


def test_group_normalisation_releases_nothing_beyond_dp_sgd(tmp_path):
    method = DPSGDScatterNet(Budget(3.0, 1e-5), context=RunContext(data_dir=tmp_path),
                             epochs=1.0, batch_size=40, norm="group")
    method.fit(tiny(), 2)
    assert [c.mechanism for c in method.ctx.ledger.charges] == [
        "DP-SGD (Poisson-sampled Gaussian)"]


def test_group_normalisation_is_per_example_and_per_group():
    x = scatternet.scatter(images(3))
    normalised = scatternet.group_normalise(x, 27)
    groups = normalised.reshape(3, 49, 27, 3)
    raw = x.reshape(3, 49, 27, 3).astype(np.float64).var(axis=(1, 3))
    np.testing.assert_allclose(groups.mean(axis=(1, 3)), 0, atol=1e-4)
    np.testing.assert_allclose(groups.var(axis=(1, 3)), raw / (raw + 1e-5), rtol=1e-3)
    np.testing.assert_allclose(scatternet.group_normalise(x[1:2], 27), normalised[1:2],
                               rtol=1e-6)


@pytest.mark.parametrize("hparams, message", [
    ({"norm": "batch"}, "norm must be one of"),
    ({"groups": 0}, "groups must be a positive integer"),
    ({"norm_noise_multiplier": 0}, "norm_noise_multiplier must be a number > 0"),
    ({"norm_clip": -1.0}, "norm_clip must be a number > 0"),
    ({"clip_norm": 0}, "clip_norm must be > 0"),
])
def test_bad_settings_are_refused(hparams, message):
    from benchmarks.errors import InputError

    with pytest.raises(InputError, match=message):
        DPSGDScatterNet(Budget(3.0, 1e-5), **hparams)


def test_a_budget_the_statistics_alone_exceed_stops_before_training():
    from benchmarks.errors import InputError

    method = DPSGDScatterNet(Budget(0.2, 1e-5), norm_noise_multiplier=2.0)
    with pytest.raises(InputError, match="unmeetable"):
        method.calibration(60_000)


# The settings of the ScatterNet suite's audited cells (epsilon 1): the paper's MNIST
# setting (the defaults) with the statistics' noise scaled by 3 / epsilon, and its
# Fashion-MNIST setting.
SUITE_AUDITED = {"mnist": {"norm_noise_multiplier": 24.0},
                 "fashion-mnist": {"batch_size": 8192, "peak_lr": 16.0, "norm": "group"}}


def suite_cell(dataset, epsilon):
    from benchmarks.suites import Cell

    return Cell("scatternet", dataset, "dp-sgd-scatternet", epsilon, 1e-5, 0,
                DPSGDScatterNet.defaults | SUITE_AUDITED[dataset], audit=True)


@pytest.mark.parametrize("dataset", ["mnist", "fashion-mnist"])
def test_the_release_audit_runs_the_statistics_then_the_calibrated_steps(dataset, monkeypatch):
    """The audit runs the releases the method would run: MNIST's noisy statistics, whose
    phantom coordinates it reads too, then DP-SGD at the calibration they leave; the
    claim it tests is every charge, composed."""
    pytest.importorskip("tensorflow")
    from benchmarks.audit import dp_sgd_release

    cell = suite_cell(dataset, 1.0)
    seen = []
    monkeypatch.setattr(dp_sgd_release, "phantom_audit",
                        lambda phantoms, claim, confidence, checks:
                        seen.append((phantoms, claim)) or {"claim_test": None})
    dp_sgd_release.audit_cell_release(cell, phantoms=1000)
    [(phantoms, claim)] = seen
    calibration = DPSGDScatterNet(cell.budget, **cell.hparams).calibration(60_000)
    costs = [charge.cost for charge in claim.charges]
    assert costs[-1] == SampledGaussian(calibration["noise_multiplier"],
                                        calibration["sampling_rate"], calibration["steps"])
    alone = dp_sgd.calibrate(1.0, 1e-5, 60_000, cell.hparams["batch_size"], 40.0)
    if dataset == "mnist":
        assert costs[:-1] == [SampledGaussian(24.0, 1.0, 1)] * 2
        assert phantoms.where == ["Gaussian mean of clipped vectors", "DP-SGD noisy clipped sum"]
        assert calibration["noise_multiplier"] > alone["noise_multiplier"]
    else:
        assert len(costs) == 1 and phantoms.where == ["DP-SGD noisy clipped sum"]
        assert calibration["noise_multiplier"] == alone["noise_multiplier"]
    assert phantoms.steps == calibration["steps"] + 2 * (dataset == "mnist")
    assert claim.epsilon() <= 1.0  # the PLD composition, below the RDP one the budget caps


def suite_release(dataset: str) -> dict:
    from benchmarks.audit import dp_sgd_release

    return dp_sgd_release.audit_cell_release(suite_cell(dataset, 1.0), seed=1, phantoms=50_000)


@pytest.mark.integration
@pytest.mark.parametrize("dataset", ["mnist", "fashion-mnist"])
def test_halved_dp_sgd_noise_is_flagged_at_the_suites_setting(dataset, monkeypatch):
    """The suite's audited cells (epsilon 1), their releases alone: honest, the claimed
    curve is not rejected and the bound stays below the claim; with DP-SGD's noise
    halved the curve is rejected."""
    pytest.importorskip("tensorflow")
    honest = suite_release(dataset)
    assert honest["epsilon_lower_bound"] <= 1.0 and not honest["claim_test"]["rejected"], honest
    noise_at_half(monkeypatch)
    assert suite_release(dataset)["claim_test"]["rejected"]


@pytest.mark.integration
def test_noiseless_statistics_are_flagged_at_the_suites_mnist_setting(monkeypatch):
    """The phantoms go through the data normalisation's release too: statistics released
    without their noise give every phantom away."""
    pytest.importorskip("tensorflow")
    real = noisy_clipped_mean.NoisyClippedMean.__init__

    def noiseless(self, *args, **kwargs):
        real(self, *args, **kwargs)
        self.noise_std = 0.0

    monkeypatch.setattr(noisy_clipped_mean.NoisyClippedMean, "__init__", noiseless)
    tested = suite_release("mnist")["claim_test"]
    assert tested["rejected"] and tested["correct"] == tested["guesses"], tested


@pytest.mark.integration  # trains an audited cell: 11 s
def test_an_audited_fit_reads_its_noisy_steps():
    pytest.importorskip("tensorflow")
    from benchmarks import datasets
    from benchmarks.audit.training import audit_training

    result = audit_training("dp-sgd-scatternet", datasets.load("digits"), Budget(2.0, 1e-5),
                            {"epochs": 1.0, "batch_size": 64, "norm": "group", "groups": 1},
                            RunContext(seed=0), canaries=400)
    assert result.release["where"] == ["DP-SGD noisy clipped sum"]
    assert not result.flagged


def test_rdp_curve_is_the_charges_sum():
    ledger = Ledger()
    for _ in range(2):
        NoisyClippedMean(ledger, dataset_size=5, clip_norm=1.0, noise_multiplier=8.0,
                         rng=np.random.default_rng(0), what="t")
    summed = sum(c.cost.curve() for c in ledger.charges)
    np.testing.assert_allclose(rdp_curve(8.0, releases=2), summed, rtol=1e-12)
