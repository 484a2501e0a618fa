"""The error classes of the harness and the methods: defined in the privacy layer, the
bottom of the project, which imports nothing else of it; and the one-line texts of an
error, whole or as a record may publish it."""
from benchmarks.privacy.errors import (InputError, PrivateFailure, PrivboardError, UnknownName,
                                       unknown)

__all__ = ["InputError", "PrivateFailure", "PrivboardError", "UnknownName", "one_line",
           "public_error", "unknown"]


def one_line(err: BaseException) -> str:
    """An error on one line: its type and its message."""
    message = " ".join(str(err).split()) or type(err).__name__
    return f"{type(err).__name__}: {message}"


def public_error(err: BaseException) -> str:
    """The error line a record publishes. A PrivboardError speaks of settings, budgets and
    files, and is shown whole; a PrivateFailure by its public line; any other exception
    raised inside a method may quote the private data, so only its type is shown (the
    whole message is in the private diagnostics)."""
    if isinstance(err, PrivboardError):
        return one_line(err)
    if isinstance(err, PrivateFailure):
        return f"{type(err).__name__}: {err.public}"
    return (f"{type(err).__name__}: the method failed; its message may quote the training "
            f"data, so it is kept with the private diagnostics")
