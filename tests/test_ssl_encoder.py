"""The self-supervised encoder never sees a label, is cached by what it was trained on, and
its clusters and prior-quality figures read labels only where the DP release allows."""
import inspect
import math
import shutil

import numpy as np
import pytest
import tensorflow as tf

from benchmarks import datasets
from benchmarks.contract import Split
from methods import cluster_priors
from benchmarks.metrics import prior_quality
from methods.cluster_priors import fit_clusters, release_cluster_priors
from benchmarks.privacy import Ledger
from benchmarks.privacy.randomizers import rr_with_prior_distribution
from charged import noisy_cluster_priors
from methods.nn import ssl_encoder

TINY = {"epochs": 1, "batch_size": 64, "projection_dim": 16}
# Every augmentation switched off: a view must be the image itself.
NO_AUGMENTATION = {"crop_scale": [1.0, 1.0], "max_rotation": 0.0, "max_shift": 0.0,
                   "flip": False, "colour_jitter": 0.0, "noise_std": 0.0,
                   "erase_probability": 0.0}


@pytest.fixture(scope="module")
def digits():
    ds = datasets.load("digits")
    return Split(ds.train.x[:256], ds.train.y[:256]), Split(ds.test.x[:64], ds.test.y[:64])


@pytest.fixture(scope="module")
def trained(digits, tmp_path_factory):
    """One encoder trained on the digits, and the data folder that caches it."""
    folder = tmp_path_factory.mktemp("trained")
    return features(*digits, folder), folder


@pytest.fixture
def warm(trained, tmp_path):
    """A data folder whose cache already holds the trained entry."""
    shutil.copytree(ssl_encoder.cache_folder(trained[1]), ssl_encoder.cache_folder(tmp_path))
    return tmp_path


@pytest.fixture
def counted_training(monkeypatch):
    """Counts how often the encoder is trained (not loaded)."""
    calls = []
    real = ssl_encoder.train_encoder

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl_encoder, "train_encoder", counting)
    return calls


def features(train: Split, test: Split, data_dir, **overrides):
    """The encoder's features for two splits, as a method holding Splits would ask."""
    kwargs = {"settings": TINY, "seed": 0, **overrides}
    return ssl_encoder.encoder_features(train.x, test.x, data_dir=data_dir, **kwargs)


def the_entry(data_dir):
    (path,) = ssl_encoder.cache_folder(data_dir).glob("*.npz")  # beside each entry, its lock
    return path


# ----- no labels --------------------------------------------------------------------------

def test_the_training_api_takes_no_labels():
    for function in (ssl_encoder.train_encoder, ssl_encoder.encoder_features):
        names = set(inspect.signature(function).parameters)
        assert names <= {"x_train", "x_test", "data_dir", "settings",
                         "seed", "progress"}, function.__name__


def test_garbage_labels_give_bit_identical_features(digits, trained, tmp_path):
    """A second, independent training with other labels lying around: equal seeds give
    equal features, and the labels change nothing."""
    (train, test), (honest, _) = digits, trained
    garbage = np.random.default_rng(1).integers(0, 10, len(train))
    scrambled = features(Split(train.x, garbage), Split(test.x, test.y[::-1]), tmp_path)
    assert not honest.cached and not scrambled.cached  # both trained
    np.testing.assert_array_equal(honest.train, scrambled.train)
    np.testing.assert_array_equal(honest.test, scrambled.test)
    assert honest.fingerprint == scrambled.fingerprint
    assert honest.train.dtype == np.float32 and honest.train.shape == (256, 128)
    np.testing.assert_allclose(np.linalg.norm(honest.train, axis=1), 1.0, rtol=1e-5)


# ----- the cache --------------------------------------------------------------------------

def test_a_second_call_loads_the_cache(digits, trained, warm, counted_training):
    first = trained[0]
    second = features(*digits, warm)
    assert not counted_training and second.cached
    assert second.train_seconds == first.train_seconds
    np.testing.assert_array_equal(first.train, second.train)
    np.testing.assert_array_equal(first.test, second.test)  # from the restored weights
    assert first.fingerprint == second.fingerprint
    assert the_entry(warm).suffix == ".npz"


@pytest.mark.parametrize("change, features_change", [
    ({"seed": 1}, True),
    ({"settings": {**TINY, "temperature": 0.5}}, True),
])
def test_what_the_encoder_depends_on_trains_anew(digits, trained, warm, counted_training,
                                                 change, features_change):
    other = features(*digits, warm, **change)
    assert len(counted_training) == 1 and not other.cached
    assert other.fingerprint != trained[0].fingerprint
    assert (not np.array_equal(other.train, trained[0].train)) == features_change
    assert len(list(ssl_encoder.cache_folder(warm).glob("*.npz"))) == 2


