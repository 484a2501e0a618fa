"""The one error base class, at the bottom of the project so that the privacy layer's
errors are the harness's too: every bad input is a PrivboardError, and every command
turns one into a single line on stderr and exit code 2."""
from __future__ import annotations

import difflib


class PrivboardError(Exception):
    """Bad input to privboard: unknown names, bad budgets, bad files, bad settings."""


class InputError(PrivboardError, ValueError):
    """A value that no run can honour (a hyperparameter, a budget, a command argument)."""


class PrivateFailure(Exception):
    """A failure whose message may speak of the private training data (a solver's trace, a
    statistic of the rows): a record shows only ``public``, a line that speaks of nothing
    private, and keeps the message with its private diagnostics."""

    def __init__(self, public: str, detail: str) -> None:
        super().__init__(detail)
        self.public = public


class UnknownName(PrivboardError, LookupError):
    """An unknown method, dataset, suite, mechanism or cell; the message suggests the
    closest known name."""


# Past this many known names, an error line counts them instead of listing them all.
LISTED_NAMES = 20


def unknown(kind: str, name: str, known: list[str]) -> UnknownName:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    if close:
        hint = f"; did you mean {close[0]!r}?"
    elif len(known) > LISTED_NAMES:
        hint = f"; {len(known)} are known, e.g. {', '.join(sorted(known)[:3])}"
    else:
        hint = f"; known: {', '.join(sorted(known))}"
    return UnknownName(f"unknown {kind} {name!r}{hint}")
