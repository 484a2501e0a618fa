"""The classical voting example (Barber, Section 3): estimating the fraction of "one"
votes from votes that were each flipped with probability p_f.

A noisy vote is 1 with probability f~ = p_f + theta (1 - 2 p_f), so the spread likelihood
peaks at theta = (f~ - p_f) / (1 - 2 p_f), clipped to [0, 1] where theta lives. (The text
copy of the paper prints "+ P_10" in eq. 24; solving eq. 21 for theta gives "- P_10".)
"""
from __future__ import annotations

import numpy as np

from methods.corruption import check_flip_probability


def estimate_vote_fraction(noisy_votes: np.ndarray, p_f: float) -> float:
    """Consistent estimate of the true fraction of 1-votes from randomised-response votes."""
    check_flip_probability(p_f)
    votes = np.asarray(noisy_votes)
    if votes.ndim != 1 or votes.size == 0 or not np.isin(votes, (0, 1)).all():
        raise ValueError("noisy_votes must be a non-empty 1-D array of 0/1 votes")
    noisy_fraction = float(votes.mean())
    return float(np.clip((noisy_fraction - p_f) / (1 - 2 * p_f), 0.0, 1.0))
