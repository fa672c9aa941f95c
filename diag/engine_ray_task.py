"""The Ray task of ``diag ingest --engine ray`` (see ``diag.engine_ray``): one run's files parsed on a worker
into a private DuckDB file, the run's partitions written into the lake's incoming area for the driver to move.

A worker process keeps its staging database between tasks (emptied, not re-created: creating the schema is
most of a small run's cost); the lake itself is only read for a run already in it, from that run's own
partition files.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from diag.discover import Candidate
from diag.identity import Plan
from diag.ingest import FileOutcome, Ingestor
from diag.lake import (
    SMALL_TABLES,
    LakeWriter,
    StagingStore,
    _set_sequences,
    drop_old_stand_ins,
    partition_dir,
)
from diag.schema import DATA_TABLES, TABLE_BY_NAME, TABLES
from diag.sql_text import sql_literal
from diag.store import q

TASK_PREFIX = ".incoming-ray-"  # a task's partitions before the driver moves them (never globbed by readers)
FAIL_ONCE_ENV = "DIAG_RAY_FAIL_ONCE"  # test hook, read by the driver: a path; the first attempt that does not find it dies
_NO_RUN = "run_id=__HIVE_DEFAULT_PARTITION__"


@dataclass
class RunTask:
    root: str  # the lake folder, as every worker sees it
    candidates: list[Candidate]  # one run's files, in the order the local engine parses them
    plan: Plan  # their parsers, identities and digests (decided on the driver for the whole input)
    id_starts: dict[str, int]  # sequence → first id of this task's block
    stored_runs: set[int]  # runs with partitions in the lake
    replace: bool = False
    max_file_bytes: int = 8 << 30
    fail_once: str | None = None  # the test hook's marker path (DIAG_RAY_FAIL_ONCE on the driver)


@dataclass
class TaskResult:
    outcomes: list[FileOutcome]
    moves: list[tuple[str, str]]  # (written in the incoming folder, its place in the lake)
    runs: list[int]  # runs whose partitions the moves replace
    rows: dict[str, Any]  # small table → Arrow table of the rows this task owns
    parse_s: float = 0.0
    wall_s: float = 0.0
    stats: dict[str, float] = field(default_factory=dict)


class _RunStore(StagingStore):
    """A task's staging database: a run already in the lake is read from its own partition files only."""

    root: Path

    def load_run(self, run_id: int | None) -> None:
        if run_id is None or run_id in self.loaded or run_id not in self.stored_runs:
            return
        self.loaded.add(run_id)
        for table in DATA_TABLES:
            files = sorted(partition_dir(self.root, table).glob(f"job_id=*/run_id={int(run_id)}/*.parquet"))
            if not files:
                continue
            paths = "[" + ", ".join(sql_literal(f.as_posix()) for f in files) + "]"
            source = f"read_parquet({paths}, hive_partitioning=true, union_by_name=true)"
            have = {r[0] for r in q(self.con, f"DESCRIBE SELECT * FROM {source}")}
            cols = ", ".join(f'"{c}"' for c in TABLE_BY_NAME[table].column_names if c in have)
            q(self.con, f'INSERT INTO "{table}" ({cols}) SELECT {cols} FROM {source}')
        drop_old_stand_ins(self.con, run_id)


