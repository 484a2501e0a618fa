"""The dataset layer: verified sources, preprocessing and a cache of the arrays.

Every dataset is verified against official checksums before use. Nothing here imports
TensorFlow: arrays are read with numpy and handed to methods as contract Splits.
"""
from benchmarks.datasets.core import (SPECS, DataError, DatasetSpec, data_dir, get_spec,
                                      load, register, status)
# Importing a module registers its datasets.
from benchmarks.datasets import (adult, color_images, kddcup, mnist_like,  # noqa: F401
                                 movielens, sklearn_sets)

__all__ = ["SPECS", "DataError", "DatasetSpec", "data_dir", "get_spec", "load", "register",
           "status"]
# Last: derived datasets are cut from the ones registered above.
from benchmarks.datasets import derived  # noqa: E402,F401
