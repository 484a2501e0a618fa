"""The contract every method and dataset meets.

Nothing here imports TensorFlow: listing, reporting and ``--help`` stay instant.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, ClassVar

import numpy as np


@dataclasses.dataclass(frozen=True)
class PrivacyNotion:
    """What a privacy number means. It travels with every record to the leaderboard."""

    protects: str  # "labels" (label-DP), "inputs and labels" (full DP), "nothing"
    neighbours: str  # "substitution" (one record/label changed) or "add/remove"
    kind: str  # "pure" (delta = 0) or "approximate"
    accountant: str  # how the epsilon was obtained

    @property
    def short(self) -> str:
        if self.protects == "nothing":
            return "non-private"
        scope = "label-DP" if self.protects == "labels" else (
            "full DP" if self.protects == "inputs and labels" else self.protects)
        return f"{scope}, {self.neighbours} neighbours, {self.kind}"

    def as_dict(self) -> dict[str, str]:
        return {**dataclasses.asdict(self), "short": self.short}


NON_PRIVATE = PrivacyNotion("nothing", "none", "none", "none")


@dataclasses.dataclass(frozen=True)
class Budget:
    """The privacy budget of one cell. epsilon = inf means no privacy."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        eps = float(self.epsilon)
        if math.isnan(eps) or eps <= 0:
            raise ValueError(f"epsilon must be > 0 (inf allowed), got {self.epsilon!r}")
        delta = float(self.delta)
        if math.isnan(delta) or not 0 <= delta < 1:
            raise ValueError(f"delta must be in [0, 1), got {self.delta!r}")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", delta)

    @property
    def private(self) -> bool:
        return math.isfinite(self.epsilon)


@dataclasses.dataclass
class Spent:
    """What a fitted method actually spent, with method-specific accounting details."""

    epsilon: float
    delta: float = 0.0
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Split:
    x: np.ndarray  # images (N, H, W, C) float32 in [0, 1], or features (N, D)
    y: np.ndarray  # int labels (N,) in [0, num_classes)

    def __len__(self) -> int:
        return len(self.y)


@dataclasses.dataclass(frozen=True)
class Dataset:
    name: str
    task: str  # "image", "tabular" or "ratings"
    num_classes: int
    train: Split
    test: Split
    fingerprint: str  # sha256 over the verified source files


_REGISTRY: dict[str, type["Method"]] = {}


class Method:
    """Base class of every method. A concrete subclass with a ``name`` registers itself.

    Subclasses set the class attributes below and implement fit, predict_proba and
    spent. Heavy imports (TensorFlow) belong inside those methods, not at module top.
    """

    name: ClassVar[str]
    paper: ClassVar[str]
    notion: ClassVar[PrivacyNotion]
    version: ClassVar[int] = 1
    tasks: ClassVar[tuple[str, ...]] = ("image",)
    needs_delta: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = {}
    tiny_hparams: ClassVar[dict[str, Any]] = {}  # overrides for the fast contract tests

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" not in cls.__dict__:
            return  # an abstract family base
        if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
            other = _REGISTRY[cls.name]
            raise ValueError(f"method name {cls.name!r} is registered twice: "
                             f"{other.__module__}.{other.__qualname__} and "
                             f"{cls.__module__}.{cls.__qualname__}")
        for attr in ("paper", "notion"):
            if not hasattr(cls, attr):
                raise TypeError(f"method {cls.name!r} must define {attr!r}")
        _REGISTRY[cls.name] = cls

    def __init__(self, budget: Budget, seed: int = 0, **hparams: Any) -> None:
        unknown = sorted(set(hparams) - set(self.defaults))
        if unknown:
            raise ValueError(f"{self.name}: unknown hyperparameter(s) {unknown}; "
                             f"known: {sorted(self.defaults)}")
        self.budget = budget
        self.seed = int(seed)
        self.hparams = {**self.defaults, **hparams}
        self.progress: Callable[[str], None] = lambda message: None

    @classmethod
    def skip_reason(cls, task: str, budget: Budget) -> str | None:
        """Why this method cannot run a setting, or None if it can."""
        if task not in cls.tasks:
            return f"{cls.name} handles {', '.join(cls.tasks)} data, not {task}"
        if cls.notion == NON_PRIVATE and budget.private:
            return f"{cls.name} is non-private and runs only at epsilon = inf"
        if cls.needs_delta and budget.private and budget.delta == 0:
            return f"{cls.name} gives (epsilon, delta)-DP and needs delta > 0"
        return None

    def fit(self, train: Split, num_classes: int) -> "Method":
        raise NotImplementedError

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities, shape (N, num_classes)."""
        raise NotImplementedError

    def spent(self) -> Spent:
        raise NotImplementedError

    def variant(self) -> str:
        """Text that tells apart settings shown as separate leaderboard rows."""
        return ""

    def extra_metrics(self) -> dict[str, Any]:
        """Method-specific figures for the record (e.g. solver tolerance reached)."""
        return {}
