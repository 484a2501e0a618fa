"""DP-ERM: output and objective perturbation for regularised linear classifiers
(Chaudhuri, Monteleoni, Sarwate. Differentially private empirical risk minimization.
JMLR 2011), with optional random Fourier features and private tuning of Lambda.

Objective, for rows ||x_i|| <= 1 and y_i in {-1, +1}:
    J(f) = (1/n) sum_i l(y_i f.x_i) + (Lambda/2) ||f||^2.
Output perturbation releases argmin J + b with beta = n Lambda epsilon / 2.
Objective perturbation releases argmin J(f) + (1/n) b.f + (Delta/2) ||f||^2 with
beta = epsilon'/2. Both are epsilon-DP for inputs and labels under the substitution of
one record in a dataset of fixed size n; their noise, calibration and charge are the
privacy layer's (benchmarks.privacy.erm_noise).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np
from scipy.special import expit

from benchmarks.contract import Budget, Method, Split
from benchmarks.errors import InputError
from benchmarks.privacy import (Accountant, Kind, Neighbours, PrivacyNotion, Protects,
                                Touches, Unprotected, records)
from benchmarks.privacy.erm_noise import (exponential_mechanism, objective_perturbation,
                                          output_perturbation)
from methods.erm_solver import ErmSolution, MarginLoss, minimise_erm
from methods.random_features import RandomFourierFeatures, check_rbf_params, draw_rbf_features

KERNELS = ("linear", "rbf")
# Rows normalised to norm 1 in float32 may exceed it by rounding; such rows are scaled
# back to norm 1 exactly, while anything further out is a real precondition failure.
_NORM_ROUNDING = 1e-5


# --------------------------------------------------------------------------- the methods

@dataclasses.dataclass(frozen=True)
class _Fit:
    """One trained linear model on one part of the data, with its public calibration."""

    weights: np.ndarray
    details: dict[str, Any]  # public: Lambda, n and the noise calibration
    solution: ErmSolution  # the minimiser the weights come from
    strong_convexity: float  # of the minimised objective: Lambda (+ Delta)
    noise: np.ndarray | None = None  # b; None when epsilon = inf

    @property
    def distance_bound(self) -> float:
        """||solution - exact minimiser|| <= gradient norm / strong convexity."""
        return self.solution.gradient_norm / self.strong_convexity


@dataclasses.dataclass(frozen=True)
class _Trained:
    released: _Fit
    fits: list[_Fit]  # every model trained (several under private tuning)
    tuning: dict[str, Any] | None = None


class DpErm(Method):
    """The shared family: data checks, features, solver, tuning. Subclasses choose where
    the noise goes (``_train_private``)."""

    paper = ("Chaudhuri, Monteleoni, Sarwate. Differentially private empirical risk "
             "minimization. JMLR 12, 2011")
    notion = PrivacyNotion(Protects.RECORDS, Neighbours.SUBSTITUTION, Kind.PURE,
                           Accountant.PURE_COMPOSITION)
    tasks = ("tabular",)
    binary_only: ClassVar[bool] = True  # the contract tests then fit on two classes
    defaults: ClassVar[dict[str, Any]] = {
        "loss": "logistic",  # or "huber"
        "huber_h": 0.5,
        "regularization": 1e-3,  # Lambda
        "kernel": "linear",  # or "rbf" (random Fourier features)
        "rff_dim": 500,
        "rff_gamma": 1.0,
        # Private tuning over these Lambdas (Algorithm 4), replacing regularization; [] = off
        "tune_lambdas": [],
        "train_size": None,  # deterministic subsample of the training set; None = all
        # L2 norm of the objective's gradient at the solution, relative to max(1, ||b||/n)
        "gradient_tolerance": 1e-10,
    }
    perturbation: ClassVar[str]

    def __init__(self, budget: Budget, seed: int = 0, **hparams: Any) -> None:
        super().__init__(budget, seed, **hparams)
        hp = self.hparams
        self.loss = MarginLoss(hp["loss"], hp["huber_h"])
        self.lambdas = [_positive("regularization", hp["regularization"])]
        if hp["tune_lambdas"]:
            if isinstance(hp["tune_lambdas"], (str, bytes)) or not hasattr(hp["tune_lambdas"], "__len__"):
                raise InputError(f"tune_lambdas must be a list of numbers, got {hp['tune_lambdas']!r}")
            self.lambdas = [_positive("tune_lambdas entry", v) for v in hp["tune_lambdas"]]
        if hp["kernel"] not in KERNELS:
            raise InputError(f"kernel must be one of {KERNELS}, got {hp['kernel']!r}")
        if hp["train_size"] is not None and not _is_positive_int(hp["train_size"]):
            raise InputError(f"train_size must be a positive integer or None, got {hp['train_size']!r}")
        _positive("gradient_tolerance", hp["gradient_tolerance"])
        if hp["kernel"] == "rbf":
            check_rbf_params(hp["rff_dim"], hp["rff_gamma"])
        self._result: _Trained | None = None
        self._features: RandomFourierFeatures | None = None

    def _train(self, features: np.ndarray, signs: np.ndarray, regularization: float,
               rng: np.random.Generator, rows: np.ndarray) -> _Fit:
        """One model with Lambda = ``regularization`` on the training rows ``rows``,
        charged to the ledger; epsilon = inf gives the exact, noiseless minimiser of J,
        the same for both perturbations."""
        touched = records(rows, f"Lambda={regularization:g}")
        if self.budget.private:
            return self._train_private(features, signs, regularization, rng, touched)
        self.ctx.ledger.charge("exact minimiser (no noise)", touched,
                               Unprotected("the non-private optimum, the reference"))
        solution = self._minimise(features, signs, regularization)
        details = {"Lambda": regularization, "n": len(features)}
        return _Fit(solution.weights, details, solution, regularization)

    def _train_private(self, features: np.ndarray, signs: np.ndarray, regularization: float,
                       rng: np.random.Generator, touched: Touches) -> _Fit:
        """Where the noise goes (the subclasses), charged to ``touched``."""
        raise NotImplementedError

    def _minimise(self, features, signs, regularization, linear_term=None) -> ErmSolution:
        return minimise_erm(features, signs, self.loss, regularization, linear_term,
                            self.hparams["gradient_tolerance"])

    def fit(self, train: Split, num_classes: int) -> "DpErm":
        x, signs = _checked_data(train, num_classes, self.name)
        rows = np.arange(len(x))  # the training rows used, as indices into ``train``
        if self.hparams["train_size"] is not None:
            size = self.hparams["train_size"]
            if size > len(x):
                raise InputError(f"train_size {size} exceeds the {len(x)} training rows")
            rows = np.sort(self.ctx.rng("subsample").permutation(len(x))[:size])
            x, signs = x[rows], signs[rows]
        rff = None
        if self.hparams["kernel"] == "rbf":
            rff = draw_rbf_features(x.shape[1], self.hparams["rff_dim"], self.hparams["rff_gamma"],
                                    self.ctx.rng("random features"))
        features = _within_unit_ball(rff.transform(x) if rff else x)
        noise_rngs = [self.ctx.rng(f"noise {i}") for i in range(len(self.lambdas))]
        if not self.hparams["tune_lambdas"]:
            self.progress(f"{self.name}: n={len(features)}, d={features.shape[1]}")
            fit = self._train(features, signs, self.lambdas[0], noise_rngs[0], rows)
            result = _Trained(fit, [fit])
        else:
            result = self._tune(features, signs, rows, noise_rngs)
        # Assigned together and last, so a failed fit leaves no half-updated model.
        self._result, self._features, self.weights = result, rff, result.released.weights
        self._diagnose_solver()
        return self

    def _tune(self, features, signs, rows, noise_rngs) -> _Trained:
        """Algorithm 4: f_i trained with Lambda_i on part i, chosen by an exponential
        mechanism on the mistakes z_i of part m+1. A record lies in exactly one part: in a
        training part it moves only its f_i (epsilon-DP; the choice is post-processing),
        in the held-out part only the choice (epsilon-DP). The ledger's parallel
        composition gives epsilon in total, not (m+1) epsilon."""
        m = len(self.lambdas)
        parts = np.array_split(self.ctx.rng("tuning partition").permutation(len(features)), m + 1)
        if min(len(p) for p in parts) == 0:
            raise InputError(f"private tuning over {m} Lambdas needs at least {m + 1} "
                             f"training rows, got {len(features)}")
        held_out = parts[-1]
        fits = []
        for i, (lam, part, rng) in enumerate(zip(self.lambdas, parts, noise_rngs)):
            self.progress(f"{self.name}: tuning {i + 1}/{m}, Lambda={lam:g}, n={len(part)}")
            fits.append(self._train(features[part], signs[part], lam, rng, rows[part]))
        mistakes = held_out_mistakes(features[held_out], signs[held_out], fits)
        chosen = exponential_mechanism(self.ctx.ledger, mistakes, self.budget.epsilon,
                                       self.ctx.rng("selection"),
                                       records(rows[held_out], "held-out part"))
        # The counts are statistics of private rows: only the (private) choice is released.
        self.ctx.diagnose(held_out_mistakes=mistakes.tolist())
        tuning = {"lambdas": self.lambdas, "chosen": chosen,
                  "chosen_lambda": self.lambdas[chosen], "part_sizes": [len(p) for p in parts]}
        return _Trained(fits[chosen], fits, tuning)

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        if self._result is None:
            raise ValueError(f"{self.name}: call fit before predict_proba")
        x = np.asarray(x, dtype=np.float64)
        features = self._features.transform(x) if self._features else x
        # A sigmoid of the score: calibrated for the logistic loss, a monotone score for Huber.
        p = expit(features @ self.weights)
        return np.stack([1.0 - p, p], axis=1)

    def privacy_details(self) -> dict[str, Any]:
        if self._result is None:
            return {}
        details = {"perturbation": self.perturbation, **self._result.released.details}
        if self._result.tuning is not None:
            details["tuning"] = self._result.tuning
        return details

    def variant(self) -> str:
        hp = self.hparams
        parts = ["logistic" if hp["loss"] == "logistic" else f"huber h={hp['huber_h']:g}"]
        if hp["kernel"] == "rbf":
            parts.insert(0, f"rbf D={hp['rff_dim']} gamma={hp['rff_gamma']:g}")
        if hp["tune_lambdas"]:
            parts.append("+ private tuning")
        else:
            parts.append(f"Lambda={hp['regularization']:g}")
        if hp["train_size"] is not None:
            parts.append(f"n={hp['train_size']}")
        return ", ".join(parts)

    def _diagnose_solver(self) -> None:
        """The solver's trace depends on the private rows: kept as diagnostics only."""
        fits = self._result.fits
        self.ctx.diagnose(
            gradient_norm=max(f.solution.gradient_norm for f in fits),
            distance_to_minimiser_bound=max(f.distance_bound for f in fits),
            lbfgs_iterations=sum(f.solution.iterations for f in fits),
            newton_steps=sum(f.solution.newton_steps for f in fits),
            noise_norms=[float(np.linalg.norm(f.noise)) for f in fits if f.noise is not None])


