"""privboard submit watches the outside DP libraries a method trains with, with no change
to its code: Opacus (examples/opacus-plugin and its variants in tests/plugins) and
tensorflow-privacy's Keras optimizer (tests/plugins/tfp_plugin). What they ran composes
against what the run charged, and Opacus' noise is tested against its noise multiplier.
The Opacus tests need the opacus extra and are skipped without it."""
from __future__ import annotations

import importlib.util
import json
import re

import numpy as np
import pytest

from benchmarks import bundle, library_watch
from benchmarks.cli import main
from plugins.installed import HERE, OPACUS_EXAMPLE, example_metadata, installed, submit

HAS_OPACUS = importlib.util.find_spec("opacus") is not None
needs_opacus = pytest.mark.skipif(
    not HAS_OPACUS, reason="needs PyTorch and Opacus: pip install -e '.[opacus]'")
OPACUS_METHODS = ["opacus-mlp", "opacus-quarter-mlp", "opacus-uncharged-mlp",
                  "opacus-quarter-beyond-tiny-mlp"]
TFP_METHODS = ["tfp-keras-mlp", "tfp-keras-quarter-mlp"]
# A few steps of each method on digits at (1, 1e-5), one seed: a run and its audited twin.
SUITE = """name = "tiny-dp-libraries"
[[block]]
datasets = ["digits"]
methods = {methods}
epsilons = [1]
delta = 1e-5
seeds = [0]
hparams = {{epochs = 2}}
"""
# The line: what ran, its epsilon at the run's delta, and the charge.
SPENT = (r"{library} ran sigma ([\d.]+) \(clip 1\) for \d+ steps at q [\d.–]+"
         r"(?: \(fixed-size batches, accounted as Poisson\))?: epsilon ([\d.]+) at delta "
         r"1e-05, charged {charged}$")


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plugins")
    path = folder / "tiny.toml"
    path.write_text(SUITE.format(methods=json.dumps(
        TFP_METHODS + (OPACUS_METHODS if HAS_OPACUS else []))))
    packages = {str(HERE): ("privboard-tfp-test", "0.0.1", {"tfp": "tfp_plugin"})}
    if HAS_OPACUS:
        packages[str(OPACUS_EXAMPLE)] = example_metadata(OPACUS_EXAMPLE)
        packages[str(HERE)] = ("privboard-dp-library-tests", "0.0.1",
                               {"tfp": "tfp_plugin", "opacus": "opacus_variants"})
    with installed(folder / "site", packages):
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


@pytest.mark.parametrize("method, library", [
    pytest.param("opacus-mlp", library_watch.OPACUS, marks=needs_opacus),
    ("tfp-keras-mlp", library_watch.TF_PRIVACY)])
def test_an_honest_method_passes_and_is_shown_charged_as_observed(submitted, method,
                                                                  library, tmp_path, capsys):
    done = submitted(method)
    assert (done.code, done.failed) == (0, [])
    manifest = json.loads((done.bundle / bundle.MANIFEST).read_text())
    assert manifest["accounting"] == f"charged as observed ({library})"
    assert manifest["environment"]["watched DP libraries"][library].startswith(
        library_watch.SUPPORTED[library][2] + ".")
    watched = [check for check in manifest["checks"]
               if check["check"] == "what the watched DP libraries ran is charged"]
    assert len(watched) == 2 and all(check["passed"] for check in watched)  # run and twin
    noise = [check for check in manifest["checks"] if "noise multiplier says" in check["check"]]
    assert len(noise) == (2 if library == library_watch.OPACUS else 0)  # Opacus exposes it
    row = site_row(method, done, tmp_path, capsys)
    assert f"charged as observed ({library})" in row and "self-accounted" not in row


@pytest.mark.parametrize("method, library", [
    pytest.param("opacus-quarter-mlp", library_watch.OPACUS, marks=needs_opacus),
    ("tfp-keras-quarter-mlp", library_watch.TF_PRIVACY)])
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
                      r"over \d+ steps \(\d+ coordinates\), p = (.+)$", flagged[0])
    assert found and float(found.group(2)) < 1e-3, flagged[0]


def test_an_unsupported_release_stops_with_one_line(suite, tmp_path, monkeypatch, capsys):
    versions = {"tensorflow-privacy": "0.8.12", "opacus": "1.6.0"}
    monkeypatch.setattr(library_watch.importlib.metadata, "version", versions.get)
    code = main(["submit", "--method", "tfp-keras-mlp", "--suite", str(suite), "--out",
                 str(tmp_path / "bundle")])
    err = capsys.readouterr().err
    assert code == 2 and err.splitlines() == [
        "privboard: error: tensorflow-privacy 0.8.12 is installed, but privboard submit "
        "watches tensorflow-privacy 0.9.x only: install tensorflow-privacy==0.9.* to submit"]
    assert not (tmp_path / "bundle").exists()


def test_without_any_watched_step_nothing_is_compared():
    assert library_watch.compare(library_watch.Ran(), 0.0, False, 1e-5) == ""


def test_the_noise_check_flags_less_noise_than_claimed_and_passes_the_claimed_law():
    """At the claimed standard deviation an honest library is flagged at the test's level
    (one in a thousand); at 0.9 of it, over 20 steps of 1,000 coordinates, always."""
    rng = np.random.default_rng(0)
    honest = [_noise_p(rng, 1.0) for _ in range(200)]
    assert 0.2 < np.mean(honest) < 0.8 and min(honest) > 1e-3
    assert max(_noise_p(rng, 0.9) for _ in range(20)) < 1e-6


def _noise_p(rng: np.random.Generator, share: float) -> float:
    ran = library_watch.Ran()
    for _ in range(20):
        ran.added_noise("Opacus", 2.0, rng.normal(0, share * 2.0, 1000))
    [check] = ran.noise_checks()
    assert check.flagged == (check.p_value < 1e-3)
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
    assert dict(ran.steps) == {library_watch.Setting(
        library_watch.TF_PRIVACY, 1.3, 1.5, 20.0, None, False): 10}
