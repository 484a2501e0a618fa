"""Each accounting rule of the watch of Opacus and tensorflow-privacy
(benchmarks/submission/library_watch.py, opacus_watch.py, tf_privacy_watch.py), on a few
steps of a tiny network: the batch, rate, sensitivity, clipping norm and noise it
measures for every form of loss and batching that each watched optimizer accepts, the
composition of what it measured, and the settings it refuses to read. Each test fails
when the one rule it names is broken. The tests that run Keras' fit take seconds each:
they are integration tests. The submissions of whole methods are
tests/test_submit_dp_libraries.py's; the Opacus tests need the opacus extra."""
from __future__ import annotations

import collections
import math

import numpy as np
import pytest

from benchmarks.contract import Budget, Method, Split
from benchmarks.submission import library_watch
from benchmarks.submission.library_watch import OPACUS, TF_PRIVACY, Ran, Setting
from plugins.installed import needs_opacus

SIGMA, CLIP = 1.5, 1.0


class Lying(float):
    """A clipping norm that reads as 1 but divides as 100."""

    def __truediv__(self, other):
        return 100 * float(self) / other


class Sized(Method):
    """A method whose fit only runs ``train``: the watch notes its training set's size."""

    paper, notion = "test", None

    def __init__(self, train=lambda: None):
        super().__init__(Budget(1.0, 1e-5))
        self.train = train

    def fit(self, train: Split, num_classes: int) -> "Sized":
        self.train()
        return self


def fits_of(*sizes: int) -> None:
    """Fits of methods given training sets of ``sizes``, inside a watch."""
    for size in sizes:
        Sized().fit(Split(np.zeros((size, 1)), np.zeros(size, int)), 2)


def steps(ran: Ran) -> list[tuple[Setting, int]]:
    return sorted(ran.steps.items(), key=lambda item: item[0].largest_batch)


@pytest.fixture(scope="module", autouse=True)
def libraries_imported():
    library_watch.import_installed()  # as submit does: a library is watched once imported


# ----- what was measured, composed ----------------------------------------------------

def test_a_fixed_size_batch_is_rated_over_the_smallest_training_set_and_proven_when_whole():
    """Batches of 4 with training sets of 8 and 16: rated 4/8; a step of all 16 examples
    of the largest set is proven, one of 8 (all of the smaller set) is not."""
    ran = Ran(train_sizes=[16, 8])
    assert ran.sampling_rate(Setting(OPACUS, SIGMA, CLIP, 4, 4)) == 0.5
    assert ran.proven(Setting(OPACUS, SIGMA, CLIP, 16, 16))
    assert not ran.proven(Setting(OPACUS, SIGMA, CLIP, 8, 16))
    assert ran.sampling_rate(Setting(OPACUS, SIGMA, CLIP, 4, 4, poisson_rate=0.1)) == 0.1
    assert Ran().sampling_rate(Setting(OPACUS, SIGMA, CLIP, 4, 4)) == 1.0  # no fit seen


def test_a_step_that_sums_nothing_costs_nothing_and_one_without_noise_everything():
    """An infinite sigma (a clipping norm of 0: nothing of the data in the sum) adds
    nothing to the epsilon; a sigma of 0 makes it infinite."""
    once = Ran(collections.Counter({Setting(OPACUS, SIGMA, CLIP, 4, 4, 0.25): 10}))
    both = Ran(collections.Counter({Setting(OPACUS, SIGMA, CLIP, 4, 4, 0.25): 10,
                                    Setting(OPACUS, math.inf, 0.0, 4, 4, 0.25): 10}))
    assert both.epsilon(1e-5)[0] == once.epsilon(1e-5)[0] < 10
    both.step(Setting(OPACUS, 0.0, CLIP, 4, 4, 0.25))
    assert both.epsilon(1e-5)[0] == math.inf


def test_steps_at_delta_0_spend_an_infinite_epsilon():
    ran = Ran(collections.Counter({Setting(OPACUS, SIGMA, CLIP, 4, 4, 0.25): 10}))
    assert library_watch.compare(ran, 1.0, True, 0.0).endswith(
        ": epsilon inf at delta 0 (no delta to convert at), charged 1")
    assert library_watch.compare(ran, 100.0, True, 1e-5) == ""


