"""kernel_details rows as a run's device tasks while it has no timeline: the view device_tasks derives them from
kernels (nothing copied), a trace replaces them, a re-ingest never duplicates them, and a schema-1 database or
lake (which stored the copies in a device_tasks table) opens with the same figures (issue #25)."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb

from diag.store import Store
from tests.conftest import REAL_LEVEL2, cli_json, query

KERNELS = REAL_LEVEL2 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
N_KERNELS, N_TRACE_TASKS = 191, 835  # the fixture's kernel_details rows and trace_view device tasks


def _tasks(db: Path) -> list[tuple]:
    return query(db, "SELECT source, count(*) FROM device_tasks GROUP BY source ORDER BY source")


def _run_folder(tmp_path: Path, with_trace: bool) -> Path:
    run = tmp_path / REAL_LEVEL2.name
    out = run / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    shutil.copy(KERNELS, out / KERNELS.name)
    for name in ("profiler_info_0.json", "profiler_metadata.json"):
        shutil.copy(REAL_LEVEL2 / name, run / name)
    if with_trace:
        shutil.copy(REAL_LEVEL2 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json", out / "trace_view.json")
    return run


def test_kernel_details_alone_are_the_runs_device_tasks(db: Path, tmp_path: Path) -> None:
    code, out = cli_json("ingest", str(_run_folder(tmp_path, with_trace=False)), "--db", str(db))
    assert code == 0
    kd = next(f for f in out["files"] if f["path"].endswith("kernel_details.csv"))
    assert kd["rows"] == {"kernels": N_KERNELS, "device_tasks": N_KERNELS}
    assert _tasks(db) == [("kernel_details", N_KERNELS)]
    assert query(db, "SELECT count(*) FROM device_task_rows") == [(0,)]  # derived, not stored
    # projected as the copies were: 'Stream <id>' lanes, the GE task type, the normalised kind
    assert query(
        db,
        """SELECT count(*) FROM device_tasks d JOIN kernels k USING (run_id, file_id, name, start_ns, dur_ns)
           WHERE d.stream = 'Stream ' || k.stream_id AND d.task_type = k.accelerator_core
             AND d.task_kind = coalesce(k.task_kind, 'OTHER')""",
    ) == [(N_KERNELS - query(db, "SELECT count(*) FROM kernels WHERE stream_id IS NULL")[0][0],)]
    assert query(db, "SELECT rows FROM files WHERE relpath LIKE '%kernel_details.csv'") == [(2 * N_KERNELS,)]


def test_a_trace_replaces_the_stand_ins_and_a_reingest_does_not_add_any(db: Path, tmp_path: Path) -> None:
    run = _run_folder(tmp_path, with_trace=False)
    assert cli_json("ingest", str(run), "--db", str(db))[0] == 0
    shutil.copy(REAL_LEVEL2 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json", run / "ASCEND_PROFILER_OUTPUT")
    code, out = cli_json("ingest", str(run), "--db", str(db))
    assert code == 0
    trace = next(f for f in out["files"] if f["path"].endswith("trace_view.json"))
    assert trace["removed"] == {"device_tasks": N_KERNELS}
    assert _tasks(db) == [("trace_view", N_TRACE_TASKS)]
    assert query(db, "SELECT rows FROM files WHERE relpath LIKE '%kernel_details.csv'") == [(N_KERNELS,)]
    # the kernel_details file changed (one row fewer) and re-ingested: still the trace's tasks only
    lines = KERNELS.read_bytes().splitlines(keepends=True)
    (run / "ASCEND_PROFILER_OUTPUT" / KERNELS.name).write_bytes(b"".join(lines[:-1]))
    assert cli_json("ingest", str(run), "--db", str(db))[0] == 0
    assert _tasks(db) == [("trace_view", N_TRACE_TASKS)]
    assert query(db, "SELECT count(*) FROM kernels") == [(N_KERNELS - 1,)]


def test_reingest_of_kernel_details_alone_does_not_duplicate(db: Path, tmp_path: Path) -> None:
    run = _run_folder(tmp_path, with_trace=False)
    assert cli_json("ingest", str(run), "--db", str(db))[0] == 0
    assert cli_json("ingest", str(run), "--db", str(db), "--replace")[0] == 0
    assert _tasks(db) == [("kernel_details", N_KERNELS)]
    lines = KERNELS.read_bytes().splitlines(keepends=True)
    (run / "ASCEND_PROFILER_OUTPUT" / KERNELS.name).write_bytes(b"".join(lines[:-2]))
    assert cli_json("ingest", str(run), "--db", str(db))[0] == 0
    assert _tasks(db) == [("kernel_details", N_KERNELS - 2)]


def _as_schema_1(db: Path) -> None:
    """The layout an older diag wrote: device_tasks a table holding the stand-in copies."""
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE old_tasks AS SELECT * FROM device_tasks")
    con.execute("DROP VIEW tasks")
    con.execute("DROP VIEW device_tasks")
    con.execute("DROP TABLE device_task_rows")
    con.execute("ALTER TABLE old_tasks RENAME TO device_tasks")
    con.execute("ALTER TABLE files DROP COLUMN stand_in_tasks")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.close()


def test_a_schema_1_database_opens_with_the_same_tasks(db: Path, tmp_path: Path) -> None:
    assert cli_json("ingest", str(_run_folder(tmp_path, with_trace=False)), "--db", str(db))[0] == 0
    code, before = cli_json("breakdown", "--db", str(db))
    _as_schema_1(db)
    assert query(db, "SELECT count(*) FROM device_tasks WHERE source = 'kernel_details'") == [(N_KERNELS,)]
    with Store(db, read_only=True) as store:  # migrates: the copies leave, the view derives them
        assert store.table_counts()["device_tasks"] == N_KERNELS
    assert query(db, "SELECT count(*) FROM device_task_rows") == [(0,)]
    assert _tasks(db) == [("kernel_details", N_KERNELS)]
    assert cli_json("breakdown", "--db", str(db)) == (code, before)


def test_a_schema_1_lake_reads_and_writes(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    run = _run_folder(tmp_path, with_trace=False)
    assert cli_json("ingest", str(run), "--lake", str(lake))[0] == 0
    code, before = cli_json("breakdown", "--lake", str(lake))
    # a schema-1 lake: the stand-in copies in device_tasks' Parquet, a catalog whose device_tasks is its view
    parts = sorted((lake / "device_tasks").glob("*/*/*.parquet"))
    assert parts == []  # this diag writes no copies
    con = duckdb.connect(str(lake / "catalog.duckdb"))
    job_id, run_id = con.execute("SELECT job_id, run_id FROM runs").fetchall()[0]
    run_dir = lake / "device_tasks" / f"job_id={job_id}" / f"run_id={run_id}"
    run_dir.mkdir(parents=True)
    con.execute(
        f"COPY (SELECT * EXCLUDE (run_id) FROM device_tasks) TO '{run_dir / 'part-0.parquet'}' (FORMAT parquet)"
    )
    con.execute("DROP VIEW tasks")
    con.execute("DROP VIEW device_tasks")
    con.execute("DROP TABLE device_task_rows")
    con.execute(
        f"CREATE VIEW device_tasks AS SELECT * FROM read_parquet('{lake}/device_tasks/**/*.parquet', "
        "hive_partitioning=true, union_by_name=true)"
    )
    con.execute("ALTER TABLE files DROP COLUMN stand_in_tasks")
    con.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    con.close()
    assert cli_json("breakdown", "--lake", str(lake)) == (code, before)
    shutil.copy(REAL_LEVEL2 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json", run / "ASCEND_PROFILER_OUTPUT")
    assert cli_json("ingest", str(run), "--lake", str(lake))[0] == 0
    assert cli_json("sql", "SELECT source, count(*) AS n FROM device_tasks GROUP BY 1", "--lake", str(lake))[
        1
    ]["rows"] == [{"source": "trace_view", "n": N_TRACE_TASKS}]
