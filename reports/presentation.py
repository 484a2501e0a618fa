"""How privacy notions, ledger charges and record fields read on the site.

Every page takes its words for a notion from here (and through it from
``benchmarks.privacy``), so a badge, its explanation and the neighbour relation of the
guarantee always agree.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

from benchmarks.privacy import Accountant, Kind, Neighbours, PrivacyNotion, Protects
from benchmarks.settings_chosen import Chosen, track_of

UNKNOWN_NOTION = ("unknown-notion", "Unknown notion", "the notion of these runs is not known.")
# Per scope of a notion: (css class, title, what it covers). Its order is the order of
# the notion filter and of the legends.
SCOPES = {
    "label-DP": ("label-dp", "Label-DP", ("protects the labels only (the inputs are public). "
                                          "Not comparable with full DP at the same epsilon.")),
    "full DP": ("full-dp", "Full DP", "protects inputs and labels."),
    "local randomised response": ("other-notion", "Local randomised response", (
        "the epsilon is NOT an overall model epsilon: it covers only the mechanism named "
        "here (local randomised response of each label), not the trained model.")),
    "non-private": ("non-private", "Non-private",
                    "no privacy: references trained on clean data."),
}
# The networks of methods.nn.models as the site names them.
MODEL_NAMES = {"cnn": "CPU CNN", "inception": "Inception", "resnet18_v2": "ResNet18-v2",
               "ncf": "NCF", "small-cnn": "small CNN", "teacher_cnn": "CPU teacher CNN",
               "pate_mnist_cnn": "PATE MNIST CNN", "pate_deep_cnn": "PATE deep CNN",
               "teacher_mlp": "teacher MLP"}
# A notion as a row's badge says it, e.g. "label-DP · sub · pure"; hover gives the words.
SHORT_SCOPES = {"label-dp": "label-DP", "full-dp": "full DP", "other-notion": "local",
                "non-private": "non-private", "unknown-notion": "unknown notion"}
SHORT_WORDS = {Neighbours.SUBSTITUTION.value: "sub", Neighbours.ADD_REMOVE.value: "add/remove",
               Kind.PURE.value: "pure", Kind.APPROXIMATE.value: "approx"}
# Datasets in reading order: the most used first, the others by name, Adult last.
FIRST_DATASETS = ("mnist", "fashion-mnist", "cifar10", "cifar100", "svhn", "kmnist")
LAST_DATASETS = ("adult",)
DATASET_TITLES = {"mnist": "MNIST", "fashion-mnist": "Fashion-MNIST", "cifar10": "CIFAR-10",
                  "cifar100": "CIFAR-100", "svhn": "SVHN", "kmnist": "KMNIST",
                  "adult": "Adult", "movielens-1m": "MovieLens-1M", "kddcup99": "KDD Cup 99",
                  "mnist-7v9": "MNIST 7 vs 9", "mnist-7v9-small": "MNIST 7 vs 9 (small)",
                  "digits": "Digits", "digits-7v9": "Digits 7 vs 9",
                  "breast-cancer": "Breast cancer"}
KIND_WORDS = {Kind.PURE.value: "pure epsilon-DP (delta = 0)",
              Kind.APPROXIMATE.value: "approximate (epsilon, delta)-DP",
              Kind.NONE.value: "none"}


def presentation(protects: str, neighbours: str) -> tuple[str, str, str]:
    """(css class, title, explanation) of a notion; the explanation names the neighbour
    relation of the guarantee."""
    try:
        scope = Protects(protects).scope
    except ValueError:
        return UNKNOWN_NOTION
    css, title, covers = SCOPES[scope]
    if scope == "non-private":
        return css, title, covers
    relation = neighbour_words(protects, neighbours)
    return css, title, f"{covers} {relation[0].upper()}{relation[1:]}."


def family_of(protects: str) -> str:
    """The css class of a notion's scope, which names its family on the site."""
    return presentation(protects, Neighbours.NONE.value)[0]


