"""PATE: Private Aggregation of Teacher Ensembles (Papernot et al. 2017, 2018), with the
LNMax, GNMax and Confident-GNMax aggregators, the semi-supervised GAN student, and a
supervised-only student as its baseline.

Private data: the training set, cut by a seeded permutation into T disjoint shards of
floor(N / T) records (the papers' 250 x 240 for MNIST), one teacher per shard. Replacing
one record changes at most one teacher, which moves at most one vote per query: full DP
with substitution neighbours. (Adding or removing a record would change the shard size,
and with it every teacher, so the claim is for substitution.)

Public data: the first ``public_size`` test examples, inputs only (the method never sees
a test label). The first ``queries`` of them are asked; an answered query gets the
aggregator's label, everything else in the public part stays unlabelled. The student
trains on the public part and is evaluated on the rest of the test set, which it never
sees.

Privacy: the aggregator's data-independent RDP (LNMax's pure 2 gamma per query; GNMax
per answered query; the Confident-GNMax threshold check on every query) and the
smooth-sensitivity release of the data-dependent epsilon are charged to the ledger; the
record's epsilon is their composition. The data-dependent epsilon itself is a function
of the private votes: it is kept as a diagnostic only. With no noise given, the noise is
calibrated to the cell's epsilon with the data-independent bound, assuming every query is
answered: the calibration looks at no private data.

The trained teachers are cached under the data folder, keyed by all they depend on (the
training arrays, the teacher settings and the seed), so the methods of one cell train
them once; the cache changes no result.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import numbers
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np

from benchmarks.atomic import atomic_write, building
from benchmarks.tf_runtime import numerics
from benchmarks.contract import Budget, Method, Split
from benchmarks.errors import InputError
from benchmarks.privacy import (Accountant, Kind, Ledger, Neighbours, PrivacyNotion, Protects,
                                mechanism_audit)
from benchmarks.privacy import pate as analysis
from benchmarks.privacy import rdp
from benchmarks.privacy.aggregators import (confident_gnmax, gnmax, lnmax,
                                            release_data_dependent_epsilon)

PAPER_2017 = ("Papernot, Abadi, Erlingsson, Goodfellow, Talwar. Semi-supervised knowledge "
              "transfer for deep learning from private training data. ICLR 2017")
PAPER_2018 = ("Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson. Scalable private "
              "learning with PATE. ICLR 2018")
PATE_NOTION = PrivacyNotion(Protects.RECORDS, Neighbours.SUBSTITUTION, Kind.APPROXIMATE,
                            Accountant.RDP)
# The papers' student splits: the first part of the test set is public, the rest evaluates.
PUBLIC_SIZES = {"mnist": 9000, "fashion-mnist": 9000, "kmnist": 9000, "svhn": 10000}
# Raise when the teachers' training changes: cached votes of the old training are not reused.
TEACHERS_VERSION = 2
NOISE_SEARCH = (1e-3, 1e6)
# The teacher builders of methods.nn.models, named here so that settings are checked
# without importing TensorFlow.
TEACHER_MODELS = ("teacher_cnn", "pate_mnist_cnn", "pate_deep_cnn", "teacher_mlp")


class Pate(Method):
    """The family: teachers, an aggregator (the subclasses), a student."""

    paper = PAPER_2018
    notion = PATE_NOTION
    # 2: the student trains with the improved-GAN reference's balance details; 3: it predicts
    # with its averaged weights
    version = 3
    tasks = ("image", "tabular")
    needs_delta = True
    cached_model = "PATE's teachers"
    student_mode: ClassVar[str] = "pate"
    defaults: ClassVar[dict[str, Any]] = {
        "teachers": 250,
        "teacher_model": "teacher_cnn",
        "teacher_epochs": 10,  # measured: 87-89% mean teacher accuracy on MNIST
        "teacher_batch_size": 8,
        "teacher_learning_rate": 0.003,
        "public_size": None,  # None: the dataset's split in PUBLIC_SIZES
        "queries": 640,
        "student_epochs": 20,
        "student_learning_rate": 0.003,
        "student_width": "paper",
        # The smooth-sensitivity release of the data-dependent epsilon: order, beta and the
        # noise multiplier are fixed here, never tuned on the votes.
        "release_order": 20.0,
        "release_beta": 0.005,
        "release_noise": 20.0,
    }
    tiny_hparams: ClassVar[dict[str, Any]] = {
        "teachers": 4, "teacher_epochs": 1, "teacher_batch_size": 16, "public_size": 40,
        "queries": 30, "student_epochs": 1, "student_width": "small"}

    def __init__(self, budget: Budget, seed: int = 0, **hparams: Any) -> None:
        super().__init__(budget, seed, **hparams)
        h = self.hparams
        for key in ("teachers", "teacher_epochs", "teacher_batch_size", "queries",
                    "student_epochs"):
            _positive_int(self.name, key, h[key])
        if h["teacher_model"] not in TEACHER_MODELS:
            raise InputError(f"{self.name}: unknown teacher_model {h['teacher_model']!r}; "
                             f"known: {', '.join(TEACHER_MODELS)}")
        if h["public_size"] is not None:
            _positive_int(self.name, "public_size", h["public_size"])
        for key in ("teacher_learning_rate", "student_learning_rate", "release_order",
                    "release_beta", "release_noise"):
            _positive(self.name, key, h[key])
        for key in ("gamma", "sigma1", "sigma2", "threshold"):  # the aggregator's noise
            if h.get(key) is not None:
                _positive(self.name, key, h[key])
        if h.get("answered_target") is not None:
            _positive_int(self.name, "answered_target", h["answered_target"])
        self.student = None
        self.released: tuple[np.ndarray, np.ndarray] | None = None
        self.details: dict[str, Any] = {}

    @classmethod
    def skip_reason(cls, task: str, budget: Budget,
                    hparams: dict[str, Any] | None = None) -> str | None:
        if not budget.private:
            return f"{cls.name} needs a finite epsilon (a cap when the noise is given)"
        return super().skip_reason(task, budget, hparams)

    def public_part(self, dataset: str, test_size: int) -> int:
        size = self.hparams["public_size"] or PUBLIC_SIZES.get(dataset)
        if size is None:
            raise InputError(f"{self.name}: no public split is known for {dataset}; "
                             f"set public_size")
        if not self.hparams["queries"] <= size < test_size:
            raise InputError(f"{self.name}: needs queries <= public_size < test size, got "
                             f"{self.hparams['queries']}, {size}, {test_size}")
        return size

    def fit(self, train: Split, num_classes: int, public_x: np.ndarray | None = None) -> "Pate":
        if public_x is None:
            raise InputError(f"{self.name} needs the public inputs (public_x)")
        queries = self.hparams["queries"]
        votes = self._teachers(train, num_classes).votes(public_x[:queries])
        self.asked = queries
        answered, labels = self._aggregate(votes)  # may stop asking early
        self._release_data_dependent_epsilon(votes[:self.asked], answered[:self.asked])
        candidates = public_x[:queries]
        self.released = (np.flatnonzero(answered), labels[answered])
        self.details.update(public_size=len(public_x), queries_asked=self.asked,
                            answered=int(answered.sum()), teachers=self.hparams["teachers"])
        self.student = self._train_student(
            candidates[answered], labels[answered],
            np.concatenate([candidates[~answered], public_x[queries:]]), num_classes)
        return self

    # --- the teachers ------------------------------------------------------------------

    def _teachers(self, train: Split, num_classes: int):
        """The T teachers, trained, or loaded from the cache of an earlier fit of the same
        training data, settings and seed."""
        from methods.nn import ensemble

        h = self.hparams
        settings = {key: h[key] for key in ("teachers", "teacher_model", "teacher_epochs",
                                            "teacher_batch_size", "teacher_learning_rate")}
        shard_seed = self.ctx.seed_for("teacher shards")
        teacher_seed = self.ctx.seed_for("teachers")
        path = self._teachers_cache(train, {**settings, "num_classes": num_classes,
                                            "shard_seed": shard_seed,
                                            "teacher_seed": teacher_seed})
        with building(path):  # cells side by side train the same teachers once
            cached = _read_weights(path)
            if cached is not None:
                self.progress("teachers from the cache")
                return ensemble.load_teachers(cached, model=h["teacher_model"],
                                              input_shape=train.x.shape[1:],
                                              num_classes=num_classes)
            teachers = ensemble.train_teachers(
                train.x, train.y, ensemble.equal_shards(len(train), h["teachers"], shard_seed),
                num_classes, model=h["teacher_model"], epochs=h["teacher_epochs"],
                batch_size=h["teacher_batch_size"], learning_rate=h["teacher_learning_rate"],
                seed=teacher_seed, progress=self.progress)
            with atomic_write(path, "wb") as f:
                np.savez(f, *teachers.stack.weights())
            return teachers

    def _teachers_cache(self, train: Split, settings: dict) -> Path:
        digest = hashlib.sha256()
        for array in (train.x, train.y):
            digest.update(np.ascontiguousarray(array).data)
        # The thread count and oneDNN too: the trained weights depend on them bit for bit.
        digest.update(json.dumps({**settings, "version": TEACHERS_VERSION,
                                  **numerics()}, sort_keys=True).encode())
        return self.ctx.data_root() / "cache" / "pate-teachers" / f"{digest.hexdigest()[:32]}.npz"

    # --- the aggregator (subclasses) ---------------------------------------------------

    def _aggregate(self, votes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(answered mask, labels) of the queries, with the aggregator's charges."""
        raise NotImplementedError

    def _release_curve(self) -> np.ndarray:
        """The RDP of the smooth-sensitivity release, which the calibration leaves room for."""
        return np.zeros_like(rdp.ORDERS)

    def _release_data_dependent_epsilon(self, votes: np.ndarray, answered: np.ndarray) -> None:
        """Charge and publish the data-dependent epsilon through smooth sensitivity."""

    def _calibrated(self, name: str, curve_of: Callable[[float], np.ndarray]) -> float:
        """The given noise ``name``, or the smallest noise scale s whose data-independent
        curve_of(s), with the release's curve, meets the cell's epsilon."""
        given = self.hparams[name]
        if given is not None:
            self.details[f"{name}_given"] = float(given)
            return float(given)
        scale = smallest_noise(lambda s: curve_of(s) + self._release_curve(),
                               self.budget.epsilon, self.budget.delta)
        self.details[f"{name}_calibrated"] = scale
        self.details["calibration"] = ("the data-independent bound at the cell's epsilon, "
                                       "every query answered; looks at no private data")
        return scale

    # --- the student -------------------------------------------------------------------

    def _train_student(self, x_labelled: np.ndarray, y_labelled: np.ndarray,
                       x_unlabelled: np.ndarray, num_classes: int):
        from methods.nn import ssgan

        h = self.hparams
        student = ssgan.train_student(
            x_labelled, y_labelled, x_unlabelled, num_classes, mode=self.student_mode,
            epochs=h["student_epochs"], learning_rate=h["student_learning_rate"],
            width=h["student_width"], seed=self.ctx.seed_for("student"),
            progress=self.progress, **self._student_settings())
        self.details["student"] = student.choices
        return student

    def _student_settings(self) -> dict[str, Any]:
        return {}

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        if self.student is None:
            raise InputError(f"{self.name}: call fit before predict_proba")
        return self.student.predict_proba(x)

    def released_public_labels(self) -> tuple[np.ndarray, np.ndarray] | None:
        return self.released

    def privacy_details(self) -> dict[str, Any]:
        return self.details

    def variant(self) -> str:
        return f"{self.hparams['teachers']} teachers, {self.hparams['queries']} queries"


