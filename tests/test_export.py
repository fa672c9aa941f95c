"""`diag export --format parquet`: a dataset partitioned by job and run that DuckDB reads back identically."""

from __future__ import annotations

import duckdb

from tests.conftest import REAL_LEVEL2, cli_json, query, run_cli


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
