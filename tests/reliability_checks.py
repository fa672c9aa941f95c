"""Database checks shared by the fuzz, crash-safety and concurrency tests and bench/reliability.py."""

from __future__ import annotations

from pathlib import Path

import duckdb

from diag.schema import DATA_TABLES, read_name
from diag.store import q

# per-file tables by the names readers use: device_tasks, kernel_details' stand-in tasks included
READ_TABLES = tuple(map(read_name, DATA_TABLES))

FileKey = tuple[str, str]  # (run_key, relpath): a stored file, the same in every database


def half_stored(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Rows of no stored file, and runs holding no stored file: what a half-written ingest would leave."""
    stored = "(SELECT file_id FROM files WHERE status IN ('ok', 'partial'))"
    orphans = " UNION ALL ".join(
        f"SELECT '{t}', count(*) FROM \"{t}\" WHERE file_id NOT IN {stored}" for t in READ_TABLES
    )
    found = [f"{n} rows of {t} belong to no stored file" for t, n in q(con, orphans) if n]
    empty = q(
        con,
        "SELECT run_id FROM runs r WHERE NOT EXISTS (SELECT 1 FROM files f WHERE f.run_id = r.run_id "
        "AND f.status IN ('ok', 'partial'))",
    )
    return found + [f"run {r[0]} holds no stored file" for r in empty]


def file_rows(con: duckdb.DuckDBPyConnection) -> dict[FileKey, dict[str, int]]:
    """Every stored file with its row count per table (and its ledger row count as ``_ledger``)."""
    counts = " UNION ALL ".join(
        f"SELECT '{t}' AS tbl, file_id, count(*) AS n FROM \"{t}\" GROUP BY file_id" for t in READ_TABLES
    )
    rows = q(
        con,
        f"""SELECT coalesce(r.run_key, f.scope, ''), f.relpath, c.tbl, c.n, f.rows
            FROM files f LEFT JOIN runs r USING (run_id) LEFT JOIN ({counts}) c USING (file_id)
            WHERE f.status IN ('ok', 'partial')""",
    )
    out: dict[FileKey, dict[str, int]] = {}
    for run_key, relpath, table, n, ledger in rows:
        entry = out.setdefault((run_key, relpath), {"_ledger": int(ledger or 0)})
        if table:
            entry[table] = int(n)
    return out


def read_db(path: Path) -> tuple[dict[FileKey, dict[str, int]], list[str]]:
    """Open ``path`` read-only: its stored files and anything half-stored."""
    with duckdb.connect(str(path), read_only=True) as con:
        return file_rows(con), half_stored(con)
