"""privboard submit watches the outside DP libraries a method trains with, with no change
to its code: Opacus (examples/opacus-plugin and its variants in tests/plugins) and
tensorflow-privacy's Keras optimizer (examples/tfp-keras-plugin and its variants in
tests/plugins). What each noisy step ran (its batch, its noise, its clipping norm,
whether its batch was a Poisson sample) is measured and composes against what the run charged; Opacus' noise is tested against the
standard deviation it was drawn at; a noisy step the watch cannot see stops the
submission; shuffled batches are labelled as accounted as Poisson, with no proven bound.
The Opacus tests need the opacus extra and are skipped without it."""
from __future__ import annotations

import collections
import json
import math
import re

import numpy as np
import pytest

from benchmarks.submission import bundle, library_watch
from benchmarks.cli import main
from benchmarks.records import SHUFFLED_BATCHES
from plugins.installed import (HAS_OPACUS, digits_block, dp_library_packages, installed_suite,
                               needs_opacus, submit)

OPACUS_METHODS = ["opacus-mlp", "opacus-shuffled-mlp", "opacus-ghost-mlp", "opacus-quarter-mlp",
                  "opacus-uncharged-mlp", "opacus-quarter-beyond-tiny-mlp",
                  "opacus-ghost-adjusted-mlp", "opacus-other-loader-mlp",
                  "opacus-accumulating-mlp", "opacus-quiet-subclass-mlp", "opacus-denoised-mlp"]
TFP_METHODS = ["tfp-keras-mlp", "tfp-keras-quarter-mlp", "tfp-keras-noiseless-mlp",
               "tfp-then-vectorized-mlp"]
# The line: what ran, its epsilon at the run's delta, and the charge.
SPENT = (r"{library} ran sigma ([\d.]+) \(clip \d\) for \d+ steps at q [\d.–]+"
         r"(?: \(batches were shuffled, accounted as Poisson\))?: epsilon ([\d.]+|inf) at "
         r"delta 1e-05, charged {charged}$")
OBSERVED = {library: bundle.charged_as_observed([library]) for library in library_watch.OF}
SHUFFLED = {library: f"{SHUFFLED_BATCHES} ({library})" for library in library_watch.OF}
UNWATCHED = "privboard: error: privboard submit cannot see every noisy step of this fit: "
# A submission of a Keras fit or of Opacus' shuffled batches takes 8 to 20 s: it runs in the
# integration tier (tensorflow-privacy's watch keeps its fast checks here).
SLOW = pytest.mark.integration


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    """A few steps of each method: a run and its audited twin."""
    methods = TFP_METHODS + (OPACUS_METHODS if HAS_OPACUS else [])
    with installed_suite(tmp_path_factory.mktemp("plugins"),
                         'name = "tiny-dp-libraries"\n' + digits_block(methods),
                         dp_library_packages()) as path:
        yield path


@pytest.fixture(scope="module")
def submitted(suite, tmp_path_factory):
    made = {}

    def submitted(method: str):
        if method not in made:
            made[method] = submit(method, suite, tmp_path_factory.mktemp("b") / "bundle")
        return made[method]
    return submitted


def site_row(method: str, done, tmp_path, capsys) -> str:
    code = main(["report", "--results", str(done.bundle), "--out", str(tmp_path / "site"),
                 "--no-archive"])
    assert (code, capsys.readouterr().err) == (0, "")
    index = (tmp_path / "site" / "tables.html").read_text()
    row = index[index.index(f"<strong>{method}</strong>"):]
    return row[:row.index("</tr>")]


@pytest.mark.parametrize("method, library, accounting", [
    pytest.param("opacus-mlp", library_watch.OPACUS, OBSERVED, marks=needs_opacus),
    pytest.param("opacus-ghost-mlp", library_watch.OPACUS, OBSERVED, marks=needs_opacus),
    pytest.param("opacus-shuffled-mlp", library_watch.OPACUS, SHUFFLED,
                 marks=[needs_opacus, SLOW]),
    pytest.param("tfp-keras-mlp", library_watch.TF_PRIVACY, SHUFFLED, marks=SLOW)])
