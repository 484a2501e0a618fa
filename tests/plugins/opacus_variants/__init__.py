"""Variants of the example Opacus method (examples/opacus-plugin), registered by a package
of their own (tests/plugins/installed.py puts it on the path): honest ones on fixed-size
shuffled batches and with ghost clipping, and each of the ways a method can run more
than it charges that ``privboard submit`` must refuse: a quarter of the noise it charges,
no charge at all, larger batches than make_private was given, batches accumulated over
skipped steps, an adjusted noise multiplier, a subclass that adds its own noise, a hook
that takes the noise out; an honest fit on BatchMemoryManager's virtual steps, and two
that publish a model trained beside their honest, charged fit (a second network without
DP, the last layer re-fitted on the true labels), which only the replay of their noisy
steps refuses."""
from __future__ import annotations

from typing import ClassVar

import torch
from opacus import PrivacyEngine
from opacus.optimizers import DPOptimizer
from opacus.utils.batch_memory_manager import BatchMemoryManager
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from benchmarks.contract import Split
from benchmarks.submission.contract_checks import TINY_TRAIN
from benchmarks.privacy import SampledGaussian, records
from benchmarks.privacy.dp_sgd import noise_multiplier_for
from opacus_plugin import OpacusMLP


class OpacusAtAQuarter(OpacusMLP):
    name = "opacus-quarter-mlp"
    noise_share = 0.25


class OpacusUncharged(OpacusMLP):
    """Trains as the example does but never charges its ledger."""

    name = "opacus-uncharged-mlp"

    def fit(self, train: Split, num_classes: int) -> "OpacusUncharged":
        charge = self.ctx.ledger.charge
        self.ctx.ledger.charge = lambda *args, **kwargs: None
        try:
            return super().fit(train, num_classes)
        finally:
            self.ctx.ledger.charge = charge


class OpacusAtAQuarterBeyondTheContract(OpacusMLP):
    """Honest on the method contract's tiny data, a quarter of its charge on any larger
    training set: only the watch of its cells can see it."""

    name = "opacus-quarter-beyond-tiny-mlp"

    def fit(self, train: Split, num_classes: int) -> "OpacusAtAQuarterBeyondTheContract":
        self.noise_share = 1.0 if len(train) <= TINY_TRAIN else 0.25
        return super().fit(train, num_classes)


class OpacusTrained(OpacusMLP):
    """The example's network and data, charged with the sampling rate and the steps of
    ``accounted`` and trained by ``train``: each variant below changes one of them."""

    poisson: ClassVar[bool] = True  # make_private's Poisson sampling

    def fit(self, train: Split, num_classes: int) -> "OpacusTrained":
        h = self.hparams
        torch.manual_seed(self.ctx.seed_for("opacus"))
        data = TensorDataset(torch.tensor(train.x.reshape(len(train), -1), dtype=torch.float32),
                             torch.tensor(train.y, dtype=torch.long))
        loader = DataLoader(data, batch_size=min(h["batch_size"], len(train)),
                            shuffle=not self.poisson,
                            generator=torch.Generator().manual_seed(self.ctx.seed_for("shuffle")))
        self.model = nn.Sequential(nn.Linear(data.tensors[0].shape[1], h["hidden"]), nn.ReLU(),
                                   nn.Linear(h["hidden"], num_classes))
        rate, steps = self.accounted(loader, len(train))
        sigma = noise_multiplier_for(self.budget.epsilon, self.budget.delta, rate, steps)
        self.ctx.ledger.charge("DP-SGD (Opacus)", records(), SampledGaussian(sigma, rate, steps),
                               clip_norm=h["clip_norm"])
        self.train(loader, data, sigma)
        self.num_classes = num_classes
        return self

    def accounted(self, loader: DataLoader, n: int) -> tuple[float, int]:
        """Opacus' own accounting: each example drawn with probability 1 / (batches per
        epoch), one step per batch."""
        return 1 / len(loader), self.hparams["epochs"] * len(loader)

    def private(self, loader: DataLoader, sigma: float, **kwargs):
        """make_private of the network, an SGD optimizer and ``loader``."""
        h = self.hparams
        return PrivacyEngine(accountant="rdp").make_private(
            module=self.model, data_loader=loader, noise_multiplier=sigma,
            optimizer=torch.optim.SGD(self.model.parameters(), lr=h["learning_rate"]),
            max_grad_norm=h["clip_norm"], poisson_sampling=self.poisson,
            noise_generator=torch.Generator().manual_seed(self.ctx.seed_for("noise")),
            **kwargs)

    def train(self, loader: DataLoader, data: TensorDataset, sigma: float) -> None:
        model, optimizer, loader = self.private(loader, sigma)
        self.epochs(model, optimizer, loader, self.hparams["epochs"])

    @staticmethod
    def epochs(model, optimizer, loader, epochs: int) -> None:
        loss = nn.CrossEntropyLoss()
        for _ in range(epochs):
            for xb, yb in loader:
                optimizer.zero_grad()
                loss(model(xb), yb).backward()
                optimizer.step()


