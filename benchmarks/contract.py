"""The contract every method and dataset meets.

Nothing here imports TensorFlow: listing, reporting and ``--help`` stay instant.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, ClassVar

import numpy as np

from benchmarks.context import RunContext
from benchmarks.errors import InputError
from benchmarks.privacy import NON_PRIVATE, PrivacyNotion, Total


@dataclasses.dataclass(frozen=True)
class Budget:
    """The privacy budget of one cell. epsilon = inf means no privacy."""

    epsilon: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        try:
            eps, delta = float(self.epsilon), float(self.delta)
        except (TypeError, ValueError):
            raise InputError(f"epsilon and delta must be numbers, got {self.epsilon!r}, "
                             f"{self.delta!r}") from None
        if math.isnan(eps) or eps <= 0:
            raise InputError(f"epsilon must be > 0 (inf allowed), got {self.epsilon!r}")
        if math.isnan(delta) or not 0 <= delta < 1:
            raise InputError(f"delta must be in [0, 1), got {self.delta!r}")
        object.__setattr__(self, "epsilon", eps)
        object.__setattr__(self, "delta", delta)

    @property
    def private(self) -> bool:
        return math.isfinite(self.epsilon)

    def covers(self, total: Total) -> bool:
        """Whether a ledger's total stays within this budget. The relative slack is for
        float rounding only (p = 1/(1+e^eps) maps back to eps + 1e-16)."""
        return total.epsilon <= self.epsilon * (1 + 1e-12) and total.delta <= self.delta


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

    Subclasses set the class attributes below and implement fit and predict_proba.
    Every privacy mechanism a fit calls is charged to ``self.ctx.ledger``; the run's
    epsilon is what the ledger composes (``spent``), never a number the method states.
    Randomness comes from ``self.ctx.rng(purpose)`` / ``self.ctx.seed_for(purpose)``.
    Heavy imports (TensorFlow) belong inside the methods, not at module top.
    """

    name: ClassVar[str]
    paper: ClassVar[str]
    notion: ClassVar[PrivacyNotion]  # at a finite budget with the default settings
    version: ClassVar[int] = 1
    # The protocol of its audited twin: raising it gives each twin a new cell (and shows
    # the twins audited before as superseded) and leaves the configurations, their runs
    # and their identities as they are.
    audit_protocol: ClassVar[int] = 1
    tasks: ClassVar[tuple[str, ...]] = ("image",)
    needs_delta: ClassVar[bool] = False
    defaults: ClassVar[dict[str, Any]] = {}
    tiny_hparams: ClassVar[dict[str, Any]] = {}  # overrides for the fast contract tests
    # What its cells of one dataset and seed train once and cache for each other (PATE's
    # teachers), if anything: cells side by side start such a cell while another trains
    # it only when nothing else is left (it would wait for the other's cache entry).
    cached_model: ClassVar[str | None] = None

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

    def __init__(self, budget: Budget, seed: int = 0, *, context: RunContext | None = None,
                 **hparams: Any) -> None:
        unknown = sorted(set(hparams) - set(self.defaults))
        if unknown:
            raise InputError(f"{self.name}: unknown hyperparameter(s) {unknown}; "
                             f"known: {sorted(self.defaults)}")
        # Made again, so checked again: a budget forged past Budget's own checks (epsilon
        # <= 0 or NaN) never reaches a fit.
        self.budget = Budget(budget.epsilon, budget.delta)
        self.ctx = context if context is not None else RunContext(seed=int(seed))
        self.hparams = {**self.defaults, **hparams}

    @property
    def seed(self) -> int:
        return self.ctx.seed

    @property
    def progress(self) -> Callable[[str], None]:
        return self.ctx.progress

    @classmethod
    def notion_for(cls, budget: Budget, hparams: dict[str, Any]) -> PrivacyNotion:
        """The notion of this method's number at a budget and settings. ``list``, the
        skip check, every record (failed ones too) and the site all take it from here."""
        return cls.notion if budget.private else NON_PRIVATE

    @classmethod
    def default_notion(cls) -> PrivacyNotion:
        """The notion at a finite budget with the default settings, as listings show it."""
        return cls.notion_for(Budget(1.0, 1e-5 if cls.needs_delta else 0.0), cls.defaults)

    @classmethod
    def skip_reason(cls, task: str, budget: Budget,
                    hparams: dict[str, Any] | None = None) -> str | None:
        """Why this method cannot run a setting, or None if it can."""
        hparams = {**cls.defaults, **(hparams or {})}
        if task not in cls.tasks:
            return f"{cls.name} handles {', '.join(cls.tasks)} data, not {task}"
        if not cls.notion_for(budget, hparams).private and budget.private:
            return f"{cls.name} is non-private and runs only at epsilon = inf"
        if cls.needs_delta and budget.private and budget.delta == 0:
            return f"{cls.name} gives (epsilon, delta)-DP and needs delta > 0"
        return None

    def fit(self, train: Split, num_classes: int) -> "Method":
        """Train on the private ``train``. A method whose ``public_part`` is positive is
        also given ``public_x``: the inputs, never the labels, of that many leading test
        examples, which are then left out of its evaluation."""
        raise NotImplementedError

    def public_part(self, dataset: str, test_size: int) -> int:
        """How many leading test examples this method takes as public unlabelled inputs
        (PATE's student data); 0 for methods that see only the training set."""
        return 0

    def released_public_labels(self) -> tuple[np.ndarray, np.ndarray] | None:
        """(indices into the public part, labels) that the method released for public
        inputs, if any; the runner scores them against the true public labels."""
        return None

    def public_priors(self, x: np.ndarray) -> tuple[np.ndarray, float] | None:
        """For methods that release label priors (the cluster histograms of the SSL
        priors): the prior (N, num_classes) those releases give public inputs ``x``, and
        the RRWithPrior epsilon whose top-k* sets judge it. The runner scores them against
        the test labels, so no method reads one."""
        return None

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities, shape (N, num_classes)."""
        raise NotImplementedError

    def spent(self) -> Total:
        """What the ledger's charges compose to under this run's notion."""
        return self.ctx.ledger.total(self.notion_for(self.budget, self.hparams),
                                     self.budget.delta)

    def planned_curve(self, train_size: int) -> np.ndarray:
        """The RDP curve (at rdp.ORDERS) that a fit on ``train_size`` examples will charge
        its worst example, known from the budget and settings alone, before any data is
        read: what a private selection of these settings is charged for
        (benchmarks.tuning). A pure epsilon-DP fit is within the pure curve of its budget,
        which its ledger is held to; other methods state their own curve, or cannot be
        tuned privately."""
        from benchmarks.privacy import Kind, rdp

        notion = self.notion_for(self.budget, self.hparams)
        if notion.private and notion.kind is Kind.PURE:
            return rdp.pure_rdp(self.budget.epsilon)
        raise InputError(f"{self.name} cannot be tuned privately: it states no RDP curve "
                         f"for its fit before training")

    def privacy_details(self) -> dict[str, Any]:
        """Public accounting details beyond the ledger (calibrated noise, stage settings).
        Nothing computed from private data unless a charge on the ledger covers it."""
        return {}

    def variant(self) -> str:
        """A display label that tells apart settings shown as separate leaderboard rows.
        Rows are grouped by configuration identity, never by this text."""
        return ""

    def extra_metrics(self) -> dict[str, Any]:
        """Public figures for the record: metrics on public test data, or functions of
        the released outputs. Statistics of private data go to ``ctx.diagnose``."""
        return {}
