"""The audit at the release: the canaries' labels as the privacy layer's label mechanisms
released them. An honest cell's bound stays below its claim and near it; a cell whose
randomisation is removed, or runs at three times its epsilon while charging one, is
flagged at the release, whatever its training (one epoch here: the model audit sees
nothing of it)."""
from __future__ import annotations

import re

import numpy as np
import pytest

from benchmarks import datasets
from benchmarks.audit import levels
from benchmarks.audit.training import audit_training
from benchmarks.context import RunContext
from benchmarks.contract import Budget
from benchmarks.privacy import randomizers
from benchmarks.registry import get_method

CANARIES = 400
# (method, dataset, hparams): the cheapest settings that release every label once.
LP_1ST = ("lp-1st", "digits", {"epochs": 1, "batch_size": 64})
RR_SSL = ("rr-ssl-prior", "digits", {"epochs": 1, "batch_size": 64, "clusters": 10,
                                     "encoder_epochs": 1})
SPREAD_LR = ("spread-lr", "digits-7v9", {"samples": 2, "em_iterations": 1, "mstep_steps": 5})
ALIBI = ("alibi", "digits", {"epochs": 1, "batch_size": 64})


def audited(cell, epsilon: float):
    method, dataset, hparams = cell
    return audit_training(method, datasets.load(dataset), Budget(epsilon), hparams,
                          RunContext(seed=0), canaries=CANARIES)


def no_randomisation(monkeypatch):
    monkeypatch.setattr(randomizers, "_randomize",
                        lambda labels, priors, k, epsilon, rng: labels.copy())


def three_times_epsilon(monkeypatch):
    real = randomizers._randomize
    monkeypatch.setattr(randomizers, "_randomize", lambda labels, priors, k, epsilon, rng:
                        real(labels, priors, k, 3 * epsilon, rng))


def no_label_flip(monkeypatch):
    from benchmarks.privacy import local_randomizers

    monkeypatch.setattr(local_randomizers, "flip_labels",
                        lambda labels, p_f, rng: np.asarray(labels).copy())


def test_an_honest_lp_1st_is_audited_at_its_release_near_its_claim():
    result = audited(LP_1ST, 2.0)
    release = result.release
    assert release["where"] == ["RRWithPrior (stage 1 of 1)"]
    assert not result.flagged
    assert 0.6 * 2.0 < release["epsilon_lower_bound"] <= 2.0, release
    assert release["guesses"] < CANARIES  # abstentions: released as a third class


def test_an_honest_ssl_prior_is_audited_at_its_release_near_its_claim():
    """The canaries' clusters learn their one pair of classes from the noisy histograms,
    so RRWithPrior releases each canary's label among those two, with all its epsilon."""
    result = audited(RR_SSL, 2.0)
    assert not result.flagged
    assert 0.7 * 2.0 < result.release["epsilon_lower_bound"] <= 2.0, result.release


@pytest.mark.parametrize("cell, epsilon, break_it", [
    (LP_1ST, 1.0, no_randomisation),
    (LP_1ST, 1.0, three_times_epsilon),
    (RR_SSL, 2.0, no_randomisation),
    (SPREAD_LR, 1.0, no_label_flip),
], ids=["lp-1st-no-rr", "lp-1st-3eps", "rr-ssl-prior-no-rr", "spread-lr-no-flip"])
def test_a_broken_release_is_flagged_at_the_release(cell, epsilon, break_it, monkeypatch):
    break_it(monkeypatch)
    result = audited(cell, epsilon)
    assert result.flagged
    assert result.release["epsilon_lower_bound"] > epsilon, result.release


def half_the_erm_noise(monkeypatch):
    from benchmarks.privacy import erm_noise

    real = erm_noise.sample_norm_exponential_noise
    monkeypatch.setattr(erm_noise, "sample_norm_exponential_noise",
                        lambda dim, beta, rng: real(dim, beta, rng) / 2)