def test_the_watched_steps_compose_to_dp_accountings_epsilon_and_are_held_to_the_charge():
    """Every step counts, at its sigma and rate: the epsilon is dp_accounting's RDP
    accountant's, computed here from the steps (two settings of one sigma and rate add
    up); a charge of that epsilon covers them and one a thousandth below does not."""
    import dp_accounting

    ran = Ran(collections.Counter({Setting(OPACUS, SIGMA, CLIP, 4, 4, 0.25): 10,
                                   Setting(OPACUS, 2 * SIGMA, 2 * CLIP, 3, 3, 0.1): 7,
                                   Setting(TF_PRIVACY, SIGMA, 3 * CLIP, 4, 4): 5}),
              train_sizes=[16])
    accountant = dp_accounting.rdp.RdpAccountant()
    for sigma, rate, count in ((SIGMA, 0.25, 10), (2 * SIGMA, 0.1, 7), (SIGMA, 4 / 16, 5)):
        accountant.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.PoissonSampledDpEvent(
            rate, dp_accounting.GaussianDpEvent(sigma)), count))
    expected = accountant.get_epsilon(1e-5)
    assert ran.epsilon(1e-5)[0] == pytest.approx(expected, rel=1e-9)
    assert library_watch.compare(ran, expected, True, 1e-5) == ""
    assert library_watch.compare(ran, 0.999 * expected, True, 1e-5).endswith(
        f": epsilon {expected:.3g} at delta 1e-05, charged {0.999 * expected:.3g}")


# ----- Opacus ------------------------------------------------------------------------

def opacus_private(poisson: bool = True, ghost: bool = False, reduction: str = "mean",
                   clip=CLIP, size: int = 12):
    """make_private of a tiny network on ``size`` examples in batches of 3 (Poisson at
    1/4 unless not ``poisson``), with ghost clipping or not and the loss ``reduction``:
    (model, optimizer, criterion, loader)."""
    import torch
    from opacus import PrivacyEngine
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    layer = torch.nn.Linear(3, 2)
    data = DataLoader(TensorDataset(torch.randn(size, 3), torch.arange(size) % 2), batch_size=3)
    made = PrivacyEngine().make_private(
        module=layer, optimizer=torch.optim.SGD(layer.parameters(), lr=0.1), data_loader=data,
        noise_multiplier=SIGMA, max_grad_norm=clip, poisson_sampling=poisson,
        loss_reduction=reduction, **({"criterion": torch.nn.CrossEntropyLoss(reduction=reduction),
                                      "grad_sample_mode": "ghost"} if ghost else {}))
    return (made[0], made[1], made[2] if ghost else torch.nn.CrossEntropyLoss(reduction=reduction),
            made[-1])


def epoch(model, optimizer, criterion, batches, skip=None,
          before_step=lambda i: None) -> None:
    """A step on each batch, those that ``skip`` says skipped (their sums accumulated
    into the next noisy step)."""
    for i, (x, y) in enumerate(batches):
        criterion(model(x), y).backward()
        if skip:
            optimizer.signal_skip_step(skip(i))
        before_step(i)
        optimizer.step()
        optimizer.zero_grad()


@needs_opacus
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("ghost", [False, True], ids=["per-sample", "ghost"])
def test_an_opacus_step_is_its_poisson_draw_at_its_noise_and_clipping_norm(reduction, ghost):
    """Each of the 4 steps of an epoch: the examples drawn (rate 1/4), sigma and the
    clipping norm, whatever the loss's reduction and however Opacus clips."""
    with library_watch.watch() as ran:
        model, optimizer, criterion, loader = opacus_private(ghost=ghost, reduction=reduction)
        epoch(model, optimizer, criterion, loader)
    assert sum(ran.steps.values()) == 4
    for setting in ran.steps:
        assert setting == Setting(OPACUS, SIGMA, CLIP, setting.largest_batch,
                                  setting.largest_batch, 0.25)


