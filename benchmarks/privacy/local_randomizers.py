"""The corruption model of spread-divergence learning: each user releases ONE noisy copy
of their example, drawn once before training.

Labels are flipped with probability p_f. Pixels (256 states) keep their state with
probability 1 - p_f and otherwise move uniformly to one of the other 255 states, or get
Gaussian noise added (not epsilon-DP). The two randomised responses are written as
deterministic functions of explicit random draws, so enumerating those draws builds each
mechanism's EXACT transition matrix from the very code that corrupts the data.

``corrupt``, the release, takes the run's ledger and charges what it draws with: the
label flip's epsilon to every label, and to every input the per-pixel epsilon times the
pixels of an example, or no guarantee at all for Gaussian noise.

numpy only: importing this module must stay cheap.
"""
from __future__ import annotations

import math

import numpy as np

from benchmarks.privacy.ledger import Ledger, PureEpsilon, Unprotected, inputs, labels

PIXEL_STATES = 256
INPUT_NOISES = ("rr", "gaussian")


def flip_probability(epsilon: float) -> float:
    """The p_f whose label flip is exactly epsilon-DP: epsilon = ln((1 - p_f) / p_f)."""
    if math.isnan(epsilon) or epsilon <= 0:
        raise ValueError(f"epsilon must be > 0 (inf allowed), got {epsilon!r}")
    return 0.0 if math.isinf(epsilon) else 1.0 / (1.0 + math.exp(epsilon))


def check_flip_probability(p_f: float) -> None:
    # p_f >= 1/2 would make the flip carry no information or invert it.
    if not 0 <= p_f < 0.5:
        raise ValueError(f"flip probability must be in [0, 0.5), got {p_f!r}")


def label_flip_epsilon(p_f: float) -> float:
    """The local epsilon of the label flip: ln((1 - p_f) / p_f); inf when nothing flips."""
    check_flip_probability(p_f)
    return math.inf if p_f == 0 else math.log((1 - p_f) / p_f)


def pixel_rr_epsilon(p_f: float, states: int = PIXEL_STATES) -> float:
    """The local epsilon of one pixel's randomised response: the largest ratio is between
    keeping a state, 1 - p_f, and reaching it from another state, p_f / (states - 1)."""
    check_flip_probability(p_f)
    return math.inf if p_f == 0 else math.log((1 - p_f) * (states - 1) / p_f)


def local_epsilon(transition: np.ndarray) -> float:
    """max over outputs o and inputs i, i' of ln(T[o, i] / T[o, i']) for T[output, input].

    Per output row the largest ratio is its largest over its smallest entry, so this is the
    maximum over every (input, input', output) triple. A zero beside a non-zero is inf.
    """
    t = np.asarray(transition, dtype=float)
    if t.ndim != 2 or not np.allclose(t.sum(axis=0), 1.0):
        raise ValueError("transition must be a 2-D matrix T[output, input] whose columns "
                         "sum to 1")
    hi, lo = t.max(axis=1), t.min(axis=1)
    if np.any((lo == 0) & (hi > 0)):
        return math.inf
    live = hi > 0
    return float(np.max(np.log(hi[live]) - np.log(lo[live])))


def flip_from_draws(labels: np.ndarray, flip: np.ndarray) -> np.ndarray:
    """Binary labels, each inverted where its draw says so."""
    labels = np.asarray(labels)
    if labels.size and not np.isin(labels, (0, 1)).all():
        raise ValueError("the label flip handles binary labels {0, 1} only")
    return np.where(flip, 1 - labels, labels).astype(labels.dtype)


