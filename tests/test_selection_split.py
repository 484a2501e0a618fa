"""The validation split of a private selection under add/remove neighbours.

A candidate trains on one part of the training set and is scored on the other, and its
curve is charged as the larger of the two (parallel composition). That holds only when
adding a record changes one part alone. The test builds the coupling: a dataset D and
D + x, split with the same seeds by the split the suites use for DP-SGD, and a candidate
that releases a noisy count of each part (two-sided geometric noise, each pure
epsilon-DP under add/remove). Over every D of a few bits and every x, it computes the
exact output distributions (a mixture over the seeds' splits) and checks the largest
privacy loss, both ways, against the charged epsilon, the larger of the two. A
fixed-size split fails it: adding x to the validation part pushes another record into
training, and both counts move at once."""
from __future__ import annotations

import collections
import functools
import itertools

import numpy as np
import pytest

from benchmarks.errors import InputError
from benchmarks.suites import load_suite
from benchmarks.tuning import COINS, FIXED_SHARE, Search, check_tunable, validation_split
from methods.dp_sgd import DPSGD

TRAINING_EPSILON = SCORE_EPSILON = 1.0
CHARGED = max(TRAINING_EPSILON, SCORE_EPSILON)  # what the selection charges a candidate
N, SHARE, SEEDS = 3, 0.5, 2000
OUTPUTS = np.arange(-30, 35)  # each count's released values (the ratios are exact)


def geometric(epsilon: float, centre: int) -> np.ndarray:
    """The two-sided geometric law around ``centre`` on OUTPUTS (its ratios between
    neighbouring centres are e^epsilon exactly, wherever it is cut)."""
    return np.exp(-epsilon * np.abs(OUTPUTS - centre))


@functools.cache
def splits(size: int, split: str) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """The splits of ``size`` rows, seed by seed, on the seeds whose split of N rows
    leaves rows on both sides (others are refused). A record added at the end cannot undo
    that, and with coins the added record's coin is independent of the others, so the
    coupling holds on these seeds."""
    kept = []
    for seed in range(SEEDS):
        try:
            validation_split(N, SHARE, np.random.default_rng(seed), split)
        except InputError:
            continue
        kept.append(validation_split(size, SHARE, np.random.default_rng(seed), split))
    return tuple(kept)


def released(bits: tuple[int, ...], split: str) -> np.ndarray:
    """The joint law of (training count, validation count) over the seeds' splits."""
    values = np.array(bits)
    counts = collections.Counter((int(values[train].sum()), int(values[held].sum()))
                                 for train, held in splits(len(values), split))
    law = sum(times * np.outer(geometric(TRAINING_EPSILON, a), geometric(SCORE_EPSILON, b))
              for (a, b), times in counts.items())
    return law / law.sum()


def largest_loss(split: str) -> float:
    """The largest |log P_D(o) / P_{D+x}(o)| over every output, D of N bits and x."""
    worst = 0.0
    for bits in itertools.product((0, 1), repeat=N):
        without = released(bits, split)
        for x in (0, 1):
            loss = np.abs(np.log(released(bits + (x,), split)) - np.log(without))
            worst = max(worst, float(loss.max()))
    return worst


def dp_sgd_split() -> str:
    """How the suites' DP-SGD selections (add/remove neighbours) draw validation rows."""
    [search] = {cell.search for cell in load_suite("label-dp-small-tuned").cells
                if cell.method == "dp-sgd"}
    return search.validation_split


def test_the_dp_sgd_selections_split_composes_in_parallel_under_add_remove():
    assert largest_loss(dp_sgd_split()) <= CHARGED + 1e-9


def test_a_fixed_size_split_composes_sequentially_under_add_remove():
    assert largest_loss(FIXED_SHARE) > CHARGED * 1.2


def test_coins_leave_every_other_rows_part_as_it_was_when_a_record_is_added():
    for seed in range(50):
        train, held = validation_split(200, 0.1, np.random.default_rng(seed), COINS)
        more_train, more_held = validation_split(201, 0.1, np.random.default_rng(seed), COINS)
        assert set(more_held) - {200} == set(held)
        assert set(more_train) - {200} == set(train)


def test_a_fixed_size_split_is_refused_under_add_remove():
    from benchmarks.contract import Budget

    fixed = Search.from_dict({"space": {"peak_lr": [0.1]}, "mean_candidates": 3, "shape": 0,
                              "validation_share": 0.1})
    with pytest.raises(InputError, match="validation_split = \"coins\""):
        check_tunable(DPSGD, Budget(1.0, 1e-5), {}, fixed)
    check_tunable(DPSGD, Budget(1.0, 1e-5), {}, Search.from_dict(
        {**fixed.as_dict(), "validation_split": COINS}))