@needs_opacus
def test_an_opacus_step_of_an_empty_poisson_draw_is_a_step():
    """A Poisson draw may take no example (at rate 1/50, some of the 50 draws of this
    seeded epoch do): its step still releases noise, and counts."""
    with library_watch.watch() as ran:
        model, optimizer, criterion, loader = opacus_private(size=150, reduction="sum")
        epoch(model, optimizer, criterion, loader)
    assert sum(ran.steps.values()) == len(loader) == 50
    assert min(setting.smallest_batch for setting in ran.steps) == 0


@needs_opacus
def test_batch_memory_managers_physical_batches_make_one_poisson_step():
    from opacus.utils.batch_memory_manager import BatchMemoryManager

    with library_watch.watch() as ran:
        model, optimizer, criterion, loader = opacus_private()
        with BatchMemoryManager(data_loader=loader, max_physical_batch_size=1,
                                optimizer=optimizer) as physical:
            epoch(model, optimizer, criterion, physical)
    assert sum(ran.steps.values()) == 4
    assert {(setting.poisson_rate, setting.clip_norm) for setting in ran.steps} == {(0.25, CLIP)}


@needs_opacus
def test_two_draws_accumulated_into_a_step_are_one_draw_at_two_clipping_norms():
    """Rate 1 - (1 - 1/4)^2, sensitivity 2 clipping norms, over 2 noisy steps."""
    with library_watch.watch() as ran:
        model, optimizer, criterion, loader = opacus_private()
        epoch(model, optimizer, criterion, loader, skip=lambda i: i % 2 == 0)
    assert sum(ran.steps.values()) == 2
    for setting in ran.steps:
        assert (setting.poisson_rate, setting.clip_norm, setting.noise_multiplier) == (
            pytest.approx(1 - 0.75 ** 2), 2 * CLIP, SIGMA / 2)


@needs_opacus
def test_the_draw_of_a_larger_population_is_rated_at_the_smallest_training_set():
    """The sampler draws at 1/4 from 12 examples, while the fits were given training
    sets of 12 and 6: the rate is 1/4 of 12 over 6."""
    def train() -> None:
        epoch(*opacus_private())

    with library_watch.watch() as ran:
        fits_of(12)
        Sized(train).fit(Split(np.zeros((6, 1)), np.zeros(6, int)), 2)
    assert {setting.poisson_rate for setting in ran.steps} == {0.5}


@needs_opacus
def test_a_step_of_more_than_its_poisson_draw_is_a_fixed_size_batch():
    """A Poisson batch, its step skipped, and a fixed batch of 3 more examples clipped
    into one noisy step."""
    import torch

    with library_watch.watch() as ran:
        model, optimizer, criterion, loader = opacus_private()
        drawn = next(iter(loader))
        epoch(model, optimizer, criterion, [drawn, (torch.randn(3, 3), torch.zeros(3).long())],
              skip=lambda i: i == 0)
    [setting] = ran.steps
    assert (setting.largest_batch, setting.poisson_rate) == (len(drawn[0]) + 3, None)


@needs_opacus
def test_poisson_draws_at_two_rates_in_one_step_are_a_fixed_size_batch():
    """A draw at 1/4 (its step skipped) and one of another Poisson loader at 1/2, clipped
    into one noisy step: not one draw of either rate."""
    from opacus.data_loader import DPDataLoader
    from torch.utils.data import DataLoader

    with library_watch.watch() as ran:
        model, optimizer, criterion, loader = opacus_private()
        other = DPDataLoader.from_data_loader(DataLoader(loader.dataset, batch_size=6))
        epoch(model, optimizer, criterion, [next(iter(loader)), next(iter(other))],
              skip=lambda i: i == 0)
    [setting] = ran.steps
    assert setting.poisson_rate is None


@needs_opacus
def test_a_step_is_rated_at_the_largest_clipping_norm_its_sum_was_clipped_at():
    """Two batches of a fixed size clipped into each step, the first at clip 1 and the
    second at 2 (the noise drawn at 2): its sensitivity is 2."""
    with library_watch.watch() as ran:
        model, optimizer, criterion, loader = opacus_private(poisson=False)

        def clip_of(i: int) -> None:
            optimizer.max_grad_norm = 2 * CLIP if i % 2 else CLIP

        epoch(model, optimizer, criterion, loader, skip=lambda i: i % 2 == 0,
              before_step=clip_of)
    [(setting, count)] = ran.steps.items()
    assert count == 2 and (setting.clip_norm, setting.noise_multiplier,
                           setting.poisson_rate) == (2 * CLIP, SIGMA, None)