def test_an_honest_fit_passes_labelled_by_how_its_batches_were_drawn(submitted, method,
                                                                     library, accounting):
    """make_private's Poisson batches (hooks or ghost clipping) are charged as observed;
    shuffled fixed-size batches (Opacus without Poisson sampling, Keras' fit) are
    accounted as Poisson with no proven bound, in the bundle and in every record."""
    done = submitted(method)
    assert (done.code, done.failed) == (0, [])
    manifest = json.loads((done.bundle / bundle.MANIFEST).read_text())
    assert manifest["accounting"] == accounting[library]
    assert manifest["environment"]["watched DP libraries"][library] in \
        library_watch.SUPPORTED[library][2]
    watched = [check for check in manifest["checks"]
               if check["check"] == "what the watched DP libraries ran is charged"]
    assert len(watched) == 2 and all(check["passed"] for check in watched)  # run and twin
    noise = [check for check in manifest["checks"] if "noise multiplier says" in check["check"]]
    assert len(noise) == (2 if library == library_watch.OPACUS else 0)  # Opacus exposes it
    marks = {record.privacy.details.get("sampling") for record in bundle.load(done.bundle).records}
    assert marks == {SHUFFLED_BATCHES if accounting is SHUFFLED else None}


@pytest.mark.parametrize("method, library, mark", [
    pytest.param("opacus-mlp", library_watch.OPACUS, OBSERVED, marks=needs_opacus),
    pytest.param("tfp-keras-mlp", library_watch.TF_PRIVACY, SHUFFLED, marks=SLOW)])
def test_the_site_shows_the_label_beside_the_row(submitted, method, library, mark, tmp_path,
                                                 capsys):
    row = site_row(method, submitted(method), tmp_path, capsys)
    assert mark[library] in row and "self-accounted" not in row
    assert (SHUFFLED_BATCHES in row) == (mark is SHUFFLED)


@pytest.mark.parametrize("method, library", [
    pytest.param("opacus-quarter-mlp", library_watch.OPACUS, marks=needs_opacus),
    pytest.param("tfp-keras-quarter-mlp", library_watch.TF_PRIVACY, marks=SLOW)])
def test_a_quarter_of_the_charged_noise_multiplier_is_refused_with_its_epsilon(
        submitted, method, library):
    """Seen by the method contract already, on its tiny data."""
    done = submitted(method)
    assert done.code == 1
    lines = [re.search(SPENT.format(library=library, charged="1"), line)
             for line in done.failed if "charges every step of the watched DP" in line]
    assert lines and lines[0], done.failed
    sigma, epsilon = map(float, lines[0].groups())
    assert epsilon > 4 and sigma < 1


@needs_opacus
def test_a_method_honest_on_the_contract_only_is_refused_by_its_cells(submitted):
    done = submitted("opacus-quarter-beyond-tiny-mlp")
    assert done.code == 1
    spent = SPENT.format(library="Opacus", charged="1")
    cells = [re.search(spent, line) for line in done.failed
             if line.startswith("digits opacus-quarter-beyond-tiny-mlp eps=1")]
    assert len(cells) == 2 and all(cells), done.failed  # the run and its audited twin
    assert float(cells[0].group(2)) > 4
    manifest = json.loads((done.bundle / bundle.MANIFEST).read_text())
    assert manifest["accounting"] == bundle.SELF_ACCOUNTED  # its charge did not hold


@needs_opacus
def test_a_method_that_runs_opacus_without_any_charge_is_refused(submitted):
    done = submitted("opacus-uncharged-mlp")
    assert done.code == 1
    assert any(re.search(SPENT.format(library="Opacus", charged="nothing"), line)
               for line in done.failed), done.failed


@needs_opacus
def test_opacus_patched_to_add_less_noise_than_its_multiplier_is_flagged(
        suite, tmp_path, monkeypatch):
    from opacus.optimizers import optimizer

    real = optimizer._generate_noise
    monkeypatch.setattr(optimizer, "_generate_noise",
                        lambda std, reference, **kwargs: real(0.9 * std, reference, **kwargs))
    done = submit("opacus-mlp", suite, tmp_path / "bundle")
    assert done.code == 1
    flagged = [line for line in done.failed if "the noise Opacus DP-SGD added is below" in line]
    assert len(flagged) == 2, done.failed  # the run and its audited twin
    found = re.search(r"\(N\(0, [\d.]+²\) on each coordinate\): (0\.8\d+) of that variance "
                      r"over \d+ steps \(\d+ coordinates\), p = (\S+) at level ", flagged[0])
    assert found and float(found.group(2)) < 1e-3, flagged[0]


