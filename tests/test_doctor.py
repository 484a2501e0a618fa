"""`privboard doctor` names the stack's versions, the GPUs, the data folder and the
datasets that are ready, verified."""
from importlib import metadata

import pytest

from benchmarks.cli import main


def test_doctor_reports_versions_gpus_data_folder_and_verified_datasets(tmp_path, capsys):
    (tmp_path / "cifar10").mkdir()
    (tmp_path / "cifar10" / "cifar-10-python.tar.gz").write_bytes(b"not a tarball")
    assert main(["doctor", "--data", str(tmp_path)]) == 0
    rows = {line[:20].strip(): line[21:] for line in capsys.readouterr().out.splitlines()}
    for package in ("tensorflow", "keras", "tensorflow-privacy"):
        assert rows[package] == metadata.version(package)
    assert rows["python"].startswith("3.11.")
    assert rows["gpu"].startswith(("/physical_device:GPU:0: ", "none ("))
    assert rows["data folder"] == str(tmp_path)
    assert "digits" in rows["datasets ready"].split(", ")
    assert "md5 mismatch" in rows["cifar10"]


def test_doctor_has_help(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["doctor", "--help"])
    assert exit_.value.code == 0 and "usage: privboard doctor" in capsys.readouterr().out
