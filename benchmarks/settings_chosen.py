"""How a configuration's settings were chosen, declared by each suite block (``chosen``)
and carried by its records: tuning on the test split is how most published DP numbers
are made, and it is charged to no epsilon, so a reader needs to know which numbers had it.

    chosen = { a_priori = "a test fixture" }      # fixed before any data of this task was
                                                  # seen: a fixture, a library default,
                                                  # another dataset's setting (named)
    chosen = { published = "the paper's Table 3" }  # a paper's setting for this dataset (or
                                                  # its test split): its authors chose it,
                                                  # on that split as far as anyone can tell
    chosen = { public = "CIFAR-100" }             # tuned on public data
    chosen = { test = "mnist, epsilon 1, seed 0" }  # tuned on this dataset's test split,
                                                  # uncharged, at that cell
A block with ``[block.search]`` is tuned privately: its selection is charged
(benchmarks.tuning), and it declares nothing else.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from benchmarks.errors import InputError

A_PRIORI, PUBLISHED, PUBLIC, TEST, PRIVATE, UNDECLARED = (
    "a priori", "a paper on this dataset", "public data", "test split, uncharged",
    "private selection, charged", "undeclared")
_TOML_KEYS = {"a_priori": A_PRIORI, "published": PUBLISHED, "public": PUBLIC, "test": TEST}
BADGES = {A_PRIORI: "a priori", PUBLISHED: "paper-tuned", PUBLIC: "public data",
          TEST: "test-tuned", PRIVATE: "tuned privately", UNDECLARED: "not declared"}
# A ranking names its best per track: the settings that never saw this dataset's test
# split (fixed a priori, tuned on public data, or by a charged selection), and the
# others (a paper's for this dataset, tuned on its test split uncharged, or not saying),
# which a user could not reproduce.
HONEST_TRACK, TEST_TUNED_TRACK = "honest", "test-tuned"
TRACKS = (HONEST_TRACK, TEST_TUNED_TRACK)


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
                         f"{{ a_priori = \"...\" }}, {{ published = \"<paper, table>\" }}, "
                         f"{{ public = \"<data>\" }}, {{ test = \"<the cell tuned at>\" }}, "
                         f"got {value!r}")

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
