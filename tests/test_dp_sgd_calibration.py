"""DP-SGD accounting and calibration: dp_accounting values, tightness, refusals, command."""
from __future__ import annotations

import json
import math

import dp_accounting
import pytest
from dp_accounting import rdp

from benchmarks.cli import main
from benchmarks.privacy import dp_sgd as cal
from benchmarks.privacy.rdp import sampled_gaussian_epsilon, sampled_gaussian_pld_epsilon


def independent_rdp(sigma, rate, steps, delta):
    accountant = rdp.RdpAccountant()
    accountant.compose(dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(rate, dp_accounting.GaussianDpEvent(sigma)), steps))
    return accountant.get_epsilon(delta)


def test_environment_cross_check_is_reproduced():
    # N = 60,000, batch 256, sigma 1.1, 60 epochs, delta 1e-5 (environment.md)
    steps = cal.steps_for(60_000, 256, 60)
    assert steps == 14_063
    assert round(sampled_gaussian_epsilon(1.1, 256 / 60_000, steps, 1e-5), 3) == 2.597
    assert round(sampled_gaussian_pld_epsilon(1.1, 256 / 60_000, steps, 1e-5), 3) == 2.382


def test_calibration_matches_dp_accounting_and_is_tight():
    result = cal.calibrate(2.0, 1e-5, 6_000, 128, 5)
    sigma, rate, steps = result["noise_multiplier"], result["sampling_rate"], result["steps"]
    assert (rate, steps) == (128 / 6_000, math.ceil(5 * 6_000 / 128))
    assert result["epsilon_rdp"] == pytest.approx(independent_rdp(sigma, rate, steps, 1e-5),
                                                  rel=1e-12)
    assert result["epsilon_rdp"] <= 2.0
    assert independent_rdp(sigma * 0.999, rate, steps, 1e-5) > 2.0
    # PLD is the tighter accountant for the same mechanism.
    assert result["epsilon_pld"] < result["epsilon_rdp"]
    assert set(result) == {"noise_multiplier", "steps", "sampling_rate", "epsilon_rdp",
                           "epsilon_pld", "delta"}


def test_more_privacy_needs_more_noise():
    sigmas = [cal.calibrate(e, 1e-5, 6_000, 128, 5)["noise_multiplier"] for e in (8, 2, 0.5)]
    assert sigmas == sorted(sigmas)


@pytest.mark.parametrize("args, message", [
    ((0.0, 1e-5, 1000, 10, 1), "epsilon must be > 0"),
    ((-1.0, 1e-5, 1000, 10, 1), "epsilon must be > 0"),
    ((math.nan, 1e-5, 1000, 10, 1), "epsilon must be > 0"),
    ((math.inf, 1e-5, 1000, 10, 1), "finite epsilon"),
    ((1.0, 0.0, 1000, 10, 1), "delta must be in"),
    ((1.0, 1.0, 1000, 10, 1), "delta must be in"),
    ((1.0, 1e-3, 1000, 10, 1), "1/N"),
    ((1.0, 1e-5, 1000, 2000, 1), "batch size"),
    ((1.0, 1e-5, 1000, 10, 0), "epochs"),
    ((1e-3, 1e-5, 1000, 500, 50), "unmeetable"),
    ((1000.0, 1e-5, 1000, 500, 1), "no meaningful protection"),
])
def test_unusable_budgets_raise_one_clear_error(args, message):
    with pytest.raises(ValueError, match=message) as error:
        cal.calibrate(*args)
    assert "\n" not in str(error.value)


def run_command(capsys, *args):
    """The command in this process: its exit code, stdout and stderr."""
    code = main(["privacy", "dp-sgd", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_command_prints_json_with_the_calibration(capsys):
    code, out, err = run_command(capsys, "--epsilon", "3", "--delta", "1e-5", "--dataset-size",
                                 "6000", "--batch-size", "128", "--epochs", "5", "--json")
    assert code == 0, err
    assert json.loads(out) == pytest.approx(cal.calibrate(3.0, 1e-5, 6000, 128, 5))


def test_command_reports_bad_input_in_one_line_with_exit_code_2(capsys):
    code, out, err = run_command(capsys, "--epsilon", "1", "--delta", "0.01", "--dataset-size",
                                 "6000", "--batch-size", "128", "--epochs", "5")
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and "1/N" in err