def rr_from_draws(states: np.ndarray, keep: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """Randomised response given its draws: keep the state, or move to the offset-th of
    the OTHER states (offset uniform on 0..states-2, skipping the state itself)."""
    moved = offset + (offset >= states)
    return np.where(keep, states, moved).astype(states.dtype)


def label_flip_matrix(p_f: float) -> np.ndarray:
    """T[output, input] of the label flip, built by enumerating its draw through the sampler."""
    check_flip_probability(p_f)
    t = np.zeros((2, 2))
    labels = np.arange(2)
    for flip, prob in ((False, 1 - p_f), (True, p_f)):
        np.add.at(t, (flip_from_draws(labels, np.full(2, flip)), labels), prob)
    return t


def pixel_rr_matrix(p_f: float, states: int = PIXEL_STATES) -> np.ndarray:
    """T[output, input] of per-pixel randomised response, built by enumerating every draw
    (keep, or each of the states - 1 offsets) through the sampler."""
    check_flip_probability(p_f)
    t = np.zeros((states, states))
    inputs, offsets = np.meshgrid(np.arange(states), np.arange(states - 1), indexing="ij")
    np.add.at(t, (inputs[:, 0], inputs[:, 0]), 1 - p_f)
    moved = rr_from_draws(inputs, np.zeros_like(inputs, dtype=bool), offsets)
    np.add.at(t, (moved, inputs), p_f / (states - 1))
    return t


def flip_labels(labels: np.ndarray, p_f: float, rng: np.random.Generator) -> np.ndarray:
    check_flip_probability(p_f)
    return flip_from_draws(labels, rng.random(np.shape(labels)) < p_f)


def randomise_pixels(states: np.ndarray, p_f: float, rng: np.random.Generator) -> np.ndarray:
    """Per-pixel randomised response on integer states 0..255."""
    check_flip_probability(p_f)
    states = np.asarray(states)
    if states.size and (states.min() < 0 or states.max() >= PIXEL_STATES):
        raise ValueError(f"pixel states must be integers in [0, {PIXEL_STATES - 1}]")
    keep = rng.random(states.shape) >= p_f
    offset = rng.integers(0, PIXEL_STATES - 1, size=states.shape)
    return rr_from_draws(states.astype(np.int64), keep, offset).astype(np.uint8)


def add_gaussian_noise(x: np.ndarray, variance: float, rng: np.random.Generator) -> np.ndarray:
    if not variance > 0:
        raise ValueError(f"input variance must be > 0, got {variance!r}")
    return (x + rng.normal(0.0, math.sqrt(variance), size=x.shape)).astype(np.float32)


def to_states(x: np.ndarray) -> np.ndarray:
    """Images in [0, 1] to pixel states 0..255 (the paper's 256-state discrete pixels)."""
    x = np.asarray(x, dtype=np.float64)
    if x.size and (np.isnan(x).any() or x.min() < 0 or x.max() > 1):
        raise ValueError("images must have pixel values in [0, 1]")
    return np.rint(x * (PIXEL_STATES - 1)).astype(np.uint8)


def from_states(states: np.ndarray) -> np.ndarray:
    return (np.asarray(states, dtype=np.float32) / (PIXEL_STATES - 1)).astype(np.float32)


def corrupt(ledger: Ledger, x: np.ndarray, y: np.ndarray, p_f: float, input_noise: str,
            input_variance: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The released (x~, c~) of every user, flattened to (N, D), charged to ``ledger``.

    x~ holds pixel states (uint8) for "rr" and float pixels for "gaussian".
    """
    if input_noise not in INPUT_NOISES:
        raise ValueError(f"input_noise must be one of {INPUT_NOISES}, got {input_noise!r}")
    flat = np.asarray(x).reshape(len(x), -1)
    ledger = Ledger.of(ledger, "the local corruption")
    ledger.charge("label flip (local randomised response)", labels(),
                  PureEpsilon(label_flip_epsilon(p_f)), flip_probability=p_f)
    if input_noise == "rr":
        pixel = pixel_rr_epsilon(p_f)
        ledger.charge("per-pixel randomised response", inputs(),
                      PureEpsilon(pixel * flat.shape[1]), pixel_epsilon=pixel)
    else:
        ledger.charge("Gaussian input noise", inputs(),
                      Unprotected("Gaussian noise on each pixel has no epsilon"),
                      input_variance=float(input_variance))
    noisy_y = flip_labels(y, p_f, rng)
    if input_noise == "rr":
        noisy_x = randomise_pixels(to_states(flat), p_f, rng)
    else:
        noisy_x = add_gaussian_noise(flat.astype(np.float32), input_variance, rng)
    noisy_x, noisy_y = ledger.released("the local corruption", (noisy_x, noisy_y), p_f=p_f,
                                       input_noise=input_noise,
                                       input_variance=input_variance)
    ledger.observe("label flip (local randomised response)", np.arange(len(noisy_y)), noisy_y)
    return noisy_x, noisy_y
