"""PATE's privacy analysis (Papernot et al. 2017, 2018): the RDP of the noisy-argmax
aggregators of teacher votes, data-independent and data-dependent, composed over the
queries; the smooth-sensitivity release of the data-dependent cost; the calibration of
sigma2 for a target epsilon; and the command ``privboard privacy pate``.

Neighbours: changing one private record changes one teacher, which moves at most one vote
of each query, n' = n - e_i + e_j. Every bound here is for that relation.

Three kinds of number, never to be confused:
- data-independent: a worst-case RDP guarantee; it looks at no vote.
- data-dependent: an RDP bound that holds at the actual votes. It is a function of the
  private votes, so it is NOT private itself.
- smooth-sensitivity release: the data-dependent cost at one order plus Gaussian noise
  scaled by its smooth sensitivity; private, at an RDP cost of its own to charge.

RDP curves are numpy arrays of values at ``orders`` (default ``rdp.ORDERS``, the orders
the ledger charges at). Only scipy.special is used, and dp_accounting only inside
``rdp.epsilon_from_rdp``, so importing this module stays cheap.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import numbers
from pathlib import Path

import numpy as np
from scipy.special import log_ndtr, logsumexp, ndtri_exp

from benchmarks.privacy.errors import InputError
from benchmarks.privacy import rdp

_SQRT2 = math.sqrt(2.0)

# The search for sigma2 stops when the bracket is this narrow (relative): the returned
# sigma2 meets the target and is within 0.0001% of the smallest one that does.
SIGMA_RELATIVE_TOLERANCE = 1e-6
SIGMA_SEARCH_LIMIT = 1e9

# Points of the grid on which the monotonicity that the GNMax local-sensitivity bound
# rests on is checked, and the rounding slack allowed in that check (relative to the
# data-independent bound).
_CONDITION_GRID_POINTS = 4000
_CONDITION_SLACK = 1e-9


# --- input checks -----------------------------------------------------------------------

def as_votes(votes) -> np.ndarray:
    """The vote counts as an int64 (queries, classes) array; InputError (one line) for
    anything else: not 2-D, fewer than 2 classes, non-integer or negative counts."""
    v = np.asarray(votes)
    if v.ndim != 2 or v.shape[1] < 2:
        raise InputError(f"votes must be a 2-D array (queries, classes) with at least 2 "
                         f"classes, got shape {v.shape}")
    if v.dtype == bool or not (np.issubdtype(v.dtype, np.integer)
                               or np.issubdtype(v.dtype, np.floating)):
        raise InputError(f"votes must be integer counts, got dtype {v.dtype}")
    if v.size and not (np.isfinite(v).all() and (v == np.round(v)).all()):
        raise InputError("votes must be integer counts, found a non-integer value")
    if v.size and v.min() < 0:
        raise InputError(f"votes must be non-negative counts, found {v.min()}")
    return v.astype(np.int64)


def as_positive(value, name: str) -> float:
    """A finite number > 0 (a noise scale), or InputError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) \
            or not 0 < value < math.inf:
        raise InputError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def as_threshold_step(threshold, sigma1) -> tuple[float | None, float | None]:
    """The threshold step's (threshold, sigma1): both given, or both None."""
    if (threshold is None) != (sigma1 is None):
        raise InputError("threshold and sigma1 go together: give both or neither")
    if threshold is None:
        return None, None
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) \
            or not math.isfinite(threshold):
        raise InputError(f"threshold must be a finite number, got {threshold!r}")
    return float(threshold), as_positive(sigma1, "sigma1")


def as_generator(rng) -> np.random.Generator:
    """The source of every noise draw: a numpy Generator, or InputError."""
    if not isinstance(rng, np.random.Generator):
        raise InputError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def _as_answered(answered, queries: int) -> np.ndarray:
    if answered is None:
        return np.ones(queries, dtype=bool)
    mask = np.asarray(answered)
    if mask.dtype != bool:
        raise InputError(f"the answered mask must be boolean, got dtype {mask.dtype}")
    if mask.shape != (queries,):
        raise InputError(f"the answered mask must have shape ({queries},) (one entry per "
                         f"query), got {mask.shape}")
    return mask


def _as_delta(delta) -> float:
    if isinstance(delta, bool) or not isinstance(delta, numbers.Real) or not 0 < delta < 1:
        raise InputError(f"delta must be in (0, 1), got {delta!r}")
    return float(delta)


def _as_orders(orders) -> np.ndarray:
    o = np.asarray(orders, dtype=np.float64)
    if o.ndim != 1 or o.size == 0 or not (np.isfinite(o).all() and (o > 1).all()):
        raise InputError("orders must be a non-empty 1-D array of finite numbers > 1")
    return o


def _as_order(order) -> float:
    if isinstance(order, bool) or not isinstance(order, numbers.Real) \
            or not 1 < order < math.inf:
        raise InputError(f"the order must be a finite number > 1, got {order!r}")
    return float(order)