@needs_opacus
def test_a_clipping_norm_that_is_not_a_plain_number_is_refused():
    """A float that divides as another value clips at a norm other than the one the watch
    reads (100 times larger)."""
    for ghost, owner in ((False, "DPOptimizer"),
                         (True, "GradSampleModuleFastGradientClipping")):
        with pytest.raises(library_watch.Unwatched, match=f"the max_grad_norm of {owner} is "
                                                          f"a Lying, not a plain number"):
            with library_watch.watch():
                epoch(*opacus_private(ghost=ghost, clip=Lying(CLIP)))


@needs_opacus
def test_a_subclass_with_a_property_in_place_of_an_instance_attribute_is_refused():
    """A property could read one clipping norm to the watch and another to the clipping."""
    import torch
    from opacus.optimizers import DPOptimizer

    class Reads(DPOptimizer):
        max_grad_norm = property(lambda self: CLIP, lambda self, value: None)

    with pytest.raises(library_watch.Unwatched,
                       match="Reads replaces max_grad_norm of Opacus' DPOptimizer"):
        with library_watch.watch():
            Reads(torch.optim.SGD(torch.nn.Linear(2, 1).parameters(), lr=0.1),
                  noise_multiplier=1.0, max_grad_norm=1.0, expected_batch_size=4)


# ----- tensorflow-privacy -------------------------------------------------------------

def keras_fit(make, size: int = 10, batch: int = 4, then=None, **kwargs) -> Ran:
    """One epoch of Keras' fit of a tiny network (``make(**kwargs)`` a DPSequential, or
    an optimizer for a Sequential), watched; ``then(model)`` runs after it, inside."""
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    x = np.random.default_rng(0).normal(size=(size, 3)).astype(np.float32)
    loss = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE)
    with library_watch.watch() as ran:
        made = make(**kwargs)
        model = made if isinstance(made, tf.keras.Model) else tf.keras.Sequential(
            [tf.keras.layers.Dense(2)])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.1) if made is model else made,
                      loss=loss)
        model.fit(x, np.arange(size) % 2, batch_size=batch, epochs=1, verbose=0)
        if then:
            then(model)
    return ran


def dp_sgd(**kwargs):
    from tensorflow_privacy import DPKerasSGDOptimizer

    return DPKerasSGDOptimizer(l2_norm_clip=CLIP, noise_multiplier=SIGMA, **kwargs)


def dp_sequential(**kwargs):
    import tensorflow as tf
    from tensorflow_privacy import DPSequential

    return DPSequential(l2_norm_clip=CLIP, noise_multiplier=SIGMA, use_xla=False,
                        layers=[tf.keras.layers.Dense(2)], **kwargs)


@pytest.mark.integration  # a Keras fit: seconds
@pytest.mark.parametrize("make, microbatches, size, sensitivity", [
    (dp_sgd, None, 10, 1), (dp_sgd, 4, 8, 1), (dp_sgd, 2, 10, 2), (dp_sequential, 2, 10, 2)])
def test_a_keras_step_is_its_batch_at_its_noise_and_a_microbatchs_sensitivity(
        make, microbatches, size, sensitivity):
    """Batches of 4 (and a last one of 2 of 10 examples), each example a microbatch, or
    4 microbatches of 4 examples (one each), or 2 (up to two each: twice the clipping
    norm), through a Keras optimizer or DPSequential."""
    ran = keras_fit(make, size=size, num_microbatches=microbatches)
    [(setting, count)] = ran.steps.items()
    assert count == -(-size // 4) and setting == Setting(
        TF_PRIVACY, pytest.approx(SIGMA / sensitivity), sensitivity * CLIP, size % 4 or 4, 4)


