"""Privacy notions as types: what a number's epsilon protects, against which neighbours,
pure or approximate, and which accountant produced it.

Every record, table and page takes its words from here, so the text above a row always
matches the neighbour relation of the guarantee below it.
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Any


class Field(enum.Enum):
    """What a privacy mechanism reads of an example."""

    LABELS = "labels"
    INPUTS = "inputs"
    RECORDS = "records"  # inputs and labels together


class Protects(enum.Enum):
    LABELS = "labels"
    RECORDS = "inputs and labels"
    NOTHING = "nothing"
    LOCAL_LABELS_AND_PIXELS = ("labels by local randomised response; pixels by per-pixel "
                               "randomised response, whose epsilon summed over an image's "
                               "pixels (in the ledger) protects no image")
    LOCAL_LABELS_GAUSSIAN_PIXELS = ("labels by local randomised response; pixels by "
                                    "Gaussian noise (no epsilon)")
    LOCAL_LABELS_CLEAN_PIXELS = ("labels by local randomised response; pixels NOT "
                                 "protected (the prior reads the clean pixels)")

    @classmethod
    def _missing_(cls, value):
        return _RENAMED.get(value)

    @property
    def scope(self) -> str:
        return {Protects.LABELS: "label-DP", Protects.RECORDS: "full DP",
                Protects.NOTHING: "non-private"}.get(self, "local randomised response")

    @property
    def fields(self) -> frozenset[Field]:
        """The ledger fields whose charges make up this notion's epsilon. Under label-DP
        the inputs are public; a local notion's epsilon is its label flip's."""
        if self is Protects.RECORDS:
            return frozenset(Field)
        if self is Protects.NOTHING:
            return frozenset()
        return frozenset({Field.LABELS, Field.RECORDS})


class Neighbours(enum.Enum):
    SUBSTITUTION = "substitution"
    ADD_REMOVE = "add/remove"
    NONE = "none"


class Kind(enum.Enum):
    PURE = "pure"
    APPROXIMATE = "approximate"
    NONE = "none"


class Accountant(enum.Enum):
    PURE_COMPOSITION = ("pure epsilon: parallel composition over disjoint examples, "
                        "sequential otherwise")
    RDP = "RDP accountant (dp_accounting)"
    LOCAL = ("local randomised response: each user's release is epsilon-DP for their "
             "label, and the model, post-processing of the releases, is epsilon-label-DP")
    NONE = "none"

    @classmethod
    def _missing_(cls, value):
        return _RENAMED.get(value)


# Texts of earlier records, read as the notions they named.
_RENAMED = {
    "labels and pixels, each by local randomised response": Protects.LOCAL_LABELS_AND_PIXELS,
    "local randomised response: each user's own epsilon, no model-level epsilon":
        Accountant.LOCAL,
}


@dataclasses.dataclass(frozen=True)
class PrivacyNotion:
    """What a privacy number means. It travels with every record to the leaderboard."""

    protects: Protects
    neighbours: Neighbours
    kind: Kind
    accountant: Accountant

    @property
    def private(self) -> bool:
        return self.protects is not Protects.NOTHING

    @property
    def short(self) -> str:
        if not self.private:
            return "non-private"
        return f"{self.protects.scope}, {self.neighbours.value} neighbours, {self.kind.value}"

    @property
    def neighbour_words(self) -> str:
        """What separates two neighbouring datasets, in words."""
        unit = {Protects.LABELS: "one example's label"}.get(
            self.protects, "one record" if self.protects is Protects.RECORDS else "one user's data")
        if self.neighbours is Neighbours.SUBSTITUTION:
            fixed = " (the dataset size n stays fixed)" if self.protects is Protects.RECORDS else ""
            return f"neighbouring datasets differ in {unit} replaced{fixed}"
        if self.neighbours is Neighbours.ADD_REMOVE:
            return f"neighbouring datasets differ by adding or removing {unit}"
        return "no neighbour relation: nothing is protected"

    def as_dict(self) -> dict[str, str]:
        return {"protects": self.protects.value, "neighbours": self.neighbours.value,
                "kind": self.kind.value, "accountant": self.accountant.value,
                "short": self.short}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "PrivacyNotion":
        """The notion of a stored record; ValueError names the field that is off."""
        values = []
        for name, enum_type in (("protects", Protects), ("neighbours", Neighbours),
                                ("kind", Kind), ("accountant", Accountant)):
            try:
                values.append(enum_type(data[name]))
            except (KeyError, ValueError):
                raise ValueError(f"privacy.{name} is {data.get(name)!r}, not one of "
                                 f"{[member.value for member in enum_type]}") from None
        return cls(*values)


NON_PRIVATE = PrivacyNotion(Protects.NOTHING, Neighbours.NONE, Kind.NONE, Accountant.NONE)
LABEL_DP_PURE = PrivacyNotion(Protects.LABELS, Neighbours.SUBSTITUTION, Kind.PURE,
                              Accountant.PURE_COMPOSITION)
