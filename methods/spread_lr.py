"""Spread-divergence logistic regression (Barber, "Private machine learning via randomised
response"), with its two baselines: logistic regression on clean and on corrupted data.

Every user releases one corrupted (c~, x~) (benchmarks.privacy.local_randomizers). Spread LR maximises the
likelihood of the corrupted data under the model pushed through the known corruption, by
EM with importance sampling: S samples per example, c^s from rho(c|c~) ~ p(c~|c) and x^s
from rho(x|x~) ~ p(x~|x) p(x); weights w(s|n) ~ p_theta(c^s|x^s) (eq. 59); M-step = the
weighted logistic regression of eq. 60; a learned prior is re-estimated from the weighted
samples (eq. 65). The three methods share one weighted fitting routine, and lr-noisy and
spread-lr draw the same corrupted data for the same seed.
"""
from __future__ import annotations

import functools
from typing import Any, ClassVar

import numpy as np

from benchmarks.contract import Budget, Method, Split
from benchmarks.errors import InputError
from benchmarks.privacy import (NON_PRIVATE, Accountant, Kind, Neighbours, PrivacyNotion,
                                Protects, Unprotected, inputs, labels)
from benchmarks.privacy import local_randomizers as corruption

PAPER = "Barber, Private machine learning via randomised response"


def local_notion(protects: Protects) -> PrivacyNotion:
    """The epsilon is each user's label flip's (local); pixels as ``protects`` says."""
    return PrivacyNotion(protects, Neighbours.SUBSTITUTION, Kind.PURE, Accountant.LOCAL)


PRIORS = ("flat", "learned", "true")
# A pixel that never varies in the clean data has zero variance; the floor keeps the
# Gaussian posterior proper while still pinning such pixels to their mean.
MIN_PRIOR_VARIANCE = 1e-4
# The input model p(x) = prod_d p(x[d]|d): a (D, 256) histogram for pixel RR, per-pixel
# (mean, variance) arrays for Gaussian input noise.
InputPrior = "np.ndarray | tuple[np.ndarray, np.ndarray]"


# --- the shared fitting routine ----------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _gradient_ascent():
    """The compiled M-step, built once per process: its inputs are tensors and variables
    only, so every model of the same shape reuses one trace."""
    import tensorflow as tf

    @tf.function(reduce_retracing=True)
    def ascend(kernel, bias, x, y, w, learning_rate, steps):
        w = w / tf.reduce_sum(w)
        for _ in tf.range(steps):
            with tf.GradientTape() as tape:
                logits = tf.squeeze(tf.matmul(x, kernel), axis=1) + bias
                losses = tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits)
                loss = tf.reduce_sum(w * losses)
            grad_kernel, grad_bias = tape.gradient(loss, [kernel, bias])
            kernel.assign_sub(learning_rate * grad_kernel)
            bias.assign_sub(learning_rate * grad_bias)

    return ascend


class WeightedLogistic:
    """A tf.keras Dense(1) logistic regression fitted by full-batch gradient ascent on the
    weighted log likelihood sum_i w_i log p(y_i | x_i) / sum_i w_i (eq. 60; w = 1 is plain LR).

    Inputs are centred on a fixed vector (the mean of the released training inputs). The
    bias absorbs the shift, so the model is the same; but input noise raises the mean
    brightness of every pixel, and uncentred, the curvature along the mean image grows so
    large that gradient ascent at the paper's step size oscillates and collapses to one
    class. Weights start at zero: the objective is convex, and equal seeds give equal models.
    """

    def __init__(self, centre: np.ndarray, learning_rate: float) -> None:
        import tensorflow as tf

        self._tf = tf
        self.centre = np.asarray(centre, dtype=np.float32)
        self.learning_rate = learning_rate
        self.model = tf.keras.Sequential([
            tf.keras.Input(shape=self.centre.shape),
            tf.keras.layers.Dense(1, kernel_initializer="zeros", bias_initializer="zeros"),
        ])

    def fit(self, x: np.ndarray, y: np.ndarray, weights: np.ndarray, steps: int) -> None:
        tf = self._tf
        dense = self.model.layers[-1]
        _gradient_ascent()(dense.kernel, dense.bias, tf.constant(x - self.centre, tf.float32),
                           tf.constant(y, tf.float32), tf.constant(weights, tf.float32),
                           tf.constant(self.learning_rate, tf.float32),
                           tf.constant(steps, tf.int32))

    def logits(self, x: np.ndarray) -> np.ndarray:
        centred = self._tf.constant(x - self.centre, self._tf.float32)
        return self.model(centred).numpy()[:, 0].astype(np.float64)


# --- importance sampling -----------------------------------------------------------------