class OpacusShuffled(OpacusTrained):
    """make_private with poisson_sampling=False: shuffled batches of a fixed size,
    charged as Poisson samples at batch/N (honest, but no proven bound)."""

    name = "opacus-shuffled-mlp"
    poisson = False

    def accounted(self, loader: DataLoader, n: int) -> tuple[float, int]:
        return loader.batch_size / n, self.hparams["epochs"] * len(loader)


class OpacusGhost(OpacusTrained):
    """Ghost clipping (grad_sample_mode="ghost"), on make_private's Poisson batches."""

    name = "opacus-ghost-mlp"

    def train(self, loader: DataLoader, data: TensorDataset, sigma: float) -> None:
        model, optimizer, criterion, loader = self.private(
            loader, sigma, criterion=nn.CrossEntropyLoss(), grad_sample_mode="ghost")
        self.adjust(optimizer, sigma)
        for _ in range(self.hparams["epochs"]):
            for xb, yb in loader:
                optimizer.zero_grad()
                criterion(model(xb), yb).backward()
                optimizer.step()

    def adjust(self, optimizer, sigma: float) -> None:
        pass


class OpacusGhostAdjusted(OpacusGhost):
    """Sets ghost clipping's adjusted noise multiplier (adaptive clipping's) to a quarter
    of the one it charges and hands make_private: less noise, the same accounting."""

    name = "opacus-ghost-adjusted-mlp"

    def adjust(self, optimizer, sigma: float) -> None:
        optimizer._adjusted_noise_multiplier = 0.25 * sigma


class OpacusOtherLoader(OpacusTrained):
    """Hands make_private a loader of batches of 64, charged so, and trains on another of
    four times larger shuffled batches."""

    name = "opacus-other-loader-mlp"

    def train(self, loader: DataLoader, data: TensorDataset, sigma: float) -> None:
        model, optimizer, _ = self.private(loader, sigma)
        larger = DataLoader(data, batch_size=4 * self.hparams["batch_size"], shuffle=True,
                            generator=torch.Generator().manual_seed(self.ctx.seed_for("big")))
        self.epochs(model, optimizer, larger, self.hparams["epochs"])