@pytest.mark.parametrize("method, accounted", [
    pytest.param("opacus-other-loader-mlp", " (clip 1) for 2 steps at q 1: epsilon ",
                 marks=needs_opacus),
    pytest.param("opacus-accumulating-mlp", " (clip 4) for 2 steps at q 0.684: epsilon ",
                 marks=needs_opacus)])
def test_the_batch_that_ran_is_measured_not_the_one_make_private_was_given(
        submitted, method, accounted):
    """Trained on another loader of larger batches (on the contract's 240 examples: the
    whole set in each of 2 steps), or with four Poisson batches accumulated into each
    noisy step over skipped steps (an example in it up to four times: one draw at
    1 - (1 - q)^4 of four times the clipping norm): each step is what it clipped, and it
    spends more than the charge of one batch of 64 a step."""
    done = submitted(method)
    assert done.code == 1
    [line] = [line for line in done.failed if "charges every step of the watched DP" in line]
    assert "Opacus ran sigma " in line and accounted in line, line
    assert float(re.search(SPENT.format(library="Opacus", charged="1"), line).group(2)) > 1.5


def test_a_step_with_no_noise_costs_infinity(submitted):
    """tensorflow-privacy's optimizer made at sigma, its state then set to draw noise of
    standard deviation 0: the noise drawn is measured, not the query's word."""
    done = submitted("tfp-keras-noiseless-mlp")
    assert done.code == 1
    assert any(line.endswith(
        "tensorflow-privacy ran sigma 0 (clip 1) for 4 steps at q 0.267 (batches were "
        "shuffled, accounted as Poisson): epsilon inf at delta 1e-05, charged 1")
        for line in done.failed), done.failed
    assert library_watch.Ran(collections.Counter({library_watch.Setting(
        library_watch.OPACUS, 0.0, 1.0, 64, 64, 0.25): 1})).epsilon(1e-5)[0] == math.inf


@pytest.mark.parametrize("method, unseen", [
    pytest.param("opacus-ghost-adjusted-mlp", "Opacus' adaptive clipping (an adjusted noise "
                 "multiplier on DPOptimizerFastGradientClipping) is not watched",
                 marks=needs_opacus),
    pytest.param("opacus-quiet-subclass-mlp",
                 "QuietDPOptimizer replaces add_noise of Opacus' DPOptimizer",
                 marks=needs_opacus),
    pytest.param("opacus-denoised-mlp",
                 "a hook changed the gradient that DPOptimizer noised before the step",
                 marks=needs_opacus),
    ("tfp-then-vectorized-mlp", "tensorflow-privacy's VectorizedDPKerasSGDOptimizer is not "
                                "watched")])
def test_a_noisy_step_the_watch_cannot_see_stops_the_submission_naming_its_class(
        suite, method, unseen, tmp_path):
    """Each would be charged as observed on the steps the watch did see: ghost clipping
    at a quarter of the noise it charges, through the adjusted noise multiplier of
    adaptive clipping; a subclass adding its own noise; a step hook taking the noise out
    again; a second epoch with a vectorized optimizer at a quarter of the noise."""
    done = submit(method, suite, tmp_path / "bundle")
    last = done.err.splitlines()[-1]
    assert done.code == 2 and last.startswith(UNWATCHED) and unseen in last, done.err
    assert not (tmp_path / "bundle").exists()


@pytest.mark.parametrize("versions, line", [
    ({"tensorflow-privacy": "0.8.12", "opacus": "1.6.0"},
     "tensorflow-privacy 0.8.12 is installed, but privboard submit watches tensorflow-privacy "
     "0.9.0 only: install tensorflow-privacy==0.9.0 to submit"),
    ({"tensorflow-privacy": "0.9.0", "opacus": "1.6.1"},
     "Opacus 1.6.1 is installed, but privboard submit watches Opacus 1.6.0 only: install "
     "opacus==1.6.0 to submit")])
