"""How a configuration's settings were chosen, declared by each suite block (``chosen``)
and carried by its records: tuning on the test split is how most published DP numbers
are made, and it is charged to no epsilon, so a reader needs to know which numbers had it.

    chosen = "a priori"                              # the paper's, or fixed before looking
    chosen = { a_priori = "the paper's Table 3" }    # the same, saying where from
    chosen = { public = "CIFAR-100" }                # tuned on public data
    chosen = { test = "mnist, epsilon 1, seed 0" }   # tuned on this dataset's test split,
                                                     # uncharged, at that cell
A block with ``[block.search]`` is tuned privately: its selection is charged
(benchmarks.tuning), and it declares nothing else.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from benchmarks.errors import InputError

A_PRIORI, PUBLIC, TEST, PRIVATE, UNDECLARED = (
    "a priori", "public data", "test split, uncharged", "private selection, charged",
    "undeclared")
_TOML_KEYS = {"a_priori": A_PRIORI, "public": PUBLIC, "test": TEST}
BADGES = {A_PRIORI: "a priori", PUBLIC: "public data", TEST: "test-tuned",
          PRIVATE: "tuned privately", UNDECLARED: "not declared"}
# A ranking names its best per track: the settings that never saw the test split (fixed
# a priori, tuned on public data, or by a charged selection), and the others (tuned on
# the test split uncharged, or not saying), which a user could not reproduce.
HONEST_TRACK, TEST_TUNED_TRACK = "honest", "test-tuned"


def track_of(how: str) -> str:
    return HONEST_TRACK if how in (A_PRIORI, PUBLIC, PRIVATE) else TEST_TUNED_TRACK


@dataclasses.dataclass(frozen=True)
class Chosen:
    how: str
    detail: str = ""  # where from: the paper's table, the public data, the tuning cell

    @classmethod
    def from_toml(cls, value: Any, where: str) -> "Chosen":
        if value == "a priori":
            return cls(A_PRIORI)
        if (isinstance(value, dict) and len(value) == 1 and set(value) <= set(_TOML_KEYS)
                and isinstance(detail := next(iter(value.values())), str) and detail.strip()):
            return cls(_TOML_KEYS[next(iter(value))], detail.strip())
        raise InputError(f"{where}: chosen must be \"a priori\" or one of "
                         f"{{ a_priori = \"...\" }}, {{ public = \"<data>\" }}, "
                         f"{{ test = \"<the cell tuned at>\" }}, got {value!r}")

    @classmethod
    def from_dict(cls, data: Any) -> "Chosen":
        if not isinstance(data, dict) or data.get("how") not in BADGES:
            return cls(UNDECLARED)
        return cls(data["how"], str(data.get("detail", "")))

    def as_dict(self) -> dict[str, str]:
        return {"how": self.how, "detail": self.detail}

    @property
    def badge(self) -> str:
        return BADGES[self.how]

    def describe(self) -> str:
        return f"{self.how}: {self.detail}" if self.detail else self.how