@pytest.mark.parametrize("method", ["dp-erm-objective", "dp-erm-output"])
def test_dp_erm_noise_is_checked_at_the_cells_setting(method, monkeypatch):
    """DP-ERM releases its weights, the model: its audit at the release is the model's,
    and its noise is also drawn again at the charged setting. Honest noise passes; half
    of it fails (on the smallest tabular set: the check reads the charged setting alone)."""
    data = datasets.load("breast-cancer")
    honest = audit_training(method, data, Budget(1.0), {}, RunContext(seed=0))
    mechanism = method.removeprefix("dp-erm-") + " perturbation"
    assert honest.release["where"] == [mechanism]
    assert honest.release["epsilon_lower_bound"] == honest.epsilon_lower_bound
    assert [c["flagged"] for c in honest.noise_checks] == [False], honest.noise_checks
    half_the_erm_noise(monkeypatch)
    broken = audit_training(method, data, Budget(1.0), {}, RunContext(seed=0))
    assert broken.flagged and broken.noise_checks[0]["flagged"], broken.noise_checks


def pate_aggregation(suite: str, method: str, break_it=None, monkeypatch=None):
    """The noise checks of a PATE cell of ``suite`` (its audited one, if it has one): its
    aggregator at the cell's hyperparameters (its calibrated noise), on stand-in votes of
    its query count."""
    from benchmarks.privacy import noise_checks
    from benchmarks.suites import load_suite

    cells = [c for c in load_suite(suite).cells if c.method == method]
    cell = next((c for c in cells if c.audit), cells[0])
    model = get_method(cell.method)(Budget(cell.epsilon, cell.delta), **cell.hparams)
    if break_it:
        break_it(monkeypatch)
    model._aggregate(np.tile([150, 100] + [0] * 8, (cell.hparams["queries"], 1)))
    return noise_checks.check_ledger(model.ctx.ledger, np.random.default_rng(0))


def quick_pate_aggregation(break_it=None, monkeypatch=None):
    return pate_aggregation("quick", "pate-confident-gnmax", break_it, monkeypatch)


def pate_level(checks) -> float:
    """Each of a PATE twin's noise checks' level: its share of the verdict's 5%."""
    return levels.noise_check_level({"release": None}, levels.FAMILY_WISE_LEVEL, len(checks))


def gnmax_at_half_sigma(monkeypatch):
    from benchmarks.privacy import aggregators

    real = aggregators._gnmax
    monkeypatch.setattr(aggregators, "_gnmax", lambda v, sigma, rng: real(v, sigma / 2, rng))


def threshold_check_at_half_sigma1(monkeypatch):
    from benchmarks.privacy import aggregators

    real = aggregators._passes
    monkeypatch.setattr(aggregators, "_passes",
                        lambda v, threshold, sigma1, rng: real(v, threshold, sigma1 / 2, rng))


def lnmax_at_twice_gamma(monkeypatch):
    from benchmarks.privacy import aggregators

    real = aggregators._lnmax
    monkeypatch.setattr(aggregators, "_lnmax", lambda v, gamma, rng: real(v, 2 * gamma, rng))


def test_the_quick_suites_pate_noise_passes_its_check():
    checks = quick_pate_aggregation()
    assert [(c.mechanism, c.flagged(pate_level(checks))) for c in checks] == [
        ("Confident-GNMax threshold check (every query asked)", False),
        ("GNMax (answered queries)", False)]


@pytest.mark.parametrize("break_it, broken", [
    (gnmax_at_half_sigma, "GNMax (answered queries)"),
    (threshold_check_at_half_sigma1, "Confident-GNMax threshold check (every query asked)"),
], ids=["gnmax-sigma2/2", "threshold-sigma1/2"])
def test_pate_noise_below_its_charge_is_flagged_at_the_quick_suites_setting(
        monkeypatch, break_it, broken):
    checks = quick_pate_aggregation(break_it, monkeypatch)
    assert {c.mechanism for c in checks if c.flagged(pate_level(checks))} == {broken}, checks