def test_an_unsupported_release_stops_with_one_line(suite, versions, line, tmp_path,
                                                    monkeypatch, capsys):
    monkeypatch.setattr(library_watch.importlib.metadata, "version", versions.get)
    monkeypatch.setattr(library_watch.importlib.util, "find_spec", lambda module: True)
    code = main(["submit", "--method", "tfp-keras-mlp", "--suite", str(suite), "--out",
                 str(tmp_path / "bundle")])
    assert (code, capsys.readouterr().err.splitlines()) == (2, [f"privboard: error: {line}"])
    assert not (tmp_path / "bundle").exists()


def test_without_any_watched_step_nothing_is_compared():
    assert library_watch.compare(library_watch.Ran(), 0.0, False, 1e-5) == ""


def test_the_noise_check_flags_less_noise_than_claimed_and_passes_the_claimed_law():
    """At the claimed standard deviation an honest library's p-value is uniform (flagged
    at the level a submission gives it); at 0.9 of it, over 20 steps of 1,000
    coordinates, always."""
    rng = np.random.default_rng(0)
    honest = [_noise_p(rng, 1.0) for _ in range(200)]
    assert 0.2 < np.mean(honest) < 0.8 and min(honest) > 1e-3
    assert max(_noise_p(rng, 0.9) for _ in range(20)) < 1e-6


def _noise_p(rng: np.random.Generator, share: float) -> float:
    ran = library_watch.Ran()
    for _ in range(20):
        ran.added_noise("Opacus", 2.0, rng.normal(0, share * 2.0, 1000))
    [check] = ran.noise_checks()
    assert check.flagged(1e-3) == (check.p_value < 1e-3)
    return check.p_value


def test_an_xla_compiled_dp_sequential_is_watched_step_by_step():
    """DPSequential compiles its train step with XLA: each step still counts, at its
    noise multiplier, clipping norm and batch (100 examples, batches of 20, 2 epochs)."""
    import tensorflow as tf
    from tensorflow_privacy import DPSequential

    tf.keras.utils.set_random_seed(0)
    x, y = np.random.default_rng(0).normal(size=(100, 5)), np.arange(100) % 2
    with library_watch.watch() as ran:
        model = DPSequential(l2_norm_clip=1.5, noise_multiplier=1.3,
                             layers=[tf.keras.layers.Dense(2)])
        model.compile(optimizer="sgd", loss=tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True))
        model.fit(x.astype(np.float32), y, batch_size=20, epochs=2, verbose=0)
    [(setting, steps)] = ran.steps.items()
    assert steps == 10 and setting == library_watch.Setting(
        library_watch.TF_PRIVACY, pytest.approx(1.3), 1.5, 20.0, 20.0)


def test_tensorflow_privacys_graph_mode_get_gradients_is_refused():
    import tensorflow as tf
    from tensorflow_privacy import DPKerasSGDOptimizer

    weights = tf.Variable([1.0, 2.0])
    optimizer = DPKerasSGDOptimizer(l2_norm_clip=1.0, noise_multiplier=1.0)
    with pytest.raises(library_watch.Unwatched, match=re.escape(
            "tensorflow-privacy's GenericDPSGDOptimizer.get_gradients (the graph-mode path) "
            "is not watched")):
        with library_watch.watch():
            tf.function(lambda: optimizer.get_gradients(
                tf.square(weights) * tf.constant([[1.0], [2.0]]), [weights]))()


@needs_opacus
@pytest.mark.parametrize("name, settings", [
    ("DPPerLayerOptimizer", {"max_grad_norm": [1.0, 1.0]}),
    ("DistributedPerLayerOptimizer", {"max_grad_norm": [1.0, 1.0]}),
    ("DistributedDPOptimizer", {"max_grad_norm": 1.0}),
    ("AdaClipDPOptimizer", {"max_grad_norm": 1.0, "target_unclipped_quantile": 0.5,
                            "clipbound_learning_rate": 0.2, "max_clipbound": 10.0,
                            "min_clipbound": 0.1, "unclipped_num_std": 10.0})])
def test_opacus_optimizers_the_watch_does_not_see_are_refused_by_class(name, settings,
                                                                       monkeypatch):
    import torch
    from opacus import optimizers
    from opacus.optimizers import ddp_perlayeroptimizer

    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 0)  # a distributed run's
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda: 1)  # only process
    cls = getattr(optimizers, name, None) or getattr(ddp_perlayeroptimizer, name)
    layer = torch.nn.Linear(2, 1)
    with pytest.raises(library_watch.Unwatched, match=f"Opacus' {name} is not watched"):
        with library_watch.watch():
            cls(torch.optim.SGD(layer.parameters(), lr=0.1), noise_multiplier=1.0,
                expected_batch_size=4, **settings)


