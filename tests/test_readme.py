"""The README's example method runs as written and meets the method contract."""
import math
import re
import types
from pathlib import Path

import numpy as np

from benchmarks import datasets
from benchmarks.contract import _REGISTRY, Budget
from benchmarks.contract_checks import check_uncharged_data_has_no_influence, fit

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_method_registers_fits_and_charges_its_ledger():
    block = re.search(r"```python\n(# methods/.*?)```", README.read_text(), re.S).group(1)
    module = types.ModuleType("readme_example")
    try:
        exec(compile(block, "README.md", "exec"), module.__dict__)
        method = _REGISTRY["noisy-majority"]
        data = datasets.load("digits")
        fitted = method(Budget(1.0), seed=0).fit(data.train, data.num_classes)
        proba = fitted.predict_proba(data.test.x)
        assert proba.shape == (len(data.test), data.num_classes)
        np.testing.assert_allclose(proba.sum(1), 1)
        total = fitted.spent()
        assert (total.epsilon, total.delta, total.composition) == (1.0, 0.0, "pure")
        check_uncharged_data_has_no_influence(fit(method))
        assert math.isinf(method(Budget(math.inf)).fit(data.train, 10).spent().epsilon)
    finally:
        _REGISTRY.pop("noisy-majority", None)


def test_readme_tables_of_our_results_are_those_the_archive_gives():
    from reports import readme_tables

    text = README.read_text()
    shown = text.split(readme_tables.START, 1)[1].split(readme_tables.END, 1)[0]
    assert shown == readme_tables.section(), "run: python -m reports.readme_tables"
