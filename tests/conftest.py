import os
from pathlib import Path

import pytest

import benchmarks  # noqa: F401  (oneDNN on, as in every privboard run, before TensorFlow loads)

# Quiet TensorFlow's start-up noise in test output.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# Under pytest-xdist each worker computes on one thread, as cells do (numpy's BLAS and
# oneDNN read it when they load: benchmarks/__init__.py), TensorFlow's own pools too:
# two workers of two threads each on two cores spin-wait on each other, which made whole
# modules three times slower than alone.
if os.environ.get("PYTEST_XDIST_WORKER"):
    from benchmarks.tf_runtime import pin_threads

    pin_threads()

# `make test` runs on two workers (pytest-xdist, --dist loadgroup). A module's tests stay
# on one worker, so its shared fixtures are built once; the modules that read the smoke
# suite's records share a worker with them. The paper suite's settings, independent tiny
# runs that take a third of the time, are spread one by one.
SPREAD_ONE_BY_ONE = {"test_paper_suite_settings"}
SMOKE_READERS = {"test_private_values", "test_ray_executor", "test_smoke_suite"}


# First: pytest-xdist reads the groups in a hook of its own, which must find them set.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items) -> None:
    for item in items:
        module = item.module.__name__
        if module not in SPREAD_ONE_BY_ONE:
            group = "smoke-suite" if module in SMOKE_READERS else module
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def smoke_results(tmp_path_factory) -> Path:
    """The smoke suite's records from one local run, shared by the tests that read them
    (read only: copy before changing anything)."""
    from benchmarks.cli import main

    results = tmp_path_factory.mktemp("smoke") / "results"
    assert main(["run", "--suite", "smoke", "--results", str(results)]) == 0
    return results