class PateLnmax(Pate):
    """PATE 2017: LNMax (Laplace noise of scale 1/gamma on the counts) on every query."""

    name = "pate-lnmax"
    paper = PAPER_2017
    defaults: ClassVar[dict[str, Any]] = {**Pate.defaults, "queries": 100, "gamma": None}

    def _aggregate(self, votes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # gamma = 1 / scale: the scale is what the search grows.
        scale = self._calibrated_scale(votes)
        gamma = 1.0 / scale
        labels = lnmax(self.ctx.ledger, votes, gamma, self.ctx.rng("aggregator"))
        self.ctx.diagnose(epsilon_data_dependent=analysis.lnmax_account(
            votes, gamma=gamma, delta=self.budget.delta).epsilon_data_dependent)
        self.details.update(aggregator="LNMax", gamma=gamma)
        return np.ones(len(votes), dtype=bool), labels

    def _calibrated_scale(self, votes: np.ndarray) -> float:
        if self.hparams["gamma"] is not None:
            return 1.0 / _positive(self.name, "gamma", self.hparams["gamma"])
        scale = smallest_noise(lambda s: len(votes) * analysis.lnmax_rdp(1.0 / s),
                               self.budget.epsilon, self.budget.delta)
        self.details["calibration"] = ("the data-independent bound at the cell's epsilon; "
                                       "looks at no private data")
        return scale

    def variant(self) -> str:
        return f"LNMax, {super().variant()}"


class _GaussianAggregator(Pate):
    """GNMax-based aggregators: their data-dependent epsilon is released with smooth
    sensitivity, and that release is charged too."""

    def _release_curve(self) -> np.ndarray:
        h = self.hparams
        return analysis.smooth_sensitivity_release_rdp(h["release_beta"], h["release_noise"])

    def _threshold(self) -> tuple[float | None, float | None]:
        return None, None

    def _release_data_dependent_epsilon(self, votes: np.ndarray, answered: np.ndarray) -> None:
        h = self.hparams
        threshold, sigma1 = self._threshold()
        sigma2 = self.details["sigma2"]
        release = release_data_dependent_epsilon(
            self.ctx.ledger, votes, answered, sigma2=sigma2, order=h["release_order"],
            beta=h["release_beta"], noise_multiplier=h["release_noise"],
            rng=self.ctx.rng("smooth sensitivity"), threshold=threshold, sigma1=sigma1)
        account = analysis.confident_gnmax_account(votes, answered, sigma2=sigma2,
                                                   delta=self.budget.delta,
                                                   threshold=threshold, sigma1=sigma1)
        self.ctx.diagnose(epsilon_data_dependent=account.epsilon_data_dependent)
        self.details.update(epsilon_data_independent_aggregator=account.epsilon_data_independent,
                            epsilon_smooth_sensitivity=release.epsilon(self.budget.delta))


class PateGnmax(_GaussianAggregator):
    """PATE 2018's GNMax (Gaussian noise on the counts) on every query."""

    name = "pate-gnmax"
    defaults: ClassVar[dict[str, Any]] = {**Pate.defaults, "sigma2": None}

    def _aggregate(self, votes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sigma2 = self._calibrated("sigma2", lambda s: len(votes) * analysis.gnmax_rdp(s))
        labels = gnmax(self.ctx.ledger, votes, sigma2, self.ctx.rng("aggregator"))
        self.details.update(aggregator="GNMax", sigma2=sigma2)
        return np.ones(len(votes), dtype=bool), labels

    def variant(self) -> str:
        return f"GNMax, {super().variant()}"


class PateConfidentGnmax(_GaussianAggregator):
    """PATE 2018's Confident-GNMax: a query is answered only when its noisy top count
    clears the threshold; the check is charged on every query, GNMax on the answered."""

    name = "pate-confident-gnmax"
    # answered_target: ask the queries in order and stop once this many are answered
    # (None: ask all ``queries``).
    defaults: ClassVar[dict[str, Any]] = {**Pate.defaults, "threshold": 200.0, "sigma1": 150.0,
                                          "sigma2": None, "answered_target": None}
    tiny_hparams: ClassVar[dict[str, Any]] = {**Pate.tiny_hparams, "threshold": 2.0,
                                              "sigma1": 50.0}

    def _threshold(self) -> tuple[float | None, float | None]:
        return float(self.hparams["threshold"]), float(self.hparams["sigma1"])

    def _aggregate(self, votes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        threshold, sigma1 = self._threshold()
        target = self.hparams["answered_target"] or len(votes)
        # The worst case the calibration assumes: every query asked, the target answered.
        worst = (len(votes) * analysis.threshold_rdp(sigma1), min(target, len(votes)))
        sigma2 = self._calibrated(
            "sigma2", lambda s: worst[0] + worst[1] * analysis.gnmax_rdp(s))
        answered, labels, self.asked = confident_gnmax(
            self.ctx.ledger, votes, threshold, sigma1, sigma2, self.ctx.rng("aggregator"),
            self.hparams["answered_target"])
        self.details.update(aggregator="Confident-GNMax", threshold=threshold,
                            sigma1=sigma1, sigma2=sigma2)
        return answered, labels

    def variant(self) -> str:
        h = self.hparams
        return (f"Confident-GNMax, {super().variant()}, threshold {h['threshold']:g}, "
                f"sigma1 {h['sigma1']:g}")


class PateSupervised(PateConfidentGnmax):
    """The baseline of the semi-supervised student: the same teachers and Confident-GNMax
    labels, a student trained on the answered queries alone."""

    name = "pate-supervised"
    student_mode = "supervised"
    version = 4  # 3: as many steps as the semi-supervised student; 4: averaged weights


def smallest_noise(curve_of: Callable[[float], np.ndarray], epsilon: float,
                   delta: float) -> float:
    """The smallest noise scale s (to 0.01%) whose RDP curve_of(s) converts to at most
    ``epsilon`` at ``delta``; curve_of must decrease in s."""
    def meets(scale: float) -> bool:
        return rdp.epsilon_from_rdp(curve_of(scale), delta)[0] <= epsilon

    low, high = NOISE_SEARCH
    if not meets(high):
        raise InputError(f"epsilon = {epsilon:g} at delta = {delta:g} is unmeetable with these "
                         f"queries even at noise scale {high:g}; ask fewer queries")
    while high / low > 1 + 1e-4:
        middle = math.sqrt(low * high)
        low, high = (low, middle) if meets(middle) else (middle, high)
    return high


def _read_weights(path: Path) -> list[np.ndarray] | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as stored:
            return [stored[f"arr_{i}"] for i in range(len(stored.files))]
    except Exception:  # a damaged cache entry is retrained, never trusted
        return None


def _positive_int(name: str, key: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InputError(f"{name}: {key} must be a positive integer, got {value!r}")
    return int(value)


def _positive(name: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value < math.inf:
        raise InputError(f"{name}: {key} must be a finite number > 0, got {value!r}")
    return float(value)


# --- the audits of the aggregators (privboard audit mechanism NAME) --------------------

# Each aggregator answers one query from the votes of the default ensemble. Substitution
# changes one teacher, which moves its vote: n' = n - e_i + e_j. Two classes are the worst
# case for a noisy argmax (a third class competes with both). GNMax then releases whether
# N(0, 2 sigma^2) exceeds the gap between the two counts: a half-space of the Gaussian
# mechanism, the kind of event that attains its (epsilon, delta) trade-off. LNMax's ratio
# nears e^(2 gamma) only far in the tail of the gap, so the pairs are a ladder of gaps, and
# the audit keeps the one its runs resolve best (a wider gap for a smaller epsilon).
# Confident-GNMax adds a pair whose top count falls from the threshold to one below it,
# for its threshold check.
AUDIT_DELTA = 1e-5  # the paper suite's delta for PATE
# The gap between the two counts on each pair's first input; the moved vote narrows it by 2.
AUDIT_GAPS = (2, 6, 10, 18, 34)


@functools.lru_cache(maxsize=None)
def calibrated_sigma2(epsilon: float, sigma1: float | None = None) -> float:
    """GNMax's sigma2 for ONE query, after Confident-GNMax's check at sigma1 when given:
    the method's calibration (smallest_noise of the data-independent RDP) at (epsilon,
    AUDIT_DELTA). Cached: the audit calls its sampler, and so this search, several times."""
    check = 0.0 if sigma1 is None else analysis.threshold_rdp(sigma1)
    return smallest_noise(lambda s: check + analysis.gnmax_rdp(s), epsilon, AUDIT_DELTA)


def _register_audits() -> None:
    teachers = Pate.defaults["teachers"]
    threshold = PateConfidentGnmax.defaults["threshold"]
    sigma1 = PateConfidentGnmax.defaults["sigma1"]

    def votes_pair(top: int) -> mechanism_audit.NeighbouringPair:
        first, second = (top, teachers - top), (top - 1, teachers - top + 1)
        return mechanism_audit.NeighbouringPair(
            np.array(first), np.array(second),
            f"votes {first} of {teachers} teachers on 2 classes",
            f"votes {second}: one teacher moved its vote to class 1")

    gap_pairs = tuple(votes_pair((teachers + gap) // 2) for gap in AUDIT_GAPS)

    def lnmax_query(votes, epsilon, rng):
        # One LNMax query is pure (2 gamma)-DP (analysis.lnmax_rdp).
        return lnmax(Ledger(), votes, epsilon / 2, rng)

    def gnmax_query(votes, epsilon, rng):
        return gnmax(Ledger(), votes, calibrated_sigma2(epsilon), rng)

    def confident_query(votes, epsilon, rng):
        # The labels alone are the release: -1 where the query is not answered.
        return confident_gnmax(Ledger(), votes, threshold, sigma1,
                               calibrated_sigma2(epsilon, sigma1), rng)[1]

    register = mechanism_audit.register
    register("pate-lnmax", mechanism_audit.AuditSpec(
        "PATE's LNMax: argmax of votes + Laplace(2 / epsilon) noise, one query (pure DP)",
        gap_pairs, mechanism_audit.votes_sampler(lnmax_query), mechanism_audit.output_values))
    register("pate-gnmax", mechanism_audit.AuditSpec(
        f"PATE's GNMax: argmax of votes + N(0, sigma^2) noise, one query, sigma calibrated "
        f"to (epsilon, {AUDIT_DELTA:g})", gap_pairs,
        mechanism_audit.votes_sampler(gnmax_query), mechanism_audit.output_values,
        AUDIT_DELTA))
    register("pate-confident-gnmax", mechanism_audit.AuditSpec(
        f"PATE's Confident-GNMax: threshold {threshold:g} at sigma1 {sigma1:g}, then GNMax, "
        f"one query, sigma2 calibrated to (epsilon, {AUDIT_DELTA:g})",
        gap_pairs + (votes_pair(int(threshold)),),
        mechanism_audit.votes_sampler(confident_query), mechanism_audit.output_values,
        AUDIT_DELTA))


_register_audits()