def test_other_training_inputs_train_anew(digits, warm, counted_training):
    train, test = digits
    subset = features(Split(train.x[:128], train.y[:128]), test, warm)
    assert len(counted_training) == 1 and len(subset.train) == 128


def test_settings_equal_after_defaults_share_an_entry(digits, warm, counted_training):
    same = features(*digits, warm, settings={**TINY, "temperature": 0.2, "epochs": 1.0})
    assert same.cached and not counted_training


def test_a_corrupt_entry_is_retrained(digits, trained, warm, counted_training):
    path = the_entry(warm)
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(64)
    path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="ignoring encoder cache"):
        again = features(*digits, warm)
    assert len(counted_training) == 1 and not again.cached
    np.testing.assert_array_equal(trained[0].train, again.train)
    assert features(*digits, warm).cached  # the rewritten entry is intact


def test_a_tampered_entry_fails_its_fingerprint(digits, warm, counted_training):
    path = the_entry(warm)
    with np.load(path) as stored:
        arrays = dict(stored)
    arrays["train"] = arrays["train"] + 1.0  # a readable file whose content changed
    np.savez(path, **arrays)
    with pytest.warns(UserWarning, match="does not match its stored fingerprint"):
        assert not features(*digits, warm).cached
    assert len(counted_training) == 1


def test_unknown_settings_are_refused():
    with pytest.raises(ValueError, match="unknown encoder settings"):
        ssl_encoder.resolve_settings({"epoch": 3})
    with pytest.raises(ValueError, match="unknown backbone"):
        ssl_encoder.resolve_settings({"backbone": "vgg"})


def test_the_resnet_setting_builds_resnet18_without_its_head():
    backbone = ssl_encoder.build_backbone((32, 32, 3), ssl_encoder.RESNET_SETTINGS)
    assert backbone.output_shape == (None, 512)


# ----- augmentation and loss ----------------------------------------------------------------

def augmented(images, settings, key=(0, 0)):
    s = ssl_encoder.resolve_settings(settings)
    return ssl_encoder.augment(tf.constant(images), tf.constant(key, tf.int64), s).numpy()


@pytest.mark.parametrize("shape, settings", [((16, 28, 28, 1), ssl_encoder.DEFAULT_SETTINGS),
                                             ((16, 32, 32, 3), ssl_encoder.RESNET_SETTINGS),
                                             ((16, 8, 8, 1), TINY)])
def test_augmentation_keeps_shape_and_range(shape, settings):
    images = np.random.default_rng(0).random(shape, dtype=np.float32)
    view = augmented(images, settings)
    assert view.shape == shape and view.dtype == np.float32
    assert view.min() >= 0.0 and view.max() <= 1.0
    assert not np.allclose(view, images)
    np.testing.assert_array_equal(view, augmented(images, settings))  # same key, same view
    assert not np.allclose(view, augmented(images, settings, key=(0, 1)))


def test_augmentation_switched_off_is_the_identity():
    images = np.random.default_rng(0).random((8, 28, 28, 1), dtype=np.float32)
    np.testing.assert_allclose(augmented(images, NO_AUGMENTATION), images, atol=1e-5)


def test_flip_mirrors_or_keeps_each_image():
    images = np.random.default_rng(0).random((32, 32, 32, 3), dtype=np.float32)
    view = augmented(images, {**NO_AUGMENTATION, "flip": True})
    mirrored = [np.allclose(v, x[:, ::-1], atol=1e-5) for v, x in zip(view, images)]
    kept = [np.allclose(v, x, atol=1e-5) for v, x in zip(view, images)]
    assert all(m != k for m, k in zip(mirrored, kept))
    assert 0 < sum(mirrored) < len(images)


def reference_nt_xent(z1, z2, temperature):
    """NT-Xent written from its definition, one view at a time."""
    z = np.concatenate([z1, z2]).astype(float)
    z /= np.linalg.norm(z, axis=1, keepdims=True)
    n = len(z1)
    losses = []
    for i in range(2 * n):
        partner = (i + n) % (2 * n)
        similarity = z @ z[i] / temperature
        others = np.delete(similarity, i)
        losses.append(-similarity[partner] + np.log(np.sum(np.exp(others))))
    return float(np.mean(losses))


