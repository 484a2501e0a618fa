"""PATE with co-teaching, PATE+ and PATE++ (Zhang, Ma, Lou, Xiong, Jiang. Correcting
noisy labels in PATE. IEEE Big Data 2020): students that learn from the aggregator's
noisy labels. The teachers, the Confident-GNMax aggregator and its accounting are
PATE's (methods.pate); only the student changes, so the four students of a cell (the
original PATE student is ``pate-confident-gnmax``) share the cached teacher votes.

The paper's setting: 250 teachers on Fashion-MNIST shards; Confident-GNMax labels 2,200
queries of the first 9,000 test images; batch 100, Adam at learning rate 0.01; alpha
0.9; R(e) = 1 - beta min(e / 15, 1). Where the paper leaves a choice open, these are
ours (recorded with every run, in the privacy details and the student's choices):
- 2,200 is the number of ANSWERED queries: queries are asked in order until 2,200 are
  answered, at most ``queries`` of them. The threshold check is charged on every query
  asked, GNMax on the answered ones; a target epsilon is met assuming all ``queries``
  are asked and answered.
- the aggregator's noise: threshold 150 and sigma1 100 with 250 teachers, sigma2
  calibrated to the cell's epsilon (the paper does not state its noise);
- epochs: ``student_epochs`` per training phase;
- the count table's decay: T <- alpha T + c_e, the decayed count of the paper's prose
  (its Algorithm 2 line 16, T <- T + alpha c_e, decays nothing); ``decay_rule``;
- tau is a fraction of the labelled set (Table 2's values are 200, ..., 800 / 2,200);
- the reported discriminator: the average of D1's and D2's probabilities (``report``).
"""
from __future__ import annotations

from typing import Any, ClassVar

from methods.pate import PateConfidentGnmax

PAPER = ("Zhang, Ma, Lou, Xiong, Jiang. Correcting noisy labels in PATE (PATE+ and "
         "PATE++). IEEE Big Data 2020")
STUDENT_DEFAULTS: dict[str, Any] = {
    "beta": 0.2,
    "report": "average",
}
# The paper's Fashion-MNIST setting (the aggregator's noise is ours, see above).
FASHION_SETTING: dict[str, Any] = {
    "threshold": 150.0, "sigma1": 100.0, "answered_target": 2200, "queries": 4000,
    "student_learning_rate": 0.01,
}


class _NoisyLabelStudent(PateConfidentGnmax):
    """Two discriminators that co-teach on the aggregator's labels."""

    paper = PAPER
    defaults: ClassVar[dict[str, Any]] = {**PateConfidentGnmax.defaults, **FASHION_SETTING,
                                          **STUDENT_DEFAULTS}

    def _student_settings(self) -> dict[str, Any]:
        return {key: self.hparams[key] for key in STUDENT_DEFAULTS}

    def variant(self) -> str:
        """The paper's own labels (Tables 1-3), so that its rows pair with ours; the
        aggregator's settings are in the configuration and on its page."""
        return f"beta={self.hparams['beta']:g}"


class PateCoTeaching(_NoisyLabelStudent):
    """Each discriminator trains on the small-loss labelled samples the other picks."""

    name = "pate-co-teaching"
    student_mode = "co-teaching"


class PatePlus(_NoisyLabelStudent):
    """PATE+: co-teaching+, restricted to the labelled samples D1 and D2 disagree on."""

    name = "pate-plus"
    student_mode = "co-teaching-plus"


class PatePlusPlus(_NoisyLabelStudent):
    """PATE++: PATE+ while counting each labelled sample's suspect epochs; the top tau
    fraction then loses its label and PATE+ is retrained."""

    name = "pate-plus-plus"
    student_mode = "pate-plus-plus"
    defaults: ClassVar[dict[str, Any]] = {**_NoisyLabelStudent.defaults, "tau": 0.318,
                                          "alpha": 0.9, "decay_rule": "decayed"}

    def _student_settings(self) -> dict[str, Any]:
        h = self.hparams
        return {**super()._student_settings(), "tau": h["tau"], "alpha": h["alpha"],
                "decay_rule": h["decay_rule"]}

    def variant(self) -> str:
        return f"{super().variant()}, tau={self.hparams['tau']:g}"