@needs_opacus
def test_a_subclass_that_replaces_nothing_is_watched_and_an_instance_that_does_is_not():
    import torch
    from opacus.optimizers import DPOptimizer

    class Named(DPOptimizer):
        """A subclass of its own name, and an __init__ of its own."""

        def __init__(self, *args, quiet: bool = False, **kwargs):
            if quiet:
                self.add_noise = lambda: None
            super().__init__(*args, **kwargs)

    def made(quiet: bool) -> None:
        Named(torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1), quiet=quiet,
              noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=4)

    with library_watch.watch():
        made(quiet=False)
    with pytest.raises(library_watch.Unwatched, match="an instance of Opacus' DPOptimizer has "
                                                       "its add_noise replaced"):
        with library_watch.watch():
            made(quiet=True)


def _noisy_step(ghost: bool = False):
    """A private network, optimizer and loss of Opacus on 8 examples (ghost clipping's
    with ``ghost``) and one of their batches."""
    import torch
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2)
    made = PrivacyEngine().make_private(
        module=layer, optimizer=torch.optim.SGD(layer.parameters(), lr=0.1),
        data_loader=DataLoader(TensorDataset(torch.randn(8, 3), torch.arange(8) % 2),
                               batch_size=8), noise_multiplier=1.0, max_grad_norm=1.0,
        poisson_sampling=False, **({"criterion": torch.nn.CrossEntropyLoss(),
                                    "grad_sample_mode": "ghost"} if ghost else {}))
    return made[0], made[1], made[2] if ghost else torch.nn.CrossEntropyLoss(), made[-1]


@needs_opacus
@pytest.mark.parametrize("change, unseen", [
    ("step hook", "a hook changed the gradient that DPOptimizer noised before the step"),
    ("pre-hook", "a step pre-hook of the optimizer that DPOptimizer wraps"),
    ("plain loss", "DPOptimizerFastGradientClipping noised a gradient that its "
                   "ghost-clipping loss did not clip")])
def test_noise_added_or_a_gradient_changed_beside_opacus_is_refused(change, unseen):
    """A step hook that adds noise of its own; a step pre-hook on the optimizer Opacus
    wraps (it could take the noise out); ghost clipping's optimizer stepped on the
    gradient of a plain loss, unclipped."""
    import torch

    def more_noise(*args) -> None:
        for p in optimizer.params:
            p.grad += torch.randn_like(p.grad)

    library_watch.import_installed()  # as submit does: a library is watched once imported
    with pytest.raises(library_watch.Unwatched, match=re.escape(unseen)):
        with library_watch.watch():
            model, optimizer, criterion, loader = _noisy_step(ghost=change == "plain loss")
            if change == "step hook":
                optimizer.attach_step_hook(more_noise)
            elif change == "pre-hook":
                optimizer.original_optimizer.register_step_pre_hook(more_noise)
            for x, y in loader:
                loss = criterion(model(x), y)
                (loss.loss_per_sample.mean() if change == "plain loss" else loss).backward()
                optimizer.step()


def test_charges_for_more_steps_than_the_watch_saw_are_not_charged_as_observed():
    """A fit whose own DP-SGD charges count steps that no watched library ran (noise
    added by its own code beside Opacus) is self-accounted, not charged as observed."""
    from benchmarks.privacy import Ledger, SampledGaussian, records
    from benchmarks.submission.submit import covered

    ran = library_watch.Ran(collections.Counter({library_watch.Setting(
        library_watch.OPACUS, 1.0, 1.0, 64, 64, 0.25): 8}))
    ledger = Ledger()
    ledger.charge("DP-SGD (Opacus)", records(), SampledGaussian(1.0, 0.25, 8))
    assert covered(ledger, ["DP-SGD (Opacus)"], ran)
    ledger.charge("DP-SGD (its own noise)", records(), SampledGaussian(1.0, 0.25, 8))
    assert not covered(ledger, ["DP-SGD (Opacus)", "DP-SGD (its own noise)"], ran)