def sample_labels(noisy_y: np.ndarray, p_f: float, samples: int,
                  rng: np.random.Generator) -> np.ndarray:
    """c^s ~ rho(c|c~) proportional to p(c~|c): for a symmetric flip, the flip itself."""
    return corruption.flip_labels(np.repeat(noisy_y[:, None], samples, axis=1), p_f, rng)


def sample_pixel_posterior(noisy: np.ndarray, prior: np.ndarray, p_f: float, samples: int,
                           rng: np.random.Generator) -> np.ndarray:
    """x^s ~ rho(x|x~) proportional to p(x~|x) p(x), per pixel, for all examples at once.

    With T(k|j) = (1 - p_f) [j = k] + q [j != k], q = p_f / 255, the posterior of a pixel
    seen as k is q pi_j + (1 - p_f - q) pi_k [j = k]: a mixture that keeps k with
    probability (1 - p_f - q) pi_k / (q + (1 - p_f - q) pi_k) and otherwise draws from the
    prior pi. noisy: (N, D) states; prior: (D, 256); returns (N, S, D) states.
    """
    n, d = noisy.shape
    q = p_f / (corruption.PIXEL_STATES - 1)
    keep_mass = (1 - p_f - q) * prior[np.arange(d), noisy]
    total = q + keep_mass
    # total == 0 only without noise at a state the prior rules out: trust the observation.
    keep_prob = np.divide(keep_mass, total, out=np.ones_like(total), where=total > 0)
    # Pixel-major (D, N, S) layout: the redraws come out grouped by pixel, so the search
    # below walks one pixel's CDF at a time (about 3x faster than scattered lookups).
    keep = rng.random((d, n, samples), dtype=np.float32) < keep_prob.T[:, :, None]
    out = np.repeat(noisy.T[:, :, None], samples, axis=2)
    redraw = np.nonzero(~keep)
    pixel = redraw[0]
    # One searchsorted for every pixel's prior: shift pixel d's CDF into [d, d + 1].
    cdf = np.cumsum(prior, axis=1)
    cdf[:, -1] = 1.0
    shifted = (cdf + np.arange(d)[:, None]).ravel()
    u = rng.random(len(pixel))
    found = np.searchsorted(shifted, pixel + u, side="right") - pixel * corruption.PIXEL_STATES
    out[redraw] = np.clip(found, 0, corruption.PIXEL_STATES - 1)
    return np.ascontiguousarray(out.transpose(1, 2, 0))


def sample_gaussian_posterior(noisy: np.ndarray, mean: np.ndarray, variance: np.ndarray,
                              noise_variance: float, samples: int,
                              rng: np.random.Generator) -> np.ndarray:
    """x^s ~ N(b/a, 1/a), a = 1/s^2 + 1/v, b = x~/s^2 + m/v (eqs. 68-69), (N, S, D)."""
    a = 1 / noise_variance + 1 / variance
    b = noisy / noise_variance + mean / variance
    noise = rng.standard_normal((len(noisy), samples, noisy.shape[1]), dtype=np.float32)
    return ((b / a)[:, None, :] + noise / np.sqrt(a)).astype(np.float32)


