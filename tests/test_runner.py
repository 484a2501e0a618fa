"""The runner resumes, never duplicates or loses a finished record, and records
failures with their error."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from benchmarks import runner
from benchmarks.cli import main
from benchmarks.numerics import NUMERICS_VARIABLES
from benchmarks.privacy import LABEL_DP_PURE
from benchmarks.records import CATALOGUE, read_records
from benchmarks.suites import SuiteError, load_suite

SUITE = """
name = "mini"
description = "test"
[[block]]
datasets = ["digits"]
methods = ["lp-1st"]
epsilons = [1, 4]
seeds = [0, 1]
hparams = {{ epochs = 1, batch_size = 128{extra} }}
"""


# The runner's behaviour (records, failures, audited twins) in this process, one cell
# after another: a fresh worker process per cell is the executors' to test
# (tests/test_worker_pool.py, tests/test_smoke_suite.py, tests/test_ray_executor.py).
IN_PROCESS = ["--workers", "1"]


def write_suite(tmp_path: Path, extra: str = "") -> str:
    path = tmp_path / "mini.toml"
    path.write_text(SUITE.format(extra=extra))
    return str(path)


def test_records_carry_metrics_privacy_and_provenance(tmp_path):
    results = tmp_path / "results"
    assert main(["run", "--suite", write_suite(tmp_path), "--results", str(results),
                 *IN_PROCESS]) == 0
    records = list(read_records(results))
    assert len(records) == 4
    r = records[0]
    assert r.ok and 0 <= r.metrics["accuracy_pct"] <= 100
    assert r.privacy.notion == LABEL_DP_PURE
    assert r.privacy.epsilon == r.epsilon and r.privacy.composition == "pure"
    [entry] = r.privacy.ledger  # LP-1ST: one RRWithPrior charge on every label
    assert entry["mechanism"] == "RRWithPrior" and entry["touches"]["field"] == "labels"
    assert len(r.provenance["git_commit"]) >= 7 or r.provenance["git_commit"] == "unknown"
    assert {"packages", "device", "git_dirty"} <= set(r.provenance)
    assert r.dataset_fingerprint and r.wall_time_s > 0 and r.hparams["epochs"] == 1
    assert r.datasets_used == {"digits": r.dataset_fingerprint}
    # Seeds share a configuration identity; the cell identity adds the seed.
    by_epsilon = {}
    for record in records:
        by_epsilon.setdefault(record.epsilon, set()).add(record.config_id)
    assert all(len(ids) == 1 for ids in by_epsilon.values()) and len(by_epsilon) == 2
    assert len({record.cell_id for record in records}) == 4
    # A second run finds everything done and writes nothing.
    before = sorted(p.name for p in results.iterdir())
    assert main(["run", "--suite", write_suite(tmp_path), "--results", str(results),
                 *IN_PROCESS]) == 0
    assert sorted(p.name for p in results.iterdir()) == before


FAILING_SUITE = """
name = "failing"
description = "test: delta >= 1/N makes DP-SGD refuse at fit time"
[[block]]
datasets = ["digits"]
methods = ["dp-sgd"]
epsilons = [1, 4]
delta = 0.01
seeds = [0, 1]
"""


def test_failed_cell_is_recorded_shown_and_retried_only_when_asked(tmp_path, capsys):
    results = tmp_path / "results"
    suite = tmp_path / "failing.toml"
    suite.write_text(FAILING_SUITE)
    suite = str(suite)
    assert main(["run", "--suite", suite, "--results", str(results), *IN_PROCESS]) == 1
    failed = [r for r in read_records(results)]
    assert len(failed) == 4 and all(not r.ok for r in failed)
    assert "1/N" in failed[0].error
    # A failed record still says what its number would have meant.
    assert failed[0].privacy.notion.protects.value == "inputs and labels"
    assert "Traceback" in failed[0].diagnostics["traceback"]
    main(["status", "--suite", suite, "--results", str(results)])
    assert "4 failed" in capsys.readouterr().out
    states = [s for _, s in runner.plan(load_suite(suite), results, tmp_path)]
    assert states == ["failed"] * 4
    # Not retried unless asked; retried (and still failing) when asked.
    assert main(["run", "--suite", suite, "--results", str(results), *IN_PROCESS]) == 0
    assert main(["run", "--suite", suite, "--results", str(results), "--retry-failed",
                 *IN_PROCESS]) == 1


def finished(results: Path) -> dict[str, bytes]:
    """Whole records by file name; temp files of an interrupted write and the catalogue
    beside the records do not count."""
    return {p.name: p.read_bytes() for p in results.glob("*.json")
            if not p.name.startswith(".tmp-") and p.name != CATALOGUE} if results.exists() else {}


@pytest.mark.integration
def test_kill_minus_nine_then_resume_loses_and_duplicates_nothing(tmp_path):
    results = tmp_path / "results"
    suite = write_suite(tmp_path)
    # The command killed with its cell (worker processes killed: tests/test_worker_pool.py).
    cmd = [sys.executable, "-m", "benchmarks.cli", "run", "--suite", suite,
           "--results", str(results), *IN_PROCESS]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and not finished(results):
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    first = finished(results)
    assert 1 <= len(first) <= 4
    assert main(cmd[3:]) == 0  # resumed in this process
    after = finished(results)
    assert len(after) == 4
    assert all(after[name] == data for name, data in first.items())  # untouched
    ids = [json.loads(data)["cell_id"] for data in after.values()]
    assert len(set(ids)) == 4


def test_a_typo_in_a_setting_stops_the_suite_before_any_cell(tmp_path, capsys):
    suite = write_suite(tmp_path, extra=', model = "no-such-model"')
    assert main(["run", "--suite", suite, "--results", str(tmp_path / "results")]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "unknown model 'no-such-model'" in error
    assert not (tmp_path / "results").exists()


def test_run_says_which_cells_it_skips_and_why(tmp_path, capsys):
    """A method runs on the tasks its class names (``tasks``): the others' cells are
    skipped, and said so, not silently."""
    suite = tmp_path / "tasks.toml"
    suite.write_text('name = "tasks"\n[[block]]\ndatasets = ["digits"]\n'
                     'methods = ["dp-erm-objective"]\nepsilons = [1, 2]\nseeds = [0]\n')
    assert main(["run", "--suite", str(suite), "--results", str(tmp_path / "results"),
                 "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert "skipping 2 cells: dp-erm-objective handles tabular data, not image" in out
    assert "suite tasks: 2 cells, 0 done, 0 to run" in out


@pytest.mark.parametrize("argv, message", [
    (["run", "--suite", "quik"], "did you mean 'quick'"),
    (["run", "--suite", "BAD.toml"], "does not exist"),
])
def test_bad_input_is_one_clear_line_and_exit_2(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("field, value, message", [
    ("epsilons", "[0]", "epsilon must be > 0"),
    ("epsilons", "[nan]", "epsilon must be > 0"),
    ("methods", '["lp-1sst"]', "did you mean 'lp-1st'"),
    ("datasets", '["mnistt"]', "did you mean 'mnist'"),
])
def test_bad_suite_values_stop_before_running(tmp_path, field, value, message):
    text = SUITE.format(extra="")
    lines = [f"{field} = {value}" if line.startswith(f"{field} =") else line
             for line in text.splitlines()]
    path = tmp_path / "bad.toml"
    path.write_text("\n".join(lines))
    with pytest.raises((SuiteError, LookupError), match=message.replace("(", r"\(")):
        load_suite(str(path))


def test_paper_dry_run_lists_cells_and_names_missing_datasets(tmp_path, capsys):
    assert main(["run", "--suite", "paper", "--dry-run", "--data", str(tmp_path),
                 "--results", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    for name in ("cifar10", "cifar100", "kmnist", "movielens-1m"):
        assert f"missing dataset {name}:" in out
    assert "resnet18_v2" not in out  # hyperparameters stay in the records, not the listing
    assert not (tmp_path / "results").exists()  # a dry run writes nothing


AUDITED = """
name = "audited"
description = "test: a block with its audited twins"
[[block]]
datasets = ["breast-cancer"]
methods = ["dp-erm-objective"]
epsilons = [1]
seeds = [0, 1]
audit = true
"""


def test_an_audited_block_runs_one_twin_per_configuration(tmp_path, capsys):
    suite = tmp_path / "audited.toml"
    suite.write_text(AUDITED)
    results = tmp_path / "results"
    assert main(["run", "--suite", str(suite), "--results", str(results), *IN_PROCESS]) == 0
    records = sorted(read_records(results), key=lambda r: r.kind)
    assert [r.kind for r in records] == ["audit", "run", "run"]
    twin, runs = records[0], records[1:]
    assert twin.config_id == runs[0].config_id == runs[1].config_id  # linked
    assert twin.cell_id not in {r.cell_id for r in runs} and twin.seed == 0
    assert twin.ok and twin.metrics == {} and twin.audit["canaries"] >= 2
    assert 0 <= twin.audit["epsilon_lower_bound"] <= twin.audit["ceiling"]
    assert twin.privacy.epsilon <= 1.0  # the audited run's own ledger covers the budget
    assert main(["status", "--suite", str(suite), "--results", str(results)]) == 0
    assert "3 done" in capsys.readouterr().out


def test_audit_must_be_true_or_false(tmp_path):
    suite = tmp_path / "bad.toml"
    suite.write_text(AUDITED.replace("audit = true", 'audit = "yes"'))
    with pytest.raises(SuiteError, match="audit must be true or false"):
        load_suite(str(suite))


def test_a_cell_two_blocks_name_is_planned_once(tmp_path):
    """Naming a cell again to audit it adds the audited twin, not a second run."""
    block = ('[[block]]\ndatasets = ["digits"]\nmethods = ["lp-1st"]\nepsilons = [2]\n'
             'seeds = [0, 1]\nhparams = {{ epochs = 1 }}\n{audit}\n')
    path = tmp_path / "twice.toml"
    path.write_text(block.format(audit="") + block.format(audit="audit = true"))
    cells = load_suite(str(path)).cells
    assert [(c.seed, c.audit) for c in cells] == [(0, False), (1, False), (0, True)]
    assert len({c.cell_id for c in cells}) == 3


def test_an_audited_twin_reports_the_privacy_of_the_run_it_audited(tmp_path):
    """LP-MST's privacy details exist only after training: the twin's record takes them
    from the audited training itself."""
    suite = tmp_path / "audited-lp.toml"
    suite.write_text(AUDITED.replace('["breast-cancer"]', '["digits"]')
                     .replace('["dp-erm-objective"]', '["lp-1st"]')
                     .replace("seeds = [0, 1]", "seeds = [0]\nhparams = { epochs = 1 }"))
    results = tmp_path / "results"
    assert main(["run", "--suite", str(suite), "--results", str(results), *IN_PROCESS]) == 0
    twin = next(r for r in read_records(results) if r.kind == "audit")
    assert twin.ok, twin.error
    assert twin.privacy.details["stages"] == 1 and len(twin.privacy.details["stage_k_bar"]) == 1


def test_seeds_replace_every_blocks_seeds_and_audited_twins_take_the_first(tmp_path):
    path = tmp_path / "audited.toml"
    path.write_text(AUDITED)
    cells = load_suite(str(path), seeds=[2, 5, 7]).cells
    assert [(c.seed, c.audit) for c in cells] == [(2, False), (5, False), (7, False), (2, True)]
    # Seeds never enter the configuration: every seed is the same configuration.
    assert len({c.config_id for c in cells}) == 1
    assert {c.cell_id for c in load_suite(str(path)).cells} < {c.cell_id for c in load_suite(
        str(path), seeds=[0, 1, 2]).cells}


@pytest.mark.parametrize("seeds", ["0,a", "1,1", "-1", ""])
def test_bad_seeds_are_one_line_and_exit_2(tmp_path, capsys, seeds):
    assert main(["status", "--suite", "smoke", "--seeds", seeds,
                 "--results", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.integration
def test_a_cell_computes_on_one_thread_by_default_and_its_record_says_so(tmp_path):
    """Results depend on the thread count bit for bit, so every cell computes on one
    (the archive's) unless told otherwise, and a re-run needs the count."""
    results = tmp_path / "results"
    one_cell = tmp_path / "one.toml"  # every record says it: one cell shows it
    one_cell.write_text(SUITE.format(extra="").replace("epsilons = [1, 4]", "epsilons = [1]")
                        .replace("seeds = [0, 1]", "seeds = [0]"))
    env = {k: v for k, v in os.environ.items() if k not in NUMERICS_VARIABLES}
    # The installed command, run from another folder, as a user runs it: there the
    # Opacus extra's own top-level `benchmarks` package comes first on the path.
    command = Path(sys.executable).parent / "privboard"
    subprocess.run([str(command), "run", "--suite", str(one_cell), "--results", str(results)],
                   env=env, cwd=tmp_path, check=True, capture_output=True)
    provenance = [r.provenance for r in read_records(results)]
    assert len(provenance) == 1 and {p["threads"] for p in provenance} == {1}
    assert provenance[0]["onednn"] and provenance[0]["onednn_isa"] == "AVX2"
    assert all(p["cpu"] and p["cores"] >= 1 for p in provenance)


def _run_one(method: str, dataset: str, epsilon: float, **hparams):
    from benchmarks import datasets
    from benchmarks.context import RunContext
    from benchmarks.suites import Cell

    cell = Cell("test", dataset, method, epsilon, 0.0, 0, hparams)
    return runner.run_cell(cell, datasets.load(dataset), RunContext(seed=0))


def test_a_ledger_over_its_budget_fails_the_cell_with_one_line():
    """A method that charges more than its budget (here 1.5 epsilon) never gets an ok
    record, whatever its metrics."""
    from benchmarks.contract import _REGISTRY, Method
    from benchmarks.privacy import PureEpsilon, labels

    class Overcharging(Method):
        name = "test-overcharging"
        paper = "test stand-in"
        notion = LABEL_DP_PURE

        def fit(self, train, num_classes):
            self.ctx.ledger.charge("test release", labels(), PureEpsilon(1.5 * self.budget.epsilon))
            self.num_classes = num_classes
            return self

        def predict_proba(self, x):
            return np.full((len(x), self.num_classes), 1 / self.num_classes)

    try:
        record = _run_one("test-overcharging", "digits", 1.0)
    finally:
        _REGISTRY.pop("test-overcharging", None)
    assert not record.ok and record.metrics == {}
    assert record.error.startswith("BudgetExceeded: the ledger's total (epsilon 1.5")
    assert "\n" not in record.error


def test_a_failure_inside_a_method_publishes_a_generic_line_and_keeps_the_detail_private():
    """The solver's trace is a statistic of the private rows: the record's public error
    line does not quote it, its diagnostics do."""
    record = _run_one("dp-erm-objective", "breast-cancer", 1.0, gradient_tolerance=1e-300)
    assert not record.ok
    assert record.error == ("PrivateFailure: the solver did not converge to the exact "
                            "minimiser the guarantee assumes")
    assert "gradient norm" in record.diagnostics["error"]
    public = json.dumps(record.public_dict())
    assert "gradient norm" not in public and "L-BFGS" not in public
