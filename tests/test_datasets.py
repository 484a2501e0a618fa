"""The dataset registry, checksum errors, the cache, and the real offline sources."""
from __future__ import annotations

import dataclasses
import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchmarks import datasets
from benchmarks.contract import Split
from benchmarks.datasets import SPECS, DataError, get_spec, load, register
from benchmarks.datasets.core import cache_path
from benchmarks.errors import UnknownName
import archives  # tests/archives.py: pytest puts this folder on sys.path

DIGESTS = {
    "mnist": {"train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
              "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"},
    "fashion-mnist": {"train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"},
    "adult": {"adult.data": "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"},
}


# --- registry and specs --------------------------------------------------------------

def test_every_dataset_is_registered_with_a_known_fingerprint():
    expected = {"mnist", "fashion-mnist", "kmnist", "cifar10", "cifar100", "svhn",
                "movielens-1m", "adult", "kddcup99", "digits", "breast-cancer"}
    assert expected <= set(SPECS)
    fingerprints = [spec.fingerprint for spec in SPECS.values()]
    assert len(set(fingerprints)) == len(fingerprints)
    assert all(len(f) == 64 and int(f, 16) >= 0 for f in fingerprints)


def test_every_dataset_states_its_licence():
    assert [name for name, spec in SPECS.items() if not spec.licence] == []
    assert get_spec("mnist-7v9").licence == get_spec("mnist").licence  # a subset keeps it


def test_fingerprint_follows_the_expected_checksums():
    spec = get_spec("cifar10")
    changed = dataclasses.replace(spec, checksums=(("cifar-10-python.tar.gz", "md5:" + "0" * 32),))
    assert changed.fingerprint != spec.fingerprint
    assert dataclasses.replace(spec).fingerprint == spec.fingerprint
    assert dataclasses.replace(spec, version=2).fingerprint != spec.fingerprint


@pytest.mark.parametrize("name, digests", DIGESTS.items())
def test_offline_specs_expect_the_official_checksums(name, digests):
    table = dict(get_spec(name).checksums)
    for label, digest in digests.items():
        assert table[label] == f"sha256:{digest}"


def test_unknown_name_suggests_the_closest():
    with pytest.raises(UnknownName, match="did you mean 'mnist'"):
        get_spec("mnsit")


def test_register_refuses_a_duplicate_name():
    with pytest.raises(ValueError, match="registered twice"):
        register(get_spec("digits"))


def test_register_adds_a_dataset(monkeypatch):
    monkeypatch.setattr(datasets.core, "SPECS", dict(SPECS))
    spec = dataclasses.replace(get_spec("digits"), name="digits-copy")
    register(spec)
    assert datasets.core.get_spec("digits-copy") is spec


