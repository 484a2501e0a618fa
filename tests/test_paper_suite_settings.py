"""Every setting of the paper suite runs a tiny step here.

The paper suite is sized for a GPU, and no GPU runs this project's TensorFlow on the
machines its tests run on, so this is where its settings are exercised: each distinct
(dataset, method, settings) of ``benchmarks/suites/paper.toml``, read through the suite
loader (a new block is covered without touching this file), runs through the runner
(``run_cell``: the public part, fitting, probabilities of the right shape, the metrics
and the budget check) on a handful of examples of its dataset's real shape. The data
comes from tiny archives in the official formats, read by the real loaders. Only sizes
and iteration counts are shrunk: models, norms, schedules, augmentation, pre-training,
aggregators, students and priors stay as the suite sets them.
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

import archives  # tests/archives.py: pytest puts this folder on sys.path
from benchmarks import datasets
from benchmarks.context import RunContext
from benchmarks.contract import Dataset, Split
from benchmarks.datasets import adult, mnist_like
from benchmarks.datasets.color_images import CIFAR10_ARCHIVE, CIFAR100_ARCHIVE
from benchmarks.registry import get_method
from benchmarks.runner import run_cell
from benchmarks.suites import Cell, load_suite

pytestmark = pytest.mark.integration  # GPU-sized models: `make test-integration`

# Shrunk wherever a method has them. PATE's public part must be smaller than the test
# split (N_TEST), and DP-SGD's expected batch smaller than the training split.
TINY = {"epochs": 1, "batch_size": 8, "pretrain_epochs": 1, "teachers": 4,
        "teacher_epochs": 1, "public_size": 16, "queries": 16, "student_epochs": 1,
        "steps": 2, "em_iterations": 1, "mstep_steps": 1, "encoder_epochs": 1, "clusters": 4}
# Shrunk only where the suite sets them (None is a setting of its own: all the rows, or
# ask every query).
TINY_IF_SET = {"train_size": 12, "answered_target": 4}
N_TRAIN, N_TEST = 16, 24


def tiny_hparams(cell: Cell) -> dict:
    method = get_method(cell.method)
    h = {**cell.hparams, **{k: v for k, v in TINY.items() if k in method.defaults}}
    h.update({k: v for k, v in TINY_IF_SET.items() if h.get(k) is not None})
    if h.get("threshold") is not None:
        # Confident-GNMax's threshold counts votes: scaled with the teachers, or 4 of them
        # would almost never clear the suite's (150-300 of 250) and the student would
        # have no label. The noise stays as the suite has it.
        h["threshold"] *= TINY["teachers"] / cell.hparams["teachers"]
    return h


# Datasets whose tiny step is another's: the same input shape and classes give the same
# model and the same graph (their archives and loaders: tests/test_datasets_archives.py).
SAME_TINY_STEP = {"fashion-mnist": "mnist", "kmnist": "mnist"}


def settings() -> list[Cell]:
    """One cell per distinct tiny setting. Settings differing only in epsilon or seed,
    in what is shrunk (PATE's queries, DP-ERM's train_size), in a real-valued knob
    (beta, tau, learning rates, clip norms: the same code with another number) or in a
    dataset of the same shape run the same tiny step once; every model, mode, loss, prior
    and switch runs."""
    unique = {}
    for cell in load_suite("paper").cells:
        if cell.skip is None:
            tiny = dataclasses.replace(cell, hparams=tiny_hparams(cell))
            shape = {k: v for k, v in tiny.hparams.items() if not isinstance(v, float)}
            step = (SAME_TINY_STEP.get(cell.dataset, cell.dataset), cell.method,
                    json.dumps(shape, sort_keys=True))
            unique.setdefault(step, tiny)
    return list(unique.values())


def setting_id(cell: Cell) -> str:
    defaults = get_method(cell.method).defaults
    changed = {k: v for k, v in cell.hparams.items() if k not in TINY and v != defaults[k]}
    return " ".join([cell.dataset, cell.method, *(f"{k}={v}" for k, v in sorted(changed.items()))])


def _adult_wheel(root, rng):
    rows = [line + "\n" for line in archives.ADULT_DATA.splitlines() if line]
    header, *test = archives.ADULT_TEST.splitlines(keepends=True)
    return archives.write_adult_wheel(root / "sources" / adult.WHEEL,
                                      "".join(rows[i % len(rows)] for i in range(N_TRAIN)),
                                      header + "".join(test[i % 2] for i in range(N_TEST)))


def _kddcup(root, rng):
    rows = [archives.KDD_NORMAL, archives.KDD_ATTACK]
    return archives.write_kddcup(root / "kddcup99", [rows[i % 2] for i in range(N_TRAIN)],
                                 [rows[i % 2] for i in range(N_TEST)])


# Each builder writes a dataset's tiny archive into the data folder and returns the
# checksums its spec must expect. The sets PATE never runs on are smaller still.
ARCHIVES = {
    "mnist": lambda root, rng: archives.write_mnist_wheel(
        root / "sources" / mnist_like.MNIST_WHEEL, archives.idx_set(rng, N_TRAIN, N_TEST)),
    "fashion-mnist": lambda root, rng: archives.write_idx_gz(
        root / "fashion-mnist", archives.idx_set(rng, N_TRAIN, N_TEST), digest_of="uncompressed"),
    "kmnist": lambda root, rng: archives.write_idx_gz(
        root / "kmnist", archives.idx_set(rng, N_TRAIN, N_TEST), digest_of="file"),
    "cifar10": lambda root, rng: archives.write_cifar10(
        root / "cifar10" / CIFAR10_ARCHIVE, rng, per_batch=2, n_test=4)[0],
    "cifar100": lambda root, rng: archives.write_cifar100(
        root / "cifar100" / CIFAR100_ARCHIVE, rng, n_train=10, n_test=4)[0],
    "svhn": lambda root, rng: archives.write_svhn(
        root / "svhn", rng, rng.integers(0, 10, N_TRAIN), rng.integers(0, 10, N_TEST))[0],
    "movielens-1m": lambda root, rng: archives.write_movielens(
        root / "movielens-1m" / "ml-1m.zip", n=20)[0],
    "adult": _adult_wheel,
    "kddcup99": _kddcup,
}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    """A data folder of tiny archives, for the cells, for public pre-training sets loaded
    through the run context, and for PATE's teacher cache (shared by the module)."""
    root = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mnist_like, "DEBIAN_FASHION", root / "no-debian-package")
        for name, write in ARCHIVES.items():
            archives.expect(patch, name, write(root, rng))
        yield root


def tiny_dataset(name: str, root) -> Dataset:
    """The dataset read from its tiny archive. A derived one (MNIST 7 vs 9) cuts more
    examples per class than a tiny archive has, so it takes its parent's inputs with
    labels folded into its own classes."""
    spec = datasets.get_spec(name)
    source = spec.parent or name
    assert source in ARCHIVES, f"no tiny archive of {source}: add a builder to ARCHIVES"
    data = datasets.load(source, root)

    def fold(split: Split) -> Split:
        return Split(split.x, split.y % spec.num_classes)

    return Dataset(name, spec.task, spec.num_classes, fold(data.train), fold(data.test),
                   data.fingerprint)


@pytest.mark.parametrize("cell", settings(), ids=setting_id)
def test_paper_setting_runs_a_tiny_step(cell, data_dir):
    context = RunContext(seed=cell.seed, data_dir=data_dir)
    record = run_cell(cell, tiny_dataset(cell.dataset, data_dir), context)
    assert record.ok, f"{record.error}\n{context.diagnostics.get('traceback', '')}"
