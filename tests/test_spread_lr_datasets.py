"""The MNIST 7-vs-9 subsets of the spread-divergence experiments."""
import functools

import numpy as np
import pytest

from benchmarks.contract import Split
from benchmarks.datasets import derived, get_spec, load

cached_load = functools.cache(load)  # MNIST's arrays are read once for all its subsets


def test_first_of_each_class_keeps_order_and_relabels():
    y = np.array([9, 1, 7, 9, 7, 9, 7, 3])
    split = Split(np.arange(len(y)).reshape(-1, 1, 1, 1), y)
    subset = derived.first_of_each_class(split, (7, 9), 2)
    assert subset.x.ravel().tolist() == [0, 2, 3, 4]  # first two 9s (0, 3), first two 7s (2, 4)
    assert subset.y.tolist() == [1, 0, 1, 0]
    with pytest.raises(ValueError, match="only 3 examples of digit 7"):
        derived.first_of_each_class(split, (7, 9), 4)


def test_fingerprints_cover_parent_and_rule():
    small, large, mnist = get_spec("mnist-7v9-small"), get_spec("mnist-7v9"), get_spec("mnist")
    assert len({small.fingerprint, large.fingerprint, mnist.fingerprint}) == 3
    assert set(mnist.checksums) < set(small.checksums)
    assert small.parent == large.parent == "mnist"
    assert small.task == "image" and small.num_classes == 2


@pytest.mark.parametrize("name, train, test", [("mnist-7v9-small", 250, 900),
                                               ("mnist-7v9", 4500, 900),
                                               ("digits-7v9", 130, 28)])
def test_subsets_have_the_papers_sizes(name, train, test):
    reason = get_spec(name).missing()
    if reason:
        pytest.skip(reason)
    ds = cached_load(name)
    assert np.bincount(ds.train.y).tolist() == [train, train]
    assert np.bincount(ds.test.y).tolist() == [test, test]
    parent = cached_load(get_spec(name).parent)
    assert ds.train.x.shape[1:] == parent.train.x.shape[1:]
    first_seven = np.flatnonzero(parent.train.y == 7)[0]
    assert np.array_equal(ds.train.x[ds.train.y == 0][0], parent.train.x[first_seven])
