"""The README's example method runs as written and meets the method contract."""
import math
import re
import types
from pathlib import Path

import numpy as np

from benchmarks import datasets
from benchmarks.contract import _REGISTRY, Budget

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_example_method_registers_and_fits():
    block = re.search(r"```python\n(# methods/.*?)```", README.read_text(), re.S).group(1)
    module = types.ModuleType("readme_example")
    try:
        exec(compile(block, "README.md", "exec"), module.__dict__)
        method = _REGISTRY["majority-vote"]
        assert method.skip_reason("image", Budget(1.0)) is not None  # non-private only
        data = datasets.load("digits")
        fitted = method(Budget(math.inf), seed=0).fit(data.train, data.num_classes)
        proba = fitted.predict_proba(data.test.x)
        assert proba.shape == (len(data.test), data.num_classes)
        np.testing.assert_allclose(proba.sum(1), 1)
    finally:
        _REGISTRY.pop("majority-vote", None)
