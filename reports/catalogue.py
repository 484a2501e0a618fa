"""The facts of the method and dataset pages that do not come from run records: those
of the catalogue written beside the records (benchmarks.catalogue), never the live
registry or the local data cache, so that a site builds from records alone."""
from __future__ import annotations

from typing import Any

from benchmarks.privacy import PrivacyNotion
from reports.presentation import describe_notion


def method_facts(catalogue: dict[str, Any]) -> dict[str, dict]:
    """Per catalogued method: its paper, version, default hyperparameters and the notion
    it gives at a finite budget with those defaults, in words."""
    return {name: {"paper": facts["paper"], "version": facts["version"],
                   "tasks": ", ".join(facts["tasks"]), "defaults": facts["defaults"],
                   "notion": describe_notion(PrivacyNotion.from_dict(facts["notion"]))}
            for name, facts in sorted(catalogue["methods"].items())}


def dataset_facts(catalogue: dict[str, Any]) -> dict[str, dict]:
    """Per catalogued dataset: where it comes from, its licence and fingerprint, and its
    split sizes where the catalogue's writer had it installed."""
    return dict(sorted(catalogue["datasets"].items()))