@pytest.mark.parametrize("temperature", [0.1, 0.5])
def test_nt_xent_matches_the_reference(temperature):
    rng = np.random.default_rng(0)
    z1, z2 = rng.normal(size=(6, 5)), rng.normal(size=(6, 5))
    loss = ssl_encoder.nt_xent_loss(tf.constant(z1, tf.float32), tf.constant(z2, tf.float32),
                                    temperature)
    assert float(loss) == pytest.approx(reference_nt_xent(z1, z2, temperature), rel=1e-5)


# ----- clusters and priors ------------------------------------------------------------------

def test_clusters_take_features_only_and_are_reproducible():
    assert list(inspect.signature(fit_clusters).parameters) == [
        "train_features", "num_clusters", "seed", "n_init"]
    rng = np.random.default_rng(0)
    train, test = rng.normal(size=(300, 4)), rng.normal(size=(50, 4))
    first, again = fit_clusters(train, 8, seed=0), fit_clusters(train, 8, seed=0)
    np.testing.assert_array_equal(first.train, again.train)
    nearest = np.argmin(((test[:, None] - first.centres[None]) ** 2).sum(-1), axis=1)
    np.testing.assert_array_equal(first.assign(test), nearest)
    np.testing.assert_array_equal(first.assign(train), first.train)


def test_training_labels_reach_the_table_only_through_the_dp_release(monkeypatch):
    clusters = np.array([0, 0, 1, 3, 3, 3])
    labels = np.array([2, 2, 0, 1, 1, 2])
    seen = []

    def release(ledger, labels, clusters, num_clusters, num_classes, epsilon, rng, **charge):
        seen.append(labels.copy())
        # Anything label-free: then the table must not depend on the labels.
        return np.eye(num_classes)[clusters % num_classes]

    monkeypatch.setattr(cluster_priors, "noisy_cluster_priors", release)
    table = release_cluster_priors(Ledger(), labels, clusters, 4, 3, 0.1,
                                   np.random.default_rng(0))
    shuffled = release_cluster_priors(Ledger(), labels[::-1], clusters, 4, 3, 0.1,
                                      np.random.default_rng(0))
    np.testing.assert_array_equal(table, shuffled)
    np.testing.assert_array_equal(seen[0], labels)
    np.testing.assert_array_equal(table, [[1, 0, 0], [0, 1, 0], [1 / 3] * 3, [1, 0, 0]])


def test_released_table_matches_each_examples_prior():
    rng = np.random.default_rng(0)
    clusters = rng.integers(0, 5, 200)
    labels = rng.integers(0, 4, 200)
    ledger = Ledger()
    table = release_cluster_priors(ledger, labels, clusters, 5, 4, 0.5,
                                   np.random.default_rng(1))
    per_example = noisy_cluster_priors(labels, clusters, 5, 4, 0.5, np.random.default_rng(1))
    np.testing.assert_array_equal(table[clusters], per_example)
    [charge] = ledger.charges  # every training label, at epsilon_p
    assert charge.cost.epsilon == 0.5 and len(charge.touches.examples) == 200


def test_prior_quality_reads_test_labels_only():
    assert list(inspect.signature(prior_quality).parameters) == [
        "priors", "test_labels", "rr_epsilon"]
    table = np.array([[0.5, 0.3, 0.2], [0.4, 0.4, 0.2]])
    clusters = np.array([0, 0, 0, 1])
    labels = np.array([0, 1, 2, 0])
    # A tie ranks the smaller class first: class 0 is cluster 1's top class, not class 1.
    quality = prior_quality(table[clusters], labels, math.inf)
    assert quality.top1 == pytest.approx(2 / 4)
    assert quality.top_k == 1.0 and quality.mean_k == 3.0  # epsilon = inf keeps every class


def test_top_k_agrees_with_rr_with_prior():
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 3, size=(10, 6))  # many ties
    counts[np.arange(10), rng.integers(0, 6, 10)] += 1  # no zero row
    table = counts / counts.sum(axis=1, keepdims=True)
    clusters = rng.integers(0, 10, 500)
    labels = rng.integers(0, 6, 500)
    for epsilon in (0.5, 2.0):
        quality = prior_quality(table[clusters], labels, epsilon)
        reachable = rr_with_prior_distribution(labels, table[clusters], epsilon)[
            np.arange(500), labels] > 0
        assert quality.top_k == pytest.approx(reachable.mean())
        assert quality.top1 == pytest.approx(np.mean(table[clusters].argmax(1) == labels))

