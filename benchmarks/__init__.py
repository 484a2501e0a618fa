"""privboard's harness: registry, datasets, suites, runner, result store and CLI."""
from benchmarks.numerics import NUMERICS_VARIABLES  # noqa: F401  (before numpy and TensorFlow)
