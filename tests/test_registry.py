import pkgutil
import subprocess
import sys
from importlib.metadata import EntryPoint

import pytest

import methods
from benchmarks import registry
from benchmarks.contract import _REGISTRY, Budget, Method, PrivacyNotion
from benchmarks.errors import UnknownName
from benchmarks.registry import all_methods, get_method


def test_every_method_module_is_imported_by_discovery():
    registry.discover()
    for info in pkgutil.iter_modules(methods.__path__, "methods."):
        if not info.ispkg:
            assert info.name in sys.modules, f"{info.name} was not imported"


def test_the_papers_methods_are_registered():
    assert {"lp-1st", "lp-2st", "lp-3st", "non-private"} <= set(all_methods())


def test_duplicate_name_raises():
    with pytest.raises(ValueError, match="registered twice"):
        class Again(Method):  # noqa: F841
            name = "lp-1st"
            paper = "x"
            notion = PrivacyNotion("labels", "substitution", "pure", "x")


def test_unknown_name_suggests_the_closest():
    with pytest.raises(UnknownName, match="did you mean 'lp-2st'"):
        get_method("lp-2sT")


def test_entry_point_registers_a_third_party_method(monkeypatch, tmp_path):
    (tmp_path / "thirdparty_method.py").write_text(
        "from benchmarks.contract import Method, NON_PRIVATE\n"
        "class Mine(Method):\n"
        "    name = 'thirdparty-demo'\n"
        "    paper = 'none'\n"
        "    notion = NON_PRIVATE\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = EntryPoint("demo", "thirdparty_method", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points",
                        lambda group: [ep] if group == registry.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(registry, "_discovered", False)
    try:
        assert "thirdparty-demo" in all_methods()
    finally:  # the demo must not leak into other tests' view of the registry
        _REGISTRY.pop("thirdparty-demo", None)


def test_unknown_hyperparameter_raises():
    with pytest.raises(ValueError, match="unknown hyperparameter"):
        get_method("lp-1st")(Budget(1.0), seed=0, epochz=3)


@pytest.mark.parametrize("eps", [0, -1, float("nan")])
def test_bad_epsilon_raises(eps):
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        Budget(eps)


def _imports_tensorflow(code: str) -> bool:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\n"
                          "print('tensorflow' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1] == "True"


def test_listing_and_help_do_not_import_tensorflow():
    assert not _imports_tensorflow(
        "from benchmarks.cli import main\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    main(['list'])\n"
        "    try: main(['run', '--help'])\n"
        "    except SystemExit: pass")


def test_the_model_names_checked_without_tensorflow_are_the_builders():
    from methods import keras_classifier, pate
    from methods.nn import models

    assert set(keras_classifier.MODELS) == set(models.BUILDERS)
    assert set(pate.TEACHER_MODELS) <= set(models.BUILDERS)
