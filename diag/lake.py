"""The Parquet lake: a store that is a folder of Parquet partitions plus a small DuckDB catalog.

Layout of ``DIR``::

    DIR/catalog.duckdb                                   the catalog (below)
    DIR/<table>/job_id=<J>/run_id=<R>/part-<n>.parquet    one partition per run of each per-file table

- Per-file tables (``diag.schema``, ``per_file``: kernels, device_tasks, logs …) are Parquet, hive-partitioned by
  job and run, with the schema's columns and int64-ns times. Rows of no run (a log stored before its run) live
  under ``run_id=__HIVE_DEFAULT_PARTITION__`` (DuckDB's name for NULL).
- The catalog holds the small tables (``jobs``, ``runs``, ``files`` — the ledger — and the other non-per-file
  tables) as DuckDB tables, with the id sequences, because every ingest updates them in place (spans, groups,
  ledger rows) and needs one transaction for them: a Parquet copy would be rewritten whole on every ingest and
  could not be committed atomically with the sequences. The per-file tables are views over
  ``read_parquet('DIR/<table>/**/*.parquet', hive_partitioning=true, union_by_name=true)`` under the store's
  table names, so the catalog opened read-only *is* a ``Store``: every analysis runs unchanged, and a filter on
  ``run_id`` / ``job_id`` prunes partitions (files) before any is read. A table with no partition yet is an
  empty typed table of the schema's columns.

Writing (``LakeWriter``): the existing ingest runs into a private staging DuckDB file in ``DIR`` seeded with the
catalog's small tables (so identity, grouping and the ledger's ``unchanged`` work as for a database), the rows
of each touched run that are already in the lake and still in the ledger are merged into it, then each touched
run's partitions are written with one ``COPY … PARTITION_BY`` per table into ``DIR/.incoming-<uuid>/`` and moved
into place with ``os.replace`` (atomic on one filesystem: a reader sees the old partition or the new one, never a
half file; a killed writer leaves only its staging files, which readers never glob and the next writer removes),
and last the catalog's small tables are replaced from the staging file in one transaction.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from pathlib import Path
from typing import Literal

import duckdb

from diag.errors import DatabaseBusyError, DiagError, StoreError
from diag.schema import DATA_TABLES, TABLE_BY_NAME, TABLES, VIEWS, read_name
from diag.sql_text import sql_literal
from diag.store import Store, _connect, q

CATALOG = "catalog.duckdb"
SMALL_TABLES = tuple(t.name for t in TABLES if not t.per_file)
_SEQUENCES = {"seq_job": "jobs.job_id", "seq_run": "runs.run_id", "seq_file": "files.file_id"}
_STAGING_PREFIXES = (".staging-", ".incoming-")
# the catalog ("main"), an attached database ("src", "cat"): the schemas whose sequences are read or set
AttachedName = Literal["main", "src", "cat"]


class LakeUsageError(DiagError):
    """--lake given with an option it excludes (--db): a usage error, one line, exit 2."""

    exit_code = 2


def catalog_path(root: str | Path) -> Path:
    return Path(root) / CATALOG


def is_lake(root: str | Path) -> bool:
    return catalog_path(root).is_file()


def open_lake(root: str | Path) -> Store:
    """The lake at ``root`` as a read-only ``Store`` (its catalog); a one-line error when there is none."""
    path = Path(root)
    if not path.is_dir():
        raise StoreError(f"{path}: no such lake folder (run `diag ingest PATH… --lake {path}` first)")
    if not is_lake(path):
        raise StoreError(
            f"{path}: not a diag lake (no {CATALOG}; run `diag ingest PATH… --lake {path}` first)"
        )
    return Store(catalog_path(path), read_only=True)


def lake_sandbox(db: str | Path, query: str) -> tuple[str, ...]:
    """For ``diag sql`` on a lake's catalog: the settings that let its views read the lake's Parquet files (and
    nothing else), or () for a DuckDB file. DuckDB's allowed directory would also let a COPY write there, so on
    a lake only queries (SELECT, EXPLAIN) run: no statement may write into the lake's partitions."""
    path = Path(db)
    if path.name != CATALOG or not path.parent.is_dir():
        return ()
    try:
        kinds = {s.type for s in duckdb.extract_statements(query)}
    except duckdb.Error:
        return ()  # the query's own syntax error is reported as before
    if kinds - {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}:
        raise DiagError("query refused: on a lake diag sql runs queries only (SELECT, WITH, EXPLAIN)")
    return (f"SET allowed_directories = [{sql_literal(path.parent.resolve().as_posix() + '/')}]",)


def partition_dir(root: Path, table: str) -> Path:
    """A per-file table's Parquet folder, under the name readers know it by (diag.schema.READ_AS)."""
    return root / read_name(table)