def test_lnmax_is_checked_at_the_paper_suites_setting(monkeypatch):
    [honest] = pate_aggregation("paper", "pate-lnmax")
    assert honest.mechanism == "LNMax" and not honest.flagged(pate_level([honest])), honest
    [broken] = pate_aggregation("paper", "pate-lnmax", lnmax_at_twice_gamma, monkeypatch)
    assert broken.flagged(pate_level([broken])), broken


def test_each_aggregator_check_states_its_honest_rate(monkeypatch):
    """With many probes the measured rate of each honest check is its stated one: the
    closed forms the p-values rest on are right."""
    from benchmarks.privacy import aggregators, noise_checks
    from benchmarks.privacy.ledger import Ledger

    monkeypatch.setattr(aggregators, "PROBES", 200_000)
    ledger = Ledger()
    votes = np.tile([150, 100] + [0] * 8, (20, 1))
    aggregators.lnmax(ledger, votes, 0.05, np.random.default_rng(1))
    aggregators.gnmax(ledger, votes, 40.0, np.random.default_rng(2))
    aggregators.confident_gnmax(ledger, votes, 150.0, 100.0, 40.0, np.random.default_rng(3))
    checks = noise_checks.check_ledger(ledger, np.random.default_rng(4))
    assert len(checks) == 4
    for check in checks:
        measured, expected = re.match(r"(\d+) of 200000 .*\(([\d.]+) expected\)",
                                      check.measured).groups()
        assert int(measured) == pytest.approx(float(expected), rel=0.03), check


# ----- DP-SGD: phantom gradient canaries in the noisy clipped sum ----------------------

# Enough to reject halved noise at the quick and label-dp-small settings (their twins
# plant 500,000).
PHANTOMS = 20_000


def quick_dp_sgd_release(break_it=None, monkeypatch=None) -> dict:
    """The audited DP-SGD cell of the quick suite, its release alone (its dataset size,
    sampling, clip norm, noise and steps), at the release audit's fixed guess share."""
    from benchmarks.audit import dp_sgd_release
    from benchmarks.suites import load_suite

    cell = next(c for c in load_suite("quick").cells if c.method == "dp-sgd" and c.audit)
    if break_it:
        break_it(monkeypatch)
    return dp_sgd_release.audit_cell_release(cell, seed=1, phantoms=PHANTOMS) | {
        "claim": cell.epsilon}


def clipping_at_4c(monkeypatch):
    from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum

    import tensorflow as tf

    monkeypatch.setattr(NoisyClippedSum, "clip_weights", lambda self, norms: (
        4 * self.clip_norm / tf.math.maximum(4 * self.clip_norm, norms)))


def noise_at_half(monkeypatch):
    from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum

    real = NoisyClippedSum.__init__

    def halved(self, *args, **kwargs):
        real(self, *args, **kwargs)
        self.noise_std /= 2

    monkeypatch.setattr(NoisyClippedSum, "__init__", halved)


def rejected(release: dict) -> bool:
    """The release's claimed curve is rejected, and its empirical epsilon exceeds the
    claim's: the twin is flagged."""
    tested = release["claim_test"]
    return tested["rejected"] and tested["empirical_epsilon"] > tested["claimed_epsilon"]


@pytest.mark.integration
@pytest.mark.parametrize("break_it", [clipping_at_4c, noise_at_half],
                         ids=["clip-4C-noise-for-C", "noise-sigma/2"])
def test_a_broken_dp_sgd_release_is_flagged_at_the_quick_suites_setting(break_it, monkeypatch):
    assert rejected(quick_dp_sgd_release(break_it, monkeypatch))


