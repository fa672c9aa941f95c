"""The Parquet lake (diag.lake): the same rows as a DuckDB file, the same answers, atomic partitions, the CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from diag.cli import main
from diag.lake import LakeWriter, open_lake
from diag.schema import TABLES
from sample_traces.generate import main as generate
from tests.conftest import open_page, run_cli

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def diag(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def table_rows(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple]]:
    """Every table's rows, sorted; the time a row was stored (created_at …) is when, not what."""
    rows = {}
    for table in TABLES:
        cols = [f'"{c.name}"' for c in table.columns if not c.type.startswith("TIMESTAMP")]
        rows[table.name] = con.execute(
            f'SELECT {", ".join(cols)} FROM "{table.name}" ORDER BY ALL'
        ).fetchall()
    rows["device_tasks"] = con.execute("SELECT * FROM device_tasks ORDER BY ALL").fetchall()  # the view
    return rows


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("lakejob")
    assert generate([str(root / "job"), "--ranks", "4", "--steps", "2", "--layers", "2"]) == 0
    return root


def ingest_both(job: Path, where: Path) -> tuple[Path, Path, Path]:
    """The generated 4-rank job ingested into a lake and into a DuckDB file (a copy of the job: tests edit it)."""
    src = where / "job"
    shutil.copytree(job / "job", src)
    lake, db = where / "lake", where / "x.duckdb"
    assert main(["ingest", str(src), "--lake", str(lake)]) == 0
    assert main(["ingest", str(src), "--db", str(db)]) == 0
    return src, lake, db