@pytest.mark.parametrize("loss", ["tensor", "function"])
def test_a_minimize_step_is_its_losss_rows_and_a_loss_function_the_whole_set(loss):
    """minimize of per-example losses with a tape: its batch is their rows; of a
    function, evaluated inside, whose rows the watch cannot see: rated 1."""
    import tensorflow as tf

    x = tf.constant(np.random.default_rng(0).normal(size=(5, 3)), tf.float32)
    weights = tf.Variable(tf.zeros([3, 1]))
    with library_watch.watch() as ran:
        fits_of(10)
        optimizer = dp_sgd(learning_rate=0.1)
        if loss == "tensor":
            with tf.GradientTape() as tape:
                losses = tf.reduce_sum(tf.square(x @ weights - 1), axis=1)
            optimizer.minimize(losses, [weights], tape=tape)
        else:
            optimizer.minimize(lambda: tf.reduce_sum(tf.square(x @ weights - 1), axis=1),
                               [weights])
    [setting] = ran.steps
    rows = (5, 5) if loss == "tensor" else (0, math.inf)
    assert (setting.smallest_batch, setting.largest_batch) == rows
    assert ran.sampling_rate(setting) == (0.5 if loss == "tensor" else 1.0)


@pytest.mark.parametrize("microbatches, sensitivity", [(4, 1), (2, 2)])
def test_a_minimize_step_of_microbatches_of_several_examples_is_rated_at_twice_its_clip(
        microbatches, sensitivity):
    """4 rows in 4 microbatches (one example each): the clipping norm; in 2 (two each):
    twice it, and the noise multiplier over that (the fast twin of the Keras fits')."""
    import tensorflow as tf

    x = tf.constant(np.random.default_rng(0).normal(size=(4, 3)), tf.float32)
    weights = tf.Variable(tf.zeros([3, 1]))
    with library_watch.watch() as ran:
        fits_of(8)
        optimizer = dp_sgd(learning_rate=0.1, num_microbatches=microbatches)
        with tf.GradientTape() as tape:
            losses = tf.reduce_sum(tf.square(x @ weights - 1), axis=1)
        optimizer.minimize(losses, [weights], tape=tape)
    [(setting, count)] = ran.steps.items()
    assert count == 1 and setting == Setting(
        TF_PRIVACY, pytest.approx(SIGMA / sensitivity), sensitivity * CLIP, 4, 4)


@pytest.mark.integration  # a Keras fit: seconds
def test_a_keras_optimizer_is_rated_at_its_smallest_noise_and_largest_clipping_norm():
    """Its state changed between two fits: the steps of both are rated at the smallest
    standard deviation over the largest clipping norm, and span the smallest and largest
    batches of both."""
    import tensorflow as tf

    def changed(model) -> None:
        optimizer = model.optimizer
        optimizer._global_state = optimizer._global_state._replace(
            l2_norm_clip=tf.constant(2 * CLIP), stddev=tf.constant(SIGMA * CLIP / 2))
        model.compile(optimizer=optimizer, loss=model.loss)
        model.fit(np.zeros((4, 3), np.float32), np.zeros(4), batch_size=4, verbose=0)

    ran = keras_fit(dp_sgd, then=changed)  # batches of 4, 4, 2, then 4
    [(setting, count)] = ran.steps.items()
    assert count == 4 and (setting.noise_multiplier, setting.clip_norm, setting.smallest_batch,
                           setting.largest_batch) == (pytest.approx(SIGMA / 4), 2 * CLIP, 2, 4)


@pytest.mark.integration  # a Keras fit: seconds
def test_a_keras_optimizer_with_another_query_is_refused():
    from tensorflow_privacy.privacy.dp_query.no_privacy_query import NoPrivacySumQuery

    def no_privacy(**kwargs):
        optimizer = dp_sgd(**kwargs)
        optimizer._dp_sum_query = NoPrivacySumQuery()
        return optimizer

    with pytest.raises(library_watch.Unwatched, match="tensorflow-privacy's "
                       "GenericDPSGDOptimizer with a NoPrivacySumQuery is not watched"):
        keras_fit(no_privacy)


@pytest.mark.integration  # a Keras fit: seconds
def test_a_dp_models_clipping_norm_that_is_not_a_plain_number_is_refused():
    """DPModel multiplies its clipping norm and noise multiplier in Python."""
    with pytest.raises(library_watch.Unwatched, match="the l2_norm_clip of DPSequential is a "
                                                      "Lying, not a plain number"):
        keras_fit(_lying_sequential)


def _lying_sequential():
    model = dp_sequential()
    model._l2_norm_clip = Lying(CLIP)
    return model