@pytest.mark.parametrize("change, message", [
    ({"task": "video"}, "task must be one of"),
    ({"num_classes": 1}, "num_classes"),
    ({"checksums": (("x", "crc32:abc"),)}, "md5:<hex>"),
    ({"checksums": ()}, "at least one"),
])
def test_spec_rejects_bad_fields(change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(get_spec("digits"), **change)


def test_data_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PRIVBOARD_DATA", str(tmp_path))
    assert datasets.data_dir() == tmp_path
    monkeypatch.delenv("PRIVBOARD_DATA")
    assert datasets.data_dir().parts[-2:] == (".privboard", "data")


def test_a_parent_decides_whether_a_derived_dataset_can_load(tmp_path):
    derived = dataclasses.replace(get_spec("digits"), name="cifar10-derived", parent="cifar10",
                                  files=None)
    assert "cifar-10-python.tar.gz: missing" in derived.missing(tmp_path)
    assert dataclasses.replace(derived, parent="digits").missing(tmp_path) is None


# --- missing, corrupt and mismatching files ------------------------------------------

def assert_one_line_naming(error: DataError, *parts: str) -> None:
    message = str(error)
    assert "\n" not in message
    for part in parts:
        assert part in message, (part, message)


def test_missing_file_names_file_checksum_and_place(tmp_path):
    with pytest.raises(DataError) as caught:
        load("cifar10", tmp_path)
    assert_one_line_naming(caught.value, "cifar-10-python.tar.gz", "missing",
                           "md5:c58f30108f718f92721af3b95e74349a", str(tmp_path / "cifar10"))
    assert "cifar-10-python.tar.gz" in get_spec("cifar10").missing(tmp_path)


def test_missing_reports_the_second_file_too(tmp_path, monkeypatch):
    checksums, _ = archives.write_svhn(tmp_path / "svhn", np.random.default_rng(0))
    archives.expect(monkeypatch, "svhn", checksums)
    (tmp_path / "svhn" / "test_32x32.mat").unlink()
    assert "test_32x32.mat: missing" in SPECS["svhn"].missing(tmp_path)


def test_corrupted_byte_is_caught(tmp_path, monkeypatch):
    archive = tmp_path / "cifar10" / "cifar-10-python.tar.gz"
    checksums, _ = archives.write_cifar10(archive, np.random.default_rng(0))
    archives.expect(monkeypatch, "cifar10", checksums)
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    archive.write_bytes(bytes(data))
    with pytest.raises(DataError) as caught:
        load("cifar10", tmp_path)
    assert_one_line_naming(caught.value, str(archive), "md5 mismatch", checksums[0][1])
    assert not cache_path(SPECS["cifar10"], tmp_path).exists()


def test_wrong_checksum_is_caught(tmp_path, monkeypatch):
    archives.write_cifar10(tmp_path / "cifar10" / "cifar-10-python.tar.gz",
                           np.random.default_rng(0))
    wrong = "md5:" + "1" * 32
    archives.expect(monkeypatch, "cifar10", (("cifar-10-python.tar.gz", wrong),))
    with pytest.raises(DataError) as caught:
        load("cifar10", tmp_path)
    assert_one_line_naming(caught.value, "md5 mismatch", wrong, "put it in")


def test_a_file_with_the_right_checksum_but_broken_content_is_a_data_error(tmp_path, monkeypatch):
    folder = tmp_path / "kmnist"
    checksums = archives.write_idx_gz(folder, archives.idx_set(np.random.default_rng(0)),
                                      digest_of="file")
    broken = gzip.compress(b"\0\0\x08\x03" + b"\0" * 8)  # header promises 3 sizes, holds 2
    (folder / "t10k-labels-idx1-ubyte.gz").write_bytes(broken)
    table = dict(checksums) | {"t10k-labels-idx1-ubyte.gz": archives.md5(broken)}
    archives.expect(monkeypatch, "kmnist", tuple(table.items()))
    with pytest.raises(DataError, match="truncated"):
        load("kmnist", tmp_path)


# --- the cache ----------------------------------------------------------------------

@pytest.fixture
def cached_digits(tmp_path):
    first = load("digits", tmp_path)
    return tmp_path, first, cache_path(get_spec("digits"), tmp_path)


def test_second_load_comes_from_the_cache(cached_digits, monkeypatch):
    root, first, path = cached_digits
    assert path.is_file()

    def no_sources(spec, root):
        raise AssertionError("sources were read although the cache is intact")

    monkeypatch.setitem(SPECS, "digits", dataclasses.replace(SPECS["digits"], reader=no_sources))
    again = load("digits", root)
    np.testing.assert_array_equal(again.train.x, first.train.x)
    np.testing.assert_array_equal(again.test.y, first.test.y)
    assert dict(datasets.status(root))["digits"] == "cached"


@pytest.mark.parametrize("damage", ["flip a byte", "garbage"])
def test_a_damaged_cache_is_not_trusted(cached_digits, damage):
    root, first, path = cached_digits
    data = bytearray(path.read_bytes())
    if damage == "flip a byte":
        data[-2000] ^= 0x01  # inside the last stored array, not its zip header
    else:
        data = bytearray(b"not an npz file")
    path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="ignoring cache"):
        again = load("digits", root)
    np.testing.assert_array_equal(again.test.x, first.test.x)
    np.testing.assert_array_equal(again.test.y, first.test.y)
    with np.load(path) as rewritten:  # rebuilt and rewritten whole
        np.testing.assert_array_equal(rewritten["test_y"], first.test.y)


def test_no_temp_file_is_left_behind(cached_digits):
    root, _, path = cached_digits
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_a_failed_cache_write_leaves_no_file(tmp_path, monkeypatch):
    def broken_savez(file, **arrays):
        file.write(b"half an npz")
        raise OSError("disk full")

    monkeypatch.setattr(datasets.core.np, "savez", broken_savez)
    with pytest.raises(OSError, match="disk full"):
        load("digits", tmp_path)
    assert list((tmp_path / "cache").iterdir()) == []


