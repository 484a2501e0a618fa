"""Label-DP randomizers: randomized response, RRTop-k, RRWithPrior, noisy label histograms
and cluster priors, and Laplace noise on one-hot labels.

Ghazi et al. 2021, "Deep Learning with Label Differential Privacy" (Algorithms 1, 2 and 4);
Malek et al. 2021, "Antipodes of Label Differential Privacy: PATE and ALIBI" (the Laplace
release of ALIBI).
Every randomizer is epsilon-DP with respect to the label of each row, given that row's
prior. The prior must not depend on the labels, or only through a DP release whose budget
is counted separately (noisy_cluster_priors; sequential composition).

Each release takes the run's ledger and the training-set indices of its rows, and charges
the epsilon it runs at to those rows' labels before it draws: what a release spends is
what it charges, by construction.

Each row's top-k set is the k classes with the largest prior, ties broken by the smaller
class index. The rule looks at the prior only, never at the label, which is what Lemma 1
needs.

All functions are vectorised over rows (N rows, K classes) with numpy only: one sort of
each row's priors and one uniform draw per row.
"""
from __future__ import annotations

import numbers

import numpy as np
import scipy.stats

from benchmarks.privacy.ledger import Ledger, PureEpsilon, Touches
from benchmarks.privacy.notions import Field

# Priors often come from a float32 softmax, whose rows sum to 1 only up to rounding.
_SUM_TOLERANCE = 1e-5
# Rows randomized together: 8192 x 100 float64 is 6.5 MB, about the size of a CPU cache.
_BLOCK_ROWS = 8192


def _as_epsilon(epsilon, allow_inf: bool = True) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real):
        raise ValueError(f"epsilon must be a real number, got {epsilon!r}")
    eps = float(epsilon)
    if not eps > 0 or (eps == np.inf and not allow_inf):
        allowed = "> 0 (inf allowed)" if allow_inf else "finite and > 0"
        raise ValueError(f"epsilon must be {allowed}, got {epsilon!r}")
    return eps


