"""The one error base class: every bad input the harness refuses is a PrivboardError,
and every command turns one into a single line on stderr and exit code 2."""
from __future__ import annotations


class PrivboardError(Exception):
    """Bad input to privboard: unknown names, bad budgets, bad files, bad settings."""


class InputError(PrivboardError, ValueError):
    """A value that no run can honour (a hyperparameter, a budget, a command argument)."""
