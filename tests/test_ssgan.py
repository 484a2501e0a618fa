"""PATE's student: the semi-supervised GAN's losses, the co-teaching selection rules, the
PATE++ count table and cleansing, and every mode end to end on tiny data."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from benchmarks import datasets
from methods.nn import ssgan
from methods.nn.training import seed_everything

TINY = {"epochs": 1, "batch_size": 20, "width": "small"}
# Keras draws layer seeds with random.randint(1, 1e9), which Python 3.11 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:non-integer arguments to randrange")


@pytest.fixture(scope="module")
def digits():
    """60 labelled (a third of the labels wrong), 200 unlabelled and 100 test digits."""
    d = datasets.load("digits")
    x, y = d.train.x, d.train.y
    noisy = y[:60].copy()
    noisy[::3] = (noisy[::3] + 1) % 10
    return x[:60], noisy, x[60:260], d.test.x[:100]


def tiny_trainer(digits, discriminators=2, seed=0, adversarial=True):
    x_l, y_l, x_u, _ = digits
    seed_everything(seed)
    return ssgan.GanTrainer(x_l, y_l, x_u, 10, discriminators=discriminators,
                            widths=ssgan.WIDTHS["small"], batch_size=20,
                            learning_rate=0.003, beta1=0.5, seed=seed, epochs=20,
                            adversarial=adversarial)


def smallest(losses, count):
    return set(np.argsort(losses, kind="stable")[:count].tolist())


# ---------------------------------------------------------------------------- losses

def test_supervised_loss_is_cross_entropy_over_the_real_classes():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(6, 4)).astype(np.float32)
    labels = rng.integers(0, 4, 6)
    log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    expected = -log_p[np.arange(6), labels]
    got = ssgan.supervised_losses(logits, labels).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_unsupervised_loss_matches_an_explicit_k_plus_1_softmax():
    rng = np.random.default_rng(1)
    real, generated = (rng.normal(scale=2, size=(5, 3)).astype(np.float32) for _ in range(2))

    def p_generated(logits):  # the K+1-th class with its logit fixed at 0
        full = np.concatenate([logits, np.zeros((len(logits), 1))], axis=1)
        p = np.exp(full) / np.exp(full).sum(1, keepdims=True)
        return p[:, -1]

    expected = (-np.mean(np.log(1 - p_generated(real)))
                - np.mean(np.log(p_generated(generated))))
    got = float(ssgan.unsupervised_loss(real, generated))
    assert got == pytest.approx(expected, rel=1e-5)


def test_feature_matching_is_the_mean_squared_gap_of_feature_means():
    rng = np.random.default_rng(2)
    real, generated = rng.normal(size=(8, 5)), rng.normal(size=(6, 5))
    expected = np.mean((real.mean(0) - generated.mean(0)) ** 2)
    got = float(ssgan.feature_matching_loss(real, generated))
    assert got == pytest.approx(expected, rel=1e-6)


def test_prediction_conditions_on_real_and_sums_to_one_over_k_classes():
    rng = np.random.default_rng(3)
    logits = rng.normal(scale=3, size=(7, 4))
    full = np.concatenate([logits, np.zeros((7, 1))], axis=1)
    p_full = np.exp(full) / np.exp(full).sum(1, keepdims=True)
    expected = p_full[:, :4] / (1 - p_full[:, 4:])
    got = ssgan.class_probabilities(logits)
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    np.testing.assert_allclose(got.sum(1), 1.0, rtol=1e-12)


def test_weight_norm_initialisation_standardises_the_pre_activations():
    layer = ssgan.WeightNormDense(7)
    x = np.random.default_rng(4).normal(3.0, 2.0, size=(200, 5)).astype(np.float32)
    layer.build((None, 5))
    layer.initialise(x)
    out = layer(x).numpy()
    np.testing.assert_allclose(out.mean(0), 0.0, atol=1e-4)
    np.testing.assert_allclose(out.std(0), 1.0, rtol=1e-3)


# ------------------------------------------------------------------- selection rules

def test_keep_ratio_ramps_from_one_to_one_minus_beta_over_15_epochs():
    assert ssgan.keep_ratio(0, 0.2) == 1.0
    assert ssgan.keep_ratio(3, 0.2) == pytest.approx(0.96)
    assert ssgan.keep_ratio(15, 0.2) == ssgan.keep_ratio(40, 0.2) == pytest.approx(0.8)
    assert ssgan.keep_ratio(5, 0.3, ramp_epochs=10) == pytest.approx(0.85)


@pytest.mark.parametrize("n", [1, 7, 20, 100])
@pytest.mark.parametrize("epoch", [0, 1, 3, 7, 11, 15])
def test_small_loss_selection_keeps_exactly_ceil_r_n_smallest(n, epoch):
    losses = np.random.default_rng(n + epoch).random(n).astype(np.float32)
    ratio = ssgan.keep_ratio(epoch, 0.2)
    exact = math.ceil((1 - Fraction(1, 5) * Fraction(min(epoch, 15), 15)) * n)
    picked = ssgan.small_loss_indices(losses, ratio).numpy()
    assert len(picked) == len(set(picked.tolist())) == exact
    assert set(picked.tolist()) == smallest(losses, exact)


def test_exact_products_do_not_round_up():
    # R(10) n for beta 0.4 and n 75 is 55.00000000000001 in floating point: still 55.
    assert ssgan.keep_ratio(10, 0.4) * 75 > 55
    assert int(ssgan.keep_count(75, ssgan.keep_ratio(10, 0.4))) == 55
    assert int(ssgan.keep_count(10, 0.7)) == 7
    assert int(ssgan.keep_count(10, 0.85)) == 9


def test_small_loss_ties_go_to_the_lower_index():
    picked = ssgan.small_loss_indices(np.array([1.0, 0.5, 0.5, 0.5, 2.0]), 0.5).numpy()
    assert picked.tolist() == [1, 2, 3]


def test_co_teaching_trains_each_discriminator_on_the_other_ones_picks():
    rng = np.random.default_rng(5)
    losses_1, losses_2 = rng.random(10), rng.random(10)
    for_d1, for_d2 = ssgan.supervised_picks("co-teaching", [losses_1, losses_2],
                                            [np.zeros(10), np.zeros(10)], 0.7)
    assert set(for_d1.numpy().tolist()) == smallest(losses_2, 7)
    assert set(for_d2.numpy().tolist()) == smallest(losses_1, 7)


def test_co_teaching_plus_keeps_only_disagreements():
    predictions_1 = np.array([0, 1, 2, 3, 4, 5, 6, 7])
    predictions_2 = np.array([0, 2, 2, 1, 4, 0, 6, 3])
    disagreed = [1, 3, 5, 7]
    assert ssgan.disagreements(predictions_1, predictions_2).numpy().tolist() == disagreed
    losses_1 = np.array([0.0, 0.9, 0.0, 0.1, 0.0, 0.5, 0.0, 0.2])  # agreed samples: lowest
    losses_2 = np.array([0.0, 0.1, 0.0, 0.9, 0.0, 0.2, 0.0, 0.5])
    for_d1, for_d2 = ssgan.supervised_picks(
        "co-teaching-plus", [losses_1, losses_2], [predictions_1, predictions_2], 0.5)
    assert sorted(for_d1.numpy().tolist()) == [1, 5]   # D2's two smallest among disagreements
    assert sorted(for_d2.numpy().tolist()) == [3, 7]   # D1's


def test_co_teaching_plus_without_disagreement_falls_back_to_co_teaching():
    same = np.array([2, 0, 1, 1])
    losses_1, losses_2 = np.array([0.4, 0.3, 0.2, 0.1]), np.array([0.1, 0.2, 0.3, 0.4])
    assert ssgan.disagreements(same, same).numpy().size == 0
    plus = ssgan.supervised_picks("co-teaching-plus", [losses_1, losses_2], [same, same], 0.5)
    plain = ssgan.supervised_picks("co-teaching", [losses_1, losses_2], [same, same], 0.5)
    for a, b in zip(plus, plain):
        assert a.numpy().tolist() == b.numpy().tolist()


def test_suspects_disagree_and_both_differ_from_the_label():
    p1 = np.array([0, 1, 2, 3, 3])
    p2 = np.array([1, 1, 0, 3, 2])
    y = np.array([2, 0, 2, 0, 1])
    suspects = np.asarray(ssgan.label_suspects(p1, p2, y))
    assert suspects.tolist() == [True, False, False, False, True]


# ------------------------------------------------------------------ PATE++ cleansing

def test_count_table_decayed_and_as_printed():
    epochs = [np.array([1, 0, 1]), np.array([1, 1, 0]), np.array([0, 1, 0])]
    decayed = scaled = np.zeros(3)
    for c in epochs:
        decayed = ssgan.update_counts(decayed, c, 0.9, "decayed")
        scaled = ssgan.update_counts(scaled, c, 0.9, "scaled")
    # decayed: T = 0.81 c_1 + 0.9 c_2 + c_3; scaled: T = 0.9 (c_1 + c_2 + c_3)
    np.testing.assert_allclose(decayed, [0.81 + 0.9, 0.9 + 1, 0.81])
    np.testing.assert_allclose(scaled, [1.8, 1.8, 0.9])
    with pytest.raises(ValueError, match="decay rule"):
        ssgan.update_counts(decayed, epochs[0], 0.9, "linear")


@pytest.mark.parametrize("n, tau, moved", [(10, 0.25, 3), (10, 0.24, 2), (2200, 200 / 2200, 200),
                                           (2200, 0.364, 801), (10, 0.0, 0)])
def test_removal_count_rounds_half_up(n, tau, moved):
    assert ssgan.removal_count(n, tau) == moved


def test_cleansing_moves_the_most_suspected_and_drops_their_labels():
    n = 10
    x_l = np.arange(n, dtype=np.float32).reshape(n, 1, 1, 1)  # every row identifies itself
    y_l = np.arange(n) % 3
    x_u = np.full((4, 1, 1, 1), -1.0, np.float32)
    counts = np.array([0.1, 2.0, 0.0, 1.5, 0.3, 2.0, 0.0, 0.9, 1.9, 0.2])
    moved = ssgan.most_suspected(counts, 0.25)
    assert moved.tolist() == [1, 5, 8]  # the three highest counts, ties by index
    x_l2, y_l2, x_u2 = ssgan.move_to_unlabelled(x_l, y_l, x_u, moved)
    kept = [i for i in range(n) if i not in (1, 5, 8)]
    assert x_l2.ravel().tolist() == kept
    assert y_l2.tolist() == y_l[kept].tolist()
    assert x_u2.ravel().tolist() == [-1.0] * 4 + [1.0, 5.0, 8.0]
    assert len(x_l2) + len(x_u2) == n + 4


# ------------------------------------------------------------------- training steps

def test_one_step_trains_each_discriminator_on_the_others_small_loss_picks(digits):
    trainer = tiny_trainer(digits)
    labelled, unlabelled, generator_real = (b[0] for b in trainer.epoch_batches())
    report = trainer.step(labelled, unlabelled, generator_real, 0.8, "co-teaching")
    losses_1, losses_2 = report.supervised
    assert len(report.picks[0]) == len(report.picks[1]) == 16  # ceil(0.8 x 20)
    assert set(report.picks[0].tolist()) == smallest(losses_2, 16)
    assert set(report.picks[1].tolist()) == smallest(losses_1, 16)
    # each discriminator's supervised loss is its own loss over the other one's picks
    for term, losses, picks in zip(report.supervised_terms, report.supervised, report.picks):
        assert term == pytest.approx(losses[picks].mean(), rel=1e-5)
    assert report.supervised_terms[0] != pytest.approx(losses_1[report.picks[1]].mean())


def test_one_co_teaching_plus_step_picks_among_disagreements_only(digits):
    trainer = tiny_trainer(digits, seed=1)
    labelled, unlabelled, generator_real = (b[0] for b in trainer.epoch_batches())
    report = trainer.step(labelled, unlabelled, generator_real, 0.5, "co-teaching-plus")
    p1, p2 = report.predictions
    disagreed = np.flatnonzero(p1 != p2)
    assert 0 < len(disagreed) < 20  # the case worth testing: some agree, some do not
    count = math.ceil(0.5 * len(disagreed))
    for picks, other_losses in zip(report.picks, reversed(report.supervised)):
        assert set(picks.tolist()) <= set(disagreed.tolist())
        ranked = disagreed[np.argsort(other_losses[disagreed], kind="stable")]
        assert set(picks.tolist()) == set(ranked[:count].tolist())
    y = digits[1][labelled]
    np.testing.assert_array_equal(report.suspects, (p1 != p2) & (p1 != y) & (p2 != y))


def test_the_pate_rule_uses_every_labelled_sample(digits):
    trainer = tiny_trainer(digits, discriminators=1)
    labelled, unlabelled, generator_real = (b[0] for b in trainer.epoch_batches())
    report = trainer.step(labelled, unlabelled, generator_real, 0.5, "all")
    assert report.picks[0].tolist() == list(range(20))
    assert report.supervised_terms[0] == pytest.approx(report.supervised[0].mean(), rel=1e-5)
    assert report.suspects is None


def test_epochs_repeat_the_smaller_set_to_the_larger_ones_size(digits):
    trainer = tiny_trainer(digits)
    labelled, unlabelled, generator_real = trainer.epoch_batches()
    assert labelled.shape == unlabelled.shape == generator_real.shape == (10, 20)
    assert sorted(unlabelled.ravel().tolist()) == list(range(200))  # 200 / batch 20
    assert set(labelled.ravel().tolist()) == set(range(60))
    # the generator matches features against its own permutation of the real inputs
    assert sorted(generator_real.ravel().tolist()) == list(range(200))
    assert generator_real.tolist() != unlabelled.tolist()


def test_the_supervised_baseline_takes_as_many_steps_as_the_gan_student(digits):
    supervised = tiny_trainer(digits, discriminators=1, adversarial=False)
    assert supervised.steps_per_epoch == tiny_trainer(digits).steps_per_epoch == 10
    assert supervised.epoch_batches()[0].shape == (10, 20)


@pytest.mark.parametrize("adversarial", [True, False])
def test_the_student_predicts_with_the_bias_corrected_average_of_its_weights(digits,
                                                                            adversarial):
    trainer = tiny_trainer(digits, discriminators=1, adversarial=adversarial)
    rate = trainer.average_rate
    assert rate == pytest.approx(ssgan.AVERAGED_SPANS / (20 * 10))  # 20 epochs of 10 steps
    average = [np.zeros(v.shape) for v in trainer.discriminators[0].trainable_variables]
    for steps, batches in enumerate(zip(*trainer.epoch_batches()), start=1):
        trainer.step(*batches, 0.5, "all")
        weights = [v.numpy() for v in trainer.discriminators[0].trainable_variables]
        average = [a + rate * (w - a) for a, w in zip(average, weights)]
    (averaged,) = trainer.averaged_discriminators()
    expected = [a / (1 - (1 - rate) ** steps) for a in average]
    for got, want in zip(averaged.trainable_variables, expected):
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-6)
    # the average differs from the last weights, and training goes on from the latter
    assert not np.allclose(averaged.trainable_variables[0].numpy(), weights[0])
    np.testing.assert_array_equal(trainer.discriminators[0].trainable_variables[0].numpy(),
                                  weights[0])


# ------------------------------------------------------------------------- students

@pytest.fixture(scope="module")
def students(digits):
    """One student per mode, seed 0, trained on demand."""
    x_l, y_l, x_u, _ = digits
    trained = {}

    def student(mode):
        if mode not in trained:
            trained[mode] = ssgan.train_student(x_l, y_l, x_u, 10, mode=mode, tau=0.25,
                                                **TINY)
        return trained[mode]
    return student


SLOW_MODES = ("co-teaching-plus", "pate-plus-plus")  # 7 and 13 s: the integration tier


@pytest.mark.parametrize("mode", [
    pytest.param(mode, marks=[pytest.mark.integration] if mode in SLOW_MODES else [])
    for mode in ssgan.MODES])
def test_every_mode_trains_and_predicts_probabilities(digits, students, mode):
    student = students(mode)
    p = student.predict_proba(digits[3])
    assert p.shape == (100, 10)
    np.testing.assert_allclose(p.sum(1), 1.0, rtol=1e-5)
    assert len(student.discriminators) == (1 if mode in ssgan.SINGLE else 2)
    assert student.choices["mode"] == mode
    if mode == "pate-plus-plus":
        assert len(student.moved_to_unlabelled) == student.choices["moved"] == 15
    else:
        assert len(student.moved_to_unlabelled) == 0


def test_the_supervised_student_never_reads_the_unlabelled_inputs(digits, students):
    """The baseline of the semi-supervised student trains on the labelled samples alone:
    other unlabelled inputs leave it bit-identical (the GAN student would change)."""
    x_l, y_l, x_u, x_test = digits
    first = students("supervised")
    other = ssgan.train_student(x_l, y_l, x_u[::-1] * 0.5, 10, mode="supervised", **TINY)
    np.testing.assert_array_equal(first.predict_proba(x_test), other.predict_proba(x_test))
    gan = ssgan.train_student(x_l, y_l, x_u[::-1] * 0.5, 10, mode="pate", **TINY)
    assert not np.array_equal(students("pate").predict_proba(x_test), gan.predict_proba(x_test))


@pytest.mark.parametrize("mode", [pytest.param("pate-plus-plus", marks=pytest.mark.integration),
                                  "co-teaching"])
def test_equal_seeds_give_equal_students(digits, students, mode):
    x_l, y_l, x_u, x_test = digits
    first = students(mode)
    again = ssgan.train_student(x_l, y_l, x_u, 10, mode=mode, tau=0.25, **TINY)
    for report in ("d1", "d2"):
        np.testing.assert_array_equal(
            ssgan.Student(first.discriminators, report, {}).predict_proba(x_test),
            ssgan.Student(again.discriminators, report, {}).predict_proba(x_test))
    np.testing.assert_array_equal(first.moved_to_unlabelled, again.moved_to_unlabelled)


def test_other_seeds_give_other_students(digits, students):
    x_l, y_l, x_u, x_test = digits
    other = ssgan.train_student(x_l, y_l, x_u, 10, mode="pate", seed=1, **TINY)
    assert not np.array_equal(other.predict_proba(x_test),
                              students("pate").predict_proba(x_test))


def test_reports_pick_a_discriminator_or_average_them(digits, students):
    x_test = digits[3]
    student = students("co-teaching")
    d1, d2 = (ssgan.Student(student.discriminators[i:i + 1], "d1", {}).predict_proba(x_test)
              for i in (0, 1))
    assert not np.allclose(d1, d2)
    for report, expected in (("d1", d1), ("d2", d2), ("average", (d1 + d2) / 2)):
        got = ssgan.Student(student.discriminators, report, {}).predict_proba(x_test)
        np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_32x32x3_inputs_are_flattened():
    rng = np.random.default_rng(6)
    x = rng.random((40, 32, 32, 3), dtype=np.float32)
    y = rng.integers(0, 10, 20)
    student = ssgan.train_student(x[:20], y, x[20:], 10, mode="pate", **TINY)
    assert student.predict_proba(x[:5]).shape == (5, 10)


@pytest.mark.parametrize("settings, message", [
    ({"mode": "mean-teacher"}, "unknown mode"),
    ({"mode": "pate", "report": "d2"}, "one discriminator"),
    ({"decay_rule": "linear"}, "unknown decay_rule"),
    ({"beta": 1.0}, "beta"),
    ({"tau": 1.0}, "tau"),
])
def test_unusable_settings_are_refused(digits, settings, message):
    x_l, y_l, x_u, _ = digits
    with pytest.raises(ValueError, match=message):
        ssgan.train_student(x_l, y_l, x_u, 10, **{"mode": "pate-plus-plus", **TINY, **settings})
