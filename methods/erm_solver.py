"""The exact minimiser DP-ERM's guarantees assume, for a linear tf.keras model.

Objective over the weights f of a bias-free Dense(1) layer, for features x_i with
||x_i|| <= 1 and signs s_i in {-1, +1}:

    (1/n) sum_i loss(s_i f.x_i) + (regularization/2) ||f||^2 + linear_term.f

It is strongly convex, so a full-batch L-BFGS in float64 heads for its unique minimiser.
Near it, the objective's decrease drops below the rounding error of its value and the
L-BFGS line search can stall short of the tolerance; safeguarded Newton steps (exact
Hessian of the same Keras model, a step kept only if it lowers the gradient norm) then
finish the job. The solver checks the final gradient norm rather than trusting any
optimiser's status, because that norm bounds the distance to the exact minimiser:
||f - f*|| <= ||grad|| / regularization. The tolerance is relative to
max(1, ||linear_term||): a large noise term makes both the minimiser and the rounding
error of the gradient proportionally large.

No bias: a constant feature would have to be part of x_i before the rows are scaled to
norm <= 1, otherwise the sensitivity bound breaks; the datasets supply no such column.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy import optimize

from benchmarks.errors import PrivateFailure

LOSS_NAMES = ("logistic", "huber")
_MAX_ITERATIONS = 20_000
_MAX_NEWTON_STEPS = 20
_MAX_STEP_HALVINGS = 30


@dataclasses.dataclass(frozen=True)
class MarginLoss:
    """A loss l(z) of the margin z = y f.x with |l'(z)| <= 1 and l''(z) <= curvature_bound."""

    name: str
    huber_h: float = 0.5

    def __post_init__(self) -> None:
        if self.name not in LOSS_NAMES:
            raise ValueError(f"loss must be one of {LOSS_NAMES}, got {self.name!r}")
        if not (isinstance(self.huber_h, (int, float)) and 0 < self.huber_h < math.inf):
            raise ValueError(f"huber_h must be a finite number > 0, got {self.huber_h!r}")

    @property
    def curvature_bound(self) -> float:
        """c of the objective-perturbation theorem: 1/4 (logistic), 1/(2h) (Huber)."""
        return 0.25 if self.name == "logistic" else 1.0 / (2.0 * self.huber_h)

    def __call__(self, z):
        """Elementwise loss of a float64 tensor of margins."""
        import tensorflow as tf

        if self.name == "logistic":
            return tf.math.softplus(-z)
        # Huber SVM loss of the paper (Section 3.4.2): linear, then quadratic, then zero.
        h = self.huber_h
        quadratic = tf.square(1.0 + h - z) / (4.0 * h)
        return tf.where(z > 1.0 + h, tf.zeros_like(z), tf.where(z < 1.0 - h, 1.0 - z, quadratic))


@dataclasses.dataclass(frozen=True)
class ErmSolution:
    weights: np.ndarray  # (d,) float64
    gradient_norm: float  # L2 norm of the objective's gradient at ``weights``
    iterations: int  # of L-BFGS
    newton_steps: int


def minimise_erm(features: np.ndarray, signs: np.ndarray, loss: MarginLoss,
                 regularization: float, linear_term: np.ndarray | None,
                 gradient_tolerance: float) -> ErmSolution:
    """Minimise the objective above; raise if the gradient norm stays above
    gradient_tolerance * max(1, ||linear_term||)."""
    import tensorflow as tf

    dim = features.shape[1]
    model = tf.keras.Sequential([
        tf.keras.Input(shape=(dim,), dtype=tf.float64),
        tf.keras.layers.Dense(1, use_bias=False, kernel_initializer="zeros", dtype="float64"),
    ])
    kernel = model.layers[0].kernel
    x = tf.constant(features, tf.float64)
    s = tf.constant(signs, tf.float64)
    linear_term = np.zeros(dim) if linear_term is None else np.asarray(linear_term, np.float64)
    linear = tf.constant(linear_term, tf.float64)
    target = gradient_tolerance * max(1.0, float(np.linalg.norm(linear_term)))

    def objective():
        margins = s * tf.squeeze(model(x), axis=1)
        weights = tf.squeeze(kernel, axis=1)
        return (tf.reduce_mean(loss(margins))
                + 0.5 * regularization * tf.reduce_sum(tf.square(weights))
                + tf.reduce_sum(linear * weights))

    @tf.function
    def value_and_gradient(flat_weights):
        kernel.assign(tf.reshape(flat_weights, (dim, 1)))
        with tf.GradientTape() as tape:
            value = objective()
        return value, tf.reshape(tape.gradient(value, kernel), [-1])

    def hessian(flat_weights):  # eager: needed at most a few times per solve
        """(1/n) X^T diag(l''(z)) X + regularization I, with l'' by automatic differentiation."""
        kernel.assign(tf.reshape(flat_weights, (dim, 1)))
        margins = s * tf.squeeze(model(x), axis=1)
        with tf.GradientTape() as outer:
            outer.watch(margins)
            with tf.GradientTape() as inner:
                inner.watch(margins)
                total = tf.reduce_sum(loss(margins))
            slopes = inner.gradient(total, margins)
        curvature = outer.gradient(slopes, margins)
        data_term = tf.matmul(x, x * curvature[:, None], transpose_a=True) / len(features)
        return data_term + regularization * tf.eye(dim, dtype=tf.float64)

    def scipy_objective(w: np.ndarray) -> tuple[float, np.ndarray]:
        value, gradient = value_and_gradient(tf.constant(w, tf.float64))
        return float(value), gradient.numpy()

    def gradient_at(w: np.ndarray) -> np.ndarray:
        return scipy_objective(w)[1]

    result = optimize.minimize(
        scipy_objective, np.zeros(dim), jac=True, method="L-BFGS-B",
        # gtol bounds the largest gradient entry; sqrt(d) of it bounds the L2 norm.
        options={"gtol": target / math.sqrt(dim), "ftol": 0.0,
                 "maxiter": _MAX_ITERATIONS, "maxcor": 20})
    w, gradient = result.x, gradient_at(result.x)
    newton_steps = 0
    while np.linalg.norm(gradient) > target and newton_steps < _MAX_NEWTON_STEPS:
        step = np.linalg.solve(hessian(tf.constant(w, tf.float64)).numpy(), gradient)
        for halving in range(_MAX_STEP_HALVINGS):
            candidate = w - 0.5 ** halving * step
            candidate_gradient = gradient_at(candidate)
            if np.linalg.norm(candidate_gradient) < np.linalg.norm(gradient):
                break
        else:
            break  # no step lowers the gradient norm: rounding has the last word
        w, gradient = candidate, candidate_gradient
        newton_steps += 1
    gradient_norm = float(np.linalg.norm(gradient))
    if gradient_norm > target:
        raise PrivateFailure(
            "the solver did not converge to the exact minimiser the guarantee assumes",
            f"the solver stopped at gradient norm {gradient_norm:.3g} > tolerance "
            f"{target:.3g} after {result.nit} L-BFGS iterations ({result.message}) and "
            f"{newton_steps} Newton steps; the privacy guarantee assumes the exact minimiser")
    return ErmSolution(w, gradient_norm, int(result.nit), newton_steps)
