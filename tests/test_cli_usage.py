"""A typo or a bad option on the command line is a usage message and exit code 2, never a traceback."""

from __future__ import annotations

import pytest

from diag import __version__
from diag.cli import main


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["nosuchcmd"], "No such command 'nosuchcmd'"),
        (["runs", "--nosuch"], "No such option: --nosuch"),
        (["findings", "4"], "Got unexpected extra argument"),  # a run id given without --run
        (["logs", "--run", "abc"], "Invalid value for '--run'"),
        (["report", "--episode", "abc"], "Invalid value for '--episode'"),
    ],
)
def test_usage_error_is_one_message_and_exit_2(argv, said, capsys, tmp_path):
    # typer raises the exceptions of its vendored click copy, which an isinstance check against click misses
    assert main([*argv, "--db", str(tmp_path / "db.duckdb")]) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("Error:")] == [
        f"Error: {err.split('Error: ')[1].strip()}"
    ]


def test_version_is_printed(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"diag {__version__}"