def _parquet_glob(root: Path, table: str) -> str:
    return (partition_dir(root.resolve(), table) / "**" / "*.parquet").as_posix()


def _has_partitions(root: Path, table: str) -> bool:
    return any(partition_dir(root, table).glob("*/*/*.parquet"))


def _view_sql(con: duckdb.DuckDBPyConnection, root: Path, table: str) -> str:
    """The view of one per-file table: the schema's columns in its order, from the partitions' files (a column
    added to the schema after they were written reads as NULL)."""
    t = TABLE_BY_NAME[table]  # only a schema table's name reaches the SQL
    source = f"read_parquet({sql_literal(_parquet_glob(root, t.name))}, hive_partitioning=true, union_by_name=true)"
    have = {r[0]: r[1] for r in q(con, f"DESCRIBE SELECT * FROM {source}")}
    cols = []
    for col in t.columns:
        base = col.type.split(" ")[0]
        if col.name not in have:
            cols.append(f'CAST(NULL AS {base}) AS "{col.name}"')
        elif have[col.name] != base:
            cols.append(f'CAST("{col.name}" AS {base}) AS "{col.name}"')
        else:
            cols.append(f'"{col.name}"')
    return f'CREATE OR REPLACE VIEW "{t.name}" AS SELECT {", ".join(cols)} FROM {source}'


def refresh_views(con: duckdb.DuckDBPyConnection, root: Path) -> None:
    """Each per-file table as a view over its partitions (an empty typed table while it has none), then the
    schema's derived views over them."""
    for table in DATA_TABLES:
        kind = q(
            con,
            "SELECT table_type FROM information_schema.tables WHERE table_name = ? "
            "AND table_catalog = current_database() AND table_schema = 'main'",
            [table],
        )
        if _has_partitions(root, table):
            if kind and kind[0][0] != "VIEW":
                q(con, f'DROP TABLE "{table}"')
            q(con, _view_sql(con, root, table))
        elif not kind:
            q(con, TABLE_BY_NAME[table].ddl())
    for view in VIEWS:
        q(con, view)


def create_catalog(root: Path) -> None:
    """A new lake: the schema's tables, sequences and views in ``DIR/catalog.duckdb``."""
    root.mkdir(parents=True, exist_ok=True)
    # every table, empty; the per-file ones become views on their first partition
    with Store(catalog_path(root)) as store:
        refresh_views(store.con, root)


def catalog_from_database(root: Path, db: str | Path) -> None:
    """The catalog of a folder ``diag export --format parquet`` wrote (its tables are partitioned alike): the
    small tables and sequences from the database, views over the exported partitions. The folder is then a
    lake (``--lake``, and further ``diag ingest --lake``)."""
    source = Path(db)
    create_catalog(root)
    con = _connect(catalog_path(root), read_only=False)
    try:
        q(con, f"ATTACH {sql_literal(source.as_posix())} AS src (READ_ONLY)")
        q(con, "BEGIN TRANSACTION")
        for table in SMALL_TABLES:
            q(con, f'INSERT INTO "{table}" SELECT * FROM src."{table}"')
        _set_sequences(con, _sequence_starts(con, "src"))
        refresh_views(con, root)
        q(con, "COMMIT")
        q(con, "DETACH src")
    finally:
        con.close()


def _sequence_starts(con: duckdb.DuckDBPyConnection, schema: AttachedName | None = None) -> dict[str, int]:
    """The next id of each sequence: past its last value and past every stored id. ``schema``: an attached
    database's name; None: the connection's own."""
    where = sql_literal(schema) if schema else "current_database()"
    last = dict(
        q(
            con,
            "SELECT sequence_name, coalesce(last_value, start_value - 1) FROM duckdb_sequences() "
            f"WHERE database_name = {where}",
        )
    )
    schema = schema or q(con, "SELECT current_database()")[0][0]
    starts = {}
    for seq, column in {**_SEQUENCES, "seq_serving": "serving_runs.serving_id"}.items():
        table, col = column.split(".")
        top = q(con, f'SELECT coalesce(max("{col}"), 0) FROM "{schema}"."{table}"')[0][0]
        starts[seq] = max(int(last.get(seq, 0) or 0), int(top)) + 1
    return starts


def _set_sequences(
    con: duckdb.DuckDBPyConnection, starts: dict[str, int], schema: AttachedName = "main"
) -> None:
    for seq, start in starts.items():
        q(con, f"DROP SEQUENCE IF EXISTS {schema}.{seq}")
        q(con, f"CREATE SEQUENCE {schema}.{seq} START {int(start)}")


