"""PATE's stacked teachers against standalone Keras teachers, and teacher t's dependence
on shard t alone."""
from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from benchmarks import datasets  # noqa: E402
from methods.nn import ensemble, models  # noqa: E402

layers = tf.keras.layers
TEACHERS, SHARD, CLASSES = 4, 32, 10


def small_chain(input_shape, num_classes):
    """For 8x8 digits: padding, strides and activations inside Conv2D and Dense."""
    inputs = tf.keras.Input(input_shape)
    h = layers.Conv2D(6, 3, padding="same", activation="relu")(inputs)
    h = layers.MaxPooling2D()(h)
    h = layers.Conv2D(8, 3, strides=2, padding="valid")(h)
    h = layers.Activation("tanh")(h)
    h = layers.Dense(12, activation="relu")(layers.Flatten()(h))
    return tf.keras.Model(inputs, layers.Dense(num_classes)(h), name="small_chain")


@pytest.fixture(autouse=True, scope="module")
def registered():
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(models.BUILDERS, "small_chain", small_chain)
        yield


@pytest.fixture(scope="module")
def digits():
    return datasets.load("digits")


def shards_of(size, teachers=TEACHERS, per_teacher=SHARD, seed=0):
    order = np.random.default_rng(seed).permutation(size)[:teachers * per_teacher]
    return np.split(order, teachers)


def train(x, y, shards, **overrides):
    settings = dict(model="small_chain", epochs=2, batch_size=8, learning_rate=1e-2, seed=3)
    return ensemble.train_teachers(x, y, shards, CLASSES, **{**settings, **overrides})


def weights(teachers, t):
    return teachers.stack.teacher_weights(t)


@pytest.fixture(scope="module")
def trained(digits):
    """The ensemble of the default settings on the digits, for the tests that only read it."""
    return train(digits.train.x, digits.train.y, shards_of(len(digits.train.x)))


@pytest.mark.parametrize("name, shape", [("small_chain", (8, 8, 1)),
                                         ("teacher_cnn", (8, 8, 1)),
                                         ("teacher_cnn", (28, 28, 1)),
                                         ("pate_mnist_cnn", (28, 28, 1)),
                                         ("pate_deep_cnn", (28, 28, 1)),
                                         ("teacher_mlp", (30,))])
def test_each_stacked_teacher_computes_its_standalone_model(name, shape):
    rng = np.random.default_rng(0)
    x, y = rng.random((12, *shape), dtype=np.float32), rng.integers(0, CLASSES, 12)
    teachers = train(x, y, np.split(np.arange(12), 3), model=name, epochs=0)
    for v in teachers.stack.variables:  # non-zero biases too
        v.assign(rng.normal(0, 0.1, v.shape).astype(np.float32))
    logits = teachers.logits(x)
    for t in range(teachers.teachers):
        alone = teachers.teacher(t)(x).numpy()
        # float32 sums in another order: the error scales with the logits' size
        np.testing.assert_allclose(logits[t], alone, rtol=1e-4,
                                   atol=1e-5 * max(1.0, np.abs(alone).max()))


def test_tabular_teachers_train_on_their_own_shard_only():
    """Feature vectors stack as (T, B, D): changing shard 1 changes teacher 1 alone."""
    data = datasets.load("breast-cancer")
    x, y = data.train.x, data.train.y
    shards = shards_of(len(x), per_teacher=40)
    first = train(x, y, shards, model="teacher_mlp")
    changed = x.copy()
    changed[shards[1]] = changed[shards[1]][::-1]
    again = train(changed, (y + np.isin(np.arange(len(y)), shards[1])) % 2, shards,
                  model="teacher_mlp")
    for t in range(TEACHERS):
        same = all(np.array_equal(a, b) for a, b in zip(weights(first, t), weights(again, t)))
        assert same == (t != 1)
    assert first.votes(data.test.x).sum(axis=1).tolist() == [TEACHERS] * len(data.test.x)


def test_training_step_gives_each_teacher_its_own_gradient(digits):
    """Plain SGD with rate 1 moves every weight by minus its gradient."""
    x, y, shards = digits.train.x, digits.train.y, shards_of(len(digits.train.x))
    teachers = train(x, y, shards, epochs=0)
    before = [weights(teachers, t) for t in range(TEACHERS)]
    index = np.stack(shards)
    step = ensemble.training_step(teachers.stack, tf.keras.optimizers.SGD(1.0),
                                  tf.constant(x[index]), tf.constant(y[index]))
    step(np.tile(np.arange(SHARD, dtype=np.int32), (TEACHERS, 1)))
    loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    for t, shard in enumerate(shards):
        model = teachers.teacher(t)
        model.set_weights(before[t])
        with tf.GradientTape() as tape:
            value = loss(y[shard], model(x[shard]))
        grads = tape.gradient(value, model.trainable_variables)
        for w0, w1, g in zip(before[t], weights(teachers, t), grads):
            np.testing.assert_allclose(w0 - w1, g.numpy(), rtol=1e-3, atol=1e-6)


