"""Synthetic records of a suite run on one model (label-dp-small) and of its privately
tuned twin suite (label-dp-small-tuned): a few methods at a few epsilons, 3 seeds each,
for the comparison's tests and the browser test."""
from __future__ import annotations

import copy
import json
from pathlib import Path

from benchmarks.records import CATALOGUE
from tests.leaderboard_inputs import catalogued, rehashed

GOLDEN = Path(__file__).parent / "golden" / "records"
SUITE = "label-dp-small"
# (method, epsilon): the three seeds' test accuracies. At e=1 labeldp-pro is best and
# alibi within its standard deviation (0.2); at e=2 alibi is best.
ACCURACIES = {
    ("alibi", 0.5): (80.0, 81.0, 82.0), ("alibi", 1.0): (94.0, 94.2, 94.4),
    ("alibi", 2.0): (96.0, 96.2, 96.4),
    ("labeldp-pro", 0.5): (93.0, 93.5, 94.0), ("labeldp-pro", 1.0): (94.1, 94.3, 94.5),
    ("labeldp-pro", 2.0): (95.0, 95.2, 95.4),
    ("dp-sgd", 0.5): (89.0, 90.0, 91.0), ("dp-sgd", 1.0): (91.5, 92.0, 92.5),
    ("dp-sgd-scatternet", 1.0): (95.0, 95.5, 96.0), ("dp-sgd-scatternet", 3.0): (98.0, 98.2, 98.4),
    ("non-private", float("inf")): (99.0, 99.1, 99.2),
}
# The variants the methods name (the model among them), where not empty.
VARIANTS = {"alibi": "small-cnn", "dp-sgd": "small-cnn, none norm",
            "dp-sgd-scatternet": "ScatterNet + linear, data normalisation"}
# The same methods with their settings chosen by private selection, at total epsilon 1.
TUNED_SUITE = "label-dp-small-tuned"
TUNED = {("alibi", 1.0): (90.0, 90.5, 91.0), ("dp-sgd", 1.0): (88.0, 88.5, 89.0)}
TEST_TUNED = {"how": "test split, uncharged", "detail": "mnist, epsilon 1, seed 0"}
# ScatterNet's records were made when its paper's settings were declared "a priori"; the
# catalogue beside them declares them as they are now: a paper's for this dataset.
WAS_A_PRIORI = {"how": "a priori", "detail": "Tramer and Boneh's MNIST setting"}
PAPER_TUNED = {"how": "a paper on this dataset", "detail": "Tramer and Boneh's MNIST setting"}
NOTIONS = {  # (protects, neighbours, kind, delta)
    "alibi": ("labels", "substitution", "pure", 0.0),
    "labeldp-pro": ("labels", "substitution", "approximate", 1e-5),
    "dp-sgd": ("inputs and labels", "add/remove", "approximate", 1e-5),
    "dp-sgd-scatternet": ("inputs and labels", "add/remove", "approximate", 1e-5),
    "non-private": ("nothing", "none", "none", 0.0),
}


def _record(template: dict, method: str, epsilon: float, seed: int, value: float,
            suite: str = SUITE, audit: dict | None = None) -> dict:
    protects, neighbours, kind, delta = NOTIONS[method]
    coded = "inf" if epsilon == float("inf") else epsilon
    record = copy.deepcopy(template)
    # ScatterNet's network is its own: its settings name no model.
    model = {} if method == "dp-sgd-scatternet" else {"model": "small-cnn"}
    record.update(method=method, epsilon=coded, delta=delta, seed=seed, suite=suite,
                  hparams={"batch_size": 1024, **model}, metrics={"accuracy_pct": value},
                  variant=VARIANTS.get(method, ""))
    record["privacy"].update(protects=protects, neighbours=neighbours, kind=kind, epsilon=coded,
                             delta=delta)
    if suite == SUITE:
        record["settings_chosen"] = WAS_A_PRIORI if method == "dp-sgd-scatternet" else TEST_TUNED
    if audit is not None:
        record.update(kind="audit", audit=audit)
    return rehashed(record)


def _tuned_record(template: dict, method: str, epsilon: float, seed: int,
                  value: float) -> dict:
    record = _record(template, method, epsilon, seed, value, suite=TUNED_SUITE)
    record.update(delta=1e-5, settings_chosen={"how": "private selection, charged",
                                               "detail": ""},
                  search={"space": {"peak_lr": [0.1, 0.2]}, "mean_candidates": 3,
                          "shape": 0, "validation_share": 0.1})
    record["privacy"].update(kind="approximate", delta=1e-5, details={
        "selected_hparams": {"peak_lr": 0.2 if seed else 0.1}, "candidate_epsilon": 0.49})
    return rehashed(record)


def comparison_records(folder: Path) -> Path:
    folder.mkdir(parents=True)
    template = json.loads((GOLDEN / "mnist-lp1st-e1-s0.json").read_text())
    audit = {**json.loads((GOLDEN / "mnist-lp1st-e1-s0-audit.json").read_text())["audit"],
             "method": "alibi"}
    found = [_record(template, method, epsilon, seed, value)
             for (method, epsilon), values in ACCURACIES.items()
             for seed, value in enumerate(values)]
    found += [_tuned_record(template, method, epsilon, seed, value)
              for (method, epsilon), values in TUNED.items()
              for seed, value in enumerate(values)]
    found.append(_record(template, "alibi", 1.0, 0, 93.0, audit=audit))
    # Another suite's run of a method: never in the comparison.
    found.append({**_record(template, "alibi", 1.0, 0, 10.0, suite="quick"),
                  "method": "lp-1st"})
    for record in found:
        record = rehashed(record)
        name = f"{record['cell_id']}.json"
        (folder / name).write_text(json.dumps(record))
    catalogued(None, folder)
    catalogue = json.loads((folder / CATALOGUE).read_text())
    catalogue["chosen"].update({record["config_id"]: PAPER_TUNED for record in map(rehashed, found)
                                if record["method"] == "dp-sgd-scatternet"})
    (folder / CATALOGUE).write_text(json.dumps(catalogue))
    return folder
