"""The DuckDB file: create/migrate, one transaction per ingested file, the ledger of files.

A ``Store`` owns one DuckDB connection.  Streamlit and other threaded callers take a ``cursor()`` per call.
"""

from __future__ import annotations

import copy
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from diag.errors import DatabaseBusyError, StoreError
from diag.schema import DATA_TABLES, SCHEMA_VERSION, SPAN_COLUMNS, TABLES, VIEW_NAMES, VIEWS, read_name
from diag.sql_text import file_literal, sql_literal  # noqa: F401 - imported from here by parsers
from diag.store_errors import damage_hint, one_line, write_failure  # noqa: F401 - write_failure: diag.ingest

# Data tables whose rows may have no run (a log, a serving result outside any run folder).
ORPHAN_TABLES = tuple(
    t.name
    for t in TABLES
    if t.per_file and any(c.name == "run_id" and "NOT NULL" not in c.type for c in t.columns)
)

RULES_DIR = Path(__file__).parent / "rules"
DEFAULT_DB = "diag.duckdb"
_SEQUENCES = ("seq_job", "seq_run", "seq_file")


@dataclass(frozen=True)
class LedgerEntry:
    file_id: int
    run_id: int | None
    sha256: str
    parser: str | None
    parser_version: int | None
    status: str


def q(con: duckdb.DuckDBPyConnection, sql: str, params: object = None) -> list[tuple]:
    """Execute and fetch everything: DuckDB refuses new work on a connection with an unfetched result."""
    return con.execute(sql, params).fetchall() if params is not None else con.execute(sql).fetchall()


def default_memory_limit() -> str:
    """For queries. DuckDB's own default is 80% of RAM; analyses of millions of tasks need about 1 GB."""
    return os.environ.get("DIAG_MEMORY_LIMIT", "1GB")


def ingest_memory_limit() -> str:
    """For ingest, which must stay bounded on GB inputs.

    Measured (bench/bench_ingest.py): 160-256 MB ingest a 1 GB trace as fast as 1 GB does, and a 1M-row
    kernel_details.csv 2.6x faster (large inserts stream to disk instead of piling up until commit); 160 MB
    keeps peak RSS under the size of a 360 MB CSV.
    """
    return os.environ.get("DIAG_INGEST_MEMORY_LIMIT", "160MB")


INGEST_LIMIT_BYTES = 160_000_000  # ingest_memory_limit()'s default, as DuckDB reads "160MB"
FITTED_FLOOR_BYTES = 100_000_000  # measured: a 0.9 MB ascend_pytorch_profiler.db needs more than 64 MB
FITTED_SHARE = 0.4  # of the file's size; from 400 MB on a file gets the whole default


def fitted_memory_limit(size_bytes: int) -> str:
    """The ingest limit for one file of ``size_bytes`` that a parser reads through spillable temporary tables
    (``fits_memory``; a serial ingest): 0.4× its size, at least 100 MB, at most the default 160 MB.  DuckDB then
    holds less for a file that needs less (a 250 MB Kineto trace: peak RSS 0.9× the file instead of 1.1×, as
    fast: README Performance); an out-of-memory error at this limit retries the file at the default
    (diag.ingest).  An explicit DIAG_INGEST_MEMORY_LIMIT is used as it is."""
    if "DIAG_INGEST_MEMORY_LIMIT" in os.environ:
        return ingest_memory_limit()
    fitted = max(FITTED_FLOOR_BYTES, int(size_bytes * FITTED_SHARE))
    return ingest_memory_limit() if fitted >= INGEST_LIMIT_BYTES else f"{fitted}B"


def busy_timeout_s() -> float:
    """How long opening waits for another process's write lock (DuckDB allows one writing process)."""
    return float(os.environ.get("DIAG_DB_BUSY_TIMEOUT_S", "30"))


