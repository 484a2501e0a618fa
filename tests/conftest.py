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
# The longest groups (one to four minutes each) are handed out first, so that none is the
# last one running while the other worker has nothing left.
LONGEST_FIRST = ("smoke-suite", "test_ray_resilience", "test_method_contract", "test_ssgan",
                 "test_submit_dp_libraries", "test_pate")


# First: pytest-xdist reads the groups in a hook of its own, which must find them set.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items) -> None:
    groups = {}
    for item in items:
        module = item.module.__name__
        if module not in SPREAD_ONE_BY_ONE:
            groups[item] = "smoke-suite" if module in SMOKE_READERS else module
            item.add_marker(pytest.mark.xdist_group(groups[item]))

    def rank(item) -> int:
        group = groups.get(item)
        return LONGEST_FIRST.index(group) if group in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: the rest keeps its order


# Smoke cells that train a model the data folder caches (the SSL encoder, PATE's
# teachers, the ScatterNet features): the smoke fixture gives each a fresh worker
# process, as every run does, so what it writes to the cache is what any run trains.
CACHING = {"rr-ssl-prior", "lp-2st-ssl-prior", "pate-confident-gnmax", "pate-plus-plus",
           "dp-sgd-scatternet"}


@pytest.fixture(scope="session")
def smoke_results(tmp_path_factory) -> Path:
    """The smoke suite's records, shared by the tests that read them (read only: copy
    before changing anything). The cells of CACHING run in fresh worker processes, the
    others one after another in this process, the cheapest way here (no process to start
    per cell). The executors' records are compared with these: local workers in
    tests/test_smoke_suite.py, Ray in tests/test_ray_executor.py."""
    import dataclasses

    from benchmarks import datasets, runner
    from benchmarks.cli import main
    from benchmarks.suites import load_suite
    from benchmarks.worker_pool import WorkerPool

    results = tmp_path_factory.mktemp("smoke") / "results"
    smoke = load_suite("smoke")
    caching = dataclasses.replace(smoke, cells=tuple(c for c in smoke.cells
                                                     if c.method in CACHING))
    assert runner.run(caching, results, datasets.data_dir(), echo=lambda line: None,
                      executor=WorkerPool(2)) == 0
    assert main(["run", "--suite", "smoke", "--results", str(results), "--workers", "1"]) == 0
    return results