def importance_weights(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """w(s|n) proportional to p_theta(c^s | x^s), normalised over s (eq. 59)."""
    log_p = -np.logaddexp(0.0, -(2 * labels - 1) * logits)
    log_p -= log_p.max(axis=1, keepdims=True)
    w = np.exp(log_p)
    return w / w.sum(axis=1, keepdims=True)


def pixel_histogram(states: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Per-pixel (weighted) histogram over the 256 states, normalised: eq. 65.

    states: (M, D); weights: (M,) or None. Returns (D, 256).
    """
    m, d = states.shape
    index = np.arange(d) * corruption.PIXEL_STATES + states.astype(np.int64)
    w = None if weights is None else np.repeat(weights, d)
    counts = np.bincount(index.ravel(), weights=w, minlength=d * corruption.PIXEL_STATES)
    counts = counts.reshape(d, corruption.PIXEL_STATES)
    return counts / counts.sum(axis=1, keepdims=True)


def gaussian_moments(x: np.ndarray,
                     weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel (weighted) mean and floored variance of x: (M, D) -> (D,), (D,)."""
    mean = np.average(x, axis=0, weights=weights)
    variance = np.average((x - mean) ** 2, axis=0, weights=weights)
    return mean, np.maximum(variance, MIN_PRIOR_VARIANCE)


# --- the methods -------------------------------------------------------------------------

class _LogisticRegressionFamily(Method):
    """Binary logistic regression on images, flattened to vectors."""

    paper: ClassVar[str] = PAPER
    tasks: ClassVar[tuple[str, ...]] = ("image",)
    binary_only: ClassVar[bool] = True  # the contract tests then fit on two classes

    def __init__(self, budget: Budget, seed: int = 0, **hparams: Any) -> None:
        super().__init__(budget, seed, **hparams)
        for key in ("learning_rate", "steps", "mstep_steps", "em_iterations", "samples",
                    "input_variance", "prior_variance"):
            if key in self.hparams and not self.hparams[key] > 0:
                raise InputError(f"{self.name}: {key} must be > 0, got {self.hparams[key]!r}")
        for key, allowed in (("input_noise", corruption.INPUT_NOISES), ("prior", PRIORS)):
            if key in self.hparams and self.hparams[key] not in allowed:
                raise InputError(f"{self.name}: {key} must be one of {allowed}, "
                                 f"got {self.hparams[key]!r}")
        self._fitted: WeightedLogistic | None = None
        self._dim = 0

    def _check_train(self, train: Split, num_classes: int) -> np.ndarray:
        if num_classes != 2 or (len(train) and not np.isin(train.y, (0, 1)).all()):
            raise ValueError(f"{self.name} is binary logistic regression: needs 2 classes "
                             f"labelled 0/1, got num_classes={num_classes}")
        if np.ndim(train.x) < 2 or len(train) == 0:
            raise ValueError(f"{self.name}: training inputs must be a non-empty (N, ...) array")
        flat = np.asarray(train.x, dtype=np.float32).reshape(len(train), -1)
        self._dim = flat.shape[1]
        return flat

    def _new_model(self, released_inputs: np.ndarray) -> WeightedLogistic:
        return WeightedLogistic(released_inputs.mean(axis=0), float(self.hparams["learning_rate"]))

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        if self._fitted is None:
            raise ValueError(f"{self.name}: call fit before predict_proba")
        flat = np.asarray(x, dtype=np.float32).reshape(len(x), -1)
        if flat.shape[1] != self._dim:
            raise ValueError(f"{self.name}: inputs have {flat.shape[1]} values each, "
                             f"the model was fitted on {self._dim}")
        p_one = 1 / (1 + np.exp(-self._fitted.logits(flat)))
        return np.stack([1 - p_one, p_one], axis=1)


class LogisticRegressionClean(_LogisticRegressionFamily):
    """The non-private reference: plain logistic regression on the clean data."""

    name = "lr-clean"
    notion = NON_PRIVATE
    defaults = {"learning_rate": 0.2, "steps": 400}
    tiny_hparams = {"steps": 20}

    @classmethod
    def skip_reason(cls, task: str, budget: Budget,
                    hparams: dict[str, Any] | None = None) -> str | None:
        if budget.private:
            return f"{cls.name} is the non-private reference; run it at epsilon = inf"
        return super().skip_reason(task, budget, hparams)

    def fit(self, train: Split, num_classes: int) -> "LogisticRegressionClean":
        x = self._check_train(train, num_classes)
        self.ctx.ledger.charge("logistic regression on the clean data", labels(),
                               Unprotected("the non-private reference"))
        self._fitted = self._new_model(x)
        self._fitted.fit(x, train.y, np.ones(len(x)), int(self.hparams["steps"]))
        return self


class _CorruptedDataMethod(_LogisticRegressionFamily):
    """Methods that only ever see the corrupted release of the training data."""

    notion = local_notion(Protects.LOCAL_LABELS_AND_PIXELS)

    def __init__(self, budget: Budget, seed: int = 0, **hparams: Any) -> None:
        super().__init__(budget, seed, **hparams)
        self.p_f = corruption.flip_probability(budget.epsilon)

    @classmethod
    def notion_for(cls, budget: Budget, hparams: dict[str, Any]) -> PrivacyNotion:
        if not budget.private:
            return NON_PRIVATE
        if hparams.get("prior") == "true":
            return local_notion(Protects.LOCAL_LABELS_CLEAN_PIXELS)
        if hparams["input_noise"] == "gaussian":
            return local_notion(Protects.LOCAL_LABELS_GAUSSIAN_PIXELS)
        return cls.notion

    def corrupted_release(self, train: Split) -> tuple[np.ndarray, np.ndarray]:
        """The (x~, c~) every user releases, drawn once per seed (the same stream for
        every method, so lr-noisy and spread-lr see the same release), charged to the
        ledger: (N, D) inputs, (N,) labels."""
        return corruption.corrupt(self.ctx.ledger, train.x, train.y, self.p_f, self.hparams["input_noise"],
                                  float(self.hparams["input_variance"]),
                                  self.ctx.rng("local corruption"))

    def _model_inputs(self, noisy_x: np.ndarray) -> np.ndarray:
        rr = self.hparams["input_noise"] == "rr"
        return corruption.from_states(noisy_x) if rr else noisy_x

    def _input_variant(self) -> str:
        if self.hparams["input_noise"] == "rr":
            return "pixel RR"
        return f"gaussian inputs var={self.hparams['input_variance']:g}"

    def privacy_details(self) -> dict[str, Any]:
        return {"flip_probability": self.p_f, "input_noise": self.hparams["input_noise"]}


class LogisticRegressionNoisy(_CorruptedDataMethod):
    """Plain logistic regression on the corrupted data, ignoring the corruption."""

    name = "lr-noisy"
    defaults = {"input_noise": "rr", "input_variance": 0.1, "learning_rate": 0.2, "steps": 400}
    tiny_hparams = {"steps": 20}

    def fit(self, train: Split, num_classes: int) -> "LogisticRegressionNoisy":
        self._check_train(train, num_classes)
        noisy_x, noisy_y = self.corrupted_release(train)
        inputs = self._model_inputs(noisy_x)
        self._fitted = self._new_model(inputs)
        self._fitted.fit(inputs, noisy_y, np.ones(len(noisy_y)),
                         int(self.hparams["steps"]))
        return self

    def variant(self) -> str:
        return self._input_variant()


class SpreadLogisticRegression(_CorruptedDataMethod):
    """EM with importance sampling on the spread likelihood of the corrupted data."""

    name = "spread-lr"
    defaults = {
        "input_noise": "rr",
        "input_variance": 0.1,
        "prior": "flat",  # "true" peeks at the clean pixel marginals: a non-private oracle
        "prior_mean": 0.0,  # the broad Gaussian prior of the "flat" Gaussian setting
        "prior_variance": 10.0,
        "samples": 10,
        "em_iterations": 40,
        "mstep_steps": 10,
        "learning_rate": 0.2,
    }
    tiny_hparams = {"samples": 2, "em_iterations": 3, "mstep_steps": 5}

    def fit(self, train: Split, num_classes: int) -> "SpreadLogisticRegression":
        """EM on the release; afterwards ``input_prior`` holds the last E-step's p(x)."""
        clean = self._check_train(train, num_classes)
        noisy_x, noisy_y = self.corrupted_release(train)
        rng = self.ctx.rng("importance sampling")
        samples, iterations = int(self.hparams["samples"]), int(self.hparams["em_iterations"])
        prior = self._initial_prior(clean)
        self._fitted = self._new_model(self._model_inputs(noisy_x))
        n, d = noisy_x.shape
        for iteration in range(iterations):
            self.progress(f"EM iteration {iteration + 1}/{iterations}")
            x_s = self._sample_inputs(noisy_x, prior, samples, rng)  # (N, S, D)
            c_s = sample_labels(noisy_y, self.p_f, samples, rng)  # (N, S)
            inputs = self._model_inputs(x_s.reshape(n * samples, d))
            weights = importance_weights(self._fitted.logits(inputs).reshape(n, samples), c_s)
            self._fitted.fit(inputs, c_s.ravel(), weights.ravel(), int(self.hparams["mstep_steps"]))
            if self.hparams["prior"] == "learned":
                prior = self._learned_prior(x_s.reshape(n * samples, d), weights.ravel())
        self.input_prior = prior
        return self

    def _initial_prior(self, clean: np.ndarray) -> InputPrior:
        gaussian = self.hparams["input_noise"] == "gaussian"
        if self.hparams["prior"] == "true":  # the oracle: marginals of the CLEAN pixels
            self.ctx.ledger.charge("true-prior oracle", inputs(),
                                   Unprotected("reads the clean pixels' marginals"))
            if gaussian:
                return gaussian_moments(clean)
            return pixel_histogram(corruption.to_states(clean))
        if gaussian:
            return (np.full(self._dim, float(self.hparams["prior_mean"])),
                    np.full(self._dim, float(self.hparams["prior_variance"])))
        return np.full((self._dim, corruption.PIXEL_STATES), 1 / corruption.PIXEL_STATES)

    def _sample_inputs(self, noisy_x: np.ndarray, prior: InputPrior, samples: int,
                       rng: np.random.Generator) -> np.ndarray:
        if self.hparams["input_noise"] == "rr":
            return sample_pixel_posterior(noisy_x, prior, self.p_f, samples, rng)
        mean, variance = prior
        return sample_gaussian_posterior(noisy_x, mean, variance,
                                         float(self.hparams["input_variance"]), samples, rng)

    def _learned_prior(self, x_s: np.ndarray, weights: np.ndarray) -> InputPrior:
        if self.hparams["input_noise"] == "rr":
            return pixel_histogram(x_s, weights)  # eq. 65
        return gaussian_moments(x_s, weights)  # the same M-step for a Gaussian p(x[d]|d)

    def variant(self) -> str:
        prior = self.hparams["prior"]
        prior_text = "true prior (non-private oracle)" if prior == "true" else f"{prior} prior"
        return f"{prior_text}, {self._input_variant()}, S={self.hparams['samples']}"
