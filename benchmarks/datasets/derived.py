"""Datasets cut from another registered dataset by a fixed rule.

Digits 7 vs 9 (Barber, "Private machine learning via randomised response", Section 6):
digit 7 is label 0 and digit 9 is label 1; each split takes the FIRST n images of each
digit in the parent's split order, so the subset is the same everywhere without a seed.
The fingerprint covers the parent's official checksums and the text of the rule.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from benchmarks.contract import Split
from benchmarks.datasets.core import DatasetSpec, get_spec, load, register

BARBER = "Barber. Private machine learning via randomised response (MNIST 7 vs 9)"
DIGITS = (7, 9)  # label i is DIGITS[i]


def first_of_each_class(split: Split, digits: tuple[int, ...], per_class: int) -> Split:
    """The first ``per_class`` examples of each digit, relabelled 0..len(digits)-1, in
    their original order."""
    chosen = []
    for digit in digits:
        where = np.flatnonzero(split.y == digit)
        if len(where) < per_class:
            raise ValueError(f"only {len(where)} examples of digit {digit}, {per_class} needed")
        chosen.append(where[:per_class])
    index = np.sort(np.concatenate(chosen))
    labels = np.searchsorted(np.asarray(digits), split.y[index])
    return Split(split.x[index], labels.astype(np.int64))


def subset_rule(parent: str, train_per_class: int, test_per_class: int) -> str:
    return (f"digits {DIGITS} as labels 0..{len(DIGITS) - 1}; first {train_per_class} of each "
            f"in {parent}'s train split order; first {test_per_class} of each in its test "
            f"split order")


def register_digit_subset(name: str, parent: str, train_per_class: int,
                          test_per_class: int) -> DatasetSpec:
    rule = subset_rule(parent, train_per_class, test_per_class)
    source = get_spec(parent)

    def read(spec: DatasetSpec, root: Path) -> tuple[Split, Split]:
        full = load(parent, root)
        return (first_of_each_class(full.train, DIGITS, train_per_class),
                first_of_each_class(full.test, DIGITS, test_per_class))

    rule_digest = hashlib.sha256(rule.encode()).hexdigest()
    return register(DatasetSpec(
        name=name, task=source.task, num_classes=len(DIGITS),
        citation=f"{BARBER}; subset of {parent}: {rule}. {source.citation}",
        checksums=(*source.checksums, ("subset rule", f"sha256:{rule_digest}")),
        reader=read, parent=parent, offline=source.offline, obtain=source.obtain,
        licence=source.licence,
    ))


# The discrete setting: 250 train + 900 test per class.
register_digit_subset("mnist-7v9-small", "mnist", train_per_class=250, test_per_class=900)
# The Gaussian-noise setting: 4,500 train + 900 test per class.
register_digit_subset("mnist-7v9", "mnist", train_per_class=4500, test_per_class=900)
# The same task on scikit-learn's 8x8 digits, for fast smoke runs.
register_digit_subset("digits-7v9", "digits", train_per_class=130, test_per_class=28)