# --- data-independent RDP of one query --------------------------------------------------

def gnmax_rdp(sigma: float, orders=rdp.ORDERS) -> np.ndarray:
    """GNMax (argmax of votes + N(0, sigma^2) each): lambda / sigma^2 (Proposition 8).
    The vote vector moves by sqrt(2) in L2 norm between neighbours."""
    return _as_orders(orders) / as_positive(sigma, "sigma") ** 2


def threshold_rdp(sigma1: float, orders=rdp.ORDERS) -> np.ndarray:
    """The threshold check (max count + N(0, sigma1^2) >= T): lambda / (2 sigma1^2). The max
    count moves by at most 1 between neighbours (sensitivity 1, not sqrt(2))."""
    return _as_orders(orders) / (2 * as_positive(sigma1, "sigma1") ** 2)


def lnmax_rdp(gamma: float, orders=rdp.ORDERS) -> np.ndarray:
    """LNMax (argmax of votes + Laplace(1/gamma) each) is pure (2 gamma)-DP."""
    return rdp.pure_rdp(2 * as_positive(gamma, "gamma"), _as_orders(orders))


# --- probabilities of the likely outcome ------------------------------------------------

def _log1mexp(x):
    """log(1 - e^x) for x <= 0, accurate at both ends."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x < -math.log(2), np.log1p(-np.exp(x)), np.log(-np.expm1(x)))


def _gaps(votes: np.ndarray) -> np.ndarray:
    """(queries, classes - 1): the top count minus every other count, largest first."""
    desc = -np.sort(-votes, axis=1)
    return desc[:, :1] - desc[:, 1:]


def _gnmax_log_q_of_gaps(gaps: np.ndarray, sigma: float, num_classes: int) -> np.ndarray:
    # Class j beats the top one when N(0, 2 sigma^2) >= gap_j; the union bound over j is
    # capped at 1 - 1/K, which no noisy argmax of K classes exceeds.
    log_q = logsumexp(log_ndtr(-gaps / (_SQRT2 * sigma)), axis=1)
    return np.minimum(log_q, math.log1p(-1.0 / num_classes))


def gnmax_log_q(votes, sigma: float) -> np.ndarray:
    """log of Proposition 7's bound on q = Pr[GNMax != argmax], one per query:
    q <= sum over j != j* of Pr[N(0, 2 sigma^2) >= n_j* - n_j], capped at 1 - 1/K."""
    v = as_votes(votes)
    return _gnmax_log_q_of_gaps(_gaps(v).astype(np.float64), as_positive(sigma, "sigma"),
                                v.shape[1])


def lnmax_log_q(votes, gamma: float) -> np.ndarray:
    """log of the bound on q = Pr[LNMax != argmax] (PATE 2017, Lemma 4): the difference of
    two Laplace(1/gamma) draws exceeds a gap g with probability (2 + gamma g) / (4 e^(gamma g));
    summed over the other classes and capped at 1 - 1/K."""
    v = as_votes(votes)
    scaled = as_positive(gamma, "gamma") * _gaps(v)
    log_q = logsumexp(np.log(2 + scaled) - math.log(4) - scaled, axis=1)
    return np.minimum(log_q, math.log1p(-1.0 / v.shape[1]))


def threshold_log_p(votes, threshold: float, sigma1: float) -> np.ndarray:
    """log Pr[max count + N(0, sigma1^2) >= threshold], one per query. Votes are integers,
    so the max count is an integer already (the 2018 code rounds it; here nothing to round)."""
    threshold, sigma1 = as_threshold_step(threshold, sigma1)
    return log_ndtr((as_votes(votes).max(axis=1) - threshold) / sigma1)


# --- data-dependent RDP of one query ----------------------------------------------------

def noisy_max_rdp(log_q, sigma: float, orders=rdp.ORDERS) -> np.ndarray:
    """Theorem 6 of Papernot et al. 2018, shape (len(log_q), len(orders)).

    For a mechanism that is (lambda, lambda / sigma^2)-RDP at every order and returns its
    likely outcome except with probability at most q: mu2 = sigma sqrt(log 1/q), mu1 = mu2 + 1,
    e1 = mu1 / sigma^2, e2 = mu2 / sigma^2. If mu2 > 1, log(1/q) > e2 and
    q <= exp((mu2 - 1) e2) / ((mu1 / (mu1 - 1)) (mu2 / (mu2 - 1)))^mu2, then at every order
    lambda < mu1 the RDP at these votes is at most
        1/(lambda - 1) log((1 - q) A^(lambda - 1) + q B^(lambda - 1)),
        A = (1 - q) / (1 - (e^e2 q)^((mu2 - 1) / mu2)),  B = e^e1 / q^(1 / (mu1 - 1)).
    Returned: the min of that and lambda / sigma^2, or lambda / sigma^2 alone wherever a
    condition fails; 0 where q = 0 (the output is fixed). It bounds D_lambda(M(D) || M(D'))
    from the actual votes D to every neighbour D', the direction that composition needs;
    the reverse divergence can be far larger.
    """
    sigma = as_positive(sigma, "sigma")
    orders = _as_orders(orders)
    log_q = np.asarray(log_q, dtype=np.float64).reshape(-1, 1)
    if np.isnan(log_q).any() or (log_q > 0).any():
        raise InputError("log q must be <= 0")
    lam = orders.reshape(1, -1)
    independent = np.broadcast_to(lam / sigma**2, (len(log_q), len(orders)))
    with np.errstate(all="ignore"):  # q = 0 and failed conditions give inf/nan, masked below
        mu2 = sigma * np.sqrt(-log_q)
        mu1 = mu2 + 1
        e1, e2 = mu1 / sigma**2, mu2 / sigma**2
        applies = ((mu2 > 1) & (-log_q > e2) & np.isfinite(log_q) & (lam < mu1)
                   & (log_q <= (mu2 - 1) * e2
                      - mu2 * (np.log(mu1 / (mu1 - 1)) + np.log(mu2 / (mu2 - 1)))))
        log_1mq = _log1mexp(log_q)
        log_a = log_1mq - _log1mexp((log_q + e2) * (mu2 - 1) / mu2)
        log_b = e1 - log_q / (mu1 - 1)
        dependent = np.logaddexp(log_1mq + (lam - 1) * log_a,
                                 log_q + (lam - 1) * log_b) / (lam - 1)
    bound = np.where(applies, np.minimum(dependent, independent), independent)
    return np.maximum(np.where(np.isneginf(log_q), 0.0, bound), 0.0)


def gnmax_data_dependent_rdp(votes, sigma: float, orders=rdp.ORDERS) -> np.ndarray:
    """GNMax's RDP at these votes, (queries, orders): Theorem 6 with Proposition 7's q."""
    return noisy_max_rdp(gnmax_log_q(votes, sigma), sigma, orders)


def _threshold_rdp_of_log_p(log_p, sigma1: float, orders) -> np.ndarray:
    # The likely outcome is whichever of answered / not answered is likelier; sensitivity 1
    # where Theorem 6 assumes sqrt(2), hence sigma -> sqrt(2) sigma1.
    log_q = np.minimum(log_p, _log1mexp(log_p))
    return noisy_max_rdp(log_q, _SQRT2 * sigma1, orders)


def threshold_data_dependent_rdp(votes, threshold: float, sigma1: float,
                                 orders=rdp.ORDERS) -> np.ndarray:
    """The threshold check's RDP at these votes, (queries, orders): Theorem 6 with
    q = min(p, 1 - p), p = Pr[answered], and sigma replaced by sqrt(2) sigma1."""
    threshold, sigma1 = as_threshold_step(threshold, sigma1)
    return _threshold_rdp_of_log_p(threshold_log_p(votes, threshold, sigma1), sigma1, orders)


def lnmax_data_dependent_rdp(votes, gamma: float, orders=rdp.ORDERS) -> np.ndarray:
    """LNMax's RDP at these votes, (queries, orders): PATE 2017 Theorem 3 (the moments
    accountant's bound alpha(l) for an eps-DP mechanism, eps = 2 gamma, whose likely outcome
    fails with probability at most q < 1 / (e^eps + 1)), as RDP: alpha(lambda - 1) / (lambda - 1),
        1/(lambda - 1) log((1 - q) ((1 - q) / (1 - e^eps q))^(lambda - 1) + q e^(eps (lambda - 1))),
    and the min with the data-independent min(eps, lambda eps^2 / 2)."""
    orders = _as_orders(orders)
    eps = 2 * as_positive(gamma, "gamma")
    log_q = lnmax_log_q(votes, gamma).reshape(-1, 1)
    lam = orders.reshape(1, -1)
    independent = np.broadcast_to(rdp.pure_rdp(eps, orders), (len(log_q), len(orders)))
    with np.errstate(all="ignore"):  # nan where e^eps q >= 1: outside ``applies``
        log_1mq = _log1mexp(log_q)
        dependent = np.logaddexp(
            log_1mq + (lam - 1) * (log_1mq - _log1mexp(eps + log_q)),
            log_q + (lam - 1) * eps) / (lam - 1)
    applies = log_q < -math.log1p(math.exp(eps))
    return np.where(applies, np.minimum(np.maximum(dependent, 0.0), independent), independent)


# --- composition over the queries -------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class PateAccount:
    """The composed RDP of an aggregator's run, both ways, and each one's (epsilon, delta).

    rdp_data_dependent and epsilon_data_dependent are functions of the private votes:
    not private themselves (see release_data_dependent_rdp)."""

    orders: np.ndarray
    rdp_data_independent: np.ndarray
    rdp_data_dependent: np.ndarray
    epsilon_data_independent: float
    order_data_independent: float
    epsilon_data_dependent: float
    order_data_dependent: float
    delta: float
    queries: int
    answered: int


def _account(orders, independent, dependent, delta, queries, answered) -> PateAccount:
    eps_ind, order_ind = rdp.epsilon_from_rdp(independent, delta, orders)
    eps_dep, order_dep = rdp.epsilon_from_rdp(dependent, delta, orders)
    return PateAccount(orders, independent, dependent, eps_ind, order_ind, eps_dep,
                       order_dep, delta, queries, answered)


def _data_dependent_curve(votes, mask, sigma2, threshold, sigma1, orders) -> np.ndarray:
    curve = gnmax_data_dependent_rdp(votes[mask], sigma2, orders).sum(axis=0)
    if threshold is not None:
        curve = curve + threshold_data_dependent_rdp(votes, threshold, sigma1,
                                                     orders).sum(axis=0)
    return curve


def confident_gnmax_account(votes, answered=None, *, sigma2: float, delta: float,
                            threshold: float | None = None, sigma1: float | None = None,
                            orders=rdp.ORDERS) -> PateAccount:
    """RDP of (Confident-)GNMax over all the queries of ``votes``, summed at each order.

    The threshold check (when threshold and sigma1 are given) is charged on EVERY query,
    GNMax with sigma2 only on the answered ones (``answered``: a boolean mask; None means
    every query was answered, as plain GNMax does).
    """
    v = as_votes(votes)
    mask = _as_answered(answered, len(v))
    sigma2 = as_positive(sigma2, "sigma2")
    threshold, sigma1 = as_threshold_step(threshold, sigma1)
    delta = _as_delta(delta)
    orders = _as_orders(orders)
    answered_count = int(mask.sum())
    independent = answered_count * gnmax_rdp(sigma2, orders)
    if threshold is not None:
        independent = independent + len(v) * threshold_rdp(sigma1, orders)
    dependent = _data_dependent_curve(v, mask, sigma2, threshold, sigma1, orders)
    return _account(orders, independent, dependent, delta, len(v), answered_count)


def lnmax_account(votes, *, gamma: float, delta: float, orders=rdp.ORDERS) -> PateAccount:
    """RDP of LNMax (PATE 2017) answering every query of ``votes``, summed at each order."""
    v = as_votes(votes)
    delta = _as_delta(delta)
    orders = _as_orders(orders)
    independent = len(v) * lnmax_rdp(gamma, orders)
    dependent = lnmax_data_dependent_rdp(v, gamma, orders).sum(axis=0)
    return _account(orders, independent, dependent, delta, len(v), len(v))


# --- smooth sensitivity of the data-dependent cost (2018, Section 4) --------------------
#
# f(D) = the data-dependent RDP, at one order lambda, of the whole run: the threshold
# check's on every query plus GNMax's on the answered ones (the mask is the mechanism's
# output, so it is public). Changing k teachers moves every query's votes by at most k
# votes, so the local sensitivity of f at distance k is at most the sum over queries of
# each query's largest local sensitivity over the votes within k moves.

def _log_gnmax_neighbour_range(log_q: np.ndarray, sigma: float, num_classes: int):
    """(log BL(q), log BU(q)): every neighbour of votes with union bound q has its union
    bound in [BL(q), BU(q)] (2018, Appendix B). Each gap moves by at most 2 votes, i.e. by
    sqrt(2) / sigma in units of N(0, 2 sigma^2); BL and BU spread q evenly over the K - 1
    other classes, the extreme case."""
    log_share = log_q - math.log(num_classes - 1)
    z = -ndtri_exp(log_share)  # Pr[N(0, 1) >= z] = q / (K - 1)
    log_bl = math.log(num_classes - 1) + log_ndtr(-(z + _SQRT2 / sigma))
    log_bu = np.minimum(0.0, math.log(num_classes - 1) + log_ndtr(-(z - _SQRT2 / sigma)))
    return log_bl, log_bu


@dataclasses.dataclass(frozen=True)
class _GnmaxLandmarks:
    """Where GNMax's data-dependent RDP at one order, as a function c(q) of the union
    bound, changes regime: c(q) is the data-independent value from q0 up; below
    q1 = BL(q0) the local sensitivity grows with q; nowhere does it exceed ``plateau``."""

    log_q0: float
    log_q1: float
    plateau: float
    conditions_hold: bool


@functools.lru_cache(maxsize=64)  # a run asks for the same few settings again and again
def _gnmax_landmarks(sigma: float, num_classes: int, order: float,
                     num_teachers: int) -> _GnmaxLandmarks:
    """q0, q1, the plateau, and a numerical check, on a dense grid of q over every value the
    analysis evaluates (from BL of the unanimous vote's q up to 1 - 1/K), of the two
    conditions the local-sensitivity bound rests on (C5 and C6 of the 2018 appendix):
    c(q) is non-decreasing, and c(BU(q)) - c(q) is non-decreasing below q1."""
    independent = order / sigma**2

    def cost(log_q):
        return noisy_max_rdp(log_q, sigma, [order])[:, 0]

    def upward(log_q):
        return cost(_log_gnmax_neighbour_range(log_q, sigma, num_classes)[1]) - cost(log_q)

    log_top = math.log1p(-1.0 / num_classes)
    unanimous = np.full((1, num_classes - 1), float(num_teachers))
    log_lowest = float(_log_gnmax_neighbour_range(
        _gnmax_log_q_of_gaps(unanimous, sigma, num_classes), sigma, num_classes)[0][0])
    grid = -np.geomspace(-log_lowest, -log_top, _CONDITION_GRID_POINTS)
    values = cost(grid)
    slack = _CONDITION_SLACK * independent
    reaches = np.flatnonzero(values >= independent)
    if not reaches.size:  # no plateau on the grid: do not rely on the conditions
        return _GnmaxLandmarks(log_top, log_top, independent, False)
    if reaches[0] == 0:
        log_q0 = grid[0]
    else:  # bisect to the first q where c(q) reaches the data-independent value
        low, high = grid[reaches[0] - 1], grid[reaches[0]]
        for _ in range(60):
            middle = 0.5 * (low + high)
            low, high = (low, middle) if cost(np.array([middle]))[0] >= independent \
                else (middle, high)
        log_q0 = high
    log_q1 = float(_log_gnmax_neighbour_range(np.array([log_q0]), sigma, num_classes)[0][0])
    plateau = independent - float(cost(np.array([log_q1]))[0])
    below = np.append(grid[grid < log_q1], log_q1)
    c5 = bool((np.diff(values) >= -slack).all())
    c6 = bool((np.diff(upward(below)) >= -slack).all())
    return _GnmaxLandmarks(float(log_q0), log_q1, plateau, c5 and c6)


def gnmax_sensitivity_conditions_hold(sigma: float, num_classes: int, order: float,
                                      num_teachers: int) -> bool:
    """Whether conditions C5 and C6 hold numerically for GNMax at this order; where they do
    not, gnmax_local_sensitivity falls back to the global bound lambda / sigma^2."""
    return _gnmax_landmarks(as_positive(sigma, "sigma"), int(num_classes), _as_order(order),
                            int(num_teachers)).conditions_hold


def _gnmax_ls_at(log_q, sigma, num_classes, order, marks: _GnmaxLandmarks) -> np.ndarray:
    """Algorithm 3 of the 2018 appendix: the local sensitivity at votes with union bound q,
    max(c(BU(q)) - c(q), c(q) - c(BL(q))) with c the data-dependent RDP, and the plateau
    between q1 and q0."""
    log_bl, log_bu = _log_gnmax_neighbour_range(log_q, sigma, num_classes)
    rows = np.concatenate([log_q, log_bl, log_bu])
    here, low, high = noisy_max_rdp(rows, sigma, [order])[:, 0].reshape(3, -1)
    ls = np.maximum(high - here, here - low)
    return np.where((log_q >= marks.log_q1) & (log_q <= marks.log_q0), marks.plateau, ls)


def gnmax_local_sensitivity(votes, sigma: float, order: float) -> np.ndarray:
    """(queries, T + 1): for each query, a bound on the local sensitivity of GNMax's
    data-dependent RDP at ``order`` over all votes within k moved votes, k = 0..T (T the
    largest row sum; beyond T every vote vector is within reach).

    The bound is monotone in q up to q1 and falls again past q0, so only the extreme q
    within k moves matters: the largest, for votes below q1, comes from moving k votes from
    the top class to the runner-up; the smallest, for votes above q0, from moving k votes one
    at a time from the largest other class to the top one (both exact for the union bound,
    convex in each gap while the gaps are positive; once a gap closes, q >= 1/2 is past q0).
    Where conditions C5/C6 fail numerically, every entry is the global bound
    lambda / sigma^2 (the RDP lies in [0, lambda / sigma^2]).
    """
    v = as_votes(votes)
    return _gnmax_local_sensitivity(v, as_positive(sigma, "sigma"), _as_order(order),
                                    _reach(v))


def _reach(votes: np.ndarray) -> int:
    """The number of teachers, T: from T moved votes on, every vote vector is in reach."""
    return int(votes.sum(axis=1).max(initial=0))


def _gnmax_local_sensitivity(v, sigma, order, reach) -> np.ndarray:
    queries, num_classes = v.shape
    marks = _gnmax_landmarks(sigma, num_classes, order, reach)
    if not marks.conditions_hold:
        return np.full((queries, reach + 1), order / sigma**2)
    ls = np.full((queries, reach + 1), marks.plateau)
    gaps = _gaps(v).astype(np.float64)
    log_q = _gnmax_log_q_of_gaps(gaps, sigma, num_classes)
    ls[:, 0] = _gnmax_ls_at(log_q, sigma, num_classes, order, marks)

    rising = np.flatnonzero(log_q < marks.log_q1)
    narrowing = np.ones((1, num_classes - 1))
    narrowing[0, 0] = 2  # a vote moved from the top to the runner-up closes its gap by 2
    for k in range(1, reach + 1):
        if not rising.size:
            break
        log_q_k = _gnmax_log_q_of_gaps(gaps[rising] - k * narrowing, sigma, num_classes)
        below = log_q_k < marks.log_q1  # once past q1, the plateau from here on
        ls[rising[below], k] = _gnmax_ls_at(log_q_k[below], sigma, num_classes, order, marks)
        rising = rising[below]

    falling = np.flatnonzero(log_q > marks.log_q0)
    desc = -np.sort(-v[falling], axis=1)
    for k in range(1, reach + 1):
        if not falling.size:
            break
        donor = 1 + np.argmax(desc[:, 1:], axis=1)
        movable = np.flatnonzero(desc[np.arange(len(desc)), donor] > 0)
        desc[movable, donor[movable]] -= 1
        desc[movable, 0] += 1
        log_q_k = _gnmax_log_q_of_gaps((desc[:, :1] - desc[:, 1:]).astype(np.float64),
                                       sigma, num_classes)
        above = log_q_k > marks.log_q0  # once at q0 or below, the plateau from here on
        ls[falling[above], k] = _gnmax_ls_at(log_q_k[above], sigma, num_classes, order, marks)
        falling, desc = falling[above], desc[above]
    return ls


def threshold_local_sensitivity(votes, threshold: float, sigma1: float,
                                order: float) -> np.ndarray:
    """(queries, T + 1): for each query, the local sensitivity of the threshold check's
    data-dependent RDP at ``order``, maximised over all votes within k moved votes.

    The cost depends on the max count m only, a neighbour's max count is m - 1, m or m + 1,
    and with row sum T and K classes m lies in [ceil(T / K), T]; so this is exact: the
    largest |cost(u + 1) - cost(u)| over u, u + 1 in that range and within k + 1 of m.
    """
    v = as_votes(votes)
    threshold, sigma1 = as_threshold_step(threshold, sigma1)
    return _threshold_local_sensitivity(v, threshold, sigma1, _as_order(order), _reach(v))


def _threshold_local_sensitivity(v, threshold, sigma1, order, reach) -> np.ndarray:
    totals = v.sum(axis=1)
    counts = np.arange(reach + 2)
    cost = _threshold_rdp_of_log_p(log_ndtr((counts - threshold) / sigma1), sigma1,
                                   [order])[:, 0]
    steps = np.abs(np.diff(cost))  # steps[u]: the change between max counts u and u + 1
    lowest = -(-totals // v.shape[1])  # ceil(T / K)
    top = v.max(axis=1)[:, None]
    k = np.arange(reach + 1)[None, :]

    def widening(edge, valid):  # the largest step seen so far as k grows
        return np.maximum.accumulate(np.where(valid, steps[np.clip(edge, 0, reach)], 0.0),
                                     axis=1)

    return np.maximum(widening(top - 1 - k, top - 1 - k >= lowest[:, None]),
                      widening(top + k, top + k < totals[:, None]))


def data_dependent_local_sensitivity(votes, answered=None, *, sigma2: float, order: float,
                                     threshold: float | None = None,
                                     sigma1: float | None = None) -> np.ndarray:
    """(T + 1,): a bound on the local sensitivity, at distance k = 0..T from ``votes``, of
    the run's data-dependent RDP at ``order`` (the threshold check on every query, GNMax on
    the answered ones): the sum of the queries' bounds."""
    v = as_votes(votes)
    mask = _as_answered(answered, len(v))
    sigma2, order = as_positive(sigma2, "sigma2"), _as_order(order)
    threshold, sigma1 = as_threshold_step(threshold, sigma1)
    reach = _reach(v)
    total = _gnmax_local_sensitivity(v[mask], sigma2, order, reach).sum(axis=0)
    if threshold is not None:
        total += _threshold_local_sensitivity(v, threshold, sigma1, order, reach).sum(axis=0)
    return total


def smooth_sensitivity(local_sensitivity, beta: float) -> float:
    """The beta-smooth sensitivity max_k e^(-beta k) LS(k), LS(k) at distance k = 0, 1, ...
    (from the last k on, LS stays constant, so the maximum is over the given ones)."""
    ls = np.asarray(local_sensitivity, dtype=np.float64)
    beta = as_positive(beta, "beta")
    return float(np.max(ls * np.exp(-beta * np.arange(len(ls))), initial=0.0))


def smooth_sensitivity_release_rdp(beta: float, noise_multiplier: float,
                                   orders=rdp.ORDERS) -> np.ndarray:
    """RDP of releasing f(D) + SS(D) N(0, s^2), s = noise_multiplier, where SS is a beta-smooth
    upper bound on the local sensitivity of f (the Gaussian noise with smooth sensitivity).

    Between neighbours, SS changes by a factor e^r, |r| <= beta, and f by at most the smaller
    of the two SS. The Renyi divergence of two Gaussians in closed form: its mean part is
    largest at r = -beta with the shift SS e^-beta, its variance part h(r) at r = +-beta, so
    at 1 < lambda < 1 / (1 - e^(-2 beta)), with u = e^(-2 beta),
        lambda u / (2 s^2 (1 - lambda (1 - u))) + max(h(-beta), h(beta)),
        h(r) = (r lambda - log(1 + lambda (e^(2 r) - 1)) / 2) / (lambda - 1),
    exact at the worst neighbour whenever h(-beta) >= h(beta); inf at higher orders (the
    divergence is unbounded there). The closed form lambda e^(2 beta) / s^2
    + (beta lambda - log(1 - 2 beta lambda) / 2) / (lambda - 1) of the 2018 code falls
    below this worst case as lambda nears 1 / (2 beta), so it is not used.
    """
    beta = as_positive(beta, "beta")
    s = as_positive(noise_multiplier, "noise multiplier")
    lam = _as_orders(orders)
    shrink = -math.expm1(-2 * beta)  # 1 - e^(-2 beta)
    inside = lam * shrink < 1
    with np.errstate(invalid="ignore", divide="ignore"):  # outside: log of <= 0, masked

        def h(r):
            return (r * lam - 0.5 * np.log1p(lam * math.expm1(2 * r))) / (lam - 1)

        value = (lam * (1 - shrink) / (2 * s**2 * (1 - lam * shrink))
                 + np.maximum(h(-beta), h(beta)))
    return np.where(inside, value, np.inf)


@dataclasses.dataclass(frozen=True)
class SmoothSensitivityRelease:
    """A private release of the run's data-dependent RDP at ``order``.

    value: the data-dependent RDP at ``order`` plus SS_beta N(0, noise_multiplier^2); an
    estimate of it, which may come out below it (or below 0). rdp: the release's own RDP
    cost at ``orders``, to charge to the ledger; rdp_at_order: that cost at ``order``."""

    order: float
    value: float
    beta: float
    noise_multiplier: float
    orders: np.ndarray
    rdp: np.ndarray
    rdp_at_order: float

    def epsilon(self, delta: float) -> float:
        """The reported epsilon at ``delta``: the released RDP (at least 0) plus the release's
        own cost, converted at ``order`` by dp_accounting."""
        total = max(self.value, 0.0) + self.rdp_at_order
        return rdp.epsilon_from_rdp(np.array([total]), _as_delta(delta),
                                    np.array([self.order]))[0]


def release_data_dependent_rdp(votes, answered=None, *, sigma2: float, order: float,
                               beta: float, noise_multiplier: float,
                               rng: np.random.Generator, threshold: float | None = None,
                               sigma1: float | None = None,
                               orders=rdp.ORDERS) -> SmoothSensitivityRelease:
    """Release the run's data-dependent RDP at ``order`` with smooth sensitivity (2018,
    Section 4 and Appendix C): value = f(D) + SS_beta(D) z, z ~ N(0, noise_multiplier^2),
    where f(D) is the data-dependent RDP at ``order`` summed over the queries (threshold
    check on all, GNMax on the answered) and SS_beta the smooth sensitivity of f from
    data_dependent_local_sensitivity. Only ``value`` is released: f(D) and SS_beta(D) are
    functions of the private votes. The release costs smooth_sensitivity_release_rdp(beta,
    noise_multiplier), finite only at orders below 1 / (1 - e^(-2 beta)), ``order`` among them.

    ``order``, ``beta`` and ``noise_multiplier`` must be fixed without looking at the votes:
    tuned on the votes, they would leak through the choice.
    """
    v = as_votes(votes)
    order = _as_order(order)
    beta = as_positive(beta, "beta")
    if not order * -math.expm1(-2 * beta) < 1:
        raise InputError(f"beta = {beta!r} is too large for order {order:g}: the release has "
                         f"an RDP guarantee only at orders below 1 / (1 - e^(-2 beta))")
    rng = as_generator(rng)
    mask = _as_answered(answered, len(v))
    sigma2 = as_positive(sigma2, "sigma2")
    threshold, sigma1 = as_threshold_step(threshold, sigma1)
    noise_multiplier = as_positive(noise_multiplier, "noise multiplier")
    cost = _data_dependent_curve(v, mask, sigma2, threshold, sigma1, [order])[0]
    sensitivity = smooth_sensitivity(data_dependent_local_sensitivity(
        v, mask, sigma2=sigma2, order=order, threshold=threshold, sigma1=sigma1), beta)
    value = cost + sensitivity * rng.normal(0.0, noise_multiplier)
    orders = _as_orders(orders)
    return SmoothSensitivityRelease(
        order, float(value), beta, noise_multiplier, orders,
        smooth_sensitivity_release_rdp(beta, noise_multiplier, orders),
        float(smooth_sensitivity_release_rdp(beta, noise_multiplier, [order])[0]))


# --- calibration with the data-independent bound ----------------------------------------

def calibrate_sigma2(epsilon: float, delta: float, queries: int,
                     sigma1: float | None = None, orders=rdp.ORDERS) -> float:
    """The smallest sigma2 (to 0.0001%) whose data-independent epsilon at ``delta`` is at
    most ``epsilon`` for ``queries`` queries, assuming the worst case that every query is
    answered, with the threshold check's cost (sigma1) on every query when given. Looks at
    no vote, so a benchmark cell may use it to meet a target epsilon."""
    epsilon = as_positive(epsilon, "epsilon")
    delta = _as_delta(delta)
    if isinstance(queries, bool) or not isinstance(queries, numbers.Integral) or queries < 1:
        raise InputError(f"queries must be an integer >= 1, got {queries!r}")
    orders = _as_orders(orders)
    base = 0.0 if sigma1 is None else queries * threshold_rdp(sigma1, orders)

    def meets(sigma2: float) -> bool:
        curve = base + queries * orders / sigma2**2
        return rdp.epsilon_from_rdp(curve, delta, orders)[0] <= epsilon

    if not meets(SIGMA_SEARCH_LIMIT):
        raise InputError(f"epsilon = {epsilon:g} at delta = {delta:g} is unmeetable with "
                         f"{queries} queries: even sigma2 = {SIGMA_SEARCH_LIMIT:g} spends more "
                         f"(the threshold check's cost, and the conversion from RDP at orders "
                         f"up to {orders.max():g}); raise sigma1 or ask fewer queries")
    low, high = 1.0, 1.0
    while not meets(high):
        low, high = high, 4 * high
    while meets(low):
        low, high = low / 4, low
    while high / low > 1 + SIGMA_RELATIVE_TOLERANCE:
        middle = math.sqrt(low * high)
        low, high = (low, middle) if meets(middle) else (middle, high)
    return high


# --- the command: privboard privacy pate -------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--votes", type=Path, required=True,
                        help="VOTES.npy: integer vote counts, queries x classes")
    parser.add_argument("--sigma2", type=float, required=True,
                        help="standard deviation of GNMax's noise on answered queries")
    parser.add_argument("--threshold", type=float, default=None,
                        help="Confident-GNMax's threshold T (with --sigma1)")
    parser.add_argument("--sigma1", type=float, default=None,
                        help="standard deviation of the threshold check's noise")
    parser.add_argument("--answered", type=Path, default=None,
                        help="MASK.npy: boolean, which queries were answered "
                             "(default: every query)")
    parser.add_argument("--delta", type=float, required=True, help="target delta")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _load_array(path: Path, what: str) -> np.ndarray:
    if not path.is_file():
        raise InputError(f"{what} file {path} does not exist")
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        reason = " ".join(str(error).split())
        raise InputError(f"{what} file {path} is not a .npy array: {reason}") from None
    if not isinstance(array, np.ndarray):
        raise InputError(f"{what} file {path} holds several arrays; give one .npy array")
    return array


