"""The audit at the release: the canaries' labels as the privacy layer's label mechanisms
released them. An honest cell's bound stays below its claim and near it; a cell whose
randomisation is removed, or runs at three times its epsilon while charging one, is
flagged at the release, whatever its training (one epoch here: the model audit sees
nothing of it)."""
from __future__ import annotations

import numpy as np
import pytest

from benchmarks import datasets
from benchmarks.audit.training import audit_training
from benchmarks.context import RunContext
from benchmarks.contract import Budget
from benchmarks.privacy import randomizers

CANARIES = 400
# (method, dataset, hparams): the cheapest settings that release every label once.
LP_1ST = ("lp-1st", "digits", {"epochs": 1, "batch_size": 64})
RR_SSL = ("rr-ssl-prior", "digits", {"epochs": 1, "batch_size": 64, "clusters": 10,
                                     "encoder_epochs": 1})
SPREAD_LR = ("spread-lr", "digits-7v9", {"samples": 2, "em_iterations": 1, "mstep_steps": 5})


def audited(cell, epsilon: float):
    method, dataset, hparams = cell
    return audit_training(method, datasets.load(dataset), Budget(epsilon), hparams,
                          RunContext(seed=0), canaries=CANARIES)


def no_randomisation(monkeypatch):
    monkeypatch.setattr(randomizers, "_randomize",
                        lambda labels, priors, k, epsilon, rng: labels.copy())


def three_times_epsilon(monkeypatch):
    real = randomizers._randomize
    monkeypatch.setattr(randomizers, "_randomize", lambda labels, priors, k, epsilon, rng:
                        real(labels, priors, k, 3 * epsilon, rng))


def no_label_flip(monkeypatch):
    from benchmarks.privacy import local_randomizers

    monkeypatch.setattr(local_randomizers, "flip_labels",
                        lambda labels, p_f, rng: np.asarray(labels).copy())


def test_an_honest_lp_1st_is_audited_at_its_release_near_its_claim():
    result = audited(LP_1ST, 2.0)
    release = result.release
    assert release["where"] == ["RRWithPrior (stage 1 of 1)"]
    assert not result.flagged
    assert 0.6 * 2.0 < release["epsilon_lower_bound"] <= 2.0, release
    assert release["guesses"] < CANARIES  # abstentions: released as a third class


@pytest.mark.parametrize("cell, epsilon, break_it", [
    (LP_1ST, 1.0, no_randomisation),
    (LP_1ST, 1.0, three_times_epsilon),
    (RR_SSL, 2.0, no_randomisation),
    (SPREAD_LR, 1.0, no_label_flip),
], ids=["lp-1st-no-rr", "lp-1st-3eps", "rr-ssl-prior-no-rr", "spread-lr-no-flip"])
def test_a_broken_release_is_flagged_at_the_release(cell, epsilon, break_it, monkeypatch):
    break_it(monkeypatch)
    result = audited(cell, epsilon)
    assert result.flagged
    assert result.release["epsilon_lower_bound"] > epsilon, result.release


def test_a_method_outside_the_layer_has_no_release_audit():
    """DP-ERM adds its own noise to weights, not labels: only its model is audited."""
    result = audit_training("dp-erm-objective", datasets.load("breast-cancer"), Budget(1.0),
                            {}, RunContext(seed=0))
    assert result.release is None
