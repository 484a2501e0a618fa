"""Lower bounds on epsilon from audit counts, each valid at a stated confidence.

Two kinds of audit:

- Many runs of a mechanism on two neighbouring inputs d, d' and an output event S:
  (eps, delta)-DP means P[S | d] <= e^eps P[S | d'] + delta, so a lower confidence limit on
  P[S | d] and an upper one on P[S | d'] (Clopper-Pearson) bound epsilon from below.
- One run with m canaries (Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training
  Run", NeurIPS 2023, arXiv:2305.08846): each canary's coin is fair and independent, the
  auditor guesses r coins and gets v right. Their main theorem: if the training is
  (eps, delta)-DP and W is the number of right guesses, then for every v
      P[W >= v] <= P[W' >= v] + 2 m delta max_{i >= 1} P[v - i <= W' < v] / i,
  W' ~ Binomial(r, e^eps / (1 + e^eps)). The right-hand side is the p-value of the claim
  "(eps, delta)-DP"; the bound is the largest epsilon it rejects. The p-value computed here is
  the one of the paper's Appendix D, and the tests reproduce the bounds the paper prints.

numpy and scipy only.
"""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np
from scipy import special, stats

# Grid points on [0, ceiling] searched for the largest rejected epsilon when delta > 0, and
# bisection steps between the last rejected grid point and the next one (2^-40 of a step).
_GRID_POINTS = 64
_BISECTIONS = 40


def _confidence(confidence) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) \
            or not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return float(confidence)


def _delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    return float(delta)


def _count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    return int(value)


def _binomial_counts(successes, trials) -> tuple[np.ndarray, np.ndarray]:
    k, n = np.broadcast_arrays(np.asarray(successes), np.asarray(trials))
    for name, values in (("successes", k), ("trials", n)):
        if values.dtype == bool or not np.issubdtype(values.dtype, np.integer):
            raise ValueError(f"{name} must be integers, got {values!r}")
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n):
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, "
                         f"got successes {successes!r}, trials {trials!r}")
    return k, n


def _scalar_or_array(values: np.ndarray):
    return float(values) if values.ndim == 0 else values


def clopper_pearson_lower(successes, trials, confidence: float = 0.95):
    """One-sided lower confidence limit on a binomial proportion (Clopper-Pearson).

    The smallest p with P[Binomial(trials, p) >= successes] >= 1 - confidence; 0 for no
    successes. Broadcasts over arrays of counts.
    """
    k, n = _binomial_counts(successes, trials)
    alpha = 1 - _confidence(confidence)
    limit = stats.beta.ppf(alpha, np.maximum(k, 1), n - k + 1)
    return _scalar_or_array(np.where(k > 0, limit, 0.0))


def clopper_pearson_upper(successes, trials, confidence: float = 0.95):
    """One-sided upper confidence limit on a binomial proportion (Clopper-Pearson).

    The largest p with P[Binomial(trials, p) <= successes] >= 1 - confidence; 1 when every
    trial succeeded. Broadcasts over arrays of counts.
    """
    k, n = _binomial_counts(successes, trials)
    alpha = 1 - _confidence(confidence)
    limit = stats.beta.ppf(1 - alpha, k + 1, np.maximum(n - k, 1))
    return _scalar_or_array(np.where(k < n, limit, 1.0))


def clopper_pearson_epsilon(successes_d, runs_d, successes_d_prime, runs_d_prime,
                            delta: float = 0.0, confidence: float = 0.95):
    """Lower bound on epsilon from an event S seen successes_d times in runs_d runs on d and
    successes_d_prime times in runs_d_prime runs on d'.

    log((lower(P[S|d]) - delta) / upper(P[S|d'])), floored at 0. The two one-sided limits
    hold together with probability >= confidence because each is taken at half the error
    (Bonferroni). S must be chosen before these runs (on other runs, or a priori).
    Broadcasts over arrays of counts.
    """
    each = 1 - (1 - _confidence(confidence)) / 2
    low = np.asarray(clopper_pearson_lower(successes_d, runs_d, each)) - _delta(delta)
    high = np.asarray(clopper_pearson_upper(successes_d_prime, runs_d_prime, each))
    # high > 0 always (the upper limit of 0 successes is positive), so only low can be <= 0.
    ratio = np.where(low > 0, low, 1.0) / high
    return _scalar_or_array(np.where(low > 0, np.maximum(np.log(ratio), 0.0), 0.0))


