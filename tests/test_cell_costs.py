"""A cell's expected cost: from its own archived records, else its configuration's, else
its method's, each on the reference host's speed; and the archive knows the quick
suite's cells."""
from __future__ import annotations

import dataclasses

import pytest

from benchmarks import cell_costs, runner
from benchmarks.cell_costs import CostTable, Timing
from benchmarks.context import RunContext
from benchmarks.suites import load_suite
from test_runner import write_suite  # the runner tests' 4-cell suite

XEON = "Intel(R) Xeon(R) Processor"


def record(cell, seconds: float, cpu: str = cell_costs.REFERENCE_CPU, **changes):
    """An ok record of ``cell`` that took ``seconds`` on ``cpu``."""
    made = runner.new_record(cell, "fingerprint", RunContext(seed=cell.seed))
    return dataclasses.replace(made, **{"status": "ok", "wall_time_s": seconds,
                                        "provenance": {"cpu": cpu}, **changes})


def table(*records, train_sizes: dict = {}) -> CostTable:
    return CostTable((t for t in map(Timing.of, records) if t is not None), train_sizes)


@pytest.fixture
def cells(tmp_path):
    """lp-1st on digits at epsilon 1 and 4, seeds 0 and 1."""
    return load_suite(write_suite(tmp_path)).cells


def test_a_cell_costs_the_median_of_its_own_records_on_the_reference_host(cells):
    # Three copies of the cell (suites that share it); the Xeon's at its slowdown.
    costs = table(record(cells[0], 100.0), record(cells[0], 200.0),
                  record(cells[0], cell_costs.SLOWDOWN[XEON] * 150, XEON),
                  record(cells[1], 500.0))  # another seed: not used while its own exist
    assert costs.cost(cells[0]) == cell_costs.Cost(150.0, "their own records")


def test_without_its_own_records_a_cell_takes_its_configuration_then_its_method(
        cells, tmp_path):
    costs = table(record(cells[0], 100.0), record(cells[2], 40.0), record(cells[3], 60.0))
    # cells[1] is seed 1 of cells[0]'s configuration.
    assert costs.cost(cells[1]) == cell_costs.Cost(100.0, "their configuration's")
    other = load_suite(write_suite(tmp_path, extra=", mixup_alpha = 0.2")).cells[0]
    assert costs.cost(other) == cell_costs.Cost(60.0, "their method's on their dataset")
    smoke = load_suite("smoke").cells
    lp_on_mnist = dataclasses.replace(cells[0], dataset="mnist")
    assert costs.cost(lp_on_mnist).basis == "their method's"  # no sizes known
    # With the datasets' sizes: 0.1, 0.04 and 0.06 s an example on digits' 1,000.
    sized = table(record(cells[0], 100.0), record(cells[2], 40.0), record(cells[3], 60.0),
                  train_sizes={"digits": 1000, "mnist": 60000})
    assert sized.cost(lp_on_mnist) == cell_costs.Cost(0.06 * 60000,
                                                      "their method's per training example")
    dp_sgd = next(c for c in smoke if c.method == "dp-sgd" and not c.audit)
    assert costs.cost(dp_sgd) == cell_costs.Cost(60.0, "the archive's median cell")
    twin = dataclasses.replace(dp_sgd, audit=True)  # no audited twin in the table at all
    assert costs.cost(twin) == cell_costs.Cost(0.0, cell_costs.BASES[-1])


def test_records_that_say_nothing_of_a_cells_cost_are_left_out(cells):
    left_out = [record(cells[0], 1.0, status="failed"),
                record(cells[0], 1.0, kind="verification"),
                record(cells[0], 1.0, cpu="a host kind of unknown speed")]
    assert all(Timing.of(r) is None for r in left_out)
    assert table(*left_out, record(cells[0], 50.0)).cost(cells[0]).seconds == 50.0


def test_a_record_that_loaded_its_ssl_encoder_is_charged_its_training(cells):
    privacy = dataclasses.replace(runner.new_record(cells[0], "f", RunContext()).privacy,
                                  details={"encoder": {"train_seconds": 90.0}})
    loaded = record(cells[0], 30.0, privacy=privacy)
    trained = record(cells[0], 120.0, privacy=privacy)
    assert loaded.cold_wall_time_s == 120.0 and trained.cold_wall_time_s == 120.0


def test_the_archive_knows_every_quick_cell():
    costs = cell_costs.from_archive()
    found = [costs.cost(cell) for cell in load_suite("quick").cells]
    assert all(cost.basis not in cell_costs.BASES[-2:] and cost.seconds > 0
               for cost in found)