@pytest.mark.parametrize("task, x, y, message", [
    ("image", np.zeros((2, 8, 8, 1), np.float64), [0, 1], "float32"),
    ("image", np.full((2, 8, 8, 1), 2, np.float32), [0, 1], r"\[0, 1\]"),
    ("image", np.zeros((2, 8, 8, 1), np.float32), [0, 10], r"\[0, 10\)"),
    ("tabular", np.ones((2, 4), np.float32), [0, 1], "norm <= 1"),
    ("ratings", np.zeros((2, 3), np.int64), [0, 1], r"\(N, 2\)"),
])
def test_a_reader_that_breaks_the_array_contract_is_refused(tmp_path, monkeypatch, task, x, y,
                                                            message):
    split = Split(x, np.asarray(y, np.int64))
    spec = dataclasses.replace(get_spec("digits"), task=task, reader=lambda spec, root: (split, split))
    monkeypatch.setitem(SPECS, "digits", spec)
    with pytest.raises(ValueError, match=message):
        load("digits", tmp_path)
    assert not cache_path(spec, tmp_path).exists()


def test_status_lists_every_dataset(tmp_path):
    rows = dict(datasets.status(tmp_path))
    assert set(rows) == set(SPECS)
    assert rows["digits"] == "ready"
    assert "missing" in rows["cifar10"]


def test_loading_does_not_import_tensorflow(tmp_path):
    code = ("import sys; from benchmarks.datasets import load; load('digits', sys.argv[1]); "
            "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True,
                   cwd=Path(__file__).resolve().parents[1])


# --- the scikit-learn sets (always present) ------------------------------------------

def test_digits_are_8x8_images_with_a_fixed_split(tmp_path):
    data = load("digits", tmp_path)
    assert data.task == "image" and data.num_classes == 10
    assert data.train.x.shape == (1438, 8, 8, 1) and data.test.x.shape == (359, 8, 8, 1)
    assert data.train.x.dtype == np.float32 and data.train.y.dtype == np.int64
    assert data.train.x.min() == 0 and data.train.x.max() == 1
    assert set(np.unique(data.train.y)) == set(range(10))
    again = load("digits", tmp_path / "elsewhere")
    np.testing.assert_array_equal(again.test.y, data.test.y)
    assert data.fingerprint == get_spec("digits").fingerprint


def test_breast_cancer_rows_lie_in_the_unit_ball(tmp_path):
    data = load("breast-cancer", tmp_path)
    assert data.task == "tabular" and data.num_classes == 2
    assert data.train.x.shape == (455, 30) and data.test.x.shape == (114, 30)
    for split in (data.train, data.test):
        assert split.x.dtype == np.float32 and split.x.min() >= 0
        assert np.linalg.norm(split.x, axis=1).max() <= 1 + 1e-6
        assert set(np.unique(split.y)) == {0, 1}


def test_changed_sklearn_arrays_are_caught(tmp_path, monkeypatch):
    archives.expect(monkeypatch, "digits", (("sklearn arrays", "sha256:" + "0" * 64),))
    with pytest.raises(DataError, match="sha256 mismatch"):
        load("digits", tmp_path)


# --- the real offline sources (installed by `privboard data install`) ---------------

def real_splits(name):
    """Read and verify the real sources (bypassing the cache), or skip if absent."""
    spec, root = get_spec(name), datasets.data_dir()
    labels = tuple(label for label, _ in spec.checksums)
    for filename in labels if spec.files is None else spec.files:
        try:
            spec.locate(root, filename)
        except DataError as error:
            pytest.skip(f"{name} is not installed (run `privboard data install`): {error}")
    return spec.reader(spec, root)


@pytest.mark.parametrize("name", ["mnist", "fashion-mnist"])
def test_real_mnist_format_sets_match_the_official_files(name):
    train, test = real_splits(name)  # raises DataError unless all four sha256 match
    assert train.x.shape == (60000, 28, 28, 1) and test.x.shape == (10000, 28, 28, 1)
    assert train.x.dtype == np.float32 and 0 == train.x.min() and train.x.max() == 1
    assert np.array_equal(np.bincount(test.y, minlength=10) > 0, np.ones(10, bool))
    assert train.y.max() == 9 and train.y.dtype == np.int64


def test_real_adult_has_the_official_rows_and_unit_norm():
    train, test = real_splits("adult")
    assert len(train) == 32561 and len(test) == 16281  # no row dropped for "?"
    assert train.x.shape[1] == test.x.shape[1] == 108
    assert np.linalg.norm(train.x, axis=1).max() <= 1 + 1e-6
    assert set(np.unique(test.y)) == {0, 1}
    assert 0.2 < train.y.mean() < 0.3  # about a quarter earn more than $50K


def test_real_data_loads_with_its_fingerprint():
    if SPECS["adult"].missing(datasets.data_dir()) is not None:
        pytest.skip("adult is not installed (run `privboard data install`)")
    data = load("adult")
    assert data.fingerprint == SPECS["adult"].fingerprint
    assert data.task == "tabular" and data.num_classes == 2 and len(data.train) == 32561