def run(args: argparse.Namespace) -> int:
    """Print the account; unusable input raises InputError (one line, exit code 2)."""
    votes = _load_array(args.votes, "votes")
    answered = None if args.answered is None else _load_array(args.answered, "answered mask")
    account = confident_gnmax_account(votes, answered, sigma2=args.sigma2, delta=args.delta,
                                      threshold=args.threshold, sigma1=args.sigma1)
    if args.json:
        print(json.dumps({
            "orders": account.orders.tolist(),
            "rdp_data_independent": account.rdp_data_independent.tolist(),
            "rdp_data_dependent": account.rdp_data_dependent.tolist(),
            "epsilon_data_independent": account.epsilon_data_independent,
            "epsilon_data_dependent": account.epsilon_data_dependent,
            "queries": account.queries,
            "answered": account.answered,
        }))
        return 0
    check = ("" if args.threshold is None
             else f", threshold {args.threshold:g} with sigma1 {args.sigma1:g}")
    print(f"{account.queries} queries, {account.answered} answered (GNMax sigma2 "
          f"{args.sigma2:g}{check}); at delta {account.delta:g}:\n"
          f"data-independent epsilon {account.epsilon_data_independent:.4f} "
          f"(RDP order {account.order_data_independent:g})\n"
          f"data-dependent epsilon {account.epsilon_data_dependent:.4f} "
          f"(RDP order {account.order_data_dependent:g}); a function of the private votes, "
          f"not private itself: release it with smooth sensitivity")
    return 0
