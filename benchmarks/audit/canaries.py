"""Canaries for auditing a trained method in one run (Steinke, Nasr, Jagielski 2023).

Every canary has its own fair coin, drawn independently, and the two sides of a coin give
two training sets that are neighbours under the method's notion:

- ``LABEL``: the canary is an example whose label is one of two classes fixed in advance,
  the same two for every canary; the coin picks which. This is a neighbour under label-DP; under the label flip of local
  randomised response (each user's epsilon is a label-DP guarantee for their own label,
  and the model is post-processing of the flipped labels); and under full DP with
  substitution neighbours (n fixed), where the record in a slot is replaced by the same
  input with another label: the pair whose gradients differ most, twice what removing
  the record would change, and with a natural threshold between the two guesses.
- ``INCLUSION``, full DP with add/remove neighbours: the coin puts the canary in the
  training set or leaves it out; the guess is membership, from the model's fit of the
  canary's label.

The inputs are chosen for power: a model shows a canary's coin only if it fits that one
example, which it does for inputs unlike the data and unlike each other.

- images: a share of the pixels, at random, fully bright on black. Each is far from every
  real image and from the other canaries (two share about BRIGHT_SHARE^2 of the pixels),
  so a model's prediction on it comes from memorising that example alone.
- tabular rows: unit rows along the directions the training rows use least (eigenvectors
  of X^T X with the smallest eigenvalues, mutually orthogonal). A linear model's weight
  along such a direction is set by the canary alone, and orthogonal canaries do not
  interfere. Beyond d canaries there are no directions left: the rest are random unit
  rows, which do interfere in a linear model.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from benchmarks.contract import Dataset, Split
from benchmarks.errors import InputError
from benchmarks.privacy import Neighbours, PrivacyNotion, Protects

LABEL = "label"
INCLUSION = "inclusion"
DESCRIPTIONS = {
    LABEL: "canaries, each labelled with one of two classes fixed in advance (the same two "
           "for all), by a fair coin",
    INCLUSION: "canaries, each in the training set or not, by a fair coin",
}

# What the audit at the release reads of each canary.
RELEASED_LABEL = "the label each canary was released with"
RELEASED_VECTOR = "the noisy one-hot vector each canary's label was released as"
RELEASED_WEIGHTS = "the released weights, projected on each canary's input"
# Canary images set this share of their values to 1 and the rest to 0.
BRIGHT_SHARE = 0.1
# The canaries on image data unless asked otherwise; tabular data gets one per dimension.
IMAGE_CANARIES = 1000
# Tabular canaries sit this far inside the unit ball, so float32 rounding never leaves it.
_UNIT_NORM = 1 - 1e-6
# Probabilities are floored here before the log: a model may round one to exactly 0.
_TINY = 1e-30


@dataclasses.dataclass(frozen=True)
class Canaries:
    """m canaries, fixed before any coin is drawn. ``labels`` holds each label canary's
    two candidate classes (m, 2), the coin choosing the column; for inclusion canaries
    it holds each canary's label (m,)."""

    kind: str
    inputs: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return len(self.inputs)

    def plant(self, train: Split, coins: np.ndarray) -> Split:
        """The training set of one draw of the coins: ``train``, then the canaries."""
        if self.kind == LABEL:
            x, y = self.inputs, self.labels[np.arange(len(self)), coins.astype(int)]
        else:
            x, y = self.inputs[coins], self.labels[coins]
        return Split(np.concatenate([train.x, x.astype(train.x.dtype)]),
                     np.concatenate([train.y, y.astype(train.y.dtype)]))

    def evidence(self, proba: np.ndarray) -> np.ndarray:
        """Per canary, from the model's probabilities on the canary inputs: positive when
        the coin looks like 1 (the second class; in the training set), negative when it
        looks like 0; the size is the confidence."""
        rows = np.arange(len(self))
        if self.kind == LABEL:
            log_p = np.log(np.maximum(proba, _TINY))
            return log_p[rows, self.labels[:, 1]] - log_p[rows, self.labels[:, 0]]
        return centred_ranks(proba[rows, self.labels])


    def release_evidence(self, observed: dict[int, tuple], first_row: int
                         ) -> tuple[np.ndarray, list[str], str] | None:
        """Per label canary, from what a release gave it (``observed``: training row ->
        (mechanism, group, released value); canary i is row first_row + i): +1 for its
        second class, -1 for its first, 0 (no guess) for anything else or nothing; where
        the releases were; and what they released. None when no release of a canary was
        observed.

        A released label is guessed when it is one of the canary's two classes. A released
        noisy one-hot vector r (ALIBI's) is guessed where the likelihood ratio of the two
        classes is at its largest, a function of clip(r_b, 0, 1) - clip(r_a, 0, 1) alone:
        class b when r_b >= 1 and r_a <= 0, class a the other way round."""
        if self.kind != LABEL:
            return None
        seen = [observed.get(first_row + i) for i in range(len(self))]
        if not any(seen):
            return None
        evidence = np.array([0.0 if s is None else self._released_side(s[2], i)
                             for i, s in enumerate(seen)])
        where = sorted({f"{s[0]} ({s[1]})" if s[1] else s[0] for s in seen if s})
        vectors = any(np.ndim(s[2]) for s in seen if s)
        return evidence, where, (RELEASED_VECTOR if vectors else RELEASED_LABEL)

    def _released_side(self, released, i: int) -> float:
        first, second = self.labels[i]
        if np.ndim(released) == 0:
            return float(released == second) - float(released == first)
        difference = np.clip(released[second], 0, 1) - np.clip(released[first], 0, 1)
        return float(difference == 1) - float(difference == -1)


