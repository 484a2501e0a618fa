"""Suites on Ray: records equal to the local executor's with default flags, a suite
started locally finished on Ray, and bad executor options refused. A killed driver and a
dying worker are tests/test_ray_resilience.py's."""
from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys

import pytest

from benchmarks import datasets, runner
from benchmarks.cli import main
from benchmarks.ray_executor import RayExecutor
from benchmarks.suites import load_suite
from test_smoke_suite import comparable

pytest.importorskip("ray")


# What a Ray worker could do otherwise than a local one: the numerics pins of TensorFlow
# (DP-SGD) and of numpy (ScatterNet's features, computed by kymatio), and a model the data
# folder caches (those features: the SSL encoder and PATE's teachers, the other readers
# in tests/conftest.py's CACHING, take the same path). The SSL-prior cell is the one
# started locally. Every other smoke cell takes one of these paths; each cell costs a
# fresh Ray worker, two minutes for four of them while the other pytest worker trains.
ON_RAY = {"rr-ssl-prior", "dp-sgd", "dp-sgd-scatternet"}


@pytest.mark.integration
def test_the_smoke_suite_on_ray_gives_the_local_records_bit_for_bit(tmp_path,
                                                                   smoke_results):
    """Ray with its default flags against the local records (the smoke fixture's: most
    cells in one process, those that cache a model in fresh ones): a suite started
    locally (its first cell's record) is finished on Ray, which leaves that record as it
    was and trains the other cells to the local records' bits, metric for metric."""
    on_ray = tmp_path / "ray"
    smoke = load_suite("smoke")
    cells = [c for c in smoke.cells if c.method in ON_RAY and not c.skip]
    suite = dataclasses.replace(smoke, cells=tuple(cells))
    started = f"{cells[0].cell_id}.json"
    on_ray.mkdir()
    shutil.copy(smoke_results / started, on_ray / started)
    assert runner.run(suite, on_ray, datasets.data_dir(), echo=lambda line: None,
                      executor=RayExecutor()) == 0
    expected = {name: record for name, record in comparable(smoke_results).items()
                if name in {f"{c.cell_id}.json" for c in cells}}
    assert len(expected) == len(cells) >= len(ON_RAY)
    assert comparable(on_ray) == expected
    assert (on_ray / started).read_bytes() == (smoke_results / started).read_bytes()


@pytest.mark.parametrize("argv, message", [
    (["--address", "localhost:6379"], "--address needs --executor ray"),
    (["--executor", "ray", "--cpus-per-cell", "0"], "--cpus-per-cell must be a number > 0"),
    (["--executor", "ray", "--gpus-per-cell", "nan"], "--gpus-per-cell must be a number >= 0"),
    (["--executor", "ray", "--gpus-per-cell", "0.00001"], "Ray refuses the resources"),
    (["--executor", "ray", "--max-retries", "-1"], "--max-retries must be >= 0"),
    (["--executor", "ray", "--address", "127.0.0.1:1"],
     "cannot join the Ray cluster at 127.0.0.1:1: Connection refused"),
    (["--workers", "0"], "--workers must be >= 1, got 0"),
    (["--workers", "2", "--executor", "ray"], "--workers needs --executor local"),
    (["--workers", "1", "--max-retries", "2"], "--max-retries needs --workers 2 or more"),
    (["--workers", "2", "--max-retries", "-1"], "--max-retries must be >= 0"),
])
def test_bad_executor_options_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    results = tmp_path / "results"
    assert main(["run", "--suite", "smoke", "--results", str(results), *argv]) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1
    assert not results.exists()


def test_listing_status_and_help_import_neither_tensorflow_nor_ray(tmp_path):
    code = ("import contextlib, io, sys\n"
            "from benchmarks.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['list'])\n"
            f"    main(['status', '--suite', 'smoke', '--results', {str(tmp_path)!r}])\n"
            "    try: main(['run', '--help'])\n"
            "    except SystemExit: pass\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'ray'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
