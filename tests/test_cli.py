"""Every command has --help, and the same bad input gives one line and exit code 2 from
every command."""
import pytest

from benchmarks.cli import main, parser

COMMANDS = [["list"], ["run"], ["status"], ["report"], ["data"], ["privacy"],
            ["privacy", "dp-sgd"], ["privacy", "pate"], ["audit"], ["audit", "mechanism"]]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    assert "usage: privboard" in capsys.readouterr().out


def test_help_lists_every_command():
    text = parser().format_help()
    for command in ("list", "run", "status", "report", "data", "privacy", "audit"):
        assert command in text


@pytest.mark.parametrize("argv, message", [
    (["run", "--suite", "quik"], "did you mean 'quick'"),
    (["status", "--suite", "quik"], "did you mean 'quick'"),
    (["report", "--results", "/nonexistent/results"], "does not exist"),
    (["privacy", "dp-sgd", "--epsilon", "nan", "--delta", "1e-5", "--dataset-size", "1000",
      "--batch-size", "10", "--epochs", "1"], "epsilon must be > 0"),
    (["privacy", "dp-sgd", "--epsilon", "0", "--delta", "1e-5", "--dataset-size", "1000",
      "--batch-size", "10", "--epochs", "1"], "epsilon must be > 0"),
    (["privacy", "pate", "--votes", "/nonexistent.npy", "--sigma2", "40", "--delta", "1e-5"],
     "does not exist"),
    (["audit", "mechanism", "rr-with-priors", "--epsilon", "1"], "did you mean"),
    (["audit", "mechanism", "rr-with-prior", "--epsilon", "nan"], "epsilon"),
    (["run", "--suite", "smoke", "--cells", "0123456789abcdef0123"], "--cells takes cell"),
])
def test_bad_input_is_one_line_and_exit_code_2_everywhere(argv, message, capsys):
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert message in error and len(error.splitlines()) == 1
