"""CIFAR-10, CIFAR-100 and SVHN: 32x32 colour images from the official archives."""
from __future__ import annotations

import io
import pickle
import tarfile
from pathlib import Path

import numpy as np
import scipy.io

from benchmarks.contract import Split
from benchmarks.datasets.core import NOT_STATED, DataError, DatasetSpec, register
from benchmarks.datasets.splits import image_split

CIFAR10_ARCHIVE = "cifar-10-python.tar.gz"
CIFAR100_ARCHIVE = "cifar-100-python.tar.gz"
CIFAR_PAGE = "https://www.cs.toronto.edu/~kriz/cifar.html"


def _unpickled_members(spec: DatasetSpec, root: Path, filename: str,
                       members: list[str]) -> dict[str, dict]:
    # The archive is verified before any of its pickles is loaded.
    path, archive = spec.read_verified(root, filename)
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            return {member: pickle.load(tar.extractfile(member), encoding="bytes")
                    for member in members}
    except (tarfile.TarError, KeyError, pickle.UnpicklingError, EOFError) as error:
        raise DataError(path, f"not a readable CIFAR archive ({error})",
                        spec.expected(filename), spec.where(root)) from error


def _cifar_split(batches: list[dict], label_key: bytes) -> Split:
    # Each row is 3072 bytes: the red, green and blue 32x32 planes in turn.
    pixels = np.concatenate([np.asarray(b[b"data"], np.uint8) for b in batches])
    pixels = pixels.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    labels = np.concatenate([np.asarray(b[label_key]) for b in batches])
    return image_split(pixels, labels)


def read_cifar10(spec: DatasetSpec, root: Path) -> tuple[Split, Split]:
    train_names = [f"cifar-10-batches-py/data_batch_{i}" for i in range(1, 6)]
    test_name = "cifar-10-batches-py/test_batch"
    batches = _unpickled_members(spec, root, CIFAR10_ARCHIVE, train_names + [test_name])
    return (_cifar_split([batches[name] for name in train_names], b"labels"),
            _cifar_split([batches[test_name]], b"labels"))


def read_cifar100(spec: DatasetSpec, root: Path) -> tuple[Split, Split]:
    names = ["cifar-100-python/train", "cifar-100-python/test"]
    batches = _unpickled_members(spec, root, CIFAR100_ARCHIVE, names)
    return (_cifar_split([batches[names[0]]], b"fine_labels"),
            _cifar_split([batches[names[1]]], b"fine_labels"))


def _svhn_split(spec: DatasetSpec, root: Path, filename: str) -> Split:
    path, data = spec.read_verified(root, filename)
    try:
        mat = scipy.io.loadmat(io.BytesIO(data))
        pixels = np.asarray(mat["X"], np.uint8).transpose(3, 0, 1, 2)  # (32,32,3,N) -> NHWC
        labels = np.asarray(mat["y"]).reshape(-1) % 10  # SVHN writes the digit 0 as 10
    except (ValueError, KeyError) as error:
        raise DataError(path, f"not a readable SVHN .mat file ({error})",
                        spec.expected(filename), spec.where(root)) from error
    return image_split(pixels, labels)


def read_svhn(spec: DatasetSpec, root: Path) -> tuple[Split, Split]:
    return _svhn_split(spec, root, "train_32x32.mat"), _svhn_split(spec, root, "test_32x32.mat")


CIFAR_CITATION = ("Krizhevsky. Learning multiple layers of features from tiny images. "
                  "Technical report, University of Toronto, 2009.")
CIFAR_LICENCE = f"{NOT_STATED} (the CIFAR page gives no licence)"

register(DatasetSpec(
    name="cifar10", task="image", num_classes=10, citation=CIFAR_CITATION,
    # md5 published on the CIFAR page; the same value is torchvision's CIFAR10.tgz_md5.
    checksums=((CIFAR10_ARCHIVE, "md5:c58f30108f718f92721af3b95e74349a"),),
    reader=read_cifar10, obtain=CIFAR_PAGE, licence=CIFAR_LICENCE,
))

register(DatasetSpec(
    name="cifar100", task="image", num_classes=100, citation=CIFAR_CITATION,
    # md5 published on the CIFAR page; the same value is torchvision's CIFAR100.tgz_md5.
    checksums=((CIFAR100_ARCHIVE, "md5:eb9058c3a382ffc7106e4002c42a8d85"),),
    reader=read_cifar100, obtain=CIFAR_PAGE, licence=CIFAR_LICENCE,
))

register(DatasetSpec(
    name="svhn", task="image", num_classes=10,
    citation="Netzer, Wang, Coates, Bissacco, Wu, Ng. Reading digits in natural images with "
             "unsupervised feature learning. NIPS Workshop on Deep Learning, 2011.",
    # md5 of the cropped-digit files, as registered in torchvision's SVHN.split_list.
    checksums=(("train_32x32.mat", "md5:e26dedcc434d2e4c54c9b2d4a06d8373"),
               ("test_32x32.mat", "md5:eb5a983be6a315427106f1b164d9cef3")),
    reader=read_svhn, obtain="http://ufldl.stanford.edu/housenumbers/, format 2",
    licence="for non-commercial use only, as the SVHN page states",
))
