"""The test metrics, each with its direction, declared once.

Accuracy is in percentage points; RMSE (ratings 1-5) is judged at a hundredth of the
accuracy tolerance, since its differences are that much smaller.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from benchmarks.privacy.randomizers import optimal_k


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


@dataclasses.dataclass(frozen=True)
class PriorQuality:
    top1: float  # share of test examples whose label is their prior's top class
    top_k: float  # share whose label is in their prior's top-k* set
    mean_k: float  # mean k* over the test examples


def prior_quality(priors: np.ndarray, test_labels: np.ndarray,
                  rr_epsilon: float) -> PriorQuality:
    """How well released priors (N, K), one row per public test example, predict those
    examples' labels, where k* is RRWithPrior's optimal k at ``rr_epsilon``. Ties rank
    the smaller class first, as in RRWithPrior's top-k sets."""
    priors, labels = np.asarray(priors, dtype=float), np.asarray(test_labels)
    if priors.ndim != 2 or labels.shape != (len(priors),):
        raise ValueError(f"need (N, K) priors and N test labels; got {priors.shape} "
                         f"and {labels.shape}")
    rows, classes = np.arange(len(labels)), np.arange(priors.shape[1])
    own = priors[rows, labels][:, None]
    rank = np.count_nonzero((priors > own) | ((priors == own) & (classes < labels[:, None])),
                            axis=1)
    k = optimal_k(priors, rr_epsilon)
    return PriorQuality(top1=float(np.mean(rank < 1)), top_k=float(np.mean(rank < k)),
                        mean_k=float(np.mean(k)))
