"""The test metrics, each with its direction, declared once.

Accuracy is in percentage points; RMSE (ratings 1-5) is judged at a hundredth of the
accuracy tolerance, since its differences are that much smaller.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class Metric:
    name: str
    label: str  # axis and column text
    higher_is_better: bool
    tolerance_scale: float  # a tolerance in accuracy points, converted to this metric
    decimals: int

    def better(self, a: float, b: float) -> bool:
        return a > b if self.higher_is_better else a < b

    def format(self, value: float, signed: bool = False) -> str:
        return f"{value:{'+' if signed else ''}.{self.decimals}f}"


METRICS = {
    "accuracy_pct": Metric("accuracy_pct", "test accuracy (%)", True, 1.0, 2),
    "rmse": Metric("rmse", "test RMSE", False, 0.01, 3),
}
DEFAULT_METRIC = "accuracy_pct"


def metric(name: str) -> Metric:
    return METRICS.get(name, METRICS[DEFAULT_METRIC])


def evaluate(task: str, num_classes: int, labels: np.ndarray,
             proba: np.ndarray) -> dict[str, float]:
    """Test metrics from class probabilities: accuracy, and for ratings the RMSE of the
    expected rating under the predicted distribution."""
    expected = (len(labels), num_classes)
    if proba.shape != expected:
        raise ValueError(f"predict_proba returned shape {proba.shape}, expected {expected}")
    metrics = {"accuracy_pct": 100.0 * float(np.mean(proba.argmax(1) == labels))}
    if task == "ratings":
        levels = np.arange(num_classes)
        metrics["rmse"] = math.sqrt(float(np.mean((proba @ levels - labels) ** 2)))
    return metrics
