"""What reaches a published site: seeds grouped by configuration identity (two settings
of the same cells never average into one number), and no private diagnostic."""
import json

import pandas as pd
import pytest

from benchmarks.cli import main
from benchmarks.records import read_records

# Any method's records are grouped alike: DP-ERM's train in well under a second.
MINI = """
name = "{name}"
description = "test"
[[block]]
datasets = ["breast-cancer"]
methods = ["dp-erm-objective"]
epsilons = [2]
seeds = [0, 1]
hparams = {{ regularization = {regularization} }}
"""

TUNED_DP_ERM = """
name = "tuned"
description = "test: DP-ERM with private tuning of Lambda"
[[block]]
datasets = ["breast-cancer"]
methods = ["dp-erm-objective", "dp-erm-output"]
epsilons = [1]
seeds = [0]
hparams = { tune_lambdas = [0.001, 0.01, 0.1] }
"""


def suite_file(tmp_path, name, text):
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return str(path)


@pytest.mark.integration  # runs cells and builds a site
def test_two_configurations_of_the_same_cells_are_shown_apart(tmp_path):
    results, site = str(tmp_path / "results"), tmp_path / "site"
    old = suite_file(tmp_path, "old", MINI.format(name="mini", regularization=0.001))
    new = suite_file(tmp_path, "new", MINI.format(name="mini", regularization=0.01))
    for suite in (old, new):
        assert main(["run", "--suite", suite, "--results", results, "--workers", "1"]) == 0
    assert len(list(read_records(tmp_path / "results"))) == 4

    # The second run of "mini" made its settings current; shown on request, the old
    # ones are a row of their own, not one cell of n = 4.
    assert main(["report", "--results", results, "--out", str(site), "--no-archive",
                 "--show-superseded"]) == 0
    rows = pd.read_csv(site / "rows.csv", dtype={"cell": str})
    ours = rows[(rows.suite == "mini") & (rows.method == "dp-erm-objective")]
    assert len(ours) == 2 and list(ours.n) == [2, 2]
    assert ours.cell.nunique() == 2
    assert sorted(ours.superseded) == [False, True]

    # By default the old runs are superseded: hidden and counted.
    assert main(["report", "--results", results, "--out", str(site), "--no-archive"]) == 0
    rows = pd.read_csv(site / "rows.csv", dtype={"cell": str})
    assert list(rows[rows.suite == "mini"].n) == [2]
    assert "2 records of 1 configuration" in (site / "index.html").read_text()


def test_a_dp_erm_site_with_private_tuning_publishes_no_diagnostic(tmp_path):
    results, site = tmp_path / "results", tmp_path / "site"
    suite = suite_file(tmp_path, "tuned", TUNED_DP_ERM)
    assert main(["run", "--suite", suite, "--results", str(results), "--workers", "1"]) == 0
    assert main(["report", "--results", str(results), "--out", str(site),
                 "--no-archive"]) == 0
    secrets = {"diagnostics"}
    for record in read_records(results):
        diagnostics = record.diagnostics
        assert {"held_out_mistakes", "noise_norms", "gradient_norm"} <= set(diagnostics)
        secrets |= set(diagnostics)
        secrets |= {json.dumps(value) for value in diagnostics["noise_norms"]}
        secrets.add(json.dumps(diagnostics["gradient_norm"]))
    published = [path for path in site.rglob("*") if path.is_file() and path.suffix != ".png"]
    assert any(path.parent.name == "records" for path in published)  # raw copies exist
    for path in published:
        text = path.read_text()
        for secret in secrets:
            assert secret not in text, (path.relative_to(site), secret)