def short_notion(protects: str, neighbours: str, kind: str) -> str:
    """A notion in a few words: its family, neighbours and kind ("label-DP · sub · pure")."""
    family = family_of(protects)
    if family == "non-private":
        return SHORT_SCOPES[family]
    return " · ".join([SHORT_SCOPES[family], SHORT_WORDS.get(neighbours, neighbours),
                       SHORT_WORDS.get(kind, kind)])


def variant_beyond_model(variant: str, model: str) -> str:
    """A variant without the part that names the model a line already names."""
    return ", ".join(part for part in variant.split(", ")
                     if part and MODEL_NAMES.get(part, part) != model)


def ordered_datasets(names) -> list[str]:
    """Dataset names in reading order (FIRST_DATASETS, the others, LAST_DATASETS)."""
    def rank(name: str) -> tuple[int, int, str]:
        if name in FIRST_DATASETS:
            return 0, FIRST_DATASETS.index(name), name
        return (2 if name in LAST_DATASETS else 1), 0, name
    return sorted(names, key=rank)


def dataset_title(name: str) -> str:
    return DATASET_TITLES.get(name, name)


def neighbour_words(protects: str, neighbours: str) -> str:
    """What separates two neighbouring datasets, in the words of ``PrivacyNotion``."""
    try:
        notion = PrivacyNotion(Protects(protects), Neighbours(neighbours), Kind.PURE,
                               Accountant.NONE)
    except ValueError:
        return f"{neighbours} neighbours"
    return notion.neighbour_words


def describe(protects: str, neighbours: str, kind: str, accountant: str) -> dict[str, str]:
    """A notion in words, for a page's definition list (notions of records, of methods
    and of paper cells alike; a paper's accountant is free text)."""
    css, title, explanation = presentation(protects, neighbours)
    return {"css": css, "title": title, "explanation": explanation, "protects": protects,
            "neighbours": neighbour_words(protects, neighbours),
            "kind": KIND_WORDS.get(kind, kind), "accountant": accountant}


def describe_notion(notion: PrivacyNotion) -> dict[str, str]:
    return describe(notion.protects.value, notion.neighbours.value, notion.kind.value,
                    notion.accountant.value)


def ledger_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """One charge of a privacy ledger, as its table shows it."""
    touches = entry.get("touches", {})
    cost = dict(entry.get("cost", {}))
    cost.pop("orders", None)  # a curve's orders are the same for every charge
    return {"mechanism": entry.get("mechanism", ""), "field": touches.get("field", ""),
            "examples": touches.get("examples", ""), "group": touches.get("group", ""),
            "epsilon_alone": entry.get("epsilon_alone", ""),
            "cost": cost.get("type", ""), "details": json_text(entry.get("details"))}


def json_text(value: Any) -> str:
    return json.dumps(value, indent=1, sort_keys=True, default=str) if value else ""


def without_nan(row: dict[str, Any]) -> dict[str, Any]:
    return {name: None if isinstance(value, float) and math.isnan(value) else value
            for name, value in row.items()}


def slug(name: str) -> str:
    """A file name for a page of a method, dataset or configuration: names come from
    records too, and may hold any character."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "_"


def sort_key(value: float | None) -> str:
    """What the tables' script sorts a number by: text JavaScript parses, or empty for
    no value (sorted last)."""
    if value is None or math.isnan(value):
        return ""
    return "Infinity" if math.isinf(value) else repr(float(value))


def settings_badge(how: str, detail: str) -> dict:
    """How a row's settings were chosen (benchmarks.settings_chosen), as its badge, the
    badge's title and its track."""
    chosen = Chosen.from_dict({"how": how, "detail": detail})
    return {"track": track_of(chosen.how), "chosen": chosen.badge,
            "chosen_title": f"settings chosen by {chosen.describe()}"}
