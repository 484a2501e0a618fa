"""DP-SGD as a label-DP method: the same training (methods.dp_sgd) with its noisy clipped
sum charged under label substitution, where the inputs are public and neighbouring
datasets differ in one example's label.

Replacing one label moves that example's clipped gradient from one point of the C-ball to
another, up to 2C apart, so the sum is noised and charged at sensitivity 2C, as
LabelDP-Pro's is (methods.labeldp_pro): at equal epsilon it adds twice the noise of
full-DP DP-SGD under add/remove neighbours. It is LabelDP-Pro without its projection,
and so the baseline that tells what the projection adds. LabelDP-Pro's own DP-SGD
baseline (Ghazi et al., ICLR 2024, Tables 5 and 14) was accounted at sensitivity C.
"""
from __future__ import annotations

from typing import Any, ClassVar

from benchmarks.privacy import Accountant, Kind, Neighbours, PrivacyNotion, Protects
from methods.dp_sgd import PAPER, DPSGD

NOTION = PrivacyNotion(Protects.LABELS, Neighbours.SUBSTITUTION, Kind.APPROXIMATE,
                       Accountant.RDP)
# How far one example's clipped gradient moves when its label is replaced, in clip norms.
SUBSTITUTION_SENSITIVITY = 2


class DPSGDLabelDP(DPSGD):
    name = "dp-sgd-label-dp"
    paper = PAPER
    notion = NOTION
    version = 1
    gradient_sensitivity: ClassVar[float] = SUBSTITUTION_SENSITIVITY

    def training_details(self) -> dict[str, Any]:
        c = self._calibration or {}
        sigma = c.get("noise_multiplier")
        return {**super().training_details(),
                "notion": "label-DP, one label replaced; the inputs are public",
                "calibrated_noise_multiplier_at_2C": sigma,
                "noise_std_in_clip_norms": None if sigma is None
                else SUBSTITUTION_SENSITIVITY * sigma,
                "microbatching": "none: each example is clipped alone",
                "sensitivity": "2C: replacing one label moves one clipped gradient within "
                               "the C-ball"}

    def extra_metrics(self) -> dict[str, Any]:
        metrics = super().extra_metrics()
        return {**metrics, "noise_multiplier": SUBSTITUTION_SENSITIVITY
                * metrics["noise_multiplier"]}