def kind_for(notion: PrivacyNotion) -> str:
    """The canary whose two coin sides are neighbours under ``notion``."""
    if not notion.private:
        raise ValueError("a non-private notion has no neighbours to audit")
    if notion.protects is Protects.RECORDS and notion.neighbours is Neighbours.ADD_REMOVE:
        return INCLUSION
    return LABEL


def default_count(data: Dataset) -> int:
    return data.train.x.shape[1] if data.task == "tabular" else IMAGE_CANARIES


def design(notion: PrivacyNotion, data: Dataset, count: int,
           rng: np.random.Generator) -> Canaries:
    """``count`` canaries for a method of ``notion`` on ``data``: public, coin-free."""
    kind = kind_for(notion)
    if data.task == "image":
        inputs = bright_pixel_images(data.train.x.shape[1:], count, rng)
    elif data.task == "tabular":
        inputs = least_used_directions(data.train.x, count, rng)
    else:
        raise InputError(f"audits have canaries for image and tabular data, not {data.task}")
    if kind == LABEL:
        # One pair of classes for every canary. A prior that learns from the canaries' own
        # labels (a cluster's noisy histogram, a model of an earlier stage) then holds
        # both in each canary's top k, where RRWithPrior releases a canary's label with
        # all its epsilon; with a pair per canary, the noisy histograms of the canaries'
        # clusters spread over every class and often left a canary's two classes out.
        pair = rng.choice(data.num_classes, size=2, replace=False)
        return Canaries(kind, inputs, np.tile(pair, (count, 1)))
    return Canaries(kind, inputs, rng.integers(data.num_classes, size=count))


def bright_pixel_images(shape: tuple[int, ...], count: int,
                        rng: np.random.Generator) -> np.ndarray:
    size = int(np.prod(shape))
    bright = max(1, round(BRIGHT_SHARE * size))
    positions = np.argsort(rng.random((count, size)), axis=1)[:, :bright]
    images = np.zeros((count, size), np.float32)
    np.put_along_axis(images, positions, 1.0, axis=1)
    return images.reshape(count, *shape)


def least_used_directions(x: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    rows = x.reshape(len(x), -1).astype(np.float64)
    dim = rows.shape[1]
    _, vectors = np.linalg.eigh(rows.T @ rows)  # eigenvalues ascending
    extra = rng.standard_normal((max(0, count - dim), dim))
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    directions = np.concatenate([vectors[:, :min(count, dim)].T, extra])
    return (_UNIT_NORM * directions).astype(x.dtype)


def centred_ranks(scores: np.ndarray) -> np.ndarray:
    """Ranks minus the middle rank: the guesses are "in" for the best-fitted half and "out"
    for the rest, and the strongest are the extremes (Steinke et al.'s top and bottom
    guesses). Ranks need no threshold on the fit, which would depend on the model and
    which a few outliers would drag away; they depend on the model's output alone, as the
    one-run bound requires. Ties keep the canaries' order, fixed before the coins."""
    order = np.argsort(scores, kind="stable")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(len(scores))
    return ranks - (len(scores) - 1) / 2