def remove_leftovers(root: Path) -> None:
    """What a killed writer left: its staging database and incoming folder (never read by a reader)."""
    for entry in root.iterdir():
        if entry.name.startswith(_STAGING_PREFIXES):
            shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)


def _take_writer_lock(root: Path):  # type: ignore[no-untyped-def] - an open file
    """One writer per lake: an exclusive flock on ``DIR/.writer.lock`` for the whole ingest (readers never wait:
    they read the catalog and the partitions, which change only by atomic steps)."""
    lock = (root / ".writer.lock").open("a")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise DatabaseBusyError(
            f"{root}: another diag ingest is writing this lake; retry when it is done"
        ) from None
    return lock


def drop_old_stand_ins(con: duckdb.DuckDBPyConnection, run_id: int) -> None:
    """The kernel_details copies a schema-1 lake holds among its device tasks: the run's partition is rewritten
    without them (the view device_tasks derives them)."""
    q(con, "DELETE FROM device_task_rows WHERE run_id = ? AND source = 'kernel_details'", [run_id])


class StagingStore(Store):
    """The staging database of one lake ingest. A run already in the lake has its rows brought in the moment
    the ingest changes it (a file replaced, a file added, a log attached), before the parse runs: the parsers'
    and ``finalize_run``'s work across a run's files (kernel_details matched to the trace's tasks, the run's
    span) then sees the whole run, exactly as in a DuckDB file, and the run's new partition is the whole run.
    The hooks are the ledger calls ``Ingestor._store_file`` makes only when it is about to parse a file."""

    loaded: set[int]
    stored_runs: set[int]
    _pending_run: int | None = None

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.loaded, self.stored_runs = set(), set()

    def load_run(self, run_id: int | None) -> None:
        if run_id is None or run_id in self.loaded or run_id not in self.stored_runs:
            return
        self.loaded.add(run_id)
        for table in DATA_TABLES:
            q(self.con, f'INSERT INTO "{table}" SELECT * FROM cat."{table}" WHERE run_id = ?', [run_id])
        drop_old_stand_ins(self.con, run_id)

    def ledger_entry(
        self, scope: str, relpath: str, run_id: int | None = None, content_key: str | None = None
    ):  # type: ignore[no-untyped-def]
        self._pending_run = run_id
        entry = super().ledger_entry(scope, relpath, run_id=run_id, content_key=content_key)
        if entry is not None:
            self._pending_run = entry.run_id if run_id is None else run_id
        return entry

    def delete_file_rows(self, file_id: int) -> None:
        self.load_run(self._pending_run)  # the file is replaced: its run's rows first, then its own out
        super().delete_file_rows(file_id)

    def forget_failures(self, source: str) -> None:
        self.load_run(self._pending_run)  # a file is about to be parsed into this run
        super().forget_failures(source)

    def attach_orphans(self) -> list[int]:
        runs = super().attach_orphans()
        for run in runs:  # finalize_run reads the whole run next
            self.load_run(run)
        return runs