class _RunWriter(LakeWriter):
    """A ``LakeWriter`` without the lake's lock (the driver holds it) and without a catalog: it writes one
    task's partitions into its incoming folder and leaves moving them to the driver."""

    def __init__(self, task: RunTask, seed: dict[str, Any]) -> None:  # no super(): no lock, no catalog
        self.root = Path(task.root)
        self.store = _staging_store(self.root)
        self.staging_path = self.store.path
        self.incoming = self.root / f"{TASK_PREFIX}{uuid.uuid4().hex}"
        con = self.store.con
        for table in SMALL_TABLES:
            con.register("seed_rows", seed[table])
            q(con, f'INSERT INTO "{table}" SELECT * FROM seed_rows')
            con.unregister("seed_rows")
        _set_sequences(con, task.id_starts)
        self.before = dict(q(con, "SELECT run_id, job_id FROM runs"))
        self.store.stored_runs = set(task.stored_runs)
        self.files_before = set(q(con, "SELECT file_id, run_id FROM files WHERE status <> 'failed'"))

    def partitions(self) -> tuple[list[tuple[str, str]], list[int]]:
        """The touched runs' partitions written into the incoming folder; run-less rows (a log of no run) get
        names of their own, since every task may write some."""
        runs = self.touched_runs()
        for run in runs:
            self.store.load_run(run)
        moves = []
        for table in DATA_TABLES:
            for written, final in self._write_table(table, runs):
                if final.parent.name == _NO_RUN:
                    final = final.with_name(f"part-{self.incoming.name[len(TASK_PREFIX) :]}-{final.name}")
                moves.append((written.as_posix(), final.as_posix()))
        return moves, runs

    def owned_rows(self, runs: list[int], sources: list[str]) -> dict[str, Any]:
        """This task's rows of the small tables: its runs, the ledger lines of its runs and files, the jobs."""
        con, where = self.store.con, {"runs": runs, "sources": sources}
        return {
            "runs": con.sql(
                "SELECT * FROM runs WHERE list_contains(?, run_id)", params=[runs]
            ).to_arrow_table(),
            "files": con.sql(
                "SELECT * FROM files WHERE list_contains($runs, run_id) OR list_contains($sources, source)",
                params=where,
            ).to_arrow_table(),
            "jobs": con.sql("SELECT * FROM jobs").to_arrow_table(),
        }

    def close(self) -> None:
        """The staging database emptied for the worker's next task; the incoming folder stays (the driver
        moves its files)."""
        _empty(self.store)


_STAGING: dict[str, _RunStore] = {}  # this worker process's staging database, kept between tasks


def _staging_store(root: Path) -> _RunStore:
    store = _STAGING.get("store")
    if store is None:
        folder = Path(tempfile.mkdtemp(prefix="diag-ray-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        store = _STAGING["store"] = _RunStore(folder / "staging.duckdb")
    store.root, store.loaded, store.stored_runs = root, set(), set()
    return store


def _empty(store: _RunStore) -> None:
    """Every table emptied, in one transaction (a task that failed half-way may have left one open)."""
    with contextlib.suppress(duckdb.Error):  # none was open: the usual case
        q(store.con, "ROLLBACK")
    try:
        with store.transaction() as con:
            for table in TABLES:
                q(con, f'DELETE FROM "{table.name}"')
    except duckdb.Error:  # a broken database: the next task starts a new one
        _STAGING.pop("store", None)
        store.close()


def _fail_once_hook(marker: str | None) -> None:
    """Tests: the first attempt to reach here (the partitions written, not yet moved) dies like a lost node."""
    if marker and not Path(marker).exists():
        Path(marker).write_text("failed once\n")
        os._exit(1)


def parse_run(task: RunTask, seed: dict[str, Any]) -> TaskResult:
    """One run's files parsed into a private database, its partitions written into the lake's incoming area."""
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="diag-ray-scratch-"))
    writer = ing = None
    try:
        writer = _RunWriter(task, seed)
        ing = Ingestor(
            writer.store, replace=task.replace, max_file_bytes=task.max_file_bytes, scratch_under=tmp
        )
        ing._plan, ing._reserved_runs = task.plan, dict(seed["reserved"])  # run key → id the driver reserved
        parse_started = time.perf_counter()
        outcomes = [ing.ingest_one(c) for c in task.candidates]
        parse_s = time.perf_counter() - parse_started
        moves, runs = writer.partitions()
        _fail_once_hook(task.fail_once)
        own = sorted({o.run_id for o in outcomes if o.run_id is not None} | set(runs))
        rows = writer.owned_rows(own, [c.source for c in task.candidates])
    finally:
        if ing is not None:
            ing.close()
        if writer is not None:
            writer.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return TaskResult(outcomes, moves, runs, rows, parse_s, time.perf_counter() - started)
