"""DP-ERM's mechanisms (Chaudhuri, Monteleoni, Sarwate. Differentially private empirical
risk minimization. JMLR 2011): the noise of output and objective perturbation, and the
exponential mechanism of private tuning.

The noise is a random vector b in R^d with density proportional to exp(-beta ||b||)
(eq. 4). In polar coordinates that density factors into a radius with density
proportional to r^(d-1) exp(-beta r), which is Gamma(shape d, scale 1/beta), times a
direction uniform on the unit sphere; a normalised standard Gaussian vector is such a
direction.

Each release takes the run's ledger and the records it touches, computes its noise rate
from the epsilon it charges, and charges that epsilon: the scale drawn is the scale
charged, by construction. Both perturbations assume rows of norm at most 1 and a
1-Lipschitz loss (the caller's minimiser), under the substitution of one record in a
dataset of fixed size n.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np
from scipy import stats

from benchmarks.privacy import noise_checks
from benchmarks.privacy.ledger import Ledger, PureEpsilon, Touches, records


def sample_norm_exponential_noise(dim: int, beta: float, rng: np.random.Generator) -> np.ndarray:
    """One draw of b (shape (dim,), float64) with density proportional to exp(-beta ||b||)."""
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"noise dimension must be a positive integer, got {dim!r}")
    if not (math.isfinite(beta) and beta > 0):
        raise ValueError(f"noise rate beta must be finite and > 0, got {beta!r}")
    radius = stats.gamma(a=dim, scale=1.0 / beta).rvs(random_state=rng)
    direction = rng.standard_normal(dim)
    return radius * direction / np.linalg.norm(direction)


def output_noise_rate(epsilon: float, n: int, regularization: float) -> float:
    """beta of output perturbation: the L2 sensitivity of argmin J is 2/(n Lambda)."""
    return n * regularization * epsilon / 2.0


@dataclasses.dataclass(frozen=True)
class ObjectiveCalibration:
    epsilon_prime: float  # the part of epsilon paid by the noise term
    extra_regularization: float  # Delta
    beta: float


def objective_calibration(epsilon: float, n: int, regularization: float,
                          curvature_bound: float) -> ObjectiveCalibration:
    """Algorithm 2 of the paper. The log term bounds the Jacobian-determinant ratio of the
    map f -> b between neighbouring datasets: log(1 + 2c/(nL) + c^2/(nL)^2) = 2 log(1 + c/(nL))."""
    epsilon_prime = epsilon - 2.0 * math.log1p(curvature_bound / (n * regularization))
    delta = 0.0
    if epsilon_prime <= 0:
        # Extra regularisation shrinks the determinant term to epsilon/2; noise gets the rest.
        delta = curvature_bound / (n * math.expm1(epsilon / 4.0)) - regularization
        epsilon_prime = epsilon / 2.0
    return ObjectiveCalibration(epsilon_prime, delta, epsilon_prime / 2.0)


def output_perturbation(ledger: Ledger, minimiser: np.ndarray, *, epsilon: float,
                        regularization: float, rng: np.random.Generator,
                        touches: Touches) -> tuple[np.ndarray, np.ndarray, float]:
    """Release argmin J + b (Algorithm 1), argmin J of the ``len(touches.examples)`` rows
    with regularisation Lambda. Returns (release, b, beta); b is private."""
    n = _size(touches, "output perturbation")
    ledger = Ledger.of(ledger, "output perturbation")
    ledger.charge("output perturbation", touches, PureEpsilon(epsilon),
                  regularization=regularization, dimension=len(minimiser))
    ledger.model_releases.append("output perturbation")
    beta = output_noise_rate(epsilon, n, regularization)
    noise = sample_norm_exponential_noise(len(minimiser), beta, rng)
    released = ledger.released("output perturbation", minimiser + noise, epsilon=epsilon,
                               regularization=regularization, touches=touches)
    return released, noise, beta


def objective_perturbation(ledger: Ledger, dim: int, *, epsilon: float,
                           regularization: float, curvature_bound: float,
                           rng: np.random.Generator, touches: Touches,
                           minimise: Callable[[np.ndarray, ObjectiveCalibration], Any],
                           ) -> tuple[Any, np.ndarray, ObjectiveCalibration]:
    """Objective perturbation (Algorithm 2) on the ``len(touches.examples)`` rows:
    ``minimise(b, calibration)`` returns the minimiser of
    J(f) + (1/n) b.f + (Delta/2) ||f||^2, which is the release. Returns (release, b,
    calibration); b is private."""
    ledger, noise, calibration = _objective_noise(ledger, dim, epsilon, regularization,
                                                  curvature_bound, rng, touches)
    released = ledger.released("objective perturbation", minimise(noise, calibration),
                               epsilon=epsilon, regularization=regularization,
                               curvature_bound=curvature_bound, touches=touches)
    return released, noise, calibration


def objective_perturbation_noise(ledger: Ledger, dim: int, *, epsilon: float,
                                 regularization: float, curvature_bound: float,
                                 rng: np.random.Generator, touches: Touches,
                                 ) -> tuple[np.ndarray, ObjectiveCalibration]:
    """The noise b of objective perturbation alone, and its calibration: the caller
    minimises the perturbed objective itself, so its release cannot be replayed (use
    ``objective_perturbation``). b is private."""
    ledger, noise, calibration = _objective_noise(ledger, dim, epsilon, regularization,
                                                  curvature_bound, rng, touches)
    ledger.not_replayed("objective perturbation", touches,
                        "its minimiser is computed outside the layer")
    return noise, calibration


def _objective_noise(ledger, dim, epsilon, regularization, curvature_bound, rng, touches):
    n = _size(touches, "objective perturbation")
    ledger = Ledger.of(ledger, "objective perturbation")
    ledger.charge("objective perturbation", touches, PureEpsilon(epsilon),
                  regularization=regularization, curvature_bound=curvature_bound, dimension=dim)
    ledger.model_releases.append("objective perturbation")
    calibration = objective_calibration(epsilon, n, regularization, curvature_bound)
    return ledger, sample_norm_exponential_noise(dim, calibration.beta, rng), calibration


def exponential_mechanism_probabilities(mistakes: np.ndarray, epsilon: float) -> np.ndarray:
    """q_i proportional to exp(-epsilon z_i / 2): epsilon-DP when each count z_i has
    sensitivity 1 (Algorithm 4). epsilon = inf puts all mass on the first minimum."""
    mistakes = np.asarray(mistakes, dtype=np.float64)
    if math.isinf(epsilon):
        probabilities = np.zeros(len(mistakes))
        probabilities[np.argmin(mistakes)] = 1.0
        return probabilities
    logits = -0.5 * epsilon * (mistakes - mistakes.min())  # shifted: no overflow/underflow to 0/0
    weights = np.exp(logits)
    return weights / weights.sum()


def exponential_mechanism(ledger: Ledger, mistakes: np.ndarray, epsilon: float,
                          rng: np.random.Generator, touches: Touches) -> int:
    """The index chosen with probabilities exponential_mechanism_probabilities: each count
    of mistakes on the rows ``touches`` has sensitivity 1."""
    ledger = Ledger.of(ledger, "the exponential mechanism")
    ledger.charge("exponential mechanism (choice of Lambda)", touches, PureEpsilon(epsilon),
                  sensitivity=1)
    probabilities = exponential_mechanism_probabilities(mistakes, epsilon)
    return ledger.released("the exponential mechanism",
                           int(rng.choice(len(probabilities), p=probabilities)),
                           epsilon=epsilon, touches=touches)


def _size(touches: Touches, mechanism: str) -> int:
    if touches.examples is None:
        raise ValueError(f"{mechanism} needs the indices of the rows it touches: its noise "
                         f"scales with their number")
    return len(touches.examples)


# ----- its audit (privboard audit mechanism dp-erm-output-noise) ----------------------------

# Output perturbation releases argmin J + b, density of b proportional to exp(-beta |b|).
# The privacy loss at an output x is beta (|x - f'| - |x - f|) <= beta |f - f'| (triangle
# inequality), which is eps at the largest distance 2 / (n Lambda): minimisers that far
# apart are the worst case. In one dimension the loss is eps on the whole half-line beyond
# f, so a half-space is tight. In two dimensions no likely set attains it, but a small ball
# around f tests the density near the minimiser, where a wrong radius law (a Gamma shape
# other than the dimension) makes the ratio unbounded.
AUDIT_EXAMPLES, AUDIT_REGULARIZATION = 100, 0.1
AUDIT_SENSITIVITY = 2 / (AUDIT_EXAMPLES * AUDIT_REGULARIZATION)


def _register_audit() -> None:
    from benchmarks.privacy import mechanism_audit as audit
    from benchmarks.privacy.ledger import records

    def release(minimiser, trials, epsilon, rng):
        # One release per call, each on its own ledger: this mechanism loops.
        return np.array([output_perturbation(
            Ledger(), np.asarray(minimiser, float), epsilon=epsilon,
            regularization=AUDIT_REGULARIZATION, rng=rng,
            touches=records(np.arange(AUDIT_EXAMPLES)))[0] for _ in range(trials)])

    def pair(dim: int):
        f, f_prime = (0.0,) * dim, (AUDIT_SENSITIVITY,) + (0.0,) * (dim - 1)
        return audit.NeighbouringPair(
            f, f_prime, f"minimiser {audit.format_row(np.array(f))} ({dim}-D)",
            f"minimiser {audit.format_row(np.array(f_prime))}, 2/(n Lambda) away "
            f"(n = {AUDIT_EXAMPLES}, Lambda = {AUDIT_REGULARIZATION})")

    audit.register("dp-erm-output-noise", audit.AuditSpec(
        "DP-ERM output perturbation: minimiser + noise with density ~ exp(-beta |b|)",
        (pair(1), pair(2)), release, audit.displacement))


_register_audit()


# ----- the noise checks at a run's setting (benchmarks.privacy.noise_checks) ---------------

# Draws of the noise per check. The radii of honest noise sum to Gamma(PROBES d, 1/beta);
# at half the scale the sum is half of that, over 40 standard deviations below its mean
# when d = 1.
PROBES = 200


def _radius_check(charge, radii: np.ndarray, beta: float) -> noise_checks.NoiseCheck:
    d = int(charge.details["dimension"])
    expected = PROBES * d / beta
    return noise_checks.NoiseCheck(
        charge.mechanism, f"noise density ~ exp(-beta |b|) in {d} dimensions, beta = "
        f"{beta:.4g}: radius Gamma({d}, 1/beta)",
        f"mean radius of {PROBES} probe draws {radii.mean():.4g} "
        f"({expected / PROBES:.4g} expected)",
        float(stats.gamma(a=PROBES * d, scale=1.0 / beta).cdf(radii.sum())))


def _check_output_perturbation(charge, rng: np.random.Generator):
    """Releases of a zero minimiser at the charge's setting: each is its noise."""
    n, d = len(charge.touches.examples), int(charge.details["dimension"])
    epsilon, regularization = charge.cost.epsilon, charge.details["regularization"]
    radii = np.array([np.linalg.norm(output_perturbation(
        Ledger(), np.zeros(d), epsilon=epsilon, regularization=regularization, rng=rng,
        touches=records(np.arange(n)))[0]) for _ in range(PROBES)])
    return _radius_check(charge, radii, output_noise_rate(epsilon, n, regularization))


def _check_objective_perturbation(charge, rng: np.random.Generator):
    n, d = len(charge.touches.examples), int(charge.details["dimension"])
    draws = [objective_perturbation_noise(
        Ledger(), d, epsilon=charge.cost.epsilon,
        regularization=charge.details["regularization"],
        curvature_bound=charge.details["curvature_bound"], rng=rng,
        touches=records(np.arange(n))) for _ in range(PROBES)]
    return _radius_check(charge, np.array([np.linalg.norm(b) for b, _ in draws]),
                         draws[0][1].beta)


noise_checks.register("output perturbation", _check_output_perturbation)
noise_checks.register("objective perturbation", _check_objective_perturbation)