def _one_run_counts(canaries, guesses, correct) -> tuple[int, int, int]:
    m, r, v = (_count(canaries, "canaries"), _count(guesses, "guesses"),
               _count(correct, "correct"))
    if not 0 <= v <= r <= m or m < 1:
        raise ValueError(f"need 0 <= correct <= guesses <= canaries and canaries >= 1, "
                         f"got correct {v}, guesses {r}, canaries {m}")
    return m, r, v


def _p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    return float(_p_values(m, r, v, np.array([epsilon]), delta)[0])


def _p_values(m: int, r: int, v: int, epsilons: np.ndarray, delta: float) -> np.ndarray:
    """The p-value at each of ``epsilons``."""
    q = special.expit(epsilons)
    tail = stats.binom.sf(v - 1, r, q)
    if delta == 0 or v == 0:
        return np.minimum(tail, 1.0)
    # P[v - i <= W' < v] for i = 1..v; beyond v it stays at P[W' < v] while i grows, so
    # the maximum over i >= 1 is attained within 1..v.
    below = np.cumsum(stats.binom.pmf(np.arange(v - 1, -1, -1), r, q[:, None]), axis=1)
    return np.minimum(tail + 2 * m * delta * np.max(below / np.arange(1, v + 1), axis=1), 1.0)


def one_run_p_value(canaries: int, guesses: int, correct: int, epsilon: float,
                    delta: float = 0.0) -> float:
    """p-value of "(epsilon, delta)-DP" after `correct` right guesses out of `guesses`,
    with `canaries` canaries (Steinke, Nasr, Jagielski 2023)."""
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) \
            or not 0 <= epsilon < math.inf:
        raise ValueError(f"epsilon must be finite and >= 0, got {epsilon!r}")
    return _p_value(*_one_run_counts(canaries, guesses, correct), float(epsilon),
                    _delta(delta))


# Audits and their verdicts ask for the same bounds again and again (a ceiling, say).
@functools.lru_cache(maxsize=1 << 14)
def one_run_lower_bound(canaries: int, guesses: int, correct: int, delta: float = 0.0,
                        confidence: float = 0.95) -> float:
    """The largest epsilon whose one-run p-value is below 1 - confidence (0.0 when there is
    none): the training is not (epsilon, delta)-DP, at that confidence.

    `guesses` must be fixed before the results are seen; trying several and keeping the best
    needs a multiple-testing correction (e.g. Bonferroni: divide 1 - confidence by their number).

    P[Binomial(r, q) >= v] < alpha exactly when q is below the one-sided Clopper-Pearson
    lower limit, so with delta = 0 the bound is that limit's log-odds. The delta term only adds,
    so the rejected epsilons lie below it; they are found on a grid, then by bisection between
    the largest rejected grid point and the next one. Any rejected epsilon is a valid report,
    because (e, delta)-DP implies (e', delta)-DP for every e' > e; so the result is valid
    even where the p-value is not monotone in epsilon.
    """
    m, r, v = _one_run_counts(canaries, guesses, correct)
    delta, confidence = _delta(delta), _confidence(confidence)
    if v == 0:
        return 0.0
    accuracy_limit = clopper_pearson_lower(v, r, confidence)
    if accuracy_limit <= 0.5:
        return 0.0
    ceiling = float(special.logit(accuracy_limit))
    if delta == 0:
        return ceiling
    alpha = 1 - confidence
    grid = np.linspace(0.0, ceiling, _GRID_POINTS + 1)
    rejected = grid[_p_values(m, r, v, grid, delta) < alpha]
    if not len(rejected):
        return 0.0
    low = rejected[-1]
    high = low + grid[1]
    for _ in range(_BISECTIONS):
        middle = (low + high) / 2
        if _p_value(m, r, v, middle, delta) < alpha:
            low = middle
        else:
            high = middle
    return float(low)


def saturation(canaries: int, guesses: int, delta: float = 0.0,
               confidence: float = 0.95) -> float:
    """The one-run bound when every guess is right: the most an audit of this size can show."""
    return one_run_lower_bound(canaries, guesses, guesses, delta, confidence)
