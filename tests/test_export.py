"""`diag export --format parquet`: a dataset partitioned by job and run that DuckDB reads back identically."""

from __future__ import annotations

import json

import duckdb

from tests.conftest import REAL_AICPU_TRACE, REAL_LEVEL2, cli_json, query, run_cli


def test_parquet_export_round_trips(tmp_path):
    db = tmp_path / "e.duckdb"
    cli_json("ingest", str(REAL_LEVEL2), "--db", str(db))
    out = tmp_path / "dataset"
    code, payload = cli_json("export", str(out), "--db", str(db))
    assert code == 0 and payload["rows"]["device_tasks"] == 835
    run_id = query(db, "SELECT run_id FROM runs")[0][0]
    parts = sorted(p.relative_to(out).parts[:3] for p in out.glob("device_tasks/*/*/*.parquet"))
    assert parts == [("device_tasks", "job_id=1", f"run_id={run_id}")]
    got = duckdb.sql(
        f"SELECT count(*), sum(dur_ns) FROM read_parquet('{out}/device_tasks/*/*/*.parquet', hive_partitioning=true)"
    ).fetchall()
    assert got == query(db, "SELECT count(*), sum(dur_ns) FROM device_tasks")
    proc = run_cli("export", str(out), "--db", str(db))
    assert proc.returncode != 0 and "not empty" in proc.stderr


def test_chrome_export_says_what_it_wrote(tmp_path):
    db = tmp_path / "c.duckdb"
    cli_json("ingest", str(REAL_AICPU_TRACE), "--db", str(db))
    run_id = query(db, "SELECT run_id FROM runs")[0][0]
    out = tmp_path / "trace.json"
    proc = run_cli("export", "--format", "chrome", str(run_id), "-o", str(out), "--db", str(db), check=True)
    assert (
        proc.stdout.startswith(f"wrote 2,217 events of run {run_id} (2 AI_CPU, ") and str(out) in proc.stdout
    )
    code, payload = cli_json("export", "--format", "chrome", str(run_id), "-o", str(out), "--db", str(db))
    assert code == 0
    assert (payload["format"], payload["path"], payload["events"], payload["ai_cpu_events"]) == (
        "chrome",
        str(out),
        2217,
        2,
    )
    assert json.loads(out.read_text())["displayTimeUnit"] == "ms"


def test_chrome_export_refuses_a_missing_or_non_numeric_run(tmp_path):
    db = tmp_path / "c.duckdb"
    cli_json("ingest", str(REAL_AICPU_TRACE), "--db", str(db))
    for run, message in (("99", "no run 99"), ("abc", "takes a run id")):
        proc = run_cli("export", "--format", "chrome", run, "-o", str(tmp_path / "t.json"), "--db", str(db))
        assert proc.returncode == 1 and message in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
