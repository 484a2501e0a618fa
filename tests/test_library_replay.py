"""The replay of a fit through Opacus or tensorflow-privacy
(benchmarks/submission/library_replay.py): the contract's replay check refits a method on
altered private data with the noisy gradients of the first fit's watched steps handed
back, and the predictions must not move. A model trained beside honest, charged noisy
steps is refused with "reads private data beside its watched DP steps" (a second
network, a last layer re-fitted, a last epoch with a plain optimizer, early stopping on
the private loss: tests/plugins/opacus_variants and tfp_plugin), and so is a fit whose
steps differ in number or shape; an honest fit of each watched path passes, and its
submission is "charged as observed and replayed". The submissions of whole suites and
the replays of Keras' fits (seconds each) are integration tests; the Opacus tests need
the opacus extra."""
from __future__ import annotations

import json
import re

import pytest

from benchmarks.submission import bundle, contract_checks, library_watch
from benchmarks.submission.contract_checks import ContractBreach, check_replays, fit
from plugins.installed import (HAS_OPACUS, digits_block, dp_library_packages, installed_suite,
                               needs_opacus, submit)

LEAK = "reads private data beside its watched DP steps: with all 240 records altered"
MOVED = LEAK + r" and the \d+ noisy steps replayed, the prediction for test input \d+ moved"
OPACUS_HONEST = ["opacus-mlp", "opacus-virtual-steps-mlp", "opacus-ghost-mlp"]
TFP_HONEST = ["tfp-keras-mlp", "tfp-tape-loop-mlp", "tfp-dp-sequential-mlp"]
PLANTED = {"opacus-beside-plain-mlp": MOVED, "opacus-refit-head-mlp": MOVED,
           "tfp-then-plain-epoch-mlp": MOVED,
           "tfp-early-stopping-mlp": LEAK + r", noisy gradient \d+ \(tensorflow-privacy, of "
                                            r"shape \(64, 32\)\) came after the \d+ of the "
                                            r"recorded fit"}
REPLAY_CHECK = ("the method contract (depends on private data only through the privacy "
                "layer's releases and its watched DP steps)")


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """Each method once: a run and its audited twin. The tensorflow-privacy methods take
    the whole training set in each step (no shuffle: the steps are proven), as DP
    gradient descent does."""
    opacus = [*OPACUS_HONEST, "opacus-beside-plain-mlp", "opacus-refit-head-mlp"]
    tfp = [*TFP_HONEST, "tfp-then-plain-epoch-mlp", "tfp-early-stopping-mlp",
           "tfp-dp-sequential-xla-mlp"]
    with installed_suite(tmp_path_factory.mktemp("plugins"),
                         'name = "tiny-library-replays"\n'
                         + (digits_block(opacus) if HAS_OPACUS else "")
                         + digits_block(tfp, "{epochs = 2, batch_size = 100000}"),
                         dp_library_packages()) as path:
        library_watch.import_installed()  # as submit does
        yield path


def refused(method) -> str:
    with pytest.raises(ContractBreach) as breach:
        check_replays(fit(method))
    return str(breach.value)


@needs_opacus
@pytest.mark.parametrize("name", ["OpacusBesideAPlainModel", "OpacusLastLayerRefitted"])
def test_a_model_trained_beside_honest_opacus_steps_is_refused(suite, name):
    import opacus_variants

    assert re.match(MOVED, refused(getattr(opacus_variants, name)))


@needs_opacus
def test_an_honest_opacus_fit_is_replayed(suite):
    from opacus_variants import OpacusVirtualSteps

    assert check_replays(fit(OpacusVirtualSteps)).startswith(
        "8 noisy steps of Opacus (32 noisy gradients) replayed with all 240 records "
        "altered: identical predictions")


@needs_opacus
def test_the_noisy_gradients_are_handed_back_before_anything_scales_them(suite):
    """A step hook that scales each noisy gradient by a statistic of the private labels
    (a positive multiple, which the watch lets through): replayed at the noise, the
    scaling runs again on the altered labels."""
    from opacus_variants import OpacusTrained

    class ScaledByTheLabels(OpacusTrained):
        def train(self, loader, data, sigma):
            model, optimizer, loader = self.private(loader, sigma)
            scale = 1 + float(data.tensors[1].float().mean()) / 10

            def scaled(optimizer) -> None:
                for p in optimizer.params:
                    p.grad.mul_(scale)
            optimizer.attach_step_hook(scaled)
            self.epochs(model, optimizer, loader, self.hparams["epochs"])

    assert re.match(MOVED, refused(ScaledByTheLabels))