@pytest.mark.integration  # trains an audited cell: 13 s
def test_a_dp_sgd_cells_audit_reads_its_noisy_steps():
    """The audited twin plants the phantoms on its run's ledger; the mechanism of the
    run observes them, and the record says where and on how many. An honest cell is not
    flagged (its power: python -m speed.bench_audit_power)."""
    result = audit_training("dp-sgd", datasets.load("digits"), Budget(2.0, 1e-5),
                            {"epochs": 1.0, "batch_size": 64}, RunContext(seed=0),
                            canaries=CANARIES)
    release = result.release
    assert release["where"] == ["DP-SGD noisy clipped sum"]
    assert release["canaries"] == 100_000 and release["guesses"] == 1000  # Steinke et al.
    tested = release["claim_test"]
    assert tested["canaries"] == 500_000 and tested["guesses"] == [1000]
    assert tested["claim"].startswith("DP-SGD (Poisson-sampled Gaussian): noise multiplier ")
    assert not result.flagged and not tested["rejected"]


# ----- LabelDP-Pro: the same phantoms in its noisy clipped sum, at sensitivity 2C --------

def label_dp_small_labeldp_pro_release(break_it=None, monkeypatch=None) -> dict:
    """The audited LabelDP-Pro cell of label-dp-small, its release alone: DP-SGD's sum at
    the cell's setting, clipped at C, noised and audited at the substitution
    sensitivity 2C."""
    from benchmarks.audit import dp_sgd_release
    from benchmarks.suites import load_suite

    cell = next(c for c in load_suite("label-dp-small").cells
                if c.method == "labeldp-pro" and c.audit)
    if break_it:
        break_it(monkeypatch)
    return dp_sgd_release.audit_cell_release(cell, seed=1, phantoms=PHANTOMS) | {
        "claim": cell.epsilon}


def test_labeldp_pros_release_is_audited_at_2c_and_passes_honest():
    release = label_dp_small_labeldp_pro_release()
    assert release["where"] == ["DP-SGD noisy clipped sum"]
    assert release["epsilon_lower_bound"] <= release["claim"], release
    assert not release["claim_test"]["rejected"], release


@pytest.mark.integration
def test_labeldp_pro_with_its_dp_sgd_noise_halved_is_flagged_at_label_dp_smalls_setting(
        monkeypatch):
    assert rejected(label_dp_small_labeldp_pro_release(noise_at_half, monkeypatch))


@pytest.mark.integration  # trains an audited cell: 12 s
def test_a_labeldp_pro_cells_audit_reads_its_noisy_steps():
    """Label canaries for the model, and phantom gradients in its noisy clipped sum, at
    seed 1 (at seed 0 the check of its real coordinates' noise has p = 0.004, below its
    0.5%: one of the honest runs a level of 0.5% flags; at seeds 1 and 2, 0.14 and 0.95)."""
    result = audit_training("labeldp-pro", datasets.load("digits"), Budget(2.0, 1e-5),
                            {"epochs": 1.0, "batch_size": 64, "alt_batch": 4,
                             "projection_steps": 5}, RunContext(seed=1), canaries=CANARIES)
    assert result.canary_kind == "label"
    assert result.release["where"] == ["DP-SGD noisy clipped sum"]
    assert [check["mechanism"] for check in result.noise_checks] == [
        "DP-SGD noisy clipped sum, its real coordinates"]
    assert not result.flagged


# ----- the neighbouring relation and the real coordinates' noise, every Gaussian release ----

def suite_release(suite: str, method: str, break_it=None, monkeypatch=None,
                  tiny: bool = False) -> dict:
    """The suite's audited cell of ``method`` on MNIST, its releases alone with as many
    phantoms as its twin, ``break_it`` planted; ``tiny``: the same on the digits for 29
    steps (epsilon 1 there: noise multiplier 4.2 at sampling rate 0.18), in seconds, with
    100,000 phantoms (enough to see a release at sensitivity C in 10 of 10 exact
    simulations)."""
    import dataclasses

    from benchmarks.audit import dp_sgd_release
    from benchmarks.suites import load_suite

    cell = next(c for c in load_suite(suite).cells
                if c.method == method and c.dataset == "mnist" and c.audit)
    if tiny:
        cell = dataclasses.replace(cell, dataset="digits",
                                   hparams={**cell.hparams, "epochs": 5.0, "batch_size": 256})
    if break_it:
        break_it(monkeypatch, method)
    return dp_sgd_release.audit_cell_release(cell, seed=1,
                                             **({"phantoms": 100_000} if tiny else {}))


