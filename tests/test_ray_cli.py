"""``--engine`` on the CLI without Ray (these run whether or not Ray is installed), and the lake's rows of no
run left alone by a re-run (diag.lake, which both engines commit through)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from diag.cli import main
from diag.lake import open_lake
from tests.conftest import FIXTURES

PLOG = FIXTURES / "cann_log" / "two_ranks" / "rank0" / "debug" / "plog"


def diag(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_engine_ray_without_ray_says_how_to_install_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as where it is absent
    code, out, err = diag(capsys, "ingest", str(PLOG), "--lake", str(tmp_path / "lake"), "--engine", "ray")
    assert code == 2 and out == ""
    assert err == "diag: error: --engine ray needs Ray, an optional extra: pip install -e '.[ray]'\n"
    assert not (tmp_path / "lake").exists()  # refused before anything was written


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("ingest", str(PLOG), "--engine", "ray"),
            "--engine ray writes a lake that every worker sees: give --lake DIR",
        ),
        (("ingest", str(PLOG), "--engine", "spark"), "--engine spark: unknown engine (local or ray)"),
        (
            ("ingest", str(PLOG), "--address", "auto"),
            "--address names a Ray cluster: give it with --engine ray",
        ),
    ],
)
def test_engine_usage_errors_are_one_line_exit_2(
    args: tuple[str, ...],
    message: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)  # the default database would be created here
    code, out, err = diag(capsys, *args)
    assert (code, out, err) == (2, "", f"diag: error: {message}\n")
    assert not (tmp_path / "diag.duckdb").exists()


def test_cluster_on_ray_over_a_database_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "x.duckdb"
    assert main(["ingest", str(PLOG), "--db", str(db)]) == 0
    code, out, err = diag(capsys, "cluster", "--db", str(db), "--engine", "ray")
    assert (code, out, err) == (
        2,
        "",
        "diag: error: --engine ray reads a lake that every worker sees: give --lake DIR\n",
    )


def test_a_lake_reingest_of_unchanged_files_leaves_the_rows_of_no_run_alone(tmp_path: Path) -> None:
    """A log of no run lives in the run-less partition: an ingest that changes none of its files keeps it."""
    lake = tmp_path / "lake"
    assert main(["ingest", str(PLOG), "--lake", str(lake)]) == 0
    (part,) = lake.glob("log_records/*/run_id=__HIVE_DEFAULT_PARTITION__/*.parquet")
    before = part.stat().st_mtime_ns
    assert main(["ingest", str(PLOG), "--lake", str(lake)]) == 0
    assert [p.stat().st_mtime_ns for p in lake.glob("log_records/*/*/*.parquet")] == [before]


def test_a_lake_reingest_keeps_a_job_whose_capture_windows_are_only_in_the_lake(tmp_path: Path) -> None:
    """A cluster job whose runs' capture windows come from comm_ops alone (no trace): a re-ingest that changes
    nothing regroups it with those windows read from the lake, not from the (empty) staging rows — before, it
    split the job into one job per rank, and `diag cluster` had nothing to compare."""
    from sample_traces.generate_cluster import main as generate_cluster

    job, lake = tmp_path / "job", tmp_path / "lake"
    assert (
        generate_cluster([str(job), "--ranks", "4", "--steps", "2", "--tp", "2", "--slow-link", "1", "3"])
        == 0
    )
    for _ in range(2):
        assert main(["ingest", str(job), "--lake", str(lake)]) == 0
        with open_lake(lake) as store:
            assert store.con.execute("SELECT count(*), count(DISTINCT job_id) FROM runs").fetchall() == [
                (4, 1)
            ]