def _as_count(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


def _as_priors(priors) -> np.ndarray:
    """The priors as a 2-D float32 or float64 array, not copied when already one: a model's
    float32 softmax is used as it is (a float64 copy of 1M x 100 priors costs more than
    the randomization). Their values are checked by _check_priors, block by block."""
    p = np.asarray(priors)
    if p.dtype not in (np.float32, np.float64):
        p = p.astype(np.float64)
    if p.ndim != 2 or p.shape[1] == 0:
        raise ValueError(f"priors must be a 2-D array (N, K) with K >= 1, got shape {p.shape}")
    return p


def _check_priors(p: np.ndarray, first_row: int = 0) -> None:
    """Each row non-negative and summing to 1; ``first_row`` numbers the rows of a block."""
    lowest = p.min(initial=np.inf)
    if np.isnan(lowest):
        raise ValueError("priors contain NaN")
    if lowest < 0:
        raise ValueError(f"priors must be non-negative, found {lowest}")
    sums = p.sum(axis=1, dtype=np.float64)
    bad = np.flatnonzero(np.abs(sums - 1.0) > _SUM_TOLERANCE)
    if bad.size:
        raise ValueError(f"each row of priors must sum to 1 (within {_SUM_TOLERANCE}); "
                         f"row {first_row + bad[0]} sums to {sums[bad[0]]}")


def _as_classes(values, length: int | None, num_classes: int, name: str) -> np.ndarray:
    """Validate a 1-D integer array with entries in [0, num_classes)."""
    v = np.asarray(values)
    if v.ndim != 1 or (length is not None and len(v) != length):
        expected = "(N,)" if length is None else f"({length},)"
        raise ValueError(f"{name} must have shape {expected}, got {v.shape}")
    if v.size == 0:
        return v.astype(np.intp)
    if not np.issubdtype(v.dtype, np.integer):
        raise ValueError(f"{name} must be integers, got dtype {v.dtype}")
    if v.min() < 0 or v.max() >= num_classes:
        raise ValueError(f"{name} must be in [0, {num_classes - 1}], "
                         f"found values in [{v.min()}, {v.max()}]")
    return v.astype(np.intp)


def _as_k(k, num_rows: int, num_classes: int) -> np.ndarray:
    ks = np.asarray(k)
    if not np.issubdtype(ks.dtype, np.integer):
        raise ValueError(f"k must be an integer or an integer array, got {k!r}")
    if ks.ndim == 0:
        ks = np.full(num_rows, ks)
    elif ks.shape != (num_rows,):
        raise ValueError(f"k must be a scalar or have shape ({num_rows},), got {ks.shape}")
    if ks.size and (ks.min() < 1 or ks.max() > num_classes):
        raise ValueError(f"k must be in [1, {num_classes}], "
                         f"found values in [{ks.min()}, {ks.max()}]")
    return ks.astype(np.intp)


def _as_rng(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def _sorted_desc(priors: np.ndarray) -> np.ndarray:
    """Each row's priors in decreasing order, C-contiguous.

    Sorting values is several times faster than argsort; classes are found again by value.
    Negating in place keeps the rows contiguous without a second temporary.
    """
    desc = np.negative(priors)
    desc.sort(axis=1)
    return np.negative(desc, out=desc)


def _rr_probabilities(k: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """P(keep the label) and P(each other top-k member) for a label inside the top-k set.

    Written with e^-epsilon so that a large epsilon cannot overflow.
    """
    denominator = 1.0 + (k - 1) * np.exp(-epsilon)
    return 1.0 / denominator, np.exp(-epsilon) / denominator


def _optimal_k(desc: np.ndarray, epsilon: float) -> np.ndarray:
    num_classes = desc.shape[1]
    w = np.empty_like(desc)
    np.cumsum(desc, axis=1, out=w[:, ::-1])  # w[:, j] holds w_k for k = K - j
    w /= 1.0 + np.arange(num_classes - 1, -1, -1) * np.exp(-epsilon)
    # argmax takes the first maximum, here the largest maximising k: ties go to the larger k,
    # so epsilon = inf gives k = K and every label is kept.
    return num_classes - np.argmax(w, axis=1)


def _top_k_mask(priors: np.ndarray, desc: np.ndarray, k: np.ndarray) -> np.ndarray:
    """(N, K) membership of each row's top-k set."""
    kth = desc[np.arange(len(k)), k - 1]
    above = priors > kth[:, None]
    tied = priors == kth[:, None]
    # Classes tied at the k-th value fill the remaining places in index order.
    room = k - np.count_nonzero(above, axis=1)
    return above | (tied & (np.cumsum(tied, axis=1) <= room[:, None]))


def _class_at(priors: np.ndarray, desc: np.ndarray, position: np.ndarray) -> np.ndarray:
    """The class at `position` of each row's order (decreasing prior, ties by index)."""
    value = desc[np.arange(len(position)), position]
    same = priors == value[:, None]
    cls = np.argmax(same, axis=1)
    tied = np.flatnonzero(np.count_nonzero(same, axis=1) > 1)
    if tied.size:
        # Tied classes take the positions after every larger prior, in index order.
        nth = position[tied] - np.count_nonzero(priors[tied] > value[tied, None], axis=1)
        cls[tied] = np.argmax(np.cumsum(same[tied], axis=1) > nth[:, None], axis=1)
    return cls


def _sample_top_k(labels, priors, desc, k, epsilon, uniform) -> np.ndarray:
    n = len(labels)
    rows = np.arange(n)
    kth = desc[rows, k - 1]
    prior_of_label = priors[rows, labels]
    in_top = prior_of_label > kth
    at_kth = np.flatnonzero(prior_of_label == kth)  # only there does the tie rule matter
    in_top[at_kth] = _top_k_mask(priors[at_kth], desc[at_kth], k[at_kth])[
        np.arange(at_kth.size), labels[at_kth]]

    # One uniform per row, cut into slots of probability `each`. Inside the top-k set slots
    # 0..k-2 are the other members and the rest of [0, 1) keeps the label; outside it slots
    # 0..k-1 are the members.
    _, other = _rr_probabilities(k, epsilon)
    each = np.where(in_top, other, 1.0 / k)
    slot = np.floor(np.divide(uniform, each, out=np.full(n, np.inf), where=each > 0))
    kept = in_top & (slot >= k - 1)
    out = _class_at(priors, desc, np.minimum(slot, k - 1).astype(np.intp))
    # Slots 0..k-2 point at positions 0..k-2; where that is the label itself, position k-1
    # stands in for it, so every other member keeps probability `other`.
    hit = np.flatnonzero(in_top & ~kept & (out == labels))
    out[hit] = _class_at(priors[hit], desc[hit], k[hit] - 1)
    out[kept] = labels[kept]
    return out


def _randomize(labels, priors, k, epsilon, rng) -> np.ndarray:
    """RRTop-k on every row; k is an int array (N,), or None for each row's optimal k.

    Rows go through in blocks so that the (rows, K) temporaries stay in the CPU cache, which
    halves the time on large batches. The uniforms are drawn up front, so the output does
    not depend on the block size.
    """
    uniform = rng.random(len(labels))
    out = np.empty(len(labels), dtype=np.intp)
    for start in range(0, len(labels), _BLOCK_ROWS):
        block = slice(start, start + _BLOCK_ROWS)
        _check_priors(priors[block], start)
        desc = _sorted_desc(priors[block])
        k_block = _optimal_k(desc, epsilon) if k is None else k[block]
        out[block] = _sample_top_k(labels[block], priors[block], desc, k_block, epsilon,
                                   uniform[block])
    return out


def _top_k_distribution(labels, priors, desc, k, epsilon) -> np.ndarray:
    rows = np.arange(len(labels))
    member = _top_k_mask(priors, desc, k)
    in_top = member[rows, labels]
    keep, other = _rr_probabilities(k, epsilon)
    dist = member * np.where(in_top, other, 1.0 / k)[:, None]
    dist[rows[in_top], labels[in_top]] = keep[in_top]
    return dist


def _checked(labels, priors, epsilon, whole: bool = True):
    """Validated arguments; ``whole=False`` leaves the priors' values to the block loop."""
    p = _checked_priors(priors) if whole else _as_priors(priors)
    return _as_classes(labels, len(p), p.shape[1], "labels"), p, _as_epsilon(epsilon)


def _checked_priors(priors) -> np.ndarray:
    p = _as_priors(priors)
    _check_priors(p)
    return p


def optimal_k(priors, epsilon) -> np.ndarray:
    """k* per row: the k maximising w_k = e^eps / (e^eps + k - 1) * (sum of the k largest priors).

    w_k is P(output == label) when the label is drawn from the prior; among equal w_k the
    larger k is chosen. Returns an int array (N,).
    """
    p = _checked_priors(priors)
    return _optimal_k(_sorted_desc(p), _as_epsilon(epsilon))


def _charged(ledger, mechanism: str, epsilon: float, examples, rows: int, group: str
             ) -> Ledger:
    """Charge ``epsilon`` to the labels of ``examples``, one index per released row."""
    examples = np.asarray(examples)
    if examples.shape != (rows,):
        raise ValueError(f"{mechanism}: examples must give the training-set index of each of "
                         f"the {rows} rows, got shape {examples.shape}")
    ledger = Ledger.of(ledger, mechanism)
    ledger.charge(mechanism, Touches(Field.LABELS, examples, group), PureEpsilon(epsilon))
    return ledger


def _observed(ledger: Ledger, mechanism: str, examples, released: np.ndarray,
              group: str, **public) -> np.ndarray:
    released = ledger.released(mechanism, released, examples=examples, group=group, **public)
    ledger.observe(mechanism, examples, released, group)
    return released


def rr_top_k(ledger: Ledger, labels, priors, k, epsilon, rng, *, examples,
             group: str = "") -> np.ndarray:
    """RRTop-k (Algorithm 1) on each row; k is an int or an int array (N,).

    A label inside its row's top-k set is kept with probability e^eps / (e^eps + k - 1) and
    otherwise replaced by another member, each with probability 1 / (e^eps + k - 1); a label
    outside it is replaced by a uniformly drawn member.
    """
    labels, p, eps = _checked(labels, priors, epsilon, whole=False)
    k = _as_k(k, len(p), p.shape[1])
    ledger = _charged(ledger, "RRTop-k", eps, examples, len(labels), group)
    return _observed(ledger, "RRTop-k", examples, _randomize(labels, p, k, eps, _as_rng(rng)),
                     group, priors=p, k=k, epsilon=eps)


def rr_with_prior(ledger: Ledger, labels, priors, epsilon, rng, *, examples,
                  group: str = "") -> np.ndarray:
    """RRWithPrior (Algorithm 2): RRTop-k with each row's k = optimal_k.

    epsilon = inf keeps every label.
    """
    labels, p, eps = _checked(labels, priors, epsilon, whole=False)
    ledger = _charged(ledger, "RRWithPrior", eps, examples, len(labels), group)
    return _observed(ledger, "RRWithPrior", examples,
                     _randomize(labels, p, None, eps, _as_rng(rng)), group, priors=p,
                     epsilon=eps)


def rr_top_k_distribution(labels, priors, k, epsilon) -> np.ndarray:
    """Exact output distribution (N, K) of rr_top_k for the given labels."""
    labels, p, eps = _checked(labels, priors, epsilon)
    return _top_k_distribution(labels, p, _sorted_desc(p), _as_k(k, len(p), p.shape[1]), eps)


def rr_with_prior_distribution(labels, priors, epsilon) -> np.ndarray:
    """Exact output distribution (N, K) of rr_with_prior for the given labels."""
    labels, p, eps = _checked(labels, priors, epsilon)
    desc = _sorted_desc(p)
    return _top_k_distribution(labels, p, desc, _optimal_k(desc, eps), eps)


def randomized_response(ledger: Ledger, labels, num_classes, epsilon, rng, *, examples,
                        group: str = "") -> np.ndarray:
    """Plain K-ary randomized response: RRTop-K, whose top-K set is every class."""
    num_classes = _as_count(num_classes, "num_classes")
    n = len(np.atleast_1d(labels))
    uniform = np.broadcast_to(1.0 / num_classes, (n, num_classes))
    labels, p, eps = _checked(labels, uniform, epsilon, whole=False)
    ledger = _charged(ledger, "randomized response", eps, examples, len(labels), group)
    released = _randomize(labels, p, _as_k(num_classes, n, num_classes), eps, _as_rng(rng))
    return _observed(ledger, "randomized response", examples, released, group,
                     num_classes=num_classes, epsilon=eps)


def cluster_histogram_noise(epsilon):
    """The noise added to each bin of a cluster's label histogram (a frozen scipy distribution).

    Changing one label moves two bins by one (L1 sensitivity 2), so the DiscreteLaplace pmf
    is proportional to exp(-(epsilon / 2) |z|).
    """
    return scipy.stats.dlaplace(a=_as_epsilon(epsilon, allow_inf=False) / 2)


def noisy_label_histogram(ledger: Ledger, labels, num_classes, epsilon, rng, *, examples,
                          group: str = "") -> np.ndarray:
    """The histogram of the labels (num_classes,), with cluster_histogram_noise on each
    count and clipped at 0, released once: epsilon-label-DP, charged to the labels of
    ``examples``. epsilon = inf adds no noise."""
    num_classes = _as_count(num_classes, "num_classes")
    eps = _as_epsilon(epsilon)
    labels = _as_classes(labels, None, num_classes, "labels")
    return _noisy_histograms(ledger, "noisy label histogram", labels,
                             np.zeros(len(labels), dtype=np.intp), 1, num_classes, eps, rng,
                             examples, group)[0]


def noisy_cluster_priors(ledger: Ledger, labels, clusters, num_clusters, num_classes, epsilon,
                         rng, *, examples, group: str = "") -> np.ndarray:
    """Priors from label-independent clusters (Algorithm 4, steps 3-4); epsilon-label-DP.

    Each cluster's label histogram is released with cluster_histogram_noise, clipped at 0 and
    normalised (uniform if nothing is left). Returns the (N, num_classes) prior of each
    example, that of its cluster. RRWithPrior on top spends its own epsilon (sequential
    composition).
    """
    num_clusters = _as_count(num_clusters, "num_clusters")
    num_classes = _as_count(num_classes, "num_classes")
    eps = _as_epsilon(epsilon, allow_inf=False)
    clusters = _as_classes(clusters, None, num_clusters, "clusters")
    labels = _as_classes(labels, len(clusters), num_classes, "labels")
    released = _noisy_histograms(ledger, "noisy cluster histograms", labels, clusters,
                                 num_clusters, num_classes, eps, rng, examples, group)
    totals = released.sum(axis=1, keepdims=True)
    table = np.divide(released, totals, out=np.full(released.shape, 1.0 / num_classes),
                      where=totals > 0)
    return table[clusters]


def _noisy_histograms(ledger, mechanism: str, labels: np.ndarray, clusters: np.ndarray,
                      num_clusters: int, num_classes: int, epsilon: float, rng, examples,
                      group: str) -> np.ndarray:
    """Each cluster's histogram of its rows' labels (num_clusters, num_classes), with
    cluster_histogram_noise on each count (none at epsilon = inf) and clipped at 0,
    released through the layer and charged to the labels of ``examples``."""
    ledger = _charged(ledger, mechanism, epsilon, examples, len(labels), group)
    shape = (num_clusters, num_classes)
    hist = np.bincount(clusters * num_classes + labels,
                       minlength=num_clusters * num_classes).reshape(shape)
    if epsilon < np.inf:
        hist = hist + cluster_histogram_noise(epsilon).rvs(size=shape,
                                                           random_state=_as_rng(rng))
    return ledger.released(mechanism, np.clip(hist, 0, None).astype(float),
                           clusters=clusters, epsilon=epsilon, examples=examples, group=group)


def one_hot_noise(epsilon):
    """The noise added to each coordinate of a one-hot label (a frozen scipy distribution).

    Changing one label moves two coordinates of its one-hot vector by one (L1 sensitivity
    2), so Laplace noise of scale 2 / epsilon on every coordinate is epsilon-label-DP.
    epsilon = inf adds none.
    """
    return scipy.stats.laplace(scale=2 / _as_epsilon(epsilon, allow_inf=False))


def laplace_one_hot(ledger: Ledger, labels, num_classes, epsilon, rng, *, examples,
                    group: str = "") -> np.ndarray:
    """ALIBI's release: each label's one-hot vector plus one_hot_noise on each of its
    coordinates, drawn once. Returns (N, num_classes) float64; epsilon-label-DP for each
    row, charged to its label."""
    num_classes = _as_count(num_classes, "num_classes")
    labels = _as_classes(labels, None, num_classes, "labels")
    eps = _as_epsilon(epsilon)
    ledger = _charged(ledger, "Laplace one-hot labels", eps, examples, len(labels), group)
    released = np.eye(num_classes)[labels]
    if eps < np.inf:
        released += one_hot_noise(eps).rvs(size=released.shape, random_state=_as_rng(rng))
    return _observed(ledger, "Laplace one-hot labels", examples, released, group,
                     num_classes=num_classes, epsilon=eps)


def one_hot_log_likelihood(released, epsilon) -> np.ndarray:
    """log P(released | label = i) for every class i, up to a constant of each row, (N, K),
    from one_hot_noise: only coordinate i depends on i, so it is
    log f(r_i - 1) - log f(r_i) for the noise density f. At epsilon = inf, 0 for the
    released label and -inf elsewhere."""
    r = np.asarray(released, dtype=np.float64)
    eps = _as_epsilon(epsilon)
    if eps == np.inf:
        return np.where(r == 1, 0.0, -np.inf)
    noise = one_hot_noise(eps)
    return noise.logpdf(r - 1) - noise.logpdf(r)


# ----- their audits (privboard audit mechanism NAME) ---------------------------------------

AUDIT_CLASSES = 6
AUDIT_TOP_K = 3
# Uniform on the first AUDIT_TOP_K classes and zero elsewhere: w_k grows up to that k and
# falls after it for every epsilon > 0, so RRWithPrior's k* is AUDIT_TOP_K as well,
# whatever the claim.
_TOP_HEAVY_PRIOR = tuple([1 / AUDIT_TOP_K] * AUDIT_TOP_K
                         + [0.0] * (AUDIT_CLASSES - AUDIT_TOP_K))


def _audited(release):
    """``release`` on a fresh ledger, the trials as the training set's rows."""
    def sample(labels, priors, epsilon, rng):
        return release(Ledger(), labels, priors, epsilon, rng, examples=np.arange(len(labels)))
    return sample


def _register_audits() -> None:
    from benchmarks.privacy import mechanism_audit as audit

    # Label-DP neighbours change one label and nothing else; the prior does not look at
    # labels. Two labels inside the randomized set are the worst case: keeping the label
    # against flipping to it is exactly the ratio e^eps. Inside against outside is not (its
    # ratio is k e^eps / (e^eps + k - 1)), but it is where a flip that leaves the set shows:
    # an output outside the set is impossible from a label outside it.
    top_set_pairs = (
        audit.NeighbouringPair(audit.LabelRow(0, _TOP_HEAVY_PRIOR),
                               audit.LabelRow(1, _TOP_HEAVY_PRIOR),
                               "label 0, prior uniform on classes 0-2 of 6",
                               "label 1, the same prior (both labels in the top-3 set)"),
        audit.NeighbouringPair(audit.LabelRow(0, _TOP_HEAVY_PRIOR),
                               audit.LabelRow(AUDIT_CLASSES - 1, _TOP_HEAVY_PRIOR),
                               "label 0, prior uniform on classes 0-2 of 6",
                               "label 5, the same prior (outside the top-3 set)"),
    )

    def plain(label, trials, epsilon, rng):
        return randomized_response(Ledger(), np.full(trials, label), AUDIT_CLASSES, epsilon,
                                   rng, examples=np.arange(trials))

    def top_k(ledger, labels, priors, epsilon, rng, examples):
        return rr_top_k(ledger, labels, priors, AUDIT_TOP_K, epsilon, rng, examples=examples)

    # One cluster holding one example, with two classes: substitution moves its count from
    # one bin to the other (L1 change 2, the sensitivity); noise on other bins and other
    # clusters is independent of the label, so they only dilute. With counts (1, 0) against
    # (0, 1), clipping at zero hides nothing: the released prior is (1, 0), i.e.
    # output[0] >= 1, when noisy bin 0 >= 1 and noisy bin 1 <= 0, an event whose
    # probability ratio is exactly e^(eps/2) per bin, e^eps in all. The priors take many
    # values, so events threshold a coordinate instead of listing values.
    def cluster_priors(label, trials, epsilon, rng):
        return noisy_cluster_priors(Ledger(), np.full(trials, label), np.arange(trials), trials,
                                    2, epsilon, rng, examples=np.arange(trials))

    audit.register("randomized-response", audit.AuditSpec(
        f"randomized response on {AUDIT_CLASSES} classes",
        # Every pair of labels is alike: keeping one against flipping to it is e^eps.
        (audit.NeighbouringPair(0, 1, "label 0", "label 1"),), plain, audit.output_values))
    audit.register("rr-top-k", audit.AuditSpec(
        f"RRTop-k with k = {AUDIT_TOP_K} of {AUDIT_CLASSES} classes", top_set_pairs,
        audit.label_sampler(_audited(top_k)), audit.output_values))
    audit.register("rr-with-prior", audit.AuditSpec(
        f"RRWithPrior on {AUDIT_CLASSES} classes (k* = {AUDIT_TOP_K} for this prior)",
        top_set_pairs, audit.label_sampler(_audited(rr_with_prior)), audit.output_values))
    def laplace_labels(label, trials, epsilon, rng):
        return laplace_one_hot(Ledger(), np.full(trials, label), AUDIT_CLASSES, epsilon, rng,
                               examples=np.arange(trials))

    # The log likelihood ratio of labels a and b is a function of the clipped difference
    # clip(r_a, 0, 1) - clip(r_b, 0, 1) alone (one_hot_log_likelihood), and its largest
    # value, epsilon, is where the difference is 1: r_a >= 1 and r_b <= 0.
    def likelihood_ratio(pair, first, second):
        def clipped(a, b):
            return audit.Statistic(
                lambda x: np.clip(x[:, a], 0, 1) - np.clip(x[:, b], 0, 1),
                lambda t: f"clip(output[{a}], 0, 1) - clip(output[{b}], 0, 1) >= {t:.4g}")
        return [clipped(pair.first, pair.second), clipped(pair.second, pair.first)]

    audit.register("laplace-one-hot", audit.AuditSpec(
        f"Laplace noise on one-hot labels of {AUDIT_CLASSES} classes (ALIBI's release)",
        (audit.NeighbouringPair(0, 1, "label 0", "label 1"),), laplace_labels,
        likelihood_ratio))
    audit.register("cluster-histogram", audit.AuditSpec(
        "noisy cluster prior: discrete-Laplace label histogram, clipped and normalised",
        (audit.NeighbouringPair(0, 1, "a one-example cluster labelled 0 (2 classes)",
                                "the same cluster labelled 1"),),
        cluster_priors, audit.coordinates))


_register_audits()
