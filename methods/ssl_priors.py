"""RRWithPrior with priors from self-supervised features (Ghazi et al. 2021, Algorithm 4):
a SimCLR encoder trained on the inputs alone (public under label-DP), k-means on its
features, each cluster's label histogram released with discrete-Laplace noise at
epsilon_prior, and the normalised noisy histogram as every member's prior for
RRWithPrior at epsilon_rr = epsilon - epsilon_prior.

Every label is touched twice: once by the histogram release, once by RRWithPrior in the
stage that owns it. The two compose sequentially, so the run is epsilon-label-DP.
"""
from __future__ import annotations

import numbers
from typing import Any, ClassVar

import numpy as np

from benchmarks.contract import Budget, Split
from benchmarks.errors import InputError
from methods.lp_mst import LPMultiStage

# The encoder settings by name: the CPU-sized CNN for 28x28 images, ResNet18-v2 for CIFAR.
ENCODERS = ("cnn", "resnet18_v2")


class SSLPriorMultiStage(LPMultiStage):
    """LP-MST whose first stage takes the cluster prior instead of the uniform one."""

    tasks = ("image",)
    cached_model = "an SSL encoder"
    defaults: ClassVar[dict[str, Any]] = {
        **LPMultiStage.defaults, "clusters": 100, "epsilon_prior": 0.05,
        "encoder": "cnn", "encoder_epochs": None,  # None: the encoder setting's own
    }
    tiny_hparams: ClassVar[dict[str, Any]] = {
        **LPMultiStage.tiny_hparams, "clusters": 4, "encoder_epochs": 1}

    def __init__(self, budget: Budget, seed: int = 0, **hparams: Any) -> None:
        super().__init__(budget, seed, **hparams)
        h = self.hparams
        if h["encoder"] not in ENCODERS:
            raise InputError(f"{self.name}: encoder must be one of {ENCODERS}, got {h['encoder']!r}")
        for key in ("clusters", "encoder_epochs"):
            value = h[key]
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise InputError(f"{self.name}: {key} must be a positive integer, got {value!r}")
        split = h["epsilon_prior"]
        if not isinstance(split, numbers.Real) or not 0 < split < budget.epsilon:
            raise InputError(f"{self.name}: epsilon_prior must lie strictly between 0 and the "
                             f"budget's epsilon {budget.epsilon}, got {split!r}")
        self.encoded = None

    def _rr_epsilon(self) -> float:
        return self.budget.epsilon - self.hparams["epsilon_prior"]

    def encoder_settings(self) -> dict[str, Any]:
        from methods.nn import ssl_encoder

        h = self.hparams
        base = ssl_encoder.RESNET_SETTINGS if h["encoder"] == "resnet18_v2" else {}
        epochs = {} if h["encoder_epochs"] is None else {"epochs": h["encoder_epochs"]}
        return ssl_encoder.resolve_settings({**base, **epochs})

    def _first_priors(self, train: Split, part: np.ndarray, num_classes: int) -> np.ndarray:
        """The released cluster priors of stage 1's examples. The histograms count every
        training label once, charged at epsilon_prior."""
        from methods.cluster_priors import fit_clusters, release_cluster_priors
        from methods.nn import ssl_encoder

        h = self.hparams
        self.encoded = ssl_encoder.encoder_features(
            train.x, None, data_dir=self.ctx.data_root(),
            settings=self.encoder_settings(), seed=self.seed, progress=self.progress)
        self.clusters = fit_clusters(self.encoded.train, h["clusters"],
                                     seed=self.ctx.seed_for("k-means"))
        self.prior_table = release_cluster_priors(
            self.ctx.ledger, train.y, self.clusters.train, h["clusters"], num_classes, h["epsilon_prior"],
            self.ctx.rng("cluster histogram noise"))
        return self.prior_table[self.clusters.train[part]]

    def public_priors(self, x: np.ndarray) -> tuple[np.ndarray, float]:
        """The released prior of public inputs ``x`` (their cluster's noisy histogram)
        and the epsilon_rr whose top-k* sets it is judged by."""
        from methods.nn import ssl_encoder

        features = ssl_encoder.encode(self.encoded.backbone, x)
        return self.prior_table[self.clusters.assign(features)], self._rr_epsilon()

    def privacy_details(self) -> dict[str, Any]:
        h = self.hparams
        encoder = None if self.encoded is None else {
            "fingerprint": self.encoded.fingerprint, "settings": self.encoded.settings,
            "train_seconds": round(self.encoded.train_seconds, 1)}
        return {**super().privacy_details(), "epsilon_prior": h["epsilon_prior"],
                "epsilon_rr": self._rr_epsilon(), "clusters": h["clusters"],
                "encoder": encoder}

    def variant(self) -> str:
        return f"C={self.hparams['clusters']}, eps_p={self.hparams['epsilon_prior']:g}"


class RRSSLPrior(SSLPriorMultiStage):
    """RRWithPrior with the cluster prior, then one model trained on its labels: the
    paper's Figure 1(b), beside lp-1st (the uniform prior)."""

    name = "rr-ssl-prior"
    stages = 1


class LP2STSSLPrior(SSLPriorMultiStage):
    """LP-2ST whose first stage uses the cluster prior instead of the uniform one."""

    name = "lp-2st-ssl-prior"
    stages = 2
