"""The one-run test of a claimed trade-off curve (Mahloujifar, Melis and Chaudhuri,
"Auditing f-Differential Privacy in One Run", ICML 2025, arXiv:2410.22235).

The game is Steinke, Nasr and Jagielski's (2023): m canaries, each with an independent
fair coin that picks one of two neighbouring inputs; one run; the auditor then guesses
the coins of exactly c' canaries, chosen from the output alone, and W of them are right.

Why the test holds. Let f be the claimed curve (symmetric, so f is its own inverse) and
fbar = 1 - f (concave). For a canary j and an event E of the output and the other coins,
f-DP gives P[E | coin j is 1] <= fbar(P[E | coin j is 0]). Take E = "j is guessed 1 and at
least i other guesses are right", and the same for guesses 0; average over the canaries
(fbar is concave). Then r(i+1) = E[W; W > i] / m, the share of right guesses on the
outputs with more than i right, and h(i) = E[c' - W; W >= i] / m, the share of wrong ones
on the outputs with at least i right, satisfy r(i+1) <= fbar(h(i)): h(i) >= f(1 - r(i+1)).
If P[W >= c] >= beta, moving the mass above c down to c only loosens these constraints for
i < c, so some law on 0..c with P[W = c] >= beta meets them. Going down from
r(c) = beta c / m and h(c) = beta (c' - c) / m, each step's least mass at i meets its
constraint and only loosens the later ones; if even these least masses add up to more
than 1 (r(0) + h(0) > c' / m), no f-DP mechanism has P[W >= c] >= beta, and W >= c rejects
the claim at level beta. The counts that reject form an upper set (a law for c + 1 moved
down to c serves for c), so testing the observed count is testing the region W >= c.

numpy only (the curve is a benchmarks.privacy.tradeoff.TradeOff, or any callable).
"""
from __future__ import annotations

import numbers
from typing import Callable

# The relative margin by which r(0) + h(0) must exceed c' / m: float rounding alone never
# rejects.
_ROUNDING = 1e-12


def rejects(curve: Callable[[float], float], canaries: int, guesses: int, correct: int,
            alpha: float) -> bool:
    """Whether ``correct`` right guesses out of ``guesses`` on ``canaries`` canaries reject
    the claim that the mechanism is f-DP for the symmetric trade-off curve ``curve``, at
    level ``alpha`` (the chance of a rejection when the claim holds is below it)."""
    for name, value in (("canaries", canaries), ("guesses", guesses), ("correct", correct)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    if not 0 <= correct <= guesses <= canaries or canaries < 1:
        raise ValueError(f"need 0 <= correct <= guesses <= canaries and canaries >= 1, got "
                         f"correct {correct}, guesses {guesses}, canaries {canaries}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    right = alpha * correct / canaries
    wrong = alpha * (guesses - correct) / canaries
    for i in range(correct - 1, -1, -1):
        least = curve(1.0 - right)
        if least <= wrong:
            break  # nothing changes any more: every later constraint holds already
        right += i / (guesses - i) * (least - wrong)
        wrong = least
    return right + wrong > guesses / canaries * (1 + _ROUNDING)