class DpErmOutput(DpErm):
    name = "dp-erm-output"
    perturbation = "output"

    def _train_private(self, features, signs, regularization, rng, touched) -> _Fit:
        solution = self._minimise(features, signs, regularization)
        released, noise, beta = output_perturbation(
            self.ctx.ledger, solution.weights, epsilon=self.budget.epsilon,
            regularization=regularization, rng=rng, touches=touched)
        details = {"Lambda": regularization, "n": len(features), "beta": beta}
        return _Fit(released, details, solution, regularization, noise)


class DpErmObjective(DpErm):
    name = "dp-erm-objective"
    perturbation = "objective"

    def _train_private(self, features, signs, regularization, rng, touched) -> _Fit:
        n, dim = features.shape
        c = self.loss.curvature_bound
        solution, noise, calibration = objective_perturbation(
            self.ctx.ledger, dim, epsilon=self.budget.epsilon, regularization=regularization,
            curvature_bound=c, rng=rng, touches=touched,
            minimise=lambda noise, calibration: self._minimise(
                features, signs, regularization + calibration.extra_regularization, noise / n))
        strong_convexity = regularization + calibration.extra_regularization
        details = {"Lambda": regularization, "n": n, "c": c, "beta": calibration.beta,
                   "Delta": calibration.extra_regularization,
                   "epsilon_prime": calibration.epsilon_prime}
        return _Fit(solution.weights, details, solution, strong_convexity, noise)


