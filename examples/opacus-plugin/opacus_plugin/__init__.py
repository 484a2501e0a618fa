"""An example privboard method in PyTorch: a network with one hidden layer trained by
Opacus' DP-SGD (``PrivacyEngine.make_private``: per-example clipping, Gaussian noise,
Poisson-sampled batches), full DP under add/remove neighbours.

The noise is Opacus', outside privboard's privacy layer, so the method charges the run's
ledger itself: ``SampledGaussian`` at the noise multiplier, the sampling rate and the
number of steps it hands Opacus. ``privboard submit`` watches Opacus while the method
trains and composes the steps it ran against that charge.
"""
from __future__ import annotations

import numbers
import warnings
from typing import Any, ClassVar

import numpy as np
import torch
from opacus import PrivacyEngine
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from benchmarks.contract import Budget, Method, Split
from benchmarks.errors import InputError
from benchmarks.privacy import (Accountant, Kind, Neighbours, PrivacyNotion, Protects,
                                SampledGaussian, records)
from benchmarks.privacy.dp_sgd import noise_multiplier_for


class OpacusMLP(Method):
    name = "opacus-mlp"
    paper = ("example plugin: DP-SGD (Abadi et al. 2016) with Opacus on a network with one "
             "hidden layer")
    notion = PrivacyNotion(Protects.RECORDS, Neighbours.ADD_REMOVE, Kind.APPROXIMATE,
                           Accountant.RDP)
    needs_delta = True
    tasks: ClassVar[tuple[str, ...]] = ("image", "tabular")
    defaults: ClassVar[dict[str, Any]] = {"hidden": 32, "batch_size": 64, "epochs": 4,
                                          "clip_norm": 1.0, "learning_rate": 0.5}
    tiny_hparams: ClassVar[dict[str, Any]] = {"epochs": 2}
    # The share of the charged noise multiplier handed to Opacus: 1 for an honest method.
    noise_share: ClassVar[float] = 1.0

    def __init__(self, budget: Budget, seed: int = 0, **hparams: Any) -> None:
        super().__init__(budget, seed, **hparams)
        for key in ("hidden", "batch_size", "epochs"):
            value = self.hparams[key]
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise InputError(f"{self.name}: {key} must be an integer >= 1, got {value!r}")

    def fit(self, train: Split, num_classes: int) -> "OpacusMLP":
        h = self.hparams
        torch.manual_seed(self.ctx.seed_for("opacus"))
        x = torch.tensor(train.x.reshape(len(train), -1), dtype=torch.float32)
        loader = DataLoader(TensorDataset(x, torch.tensor(train.y, dtype=torch.long)),
                            batch_size=min(h["batch_size"], len(train)))
        self.model = nn.Sequential(nn.Linear(x.shape[1], h["hidden"]), nn.ReLU(),
                                   nn.Linear(h["hidden"], num_classes))
        optimizer = torch.optim.SGD(self.model.parameters(), lr=h["learning_rate"])
        # Opacus samples each example with probability 1 / (batches per epoch).
        rate, steps = 1 / len(loader), h["epochs"] * len(loader)
        sigma = noise_multiplier_for(self.budget.epsilon, self.budget.delta, rate, steps)
        self.ctx.ledger.charge("DP-SGD (Opacus)", records(), SampledGaussian(sigma, rate, steps),
                               clip_norm=h["clip_norm"])
        engine = PrivacyEngine(accountant="rdp")
        model, optimizer, loader = engine.make_private(
            module=self.model, optimizer=optimizer, data_loader=loader,
            noise_multiplier=self.noise_share * sigma, max_grad_norm=h["clip_norm"],
            poisson_sampling=True, noise_generator=torch.Generator().manual_seed(
                self.ctx.seed_for("noise")))
        loss = nn.CrossEntropyLoss()
        with warnings.catch_warnings():
            # torch warns at every backward pass through Opacus' per-sample hooks that
            # no input requires a gradient: none needs one here.
            warnings.filterwarnings("ignore", message="Full backward hook is firing")
            for _ in range(h["epochs"]):
                for xb, yb in loader:
                    optimizer.zero_grad()
                    loss(model(xb), yb).backward()
                    optimizer.step()
        self.num_classes = num_classes
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits = self.model(torch.tensor(x.reshape(len(x), -1), dtype=torch.float32))
            return torch.softmax(logits, dim=1).double().numpy()