@pytest.fixture(scope="module")
def both(job: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """For the tests that only read (or re-ingest unchanged files)."""
    return ingest_both(job, tmp_path_factory.mktemp("both"))


def test_lake_holds_exactly_the_rows_of_the_database(both: tuple[Path, Path, Path]) -> None:
    _, lake, db = both
    with open_lake(lake) as store, duckdb.connect(str(db), read_only=True) as con:
        in_lake, in_db = table_rows(store.con), table_rows(con)
    assert in_lake == in_db
    assert len(in_db["kernels"]) == 248 and len(in_db["runs"]) == 4
    assert {len(in_db[t]) for t in ("device_tasks", "device_task_rows", "steps")} != {0}
    parts = sorted(p.relative_to(lake).as_posix() for p in (lake / "kernels").glob("*/*/*.parquet"))
    assert parts == [f"kernels/job_id=1/run_id={r}/part-0.parquet" for r in (1, 2, 3, 4)]


def test_every_table_of_the_schema_reads_from_a_new_lake(tmp_path: Path) -> None:
    with LakeWriter(tmp_path / "lake") as writer:
        writer.commit()
    with open_lake(tmp_path / "lake") as store:
        for table in TABLES:  # an empty typed table where no partition exists yet
            assert store.con.execute(f'SELECT count(*) FROM "{table.name}"').fetchall() == [(0,)]


def test_cluster_over_the_lake_equals_cluster_over_the_database(
    both: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, lake, db = both
    code_l, out_l, _ = diag(capsys, "cluster", "--lake", str(lake), "--json")
    code_d, out_d, _ = diag(capsys, "cluster", "--db", str(db), "--json")
    from_lake, from_db = json.loads(out_l), json.loads(out_d)
    assert code_l == code_d == 0
    assert from_lake.pop("db") == str(lake / "catalog.duckdb") and from_db.pop("db") == str(db)
    assert from_lake == from_db and len(from_db["jobs"][0]["ranks"]) == 4


def test_a_filter_on_run_prunes_partitions_in_the_plan(both: tuple[Path, Path, Path]) -> None:
    with open_lake(both[1]) as store:
        plan = "\n".join(
            r[1] for r in store.con.execute("EXPLAIN SELECT * FROM kernels WHERE run_id = 2").fetchall()
        )
    assert "File Filters:" in plan and "run_id = 2" in plan
    assert "Scanning Files: 1/4" in plan


def test_reingest_of_unchanged_files_rewrites_nothing(
    both: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    src, lake, _ = both
    before = {p: p.stat().st_mtime_ns for p in lake.glob("*/*/*/*.parquet")}
    code, out, _ = diag(capsys, "ingest", str(src), "--lake", str(lake), "--json")
    summary = json.loads(out)["summary"]
    assert code == 0 and (summary["unchanged"], summary["ok"], summary["rows"]) == (24, 0, {})
    assert {p: p.stat().st_mtime_ns for p in lake.glob("*/*/*/*.parquet")} == before


def test_lake_with_db_is_a_one_line_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["cluster"], ["ingest", str(tmp_path)]):
        code, out, err = diag(
            capsys, *args, "--db", str(tmp_path / "x.duckdb"), "--lake", str(tmp_path / "l")
        )
        assert (code, out) == (2, "")
        assert err == "diag: error: --lake and --db name two stores: give one of them\n"


def test_a_missing_lake_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = diag(capsys, "runs", "--lake", str(tmp_path / "nowhere"))
    assert (code, out) == (3, "")
    assert err == (
        f"diag: error: {tmp_path / 'nowhere'}: no such lake folder "
        f"(run `diag ingest PATH… --lake {tmp_path / 'nowhere'}` first)\n"
    )


def lake_equals_db(lake: Path, db: Path) -> dict[str, list[tuple]]:
    with open_lake(lake) as store, duckdb.connect(str(db), read_only=True) as con:
        in_lake, in_db = table_rows(store.con), table_rows(con)
    assert in_lake == in_db
    return in_db


def test_later_ingests_keep_the_lake_equal_to_the_database(
    job: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Into a lake holding the 4-rank job: a write that fails, then a changed file, then a log and a second job."""
    src, lake, db = ingest_both(job, tmp_path)
    # 1. What a killed writer leaves (a half-written partition file, its staging files), and a writer that fails
    # inside a COPY after other tables were written: the lake reads as before, nothing half of it shows.
    part = lake / "kernels" / "job_id=1" / "run_id=9"
    part.mkdir(parents=True)
    (part / "part-0.parquet.tmp").write_bytes(b"PAR1\x00half")
    (lake / ".incoming-dead").mkdir()
    (lake / ".incoming-dead" / "x.parquet").write_bytes(b"PAR1")
    kernels = next(src.glob("rank1_*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
    lines = kernels.read_text(encoding="utf-8").splitlines(keepends=True)
    kernels.write_text("".join(lines[:-10]), encoding="utf-8")  # ten kernels fewer on rank 1 (run 2)
    real_write = LakeWriter._write_table

    def failing_write(self: LakeWriter, table: str, runs: list[int]) -> list:
        if table == "kernels":
            raise OSError("disk full (simulated)")
        return real_write(self, table, runs)

    monkeypatch.setattr(LakeWriter, "_write_table", failing_write)
    code, _, err = diag(capsys, "ingest", str(src), "--lake", str(lake))
    assert code != 0 and "disk full (simulated)" in err
    monkeypatch.undo()
    assert len(lake_equals_db(lake, db)["kernels"]) == 248
    # 2. The changed file, ingested again: its run's partition is replaced, the other runs' stay.
    untouched = (lake / "kernels" / "job_id=1" / "run_id=1" / "part-0.parquet").stat().st_mtime_ns
    assert main(["ingest", str(src), "--lake", str(lake)]) == 0
    assert not list(lake.glob(".staging-*")) and not list(lake.glob(".incoming-*"))
    assert main(["ingest", str(src), "--db", str(db)]) == 0
    lake_equals_db(lake, db)
    with open_lake(lake) as store:
        per_run = store.con.execute("SELECT run_id, count(*) FROM kernels GROUP BY ALL ORDER BY 1").fetchall()
    assert per_run == [(1, 62), (2, 52), (3, 62), (4, 62)]
    assert [p.name for p in (lake / "kernels" / "job_id=1" / "run_id=2").iterdir()] == ["part-0.parquet"]
    assert (lake / "kernels" / "job_id=1" / "run_id=1" / "part-0.parquet").stat().st_mtime_ns == untouched
    # 3. A log and a second job: ids continue, grouping sees the earlier runs, the log's records are stored.
    assert (
        generate([str(tmp_path / "b"), "--ranks", "2", "--steps", "2", "--layers", "2", "--seed", "3"]) == 0
    )
    shutil.copytree(SAMPLES / "incident", tmp_path / "incident")
    for later in ("incident", "b"):
        assert main(["ingest", str(tmp_path / later), "--lake", str(lake)]) == 0
        assert main(["ingest", str(tmp_path / later), "--db", str(db)]) == 0
    in_db = lake_equals_db(lake, db)
    assert (len(in_db["jobs"]), len(in_db["runs"]), len(in_db["log_records"])) == (3, 7, 10)


def test_app_reads_the_lake(
    both: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``diag app --lake`` sets DIAG_DB to the catalog and DIAG_LAKE: the app opens it read-only."""
    monkeypatch.setenv("DIAG_LAKE", str(both[1]))
    at = open_page(monkeypatch, both[1] / "catalog.duckdb")
    assert at.title[0].value == "Runs"
    assert {m.label: m.value for m in at.metric}["runs"] == "4"
    at.checkbox(key="delete_sure").check().run()
    at.button(key="delete_run").click().run()
    assert not at.exception
    assert at.error[0].value == (
        f"This app reads the Parquet lake {both[1]} read-only: deleting a run is not possible here; "
        f"add or replace runs with `diag ingest PATH… --lake {both[1]}`."
    )


def test_sql_reads_the_lake_and_refuses_writes(
    both: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    lake = str(both[1])
    code, out, err = diag(capsys, "sql", f"COPY (SELECT 1) TO '{lake}/kernels/x.parquet'", "--lake", lake)
    assert (code, out) == (1, "")
    assert err == "diag: error: query refused: on a lake diag sql runs queries only (SELECT, WITH, EXPLAIN)\n"
    assert not (both[1] / "kernels" / "x.parquet").exists()
    # in a process of its own: the sandbox's settings are global to the DuckDB instance of the catalog
    counted = run_cli("sql", "SELECT count(*) AS n FROM kernels WHERE run_id = 2", "--lake", lake, "--json")
    assert (counted.returncode, json.loads(counted.stdout)) == (0, {"columns": ["n"], "rows": [{"n": 62}]})


def test_an_exported_database_is_a_lake(both: tuple[Path, Path, Path], tmp_path: Path) -> None:
    assert main(["export", "--format", "parquet", str(tmp_path / "out"), "--db", str(both[2])]) == 0
    assert (tmp_path / "out" / "catalog.duckdb").is_file()
    assert len(lake_equals_db(tmp_path / "out", both[2])["kernels"]) == 248


def test_a_second_writer_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with LakeWriter(tmp_path / "lake"):
        code, out, err = diag(capsys, "ingest", str(tmp_path / "none"), "--lake", str(tmp_path / "lake"))
    assert (code, out) == (4, "")
    assert (
        err
        == f"diag: error: {tmp_path / 'lake'}: another diag ingest is writing this lake; retry when it is done\n"
    )