# ------------------------------------------------------------------------------- helpers

def _checked_data(train: Split, num_classes: int, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Features as float64 and labels {0, 1} as signs {-1, +1}, or a ValueError."""
    if num_classes != 2:
        raise ValueError(f"{name} is a binary classifier; got num_classes={num_classes}")
    x = np.asarray(train.x, dtype=np.float64)
    y = np.asarray(train.y)
    if x.ndim != 2 or len(x) != len(y) or len(x) == 0:
        raise ValueError(f"{name} needs features (N, D) and labels (N,), got {x.shape} and {y.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name}: features contain NaN or infinity")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError(f"{name} needs labels in {{0, 1}}, got {sorted(np.unique(y).tolist())[:5]}")
    return x, np.where(y == 1, 1.0, -1.0)


def _within_unit_ball(features: np.ndarray) -> np.ndarray:
    """The guarantees need ||x_i|| <= 1: verify, and remove float rounding above 1."""
    norms = np.linalg.norm(features, axis=1)
    worst = int(np.argmax(norms))
    if norms[worst] > 1.0 + _NORM_ROUNDING:
        raise ValueError(f"DP-ERM needs every feature row to have L2 norm <= 1; row {worst} "
                         f"has norm {norms[worst]:.6g}")
    return features / np.maximum(norms, 1.0)[:, None]


def _predicted_signs(features: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """+1 iff the score is > 0, the same rule as argmax of predict_proba."""
    return np.where(features @ weights > 0, 1.0, -1.0)


def held_out_mistakes(features: np.ndarray, signs: np.ndarray, fits: list[_Fit]) -> np.ndarray:
    """z_i: the mistakes of each model on the held-out rows (and on nothing else: a row
    of a training part would move both its f_i and the choice)."""
    return np.array([int(np.sum(_predicted_signs(features, fit.weights) != signs))
                     for fit in fits])


def _is_positive_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value > 0


def _positive(what: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise InputError(f"{what} must be a finite number > 0, got {value!r}")
    return float(value)