class LakeWriter:
    """One ingest into the lake: ``store`` is the staging database the ``Ingestor`` writes; ``commit()`` moves
    the touched runs' partitions into the lake and the small tables into the catalog. One writer at a time (the
    catalog's write lock is taken at the start and at the commit)."""

    orphans_changed = True  # whether the rows of no run changed (``touched_runs`` decides it)

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"{self.root}: not a folder (a lake is a folder)")
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = _take_writer_lock(self.root)
        if not is_lake(self.root):
            create_catalog(self.root)
        else:  # a catalog an older diag wrote is migrated first (Store's read-only open does it when needed)
            Store(catalog_path(self.root), read_only=True).close()
        remove_leftovers(self.root)  # under the lock: no other writer's staging files are live
        token = uuid.uuid4().hex
        self.staging_path = self.root / f".staging-{token}.duckdb"
        self.incoming = self.root / f".incoming-{token}"
        self.store = StagingStore(self.staging_path)
        con = self.store.con
        q(con, f"ATTACH {sql_literal(catalog_path(self.root).as_posix())} AS cat (READ_ONLY)")
        for table in SMALL_TABLES:
            q(con, f'INSERT INTO "{table}" SELECT * FROM cat."{table}"')
        for table in DATA_TABLES:  # rows of no run: a later run may claim them (attach_orphans)
            if "run_id" in TABLE_BY_NAME[table].column_names:
                q(con, f'INSERT INTO "{table}" SELECT * FROM cat."{table}" WHERE run_id IS NULL')
        self.starts = _sequence_starts(con, "cat")
        _set_sequences(con, self.starts)
        self.before = dict(q(con, "SELECT run_id, job_id FROM cat.runs"))
        self.store.stored_runs = set(self.before)
        self.files_before = set(q(con, "SELECT file_id, run_id FROM cat.files WHERE status <> 'failed'"))

    def close(self) -> None:
        self.store.close()
        self._lock.close()  # releases the flock
        shutil.rmtree(self.incoming, ignore_errors=True)
        for path in (self.staging_path, self.staging_path.with_suffix(".duckdb.wal")):
            path.unlink(missing_ok=True)
        shutil.rmtree(self.root / ".diag_tmp", ignore_errors=True)

    def __enter__(self) -> LakeWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def touched_runs(self) -> list[int]:
        """Runs whose partitions change: a changed file set (a file new, replaced or attached) or a new job."""
        con = self.store.con
        files_now = set(q(con, "SELECT file_id, run_id FROM files WHERE status <> 'failed'"))
        changed = files_now ^ self.files_before
        # the rows of no run (a log stored before its run) are rewritten only when a file of theirs changed
        self.orphans_changed = any(run is None for _, run in changed)
        touched = {run for _, run in changed if run is not None}
        touched |= {
            run for run, job in q(con, "SELECT run_id, job_id FROM runs") if self.before.get(run, job) != job
        }
        return sorted(touched | self.store.loaded)

    def commit(self) -> list[int]:
        """Write the touched runs' partitions, then the catalog; returns the runs rewritten.

        Every table's COPY finishes (into the incoming folder) before the first file moves into the lake, so a
        failure while writing leaves the lake as it was; the moves are renames, each atomic."""
        runs = self.touched_runs()
        for run in runs:  # a run that only moved to another job: its rows, as they are
            self.store.load_run(run)
        moves = [move for table in DATA_TABLES for move in self._write_table(table, runs)]
        for written, final in moves:
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(written, final)  # atomic: a reader sees the old partition file or the new one
        self._remove_stale(runs, [final for _, final in moves])
        self._commit_catalog()
        return runs

    def _write_table(self, table: str, runs: list[int]) -> list[tuple[Path, Path]]:
        """One COPY of the touched runs' rows (and the run-less rows) of ``table`` into the incoming folder,
        partitioned by job and run; returns (written file, its place in the lake) pairs."""
        t = TABLE_BY_NAME[table]  # only a schema table's name reaches the SQL
        cols = t.column_names
        if "run_id" not in cols:
            return []
        source = (
            f'SELECT x.*{"" if "job_id" in cols else ", r.job_id"} FROM "{t.name}" x LEFT JOIN runs r USING (run_id) '
            f"WHERE list_contains(?, x.run_id) OR (x.run_id IS NULL AND ?)"
        )
        params = [runs, self.orphans_changed]
        if not q(self.store.con, f"SELECT count(*) FROM ({source})", params)[0][0]:
            return []
        target = self.incoming / table
        self.incoming.mkdir(exist_ok=True)
        q(
            self.store.con,
            f"COPY ({source}) TO {sql_literal(target.as_posix())} (FORMAT parquet, PARTITION_BY (job_id, run_id))",
            params,
        )
        moves = []
        for part_dir in sorted(p for p in target.glob("*/*") if p.is_dir()):
            final_dir = partition_dir(self.root, table) / part_dir.relative_to(target)
            for i, written in enumerate(sorted(part_dir.glob("*.parquet"))):
                moves.append((written, final_dir / f"part-{i}.parquet"))
        return moves

    def _remove_stale(self, runs: list[int], placed: list[Path]) -> None:
        """Partition files of the touched runs (and run-less ones) that this write did not replace: a run that
        moved to another job, a table a replaced file no longer fills, a partition now split in fewer files."""
        keep = set(placed)
        names = {f"run_id={r}" for r in runs} | (
            {"run_id=__HIVE_DEFAULT_PARTITION__"} if self.orphans_changed else set()
        )
        for table in DATA_TABLES:
            for path in partition_dir(self.root, table).glob("*/*/*.parquet"):
                if path.parent.name in names and path not in keep:
                    path.unlink()

    def _commit_catalog(self) -> None:
        """The small tables and the sequences from staging, and the views, in one catalog transaction."""
        starts = _sequence_starts(self.store.con)
        staging = self.staging_path.as_posix()
        self.store.close()  # the catalog's connection reads the staging file next
        con = _connect(catalog_path(self.root), read_only=False)
        try:
            q(con, f"ATTACH {sql_literal(staging)} AS staging (READ_ONLY)")
            q(con, "BEGIN TRANSACTION")
            for table in SMALL_TABLES:
                q(con, f'DELETE FROM "{table}"')
                q(con, f'INSERT INTO "{table}" SELECT * FROM staging."{table}"')
            _set_sequences(con, starts)
            refresh_views(con, self.root)
            q(con, "COMMIT")
            q(con, "DETACH staging")
        finally:
            con.close()