@needs_opacus
def test_noisy_steps_that_differ_in_number_or_shape_are_refused(suite):
    """A network whose width, or whose number of epochs, the first private label sets."""
    from opacus_variants import OpacusTrained

    first = contract_checks.tiny_data("image", binary=False)[0].y[0]

    class WidthOfTheLabel(OpacusTrained):
        def fit(self, train, num_classes):
            self.hparams = {**self.hparams, "hidden": 8 + int(train.y[0])}
            return super().fit(train, num_classes)

    class EpochsOfTheLabel(OpacusTrained):  # charged for its 2 epochs either way
        def train(self, loader, data, sigma):
            model, optimizer, loader = self.private(loader, sigma)
            self.epochs(model, optimizer, loader, 2 if data.tensors[1][0] == first else 1)

    assert refused(WidthOfTheLabel) == (
        f"{LEAK}, noisy gradient 1 (Opacus, of shape ({9 + first}, 64)) came where the "
        f"recorded fit released one of Opacus of shape ({8 + first}, 64)")
    assert refused(EpochsOfTheLabel) == (
        f"{LEAK}, the replayed fit released 16 of the 32 noisy gradients of the recorded fit")


@pytest.mark.integration  # Keras' fits: seconds
def test_an_honest_tensorflow_privacy_fit_is_replayed(suite):
    """Through a Keras DP optimizer's gradients, and through DPSequential's noise."""
    from tfp_plugin import DPSequentialMLP, KerasDPSGD

    for method in (KerasDPSGD, DPSequentialMLP):
        assert check_replays(fit(method)).startswith(
            "4 noisy steps of tensorflow-privacy (16 noisy gradients) replayed with all 240 "
            "records altered: identical predictions")


@pytest.mark.integration  # Keras' fits: seconds
def test_early_stopping_on_the_private_loss_is_refused(suite):
    from tfp_plugin import KerasStoppedEarly

    assert re.match(PLANTED["tfp-early-stopping-mlp"], refused(KerasStoppedEarly))


# ----- whole submissions ---------------------------------------------------------------

@pytest.mark.integration
@pytest.mark.parametrize("method", [
    *[pytest.param(name, marks=needs_opacus) for name in OPACUS_HONEST], *TFP_HONEST])
def test_an_honest_fit_of_each_watched_path_is_charged_as_observed_and_replayed(
        suite, method, tmp_path):
    done = submit(method, suite, tmp_path / "bundle")
    assert (done.code, done.failed) == (0, [])
    manifest = json.loads((done.bundle / bundle.MANIFEST).read_text())
    library = library_watch.OPACUS if method.startswith("opacus") else library_watch.TF_PRIVACY
    assert manifest["accounting"] == bundle.charged_as_observed([library])
    [found] = [check["found"] for check in manifest["checks"] if check["scope"] == REPLAY_CHECK]
    assert re.match(rf"\d+ noisy steps of {library} \(\d+ noisy gradients\) replayed with all "
                    rf"240 records altered: identical predictions", found), found
    bundle.load(done.bundle)


@pytest.mark.integration
@pytest.mark.parametrize("method", [
    *[pytest.param(name, marks=needs_opacus) for name in PLANTED if name.startswith("opacus")],
    *[name for name in PLANTED if name.startswith("tfp")]])
def test_a_model_trained_beside_the_watched_steps_is_refused(suite, method, tmp_path):
    done = submit(method, suite, tmp_path / "bundle")
    assert done.code == 1
    assert [line for line in done.failed if line.startswith(REPLAY_CHECK)], done.failed
    [line] = [line[len(REPLAY_CHECK) + 2:] for line in done.failed
              if line.startswith(REPLAY_CHECK)]
    assert re.match(PLANTED[method], line), line


@pytest.mark.integration
def test_dp_sequential_with_its_default_xla_is_told_why_two_fits_differ(suite, tmp_path):
    done = submit("tfp-dp-sequential-xla-mlp", suite, tmp_path / "bundle")
    assert done.code == 1
    assert any(re.search(
        r"\(is deterministic for a fixed seed\): two fits with seed 3 predicted "
        r"probabilities up to [\d.]+ apart; likely cause: tensorflow-privacy's DPSequential "
        r"compiles its train step with XLA \(use_xla=True, its default\), which a seed does "
        r"not make reproducible: make the DPSequential with use_xla=False$", line)
        for line in done.failed), done.failed