def at_sensitivity_c(monkeypatch, method):
    """The release configured (noised and charged) at sensitivity C, where replacing a
    label moves a clipped gradient by 2C: the error of LabelDP-Pro's paper."""
    monkeypatch.setattr(get_method(method), "gradient_sensitivity", 1.0)


class RealNoiseHalved:
    """A generator that draws half the noise on every tensor but the phantoms'."""

    def __init__(self, generator, phantoms: int) -> None:
        self.generator, self.phantoms = generator, phantoms

    def normal(self, shape, stddev):
        import tensorflow as tf

        real = list(tf.get_static_value(shape)) != [self.phantoms]
        return self.generator.normal(shape, stddev=stddev / 2 if real else stddev)

    def __getattr__(self, name):
        return getattr(self.generator, name)


class RealNoiseHalvedRng:
    """A numpy generator that halves the noise before the phantoms' coordinates."""

    def __init__(self, rng, phantoms: int) -> None:
        self.rng, self.phantoms = rng, phantoms

    def normal(self, loc, scale, shape):
        draws = self.rng.normal(loc, scale, shape)
        draws[:shape[0] - self.phantoms] /= 2
        return draws


def real_noise_at_half(monkeypatch, method):
    """Every Gaussian release noises its real coordinates at half the phantoms' noise."""
    from benchmarks.privacy.noisy_clipped_mean import NoisyClippedMean
    from benchmarks.privacy.noisy_clipped_sum import NoisyClippedSum

    def wrapped(cls, attribute, wrapper):
        real = cls.__init__

        def init(self, ledger, **kwargs):
            real(self, ledger, **kwargs)
            setattr(self, attribute, wrapper(getattr(self, attribute), ledger.phantoms.size))
        monkeypatch.setattr(cls, "__init__", init)

    wrapped(NoisyClippedSum, "generator", RealNoiseHalved)
    wrapped(NoisyClippedMean, "rng", RealNoiseHalvedRng)


def noise_failures(release: dict) -> list[str]:
    return [check["mechanism"] for check in release["noise_checks"] if check["flagged"]]


LABEL_SUBSTITUTION = ["labeldp-pro", "dp-sgd-label-dp"]
GAUSSIAN_RELEASES = ["dp-sgd", *LABEL_SUBSTITUTION, "dp-sgd-scatternet"]
SUITE = {"dp-sgd": "quick", "labeldp-pro": "label-dp-small", "dp-sgd-label-dp": "label-dp-small",
         "dp-sgd-scatternet": "label-dp-small"}


def fast_first(fast: str, *others: str) -> list:
    """``fast`` in the fast tier, each of ``others`` in the integration tier (seconds each
    on the digits, a minute with LabelDP-Pro's or ScatterNet's start)."""
    return [fast, *(pytest.param(m, marks=pytest.mark.integration) for m in others)]


@pytest.mark.parametrize("method", fast_first("dp-sgd-label-dp", "labeldp-pro"))
def test_a_label_substitution_release_at_sensitivity_c_is_flagged(method, monkeypatch):
    """The phantoms move as a replaced label moves a gradient, +C to -C, whatever the
    sensitivity the release is configured at (a small release on the digits)."""
    honest = suite_release(SUITE[method], method, tiny=True)
    assert not honest["claim_test"]["rejected"] and not noise_failures(honest), honest
    assert suite_release(SUITE[method], method, at_sensitivity_c, monkeypatch,
                         tiny=True)["claim_test"]["rejected"]


@pytest.mark.parametrize("method", fast_first("dp-sgd", *GAUSSIAN_RELEASES[1:]))
def test_real_coordinates_noised_at_half_are_flagged(method, monkeypatch):
    """Each release's real coordinates' noise is checked against its phantoms': half of
    it fails (a small release on the digits; ScatterNet's statistics too)."""
    broken = suite_release(SUITE[method], method, real_noise_at_half, monkeypatch, tiny=True)
    expected = ["DP-SGD noisy clipped sum, its real coordinates"]
    if method == "dp-sgd-scatternet":
        expected.insert(0, "Gaussian mean of clipped vectors, its real coordinates")
    assert noise_failures(broken) == expected, broken["noise_checks"]