class OpacusAccumulating(OpacusTrained):
    """Accumulates four Poisson batches into each noisy step (the first three steps
    skipped) and charges one batch's rate for each."""

    name = "opacus-accumulating-mlp"

    def accounted(self, loader: DataLoader, n: int) -> tuple[float, int]:
        return 1 / len(loader), max(1, self.hparams["epochs"] * len(loader) // 4)

    def train(self, loader: DataLoader, data: TensorDataset, sigma: float) -> None:
        model, optimizer, loader = self.private(loader, sigma)
        loss = nn.CrossEntropyLoss()
        for _ in range(self.hparams["epochs"]):
            for i, (xb, yb) in enumerate(loader):
                loss(model(xb), yb).backward()
                optimizer.signal_skip_step((i + 1) % 4 != 0)
                optimizer.step()
                optimizer.zero_grad()


class QuietDPOptimizer(DPOptimizer):
    """Adds a quarter of the noise its multiplier says, by its own code."""

    def add_noise(self) -> None:
        for p in self.params:
            noise = torch.normal(0, self.noise_multiplier * self.max_grad_norm / 4,
                                 p.summed_grad.shape)
            p.grad = (p.summed_grad + noise).view_as(p)


class OpacusQuietSubclass(OpacusTrained):
    """Its first epoch with make_private's optimizer, the others with a subclass that
    adds a quarter of the noise: only the first epoch's steps run through DPOptimizer's
    add_noise."""

    name = "opacus-quiet-subclass-mlp"

    def train(self, loader: DataLoader, data: TensorDataset, sigma: float) -> None:
        model, optimizer, loader = self.private(loader, sigma)
        self.epochs(model, optimizer, loader, 1)
        quiet = QuietDPOptimizer(optimizer.original_optimizer, noise_multiplier=sigma,
                                 max_grad_norm=optimizer.max_grad_norm,
                                 expected_batch_size=optimizer.expected_batch_size)
        self.epochs(model, quiet, loader, self.hparams["epochs"] - 1)


class OpacusDenoised(OpacusTrained):
    """A step hook that sets each gradient back to the clipped sum: noised, then
    denoised before the step."""

    name = "opacus-denoised-mlp"

    def train(self, loader: DataLoader, data: TensorDataset, sigma: float) -> None:
        model, optimizer, loader = self.private(loader, sigma)

        def denoise(optimizer) -> None:
            for p in optimizer.params:
                p.grad = p.summed_grad.view_as(p) / optimizer.expected_batch_size
        optimizer.attach_step_hook(denoise)
        self.epochs(model, optimizer, loader, self.hparams["epochs"])


class OpacusVirtualSteps(OpacusTrained):
    """Honest: make_private's Poisson batches, each split by BatchMemoryManager into
    physical batches of at most 16 examples, one noisy step per Poisson batch."""

    name = "opacus-virtual-steps-mlp"

    def train(self, loader: DataLoader, data: TensorDataset, sigma: float) -> None:
        model, optimizer, loader = self.private(loader, sigma)
        for _ in range(self.hparams["epochs"]):
            with BatchMemoryManager(data_loader=loader, max_physical_batch_size=16,
                                    optimizer=optimizer) as physical:
                self.epochs(model, optimizer, physical, 1)


def plain_steps(model: nn.Module, data: TensorDataset, learning_rate: float,
                steps: int) -> None:
    """Full-batch gradient descent of ``model`` on ``data``, without DP."""
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(data.tensors[0]), data.tensors[1]).backward()
        optimizer.step()


class OpacusBesideAPlainModel(OpacusTrained):
    """Broken on purpose: an honest, charged make_private fit, and the predictions of a
    second network of the same shape trained without DP on the same records."""

    name = "opacus-beside-plain-mlp"

    def train(self, loader: DataLoader, data: TensorDataset, sigma: float) -> None:
        super().train(loader, data, sigma)
        hidden, classes = self.model[0].out_features, self.model[2].out_features
        self.model = nn.Sequential(nn.Linear(data.tensors[0].shape[1], hidden), nn.ReLU(),
                                   nn.Linear(hidden, classes))
        plain_steps(self.model, data, self.hparams["learning_rate"], 20)


class OpacusLastLayerRefitted(OpacusTrained):
    """Broken on purpose: an honest, charged make_private fit, then its last layer
    re-fitted without DP on the true labels of the training records."""

    name = "opacus-refit-head-mlp"

    def train(self, loader: DataLoader, data: TensorDataset, sigma: float) -> None:
        super().train(loader, data, sigma)
        with torch.no_grad():
            features = self.model[:-1](data.tensors[0])
        last = self.model[-1]
        head = nn.Linear(last.in_features, last.out_features)  # without Opacus' hooks
        head.load_state_dict(last.state_dict())
        plain_steps(head, TensorDataset(features, data.tensors[1]),
                    self.hparams["learning_rate"], 20)
        self.model[-1] = head
