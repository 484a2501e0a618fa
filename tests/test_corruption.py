"""Exact privacy checks of the corruption model, over every input pair and output."""
import math

import numpy as np
import pytest

from benchmarks.privacy import Ledger
from benchmarks.privacy import local_randomizers as corruption

P_FS = [0.05, 0.1, 0.2, 0.3, 0.4, 0.49]


def worst_log_ratio_over_all_triples(t: np.ndarray) -> float:
    """max over (output o, input i, input i') of ln T[o, i] - ln T[o, i'], by brute force."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log_t = np.log(t)
        worst = -math.inf
        for row in log_t:  # one output at a time keeps the (i, i') table small
            diff = row[:, None] - row[None, :]
            diff = np.where(np.isnan(diff), -math.inf, diff)  # both zero: no evidence either way
            worst = max(worst, float(diff.max()))
    return worst


@pytest.mark.parametrize("p_f", P_FS)
def test_label_flip_is_exactly_epsilon_dp(p_f):
    t = corruption.label_flip_matrix(p_f)
    eps = math.log((1 - p_f) / p_f)
    assert np.allclose(t.sum(axis=0), 1)
    worst = worst_log_ratio_over_all_triples(t)
    assert worst <= eps + 1e-12
    assert worst == pytest.approx(eps, abs=1e-12)  # the bound is attained
    assert corruption.label_flip_epsilon(p_f) == pytest.approx(eps)


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 2.0, 5.0])
def test_flip_probability_inverts_label_epsilon(epsilon):
    p_f = corruption.flip_probability(epsilon)
    t = corruption.label_flip_matrix(p_f)
    assert worst_log_ratio_over_all_triples(t) == pytest.approx(epsilon, rel=1e-12)


@pytest.mark.parametrize("p_f", P_FS)
def test_pixel_rr_is_exactly_its_local_epsilon_over_all_triples(p_f):
    t = corruption.pixel_rr_matrix(p_f)
    assert t.shape == (256, 256)
    assert np.allclose(t.sum(axis=0), 1)
    assert np.allclose(np.diag(t), 1 - p_f)  # the paper's definition: keep w.p. 1 - p_f
    off = t[~np.eye(256, dtype=bool)]
    assert np.allclose(off, p_f / 255)  # ... else uniform over the 255 other states
    worst = worst_log_ratio_over_all_triples(t)
    eps = corruption.pixel_rr_epsilon(p_f)
    assert eps == pytest.approx(math.log(255 * (1 - p_f) / p_f))
    assert worst <= eps + 1e-12
    assert worst == pytest.approx(eps, abs=1e-12)
    assert corruption.local_epsilon(t) == pytest.approx(worst, abs=1e-12)


def test_broken_rr_fails_the_exact_check(monkeypatch):
    # An off-by-one in skipping the own state lets it keep itself by "moving" and never
    # reach state 255 from below: the exact check must catch it.
    monkeypatch.setattr(corruption, "rr_from_draws",
                        lambda s, keep, off: np.where(keep, s, off + (off > s)))
    t = corruption.pixel_rr_matrix(0.2)
    assert worst_log_ratio_over_all_triples(t) > corruption.pixel_rr_epsilon(0.2)
    assert corruption.local_epsilon(t) > corruption.pixel_rr_epsilon(0.2)


def test_broken_label_flip_fails_the_exact_check(monkeypatch):
    # Flipping only 1 -> 0 reveals every released 1: infinite epsilon.
    monkeypatch.setattr(corruption, "flip_from_draws",
                        lambda y, flip: np.where(flip & (y == 1), 0, y))
    t = corruption.label_flip_matrix(0.2)
    assert worst_log_ratio_over_all_triples(t) > corruption.label_flip_epsilon(0.2)


@pytest.mark.parametrize("p_f", [0.1, 0.4])
def test_samplers_follow_their_exact_matrices(p_f):
    rng = np.random.default_rng(7)
    n = 200_000
    source = np.full(n, 3, dtype=np.uint8)
    out = corruption.randomise_pixels(source, p_f, rng)
    freq = np.bincount(out, minlength=256) / n
    t = corruption.pixel_rr_matrix(p_f)[:, 3]
    assert abs(freq[3] - t[3]) < 4 * math.sqrt(t[3] * (1 - t[3]) / n)
    others = np.delete(freq, 3)
    assert others.sum() == pytest.approx(p_f, abs=4 * math.sqrt(p_f / n))
    assert others.min() > 0  # every other state is reachable
    flipped = corruption.flip_labels(np.zeros(n, dtype=np.int64), p_f, rng)
    assert abs(flipped.mean() - p_f) < 4 * math.sqrt(p_f * (1 - p_f) / n)


def test_corrupt_is_seeded_and_shapes_match():
    x = np.random.default_rng(0).random((10, 4, 4, 1)).astype(np.float32)
    y = np.arange(10) % 2
    a = corruption.corrupt(Ledger(), x, y, 0.3, "rr", 0.1, np.random.default_rng(5))
    b = corruption.corrupt(Ledger(), x, y, 0.3, "rr", 0.1, np.random.default_rng(5))
    assert a[0].shape == (10, 16) and a[0].dtype == np.uint8 and a[1].shape == (10,)
    assert all(np.array_equal(u, v) for u, v in zip(a, b))
    g = corruption.corrupt(Ledger(), x, y, 0.3, "gaussian", 0.1, np.random.default_rng(5))
    assert g[0].dtype == np.float32 and not np.allclose(g[0], x.reshape(10, -1))


@pytest.mark.parametrize("call, message", [
    (lambda: corruption.flip_probability(0), "epsilon must be > 0"),
    (lambda: corruption.label_flip_epsilon(0.5), "flip probability"),
    (lambda: corruption.flip_labels(np.array([0, 2]), 0.1, np.random.default_rng()), "binary"),
    (lambda: corruption.to_states(np.array([1.5])), r"\[0, 1\]"),
    (lambda: corruption.add_gaussian_noise(np.zeros(2), 0.0, np.random.default_rng()), "variance"),
    (lambda: corruption.corrupt(Ledger(), np.zeros((1, 2)), np.zeros(1, int), 0.1, "blur", 0.1,
                                np.random.default_rng()), "input_noise"),
])
def test_bad_input_raises_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_no_noise_is_identity_with_infinite_epsilon():
    assert corruption.flip_probability(math.inf) == 0
    assert corruption.label_flip_epsilon(0.0) == math.inf
    states = np.arange(256, dtype=np.uint8)
    same = corruption.randomise_pixels(states, 0.0, np.random.default_rng(1))
    assert np.array_equal(same, states)


# ----- the release itself: corrupt() flips at the probability it charges -------------

GRID = 2 ** 16  # uniform draws k / GRID: a flip probability is read to within 1 / GRID


class GridDraws:
    """A generator whose uniform draws for the labels are the grid k / GRID, each label
    once with every draw; the pixels' draws keep every pixel."""

    def random(self, shape):
        if len(shape) == 1:
            return np.tile(np.arange(GRID) / GRID, shape[0] // GRID)
        return np.ones(shape)

    def integers(self, low, high, size):
        return np.full(size, low)


def corrupt_on_the_grid(p_f: float) -> tuple[np.ndarray, float]:
    """T[output, input] of the labels corrupt() releases, from every grid draw for each
    label 0 and 1, and the epsilon it charged to the labels."""
    y = np.repeat([0, 1], GRID)
    ledger = Ledger()
    _, released = corruption.corrupt(ledger, np.zeros((len(y), 1)), y, p_f, "rr", 0.0,
                                     GridDraws())
    t = np.array([[np.mean(released[y == i] == o) for i in (0, 1)] for o in (0, 1)])
    [charged] = [c.cost.epsilon for c in ledger.charges if c.touches.field.value == "labels"]
    return t, charged


@pytest.mark.parametrize("p_f", P_FS)
def test_corrupt_flips_every_label_at_exactly_the_charged_probability(p_f):
    t, charged = corrupt_on_the_grid(p_f)
    # Each label flips with probability p_f, up to the grid, and no other way.
    np.testing.assert_allclose(t, [[1 - p_f, p_f], [p_f, 1 - p_f]], rtol=0, atol=1 / GRID)
    # So the release's epsilon over every (output, input, input') is the charged one; the
    # slack is the grid's resolution times d epsilon / d p = 1 / (p (1 - p)).
    slack = 1 / (GRID * p_f * (1 - p_f))
    assert abs(worst_log_ratio_over_all_triples(t) - charged) <= slack
    assert charged == pytest.approx(corruption.label_flip_epsilon(p_f))


@pytest.mark.parametrize("break_it", [
    lambda monkeypatch, real: monkeypatch.setattr(
        corruption, "flip_labels", lambda y, p_f, rng: real(y, p_f / 2, rng)),
    lambda monkeypatch, real: monkeypatch.setattr(
        corruption, "flip_labels", lambda y, p_f, rng: np.where(
            y == 1, real(y, p_f, rng), real(y, p_f / 2, rng))),
], ids=["half-the-flips", "label-0-flipped-less"])
def test_a_weaker_flip_than_the_charge_fails_the_exact_check(monkeypatch, break_it):
    break_it(monkeypatch, corruption.flip_labels)
    t, charged = corrupt_on_the_grid(0.2)
    assert worst_log_ratio_over_all_triples(t) > charged + 0.1