@pytest.mark.integration
@pytest.mark.parametrize("method", LABEL_SUBSTITUTION)
def test_a_release_at_sensitivity_c_is_flagged_at_label_dp_smalls_setting(method, monkeypatch):
    honest = suite_release("label-dp-small", method)
    assert not honest["claim_test"]["rejected"] and not noise_failures(honest), honest
    assert suite_release("label-dp-small", method, at_sensitivity_c,
                         monkeypatch)["claim_test"]["rejected"]


@pytest.mark.integration
@pytest.mark.parametrize("method", GAUSSIAN_RELEASES)
def test_real_noise_at_half_is_flagged_at_the_suites_setting(method, monkeypatch):
    assert noise_failures(suite_release(SUITE[method], method, real_noise_at_half,
                                        monkeypatch))


# ----- ALIBI: each canary's noisy one-hot vector -------------------------------------------

def test_an_honest_alibi_is_audited_at_its_release_near_its_claim():
    """The audit reads each canary's noisy vector and guesses where the likelihood ratio
    of its two classes is largest (about a quarter of the canaries), abstaining on the
    rest."""
    result = audited(ALIBI, 2.0)
    release = result.release
    assert release["where"] == ["Laplace one-hot labels"]
    assert release["observed"] == "the noisy one-hot vector each canary's label was released as"
    assert not result.flagged
    assert 0.6 * 2.0 < release["epsilon_lower_bound"] <= 2.0, release
    assert 0.2 * CANARIES < release["guesses"] < 0.5 * CANARIES


def quick_alibi_release(seed: int, break_it=None, monkeypatch=None) -> dict:
    """The audit at the release of the quick suite's audited ALIBI cell: its epsilon, its
    dataset's classes and the default canary count, one pair of classes fixed in advance.
    The release comes before any training, so nothing is trained."""
    from benchmarks.audit.canaries import IMAGE_CANARIES, LABEL, Canaries
    from benchmarks.audit.training import release_audit
    from benchmarks.privacy import Ledger
    from benchmarks.suites import load_suite

    cell = next(c for c in load_suite("quick").cells if c.method == "alibi" and c.audit)
    classes = datasets.load(cell.dataset).num_classes
    if break_it:
        break_it(monkeypatch)
    rng = np.random.default_rng(seed)
    m = IMAGE_CANARIES
    planted = Canaries(LABEL, np.zeros((m, 1)), np.tile(rng.choice(classes, 2, replace=False),
                                                        (m, 1)))
    coins = rng.integers(0, 2, size=m).astype(bool)
    ledger = Ledger()
    ledger.watch(np.arange(m))
    randomizers.laplace_one_hot(ledger, planted.labels[np.arange(m), coins.astype(int)],
                                classes, cell.epsilon, rng, examples=np.arange(m))
    return release_audit(*planted.release_evidence(ledger.observed, 0), coins, 0.0, 0.95) | {
        "claim": cell.epsilon}


def alibi_at_half_noise(monkeypatch):
    import scipy.stats

    monkeypatch.setattr(randomizers, "one_hot_noise",
                        lambda epsilon: scipy.stats.laplace(scale=1 / epsilon))


def test_an_honest_alibi_release_is_near_its_claim_at_the_quick_suites_setting():
    """(An honest release exceeds its claim in at most 5% of the seeds.)"""
    honest = quick_alibi_release(0)
    assert 0.7 * honest["claim"] < honest["epsilon_lower_bound"] <= honest["claim"], honest


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_alibi_at_half_its_noise_is_flagged_at_the_quick_suites_setting(seed, monkeypatch):
    broken = quick_alibi_release(seed, alibi_at_half_noise, monkeypatch)
    assert broken["epsilon_lower_bound"] > broken["claim"], broken
