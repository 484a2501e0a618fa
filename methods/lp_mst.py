"""LP-1ST, LP-2ST and LP-3ST: multi-stage training with RRWithPrior (Ghazi et al. 2021,
Algorithm 3), with the enhancements of the paper's Appendix B: each stage starts from
the previous model, reuses the earlier stages' randomized labels after dropping those
outside the previous model's top-k_bar, sharpens the prior with a temperature, and
trains with mixup.

Each true label is queried exactly once, by the stage that owns its example, so the
whole procedure is epsilon-label-DP by parallel composition; the partition, the earlier
models and the earlier randomized labels are post-processing.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from benchmarks.contract import Split
from benchmarks.privacy import LABEL_DP_PURE
from benchmarks.privacy.randomizers import optimal_k, rr_with_prior
from methods.keras_classifier import TRAINING_DEFAULTS, KerasClassifier

PAPER = "Ghazi, Golowich, Kumar, Manurangsi, Zhang. Deep Learning with Label Differential Privacy. NeurIPS 2021"

# Per-epsilon settings of the authors' later reimplementation (published-results.md):
# epsilon -> (stage-1 mixup alpha, later-stage mixup alpha, stage-1 data share,
# prior temperature). A budget uses the row of the largest epsilon not above it.
PER_EPSILON = {1: (16.0, 8.0, 0.8, 0.6), 2: (8.0, 8.0, 0.7, 0.5),
               4: (8.0, 4.0, 0.6, 0.5), 8: (4.0, 4.0, 0.6, 0.5)}

def per_epsilon_settings(epsilon: float) -> tuple[float, float, float, float]:
    eligible = [e for e in PER_EPSILON if e <= epsilon] or [min(PER_EPSILON)]
    return PER_EPSILON[max(eligible)]


class LPMultiStage(KerasClassifier):
    """The family; subclasses fix the number of stages."""

    stages: ClassVar[int]
    paper = PAPER
    notion = LABEL_DP_PURE
    # None means: take the value from PER_EPSILON for the budget.
    defaults: ClassVar[dict[str, Any]] = {
        **TRAINING_DEFAULTS, "mixup_alpha": None, "later_mixup_alpha": None,
        "stage1_share": None, "prior_temperature": None, "filter_earlier": True,
    }

    def _settings(self) -> dict[str, float]:
        table = dict(zip(("mixup_alpha", "later_mixup_alpha", "stage1_share",
                          "prior_temperature"), per_epsilon_settings(self.budget.epsilon)))
        return {k: table[k] if self.hparams[k] is None else self.hparams[k] for k in table}

    def _partition(self, n: int, rng: np.random.Generator, share: float) -> list[np.ndarray]:
        """Split the examples into stages without looking at labels: stage 1 gets
        ``share``, the later stages split the rest evenly."""
        order = rng.permutation(n)
        later = (1.0 - share) / (self.stages - 1) if self.stages > 1 else 0.0
        bounds = np.cumsum([share] + [later] * (self.stages - 1))
        cuts = np.round(bounds[:-1] * n).astype(int)
        return np.split(order, cuts) if self.stages > 1 else [order]

    def fit(self, train: Split, num_classes: int) -> "LPMultiStage":
        from methods.nn import training

        settings = self._settings()
        parts = self._partition(len(train), self.ctx.rng("stage partition"),
                                settings["stage1_share"])
        # Before the model is built: a first prior may train a model of its own, which
        # must not shift the classifier's seeded initialisation.
        first_priors = self._first_priors(train, parts[0], num_classes)
        self._build(train, num_classes)
        randomizer = self.ctx.rng("randomized response")
        epsilon = self._rr_epsilon()
        noisy = np.full(len(train), -1, dtype=np.int64)
        self.k_bars: list[float] = []
        self.kept_fraction: list[float] = []
        for t, part in enumerate(parts):
            if t == 0:
                priors = first_priors
            else:
                priors = training.softmax(self._logits(train.x[part]),
                                          settings["prior_temperature"])
            noisy[part] = rr_with_prior(self.ctx.ledger, train.y[part], priors, epsilon,
                                        randomizer, examples=part,
                                        group=f"stage {t + 1} of {self.stages}")
            k_bar = float(np.mean(optimal_k(priors, epsilon)))
            self.k_bars.append(k_bar)
            use = np.concatenate([self._earlier_kept(train.x, noisy, parts[:t], k_bar), part])
            alpha = settings["mixup_alpha"] if t == 0 else settings["later_mixup_alpha"]
            self._train(train.x[use], noisy[use], alpha,
                        label=f"stage {t + 1}/{self.stages} " if self.stages > 1 else "")
        return self

    def _rr_epsilon(self) -> float:
        """The epsilon of each label's RRWithPrior: the whole budget here."""
        return self.budget.epsilon

    def _first_priors(self, train: Split, part: np.ndarray, num_classes: int) -> np.ndarray:
        """Stage 1's priors: uniform, so stage 1 is plain randomized response."""
        return np.full((len(part), num_classes), 1.0 / num_classes)

    def _earlier_kept(self, x: np.ndarray, noisy: np.ndarray, earlier: list[np.ndarray],
                      k_bar: float) -> np.ndarray:
        """Earlier stages' examples whose randomized label is among the current model's
        top round(k_bar) predictions (all of them if filtering is off)."""
        if not earlier:
            return np.empty(0, dtype=np.int64)
        idx = np.concatenate(earlier)
        if not self.hparams["filter_earlier"]:
            return idx
        k = max(1, round(k_bar))
        top = np.argsort(-self._logits(x[idx]), axis=1, kind="stable")[:, :k]
        keep = (top == noisy[idx, None]).any(axis=1)
        self.kept_fraction.append(float(keep.mean()))
        return idx[keep]

    def privacy_details(self) -> dict[str, Any]:
        """k_bar and the kept fractions are functions of the released labels, the models
        trained on them and the public inputs: covered by the ledger's epsilon."""
        return {"stages": self.stages, "stage_k_bar": self.k_bars,
                "earlier_labels_kept": self.kept_fraction, **self._settings()}


class LP1ST(LPMultiStage):
    """LP-1ST: one stage with a uniform prior, which is plain randomized response."""

    name = "lp-1st"
    stages = 1


class LP2ST(LPMultiStage):
    name = "lp-2st"
    stages = 2


class LP3ST(LPMultiStage):
    name = "lp-3st"
    stages = 3