def _connect(path: Path, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Open, retrying with backoff while another process holds the lock; then a one-line 'busy' error."""
    timeout = busy_timeout_s()
    deadline, delay = time.monotonic() + timeout, 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower():
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                pid = re.search(r"\(PID (\d+)\)", str(exc))
                raise DatabaseBusyError(
                    f"{path}: database busy: another process{f' (PID {pid[1]})' if pid else ''} is writing "
                    f"it; waited {timeout:g} s, retry when it is done (DIAG_DB_BUSY_TIMEOUT_S sets the wait)"
                ) from None
            time.sleep(min(delay, left))
            delay = min(delay * 2, 1.0)


class Store:
    def __init__(self, path: str | Path = DEFAULT_DB, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if read_only and not self.path.exists():
            raise StoreError(f"{self.path}: no such database (run `diag ingest` first)")
        if read_only:
            self._upgrade_if_needed()
        try:
            self.con = _connect(self.path, read_only)
        except duckdb.Error as exc:
            raise StoreError(f"{self.path}: cannot open database: {one_line(exc)}{damage_hint(exc)}") from exc
        tmp = self.path.parent / ".diag_tmp"
        q(self.con, f"SET memory_limit='{default_memory_limit()}'")
        q(self.con, "SET preserve_insertion_order=false")
        # lets another thread read query_progress() while a long statement runs (the CLI's progress bar)
        q(self.con, "SET enable_progress_bar=true")
        q(self.con, "SET enable_progress_bar_print=false")
        if not read_only:
            q(self.con, f"SET temp_directory={sql_literal(tmp.as_posix())}")  # a folder may hold a quote
            self.migrate()

    def sibling(self) -> Store:
        """The same database through a connection of its own (own transactions): for a worker thread."""
        other = copy.copy(self)
        other.con = self.con.cursor()
        q(other.con, "SET enable_progress_bar=true")
        q(other.con, "SET enable_progress_bar_print=false")
        return other

    def _upgrade_if_needed(self) -> None:
        """A database from an older diag lacks newer views/columns: migrate it once, briefly read-write."""
        try:
            with duckdb.connect(str(self.path), read_only=True) as con:
                views = {
                    r[0]
                    for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
                }
                columns = set(
                    con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall()
                )
        except duckdb.Error:
            return  # not ours, or locked by a writer: the real open below reports it
        wanted = {(t.name, c.name) for t in TABLES for c in t.columns}
        if set(VIEW_NAMES) <= views and wanted <= columns:
            return
        try:
            Store(self.path).close()
        except (duckdb.Error, StoreError) as exc:
            raise StoreError(
                f"{self.path}: written by an older diag and busy, cannot upgrade it now: {exc}"
            ) from exc

    # -- lifecycle -------------------------------------------------------------------------------------------
    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self.con.cursor()

    def migrate(self) -> None:
        con = self.con
        q(con, "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        row = con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchall()
        if row and int(row[0][0]) > SCHEMA_VERSION:
            raise StoreError(f"{self.path}: written by a newer diag (schema {row[0][0]} > {SCHEMA_VERSION})")
        for seq in _SEQUENCES:
            q(con, f"CREATE SEQUENCE IF NOT EXISTS {seq} START 1")
        old_schema = bool(row) and int(row[0][0]) < SCHEMA_VERSION
        old_lake_catalog = self._rename_device_tasks()
        # one catalog read for every table (a query per table was a third of each open's time)
        have_columns: dict[str, list[str]] = dict(
            q(
                con,
                "SELECT c.table_name, list(c.column_name) FROM information_schema.columns c "
                "JOIN information_schema.tables t USING (table_catalog, table_schema, table_name) "
                "WHERE t.table_type = 'BASE TABLE' AND c.table_catalog = current_database() "
                "AND c.table_schema = 'main' GROUP BY c.table_name",
            )
        )
        for table in TABLES:
            if table.name not in have_columns:
                q(con, table.ddl())
                continue
            # A database written by an older diag gains the columns added since (schema additions only).
            have = set(have_columns[table.name])
            for col in table.columns:
                if col.name not in have:
                    base_type = col.type.split(" ")[0]
                    q(con, f'ALTER TABLE "{table.name}" ADD COLUMN "{col.name}" {base_type}')
        # serving ids were max()+1 before: a database from then continues after its highest one
        if not q(con, "SELECT 1 FROM duckdb_sequences() WHERE sequence_name = 'seq_serving'"):
            start = q(con, "SELECT coalesce(max(serving_id), 0) + 1 FROM serving_runs")[0][0]
            q(con, f"CREATE SEQUENCE seq_serving START {int(start)}")
        for view in VIEWS:
            q(con, view)
        if old_lake_catalog:  # its device_task_rows reads the Parquet its device_tasks view read
            from diag.lake import refresh_views

            refresh_views(con, self.path.parent)
        if old_schema:
            self.refresh_stand_ins()
        q(con, "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)])
        q(con, "DROP TABLE IF EXISTS rule_task_kinds")  # rules are compiled into SQL from diag/rules now

    def _rename_device_tasks(self) -> bool:
        """Schema 1 stored device_tasks as a table, kernel_details' stand-in copies included: it becomes
        device_task_rows without them (the view device_tasks derives those).  True for a schema-1 lake catalog,
        whose device_tasks was a view over the Parquet partitions."""
        kind = q(
            self.con,
            "SELECT table_type FROM information_schema.tables WHERE table_name = 'device_tasks' "
            "AND table_catalog = current_database() AND table_schema = 'main'",
        )
        if not kind or q(
            self.con,
            "SELECT 1 FROM information_schema.tables WHERE table_name = 'device_task_rows' "
            "AND table_catalog = current_database() AND table_schema = 'main'",
        ):
            return False
        if kind[0][0] == "VIEW":
            q(self.con, "DROP VIEW device_tasks")
            return True
        q(self.con, "ALTER TABLE device_tasks RENAME TO device_task_rows")
        q(self.con, "DELETE FROM device_task_rows WHERE source = 'kernel_details'")
        return False

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        q(self.con, "BEGIN TRANSACTION")
        try:
            yield self.con
        except BaseException as exc:
            try:
                q(self.con, "ROLLBACK")
            except duckdb.Error:
                if write_failure(self.path, exc) is None:
                    raise
                # a failed write invalidated the database: the rollback's error would hide why
            raise
        else:
            q(self.con, "COMMIT")

    # -- jobs and runs -------------------------------------------------------------------------------------
    def ensure_job(self, job_key: str, name: str, source: str) -> int:
        row = self.con.execute("SELECT job_id FROM jobs WHERE job_key = ?", [job_key]).fetchall()
        if row:
            return int(row[0][0])
        return int(
            self.con.execute(
                "INSERT INTO jobs (job_id, job_key, name, source) VALUES (nextval('seq_job'), ?, ?, ?) "
                "RETURNING job_id",
                [job_key, name, source],
            ).fetchall()[0][0]
        )

    def ensure_run(
        self,
        run_key: str,
        *,
        name: str,
        platform: str,
        source: str,
        job_id: int | None,
        run_id: int | None = None,
    ) -> int:
        """The run of ``run_key``, created if new (with ``run_id`` when one was reserved for it)."""
        row = self.con.execute("SELECT run_id FROM runs WHERE run_key = ?", [run_key]).fetchall()
        if row:
            return int(row[0][0])
        return int(
            self.con.execute(
                "INSERT INTO runs (run_id, run_key, job_id, name, platform, source) "
                "VALUES (coalesce(?, nextval('seq_run')), ?, ?, ?, ?, ?) RETURNING run_id",
                [run_id, run_key, job_id, name, platform, source],
            ).fetchall()[0][0]
        )

    def reserve_run_id(self) -> int:
        return int(self.con.execute("SELECT nextval('seq_run')").fetchall()[0][0])

    def update_run(self, run_id: int, **fields: Any) -> None:
        """Set run metadata; JSON-typed fields accept Python objects. None values leave a field as is."""
        fields = {k: v for k, v in fields.items() if v is not None}
        if not fields:
            return
        values = [
            json.dumps(v, ensure_ascii=False, default=str) if k in ("config", "metadata") else v
            for k, v in fields.items()
        ]
        sets = ", ".join(f'"{k}" = ?' for k in fields)
        q(self.con, f"UPDATE runs SET {sets} WHERE run_id = ?", [*values, run_id])

    def set_job_groups(self, run_id: int, groups: object) -> None:
        q(
            self.con,
            # each rank's metadata lists only the groups it is in: merge them into the job's
            "UPDATE jobs SET parallel_groups = json_merge_patch(coalesce(parallel_groups, '{}'::JSON), ?::JSON) "
            "WHERE job_id = (SELECT job_id FROM runs WHERE run_id = ?)",
            [json.dumps(groups, ensure_ascii=False, default=str), run_id],  # default: Decimal numbers
        )

    def refresh_run_span(self, run_id: int) -> None:
        parts = " UNION ALL ".join(
            f"SELECT min({lo}) AS lo, max({hi}) AS hi FROM {t} WHERE run_id = $run"
            for t, (lo, hi) in SPAN_COLUMNS.items()
        )
        q(
            self.con,
            f"UPDATE runs SET start_ns = s.lo, end_ns = s.hi FROM (SELECT min(lo) AS lo, max(hi) AS hi "
            f"FROM ({parts})) s WHERE run_id = $run",
            {"run": run_id},
        )

    def refresh_stand_ins(self, run_id: int | None = None) -> None:
        """Flag the kernel_details files of the run (of every run: None) whose rows stand in for its device
        tasks: those of a run with no stored task (diag.schema's view device_tasks shows them)."""
        q(
            self.con,
            """UPDATE files SET stand_in_tasks = NOT EXISTS (
                   SELECT 1 FROM device_task_rows d
                   WHERE d.run_id = files.run_id AND d.source IS DISTINCT FROM 'kernel_details')
               WHERE parser = 'ascend_kernel_details' AND ($run IS NULL OR run_id = $run)""",
            {"run": run_id},
        )

    def delete_run(self, run_id: int) -> None:
        with self.transaction() as con:
            for table in DATA_TABLES:
                q(con, f'DELETE FROM "{table}" WHERE run_id = ?', [run_id])
            q(con, "DELETE FROM files WHERE run_id = ?", [run_id])
            q(con, "DELETE FROM runs WHERE run_id = ?", [run_id])

    # -- ledger ----------------------------------------------------------------------------------------------
    def ledger_entry(
        self, scope: str, relpath: str, run_id: int | None = None, content_key: str | None = None
    ) -> LedgerEntry | None:
        """The stored file at ``relpath`` of a run folder, if any: stored from the same folder (``scope``), in
        the same run (the same content from elsewhere), or, run-less, in the same file set (``content_key``)."""
        row = self.con.execute(
            "SELECT file_id, run_id, sha256, parser, parser_version, status FROM files "
            "WHERE relpath = ? AND status <> 'failed' "
            "AND (scope = ? OR run_id = ? OR (run_id IS NULL AND content_key = ?)) "
            "ORDER BY scope = ? DESC, file_id LIMIT 1",
            [relpath, scope, run_id, content_key, scope],
        ).fetchall()
        return LedgerEntry(*row[0]) if row else None

    def attach_orphans(self) -> list[int]:
        """Give stored files without a run, and their rows, the run their scope names — a run's key, or the
        scope of the files of exactly one run — and return the runs that gained some."""
        pairs = q(
            self.con,
            """WITH owners AS (SELECT scope, run_id FROM files WHERE run_id IS NOT NULL AND scope IS NOT NULL
                               UNION SELECT run_key, run_id FROM runs),
                    one AS (SELECT scope, min(run_id) AS run_id FROM owners GROUP BY scope
                            HAVING count(DISTINCT run_id) = 1)
               SELECT f.file_id, one.run_id FROM files f JOIN one USING (scope)
               WHERE f.run_id IS NULL AND f.status <> 'failed' ORDER BY f.file_id""",
        )
        if not pairs:
            return []
        files, runs = [p[0] for p in pairs], [p[1] for p in pairs]
        pick = "(SELECT unnest(?::BIGINT[]) AS file_id, unnest(?::BIGINT[]) AS run_id) m"
        for table in (*ORPHAN_TABLES, "files"):
            q(
                self.con,
                f'UPDATE "{table}" SET run_id = m.run_id FROM {pick} '
                f'WHERE "{table}".file_id = m.file_id AND "{table}".run_id IS NULL',
                [files, runs],
            )
        return sorted(set(runs))

    def new_file_id(self) -> int:
        return int(self.con.execute("SELECT nextval('seq_file')").fetchall()[0][0])

    def delete_file_rows(self, file_id: int) -> None:
        for table in DATA_TABLES:
            q(self.con, f'DELETE FROM "{table}" WHERE file_id = ?', [file_id])
        q(self.con, "DELETE FROM files WHERE file_id = ?", [file_id])

    def record_file(
        self,
        *,
        file_id: int,
        run_id: int | None,
        relpath: str,
        scope: str | None = None,
        content_key: str | None = None,
        source: str,
        sha256: str,
        size_bytes: int,
        parser: str | None,
        parser_version: int | None,
        status: str,
        message: str | None,
        rows: int,
    ) -> None:
        q(
            self.con,
            "INSERT INTO files (file_id, run_id, scope, content_key, relpath, source, sha256, size_bytes, parser, "
            "parser_version, status, message, rows) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                file_id,
                run_id,
                scope,
                content_key,
                relpath,
                source,
                sha256,
                size_bytes,
                parser,
                parser_version,
                status,
                message,
                rows,
            ],
        )

    def forget_failures(self, source: str) -> None:
        """A failed attempt is history once the same source is tried again."""
        q(self.con, "DELETE FROM files WHERE source = ? AND status = 'failed'", [source])

    # -- read side -------------------------------------------------------------------------------------------
    def fingerprint(self) -> str:
        """Changes whenever any ingest or delete commits: the cache key for analysis results. It names the database
        file too: two stores with the same counts (the same samples ingested in another order) must not share
        cached results in one process (the app's caches are per process, not per database)."""
        row = self.con.execute(
            "SELECT count(*), coalesce(max(file_id), 0), coalesce(sum(rows), 0) FROM files"
        ).fetchall()[0]
        runs = self.con.execute("SELECT count(*), coalesce(max(run_id), 0) FROM runs").fetchall()[0]
        return f"{self.path.resolve()}:{row[0]}-{row[1]}-{row[2]}-{runs[0]}-{runs[1]}"

    def table_counts(self, run_ids: list[int] | None = None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for table in map(read_name, DATA_TABLES):
            if run_ids is None:
                n = self.con.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0]
            else:
                n = self.con.execute(
                    f'SELECT count(*) FROM "{table}" WHERE list_contains(?, run_id)', [run_ids]
                ).fetchall()[0][0]
            counts[table] = int(n)
        return counts
