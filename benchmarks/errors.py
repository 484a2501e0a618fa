"""The error classes of the harness and the methods: defined in the privacy layer, the
bottom of the project, which imports nothing else of it."""
from benchmarks.privacy.errors import (InputError, PrivateFailure, PrivboardError, UnknownName,
                                       unknown)

__all__ = ["InputError", "PrivateFailure", "PrivboardError", "UnknownName", "unknown"]