@pytest.mark.integration  # eight Keras fits: 8 s
def test_adam_steps_equal_separate_keras_fits(digits):
    """Two full-shard epochs: two Adam steps per teacher, as ``model.fit`` takes them."""
    x, y, shards = digits.train.x, digits.train.y, shards_of(len(digits.train.x))
    initial = train(x, y, shards, epochs=0)
    trained = train(x, y, shards, epochs=2, batch_size=SHARD)
    for t, shard in enumerate(shards):
        model = initial.teacher(t)
        model.compile(ensemble.adam(1e-2),
                      tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x[shard], y[shard], batch_size=SHARD, epochs=2, shuffle=False, verbose=0)
        for expected, got in zip(model.get_weights(), weights(trained, t)):
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_teacher_depends_only_on_its_shard(digits, trained):
    x, y, shards = digits.train.x.copy(), digits.train.y.copy(), shards_of(len(digits.train.x))
    original = trained
    changed = 1
    x[shards[changed]] = x[shards[changed]][::-1]
    y[shards[changed]] = (y[shards[changed]] + 1) % CLASSES
    retrained = train(x, y, shards)
    queries = digits.test.x
    a, b = original.predictions(queries), retrained.predictions(queries)
    for t in range(TEACHERS):
        same = [np.array_equal(w, v) for w, v in zip(weights(original, t),
                                                     weights(retrained, t))]
        if t == changed:
            assert not any(same)
        else:
            assert all(same), f"teacher {t} changed with shard {changed}"
            assert np.array_equal(a[t], b[t])


def test_votes_count_the_teachers_predictions(digits, trained):
    teachers = trained
    predictions = teachers.predictions(digits.test.x)
    votes = teachers.votes(digits.test.x)
    assert votes.shape == (len(digits.test.x), CLASSES)
    assert (votes.sum(axis=1) == TEACHERS).all()
    for c in range(CLASSES):
        np.testing.assert_array_equal(votes[:, c], (predictions == c).sum(axis=0))


def test_equal_seeds_give_equal_ensembles(digits, trained):
    x, y, shards = digits.train.x, digits.train.y, shards_of(len(digits.train.x))
    first, second, other = trained, train(x, y, shards), train(x, y, shards, seed=4)
    for t in range(TEACHERS):
        assert all(np.array_equal(w, v) for w, v in zip(weights(first, t), weights(second, t)))
        assert not np.array_equal(weights(first, t)[0], weights(other, t)[0])


def test_refuses_what_it_cannot_stack_or_split(digits):
    rngs = [np.random.default_rng(t) for t in range(2)]
    with pytest.raises(ValueError, match="cannot be stacked"):
        ensemble.StackedModel(models.build("teacher_cnn", (28, 28, 1), CLASSES, norm="batch"),
                              rngs)
    inputs = tf.keras.Input((8, 8, 1))
    dense_on_images = layers.Dense(CLASSES)(layers.Flatten()(layers.Dense(4)(inputs)))
    with pytest.raises(ValueError, match="then one Flatten"):
        ensemble.StackedModel(tf.keras.Model(inputs, dense_on_images), rngs)
    x, y = digits.train.x, digits.train.y
    with pytest.raises(ValueError, match="equal sizes"):
        train(x, y, [np.arange(8), np.arange(8, 20)])
    with pytest.raises(ValueError, match="disjoint"):
        train(x, y, [np.arange(8), np.arange(4, 12)])


@pytest.mark.parametrize("size, teachers, seed", [(12, 3, 0), (1000, 250, 1), (60_000, 250, 7),
                                                  (101, 10, 3)])
def test_the_shards_pate_trains_on_are_disjoint_equal_and_seeded(size, teachers, seed):
    """PATE charges every record once per query because a record is in at most one
    teacher's shard: check the split itself, not only the guard that trains on it."""
    shards = ensemble.equal_shards(size, teachers, seed)
    index = np.concatenate(shards)
    assert len(shards) == teachers and {len(s) for s in shards} == {size // teachers}
    assert len(np.unique(index)) == len(index) and 0 <= index.min() and index.max() < size
    again = ensemble.equal_shards(size, teachers, seed)
    assert all(np.array_equal(a, b) for a, b in zip(shards, again))
