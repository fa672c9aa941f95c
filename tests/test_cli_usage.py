"""A typo or a bad option on the command line is one line ``diag: error: …`` on stderr (then at most a hint where
the help is) and exit code 2, never a traceback or click's four-line usage block."""

from __future__ import annotations

import pytest

from diag import __version__
from diag.cli import main
from tests.conftest import run_cli


@pytest.mark.parametrize(
    ("argv", "error", "hint"),
    [
        (["nosuchcmd"], "No such command 'nosuchcmd'.", "Try 'diag --help' for help."),
        (["rnus"], "No such command 'rnus'. Did you mean 'runs'?", "Try 'diag --help' for help."),
        (["runs", "--nosuch"], "No such option: --nosuch", "Try 'diag runs --help' for help."),
        (
            ["runs", "--jsn"],
            "No such option: --jsn (Possible options: --json)",
            "Try 'diag runs --help' for help.",
        ),
        (["findings", "4"], "Got unexpected extra argument(s) (4)", "Try 'diag findings --help' for help."),
        (
            ["logs", "--run", "abc"],
            "Invalid value for '--run': Input should be a valid integer, unable to parse string as an integer",
            "Try 'diag logs --help' for help.",
        ),
        (
            ["report", "--episode", "abc"],
            "Invalid value for '--episode': Input should be a valid integer, unable to parse string as an integer",
            "Try 'diag report --help' for help.",
        ),
    ],
)
def test_usage_error_is_one_line_and_exit_2(argv, error, hint, capsys, tmp_path):
    # typer raises the exceptions of its vendored click copy, which an isinstance check against click misses
    assert main([*argv, "--db", str(tmp_path / "db.duckdb")]) == 2
    out, err = capsys.readouterr()
    assert err.splitlines() == [f"diag: error: {error}", hint]
    assert out == ""


def test_option_without_its_value_is_one_line():
    # the parser raises this one before it knows the command: the hint names the top-level help
    proc = run_cli("report", "--format")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "diag: error: Option '--format' requires an argument.",
        "Try 'diag --help' for help.",
    ]


def test_no_arguments_prints_the_help_and_exits_2(capsys):
    # what click does for a group called without a command: the help, exit 2; nothing on stderr
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert "Usage: diag [OPTIONS] COMMAND [ARGS]..." in out
    assert all(f" {c} " in out for c in ("ingest", "runs", "breakdown", "logs", "report", "sql"))
    assert err == ""


def test_version_is_printed(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"diag {__version__}"


def test_a_bug_is_one_line_with_how_to_see_the_traceback(capsys, monkeypatch, tmp_path):
    import diag.commands.runs as runs_command

    def broken(store):  # noqa: ANN001, ANN202
        raise KeyError("duration_ns")

    monkeypatch.setattr(runs_command, "list_runs", broken)
    monkeypatch.delenv("DIAG_DEBUG", raising=False)
    db = str(tmp_path / "db.duckdb")
    from diag.store import Store

    Store(db).close()
    assert main(["runs", "--db", db]) == 70
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        "diag: internal error: KeyError: 'duration_ns' (set DIAG_DEBUG=1 for the traceback)"
    ]
    monkeypatch.setenv("DIAG_DEBUG", "1")
    with pytest.raises(KeyError):
        main(["runs", "--db", db])
