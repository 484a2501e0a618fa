import os
from pathlib import Path

import pytest

import benchmarks  # noqa: F401  (oneDNN on, as in every privboard run, before TensorFlow loads)

# Quiet TensorFlow's start-up noise in test output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@pytest.fixture(scope="session")
def smoke_results(tmp_path_factory) -> Path:
    """The smoke suite's records from one local run, shared by the tests that read them
    (read only: copy before changing anything)."""
    from benchmarks.cli import main

    results = tmp_path_factory.mktemp("smoke") / "results"
    assert main(["run", "--suite", "smoke", "--results", str(results)]) == 0
    return results
