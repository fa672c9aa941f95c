"""``diag ingest PATH… --engine ray --lake DIR``: each run's parse is a Ray task; the driver commits the catalog.

The driver (the ``diag`` process) does what a local lake ingest does before parsing — walk the inputs, plan
every file's parser and identity, group the files into runs (``Plan.group_of``), create the jobs and reserve
the run ids in input order (``diag.ingest_parallel._prepare``: the run ids are the local engine's) — then
submits one task per run (largest first).  A task, on any worker that sees the lake's folder:

* seeds a private DuckDB file (worker-local temp) with the catalog's small tables (jobs, runs, the ledger) as
  the driver had them at submission, and id blocks of its own for the files, runs and serving rows it may
  create (so tasks never draw the same id);
* runs ``Ingestor.ingest_one`` over the run's files in the local engine's order (logs of the run included):
  the same parsers, the same ledger check (an unchanged file is skipped by its hash), the same one-line
  failure per file; a file that replaces one of a run already in the lake first brings in that run's rows,
  read from its own partitions only;
* writes the touched run's partitions (``LakeWriter._write_table``) into ``DIR/.incoming-ray-<token>/`` and
  returns their names, the outcomes and its rows of the small tables.

As each task finishes the driver moves its files into place with ``os.replace`` (atomic: a reader sees the old
partition or the new one) and commits the catalog in one transaction, so a killed driver leaves a lake of
whole runs.  A task whose worker dies is retried (``max_retries``); its half-written incoming folder is never
read (readers glob ``DIR/<table>/**``) and is removed at the end.  Files that only join a run and were not
grouped with one (a log alone in its folder) are parsed on the driver afterwards, with orphans attached and
jobs regrouped as in a local ingest, and the usual ``LakeWriter.commit`` finishes the ingest.

Ids that may differ from the local engine's: ``file_id`` (each task draws from its own block), ``serving_id``,
and the run id of a one-file capture whose identity is its bytes (nsys, Kineto).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diag.discover import Candidate
from diag.errors import DiagError
from diag.grouping import regroup
from diag.identity import Plan, joins_only
from diag.ingest import FileOutcome, Ingestor, IngestSummary, _size
from diag.ingest_parallel import _drop_empty_jobs, _prepare
from diag.lake import SMALL_TABLES, LakeWriter, StagingStore, _sequence_starts, _set_sequences, catalog_path
from diag.lake import refresh_views as _refresh_views
from diag.schema import DATA_TABLES, TABLE_BY_NAME
from diag.sql_text import sql_literal
from diag.store import _connect, one_line, q

INSTALL_HINT = "--engine ray needs Ray, an optional extra: pip install -e '.[ray]'"
TASK_PREFIX = (
    ".incoming-ray-"  # a task's partitions before the driver moves them (LakeWriter's staging names)
)
FAIL_ONCE_ENV = "DIAG_RAY_FAIL_ONCE"  # test hook: a path; the first attempt that does not find it dies
MAX_RETRIES = 3  # a task whose worker died (node lost, OOM kill) runs again, up to this many times
_RESERVED = 1_000_000  # serving ids per task: a serving result stores one row per request
_NO_RUN = "run_id=__HIVE_DEFAULT_PARTITION__"


class EngineUsageError(DiagError):
    """--engine ray without Ray installed, or without --lake: a usage error, one line, exit 2."""

    exit_code = 2


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EngineUsageError(INSTALL_HINT) from None
    return ray


def connect(address: str | None) -> bool:
    """Ray started or joined (``auto``, ``ray://HOST:PORT``, None: a local instance); True if this call did."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    ray.init(address=address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    return True


# -- the task (runs on a worker) -----------------------------------------------------------------------------


@dataclass
class RunTask:
    root: str  # the lake folder, as every worker sees it
    candidates: list[Candidate]  # one run's files, in the order the local engine parses them
    plan: Plan  # their parsers, identities and digests (decided on the driver for the whole input)
    reserved: dict[str, int]  # run key → run id reserved by the driver
    id_starts: dict[str, int]  # sequence → first id of this task's block
    stored_runs: set[int]  # runs with partitions in the lake
    replace: bool = False
    max_file_bytes: int = 8 << 30


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
            files = sorted((self.root / table).glob(f"job_id=*/run_id={int(run_id)}/*.parquet"))
            if not files:
                continue
            paths = "[" + ", ".join(sql_literal(f.as_posix()) for f in files) + "]"
            source = f"read_parquet({paths}, hive_partitioning=true, union_by_name=true)"
            have = {r[0] for r in q(self.con, f"DESCRIBE SELECT * FROM {source}")}
            cols = ", ".join(f'"{c}"' for c in TABLE_BY_NAME[table].column_names if c in have)
            q(self.con, f'INSERT INTO "{table}" ({cols}) SELECT {cols} FROM {source}')


class _RunWriter(LakeWriter):
    """A ``LakeWriter`` without the lake's lock (the driver holds it) and without a catalog: it writes one
    task's partitions into its incoming folder and leaves moving them to the driver."""

    def __init__(self, task: RunTask, seed: dict[str, Any], tmp: Path) -> None:  # noqa: D107 - no super(): no lock
        self.root = Path(task.root)
        self.staging_path = tmp / "staging.duckdb"
        self.incoming = self.root / f"{TASK_PREFIX}{uuid.uuid4().hex}"
        self.store = _RunStore(self.staging_path)
        self.store.root = self.root
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
            "runs": con.execute("SELECT * FROM runs WHERE list_contains(?, run_id)", [runs]).to_arrow_table(),
            "files": con.execute(
                "SELECT * FROM files WHERE list_contains($runs, run_id) OR list_contains($sources, source)",
                where,
            ).to_arrow_table(),
            "jobs": con.execute("SELECT * FROM jobs").to_arrow_table(),
        }

    def close(self) -> None:
        self.store.close()  # the incoming folder stays: the driver moves its files


def _fail_once_hook() -> None:
    """Tests: the first attempt to reach here (the partitions written, not yet moved) dies like a lost node."""
    marker = os.environ.get(FAIL_ONCE_ENV)
    if marker and not Path(marker).exists():
        Path(marker).write_text("failed once\n")
        os._exit(1)


def parse_run(task: RunTask, seed: dict[str, Any]) -> TaskResult:
    """One run's files parsed into a private database, its partitions written into the lake's incoming area."""
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="diag-ray-"))
    writer = ing = None
    try:
        writer = _RunWriter(task, seed, tmp)
        ing = Ingestor(
            writer.store, replace=task.replace, max_file_bytes=task.max_file_bytes, scratch_under=tmp
        )
        ing._plan, ing._reserved_runs = task.plan, dict(task.reserved)
        parse_started = time.perf_counter()
        outcomes = [ing.ingest_one(c) for c in task.candidates]
        parse_s = time.perf_counter() - parse_started
        moves, runs = writer.partitions()
        _fail_once_hook()
        own = sorted({o.run_id for o in outcomes if o.run_id is not None} | set(runs))
        rows = writer.owned_rows(own, [c.source for c in task.candidates])
    finally:
        if ing is not None:
            ing.close()
        if writer is not None:
            writer.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return TaskResult(outcomes, moves, runs, rows, parse_s, time.perf_counter() - started)


# -- the driver ----------------------------------------------------------------------------------------------


@dataclass
class RayStats:
    """What the bench reads: per task its wall and parse time, per commit the driver's time."""

    task_wall_s: list[float] = field(default_factory=list)
    task_parse_s: list[float] = field(default_factory=list)
    commit_s: list[float] = field(default_factory=list)


def run_on_ray(
    ing: Ingestor,
    writer: LakeWriter,
    candidates: list[Candidate],
    refused: list[FileOutcome],
    *,
    on_tasks: Callable[[int], None] | None = None,
    on_task_done: Callable[[], None] | None = None,
    stats: RayStats | None = None,
) -> IngestSummary:
    """``Ingestor.run`` with each run's files parsed by a Ray task (see the module doc); same outcomes, same
    order, the lake's catalog committed as each task finishes. ``ing`` writes ``writer``'s staging store."""
    from diag.identity import plan

    ray = import_ray()
    summary = IngestSummary(files=list(refused))
    for outcome in refused:
        ing._done(outcome)
    ing._plan = plan(candidates, ing.max_file_bytes)
    remote, local = _split_groups(ing._plan, candidates)
    created_jobs, ing._reserved_runs = _prepare(ing, candidates)
    q(writer.store.con, "DETACH cat")  # the catalog is written as tasks finish: re-attached after them
    tasks, next_ids = _tasks(ing, writer, candidates, remote)
    con = writer.store.con
    seed = ray.put({t: con.execute(f'SELECT * FROM "{t}"').to_arrow_table() for t in SMALL_TABLES})
    parse = ray.remote(max_retries=MAX_RETRIES, retry_exceptions=[OSError])(parse_run)
    pending = {parse.remote(task, seed): (task, idx) for task, idx in zip(tasks, remote, strict=True)}
    if on_tasks:
        on_tasks(len(pending))
    outcomes: dict[int, FileOutcome] = {}
    stats = stats or RayStats()
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        task, idx = pending.pop(ref)
        try:
            result: TaskResult = ray.get(ref)
        except ray.exceptions.RayError as exc:  # retries spent: every file of the run fails, in one line each
            result = _failed(task, exc)
        else:
            started = time.perf_counter()
            _commit_task(writer, result)
            stats.commit_s.append(time.perf_counter() - started)
            stats.task_wall_s.append(result.wall_s)
            stats.task_parse_s.append(result.parse_s)
        for i, outcome in zip(idx, result.outcomes, strict=True):
            outcomes[i] = outcome
            ing._done(outcome)
        if on_task_done:
            on_task_done()
    _reseed(writer, next_ids)
    for idx in local:  # files that only join a run, alone in their group: on the driver, as locally
        for i in idx:
            outcomes[i] = ing.ingest_one(candidates[i])
            ing._done(outcomes[i])
    ing._reserved_runs = {}
    _drop_empty_jobs(ing, created_jobs)
    ing.attach_orphans()
    with lake_wide_spans(writer):
        regroup(ing.store)
    remove_task_leftovers(writer.root)
    summary.files.extend(outcomes[i] for i in range(len(candidates)))
    return summary


def _split_groups(the_plan: Plan, candidates: list[Candidate]) -> tuple[list[list[int]], list[list[int]]]:
    """The runs' groups of file indices (``Plan.group_of``, files in ``Plan.order``), largest first: those
    with a file that makes a run go to tasks; those of files that only join one stay on the driver."""
    groups: dict[str, list[int]] = {}
    for i in the_plan.order(candidates):
        groups.setdefault(the_plan.group_of(candidates[i]), []).append(i)
    ordered = sorted(groups.values(), key=lambda idx: -sum(_size(candidates[i].path) for i in idx))
    makes = [g for g in ordered if any(_makes_run(the_plan, candidates[i]) for i in g)]
    return makes, [g for g in ordered if g not in makes]


def _makes_run(the_plan: Plan, cand: Candidate) -> bool:
    parser = the_plan.parsers.get(cand)
    return parser is not None and not joins_only(parser)


def _tasks(
    ing: Ingestor, writer: LakeWriter, candidates: list[Candidate], groups: list[list[int]]
) -> tuple[list[RunTask], dict[str, int]]:
    """One task per group, each with id blocks of its own; returns them and the ids past every block."""
    nxt = _sequence_starts(writer.store.con)
    stored = set(writer.before)
    tasks = []
    for idx in groups:
        cands = [candidates[i] for i in idx]
        n = len(cands)
        blocks = {"seq_file": 4 * n + 4, "seq_run": n + 1, "seq_job": n + 1, "seq_serving": _RESERVED}
        sub = Plan(
            identities={c: ing._plan.identities[c] for c in cands if c in ing._plan.identities},
            parsers={c: ing._plan.parsers.get(c) for c in cands},
            digests={c.path: ing._plan.digests[c.path] for c in cands if c.path in ing._plan.digests},
        )
        tasks.append(
            RunTask(
                str(writer.root.resolve()),
                cands,
                sub,
                dict(ing._reserved_runs),
                dict(nxt),
                stored,
                ing.replace,
                ing.max_file_bytes,
            )  # fmt: skip
        )
        nxt = {seq: start + blocks[seq] for seq, start in nxt.items()}
    return tasks, nxt


def _failed(task: RunTask, exc: Exception) -> TaskResult:
    cause = getattr(exc, "cause", None) or exc  # a RayTaskError carries the task's own exception
    why = f"{type(cause).__name__}: {one_line(cause)}"
    outcomes = [
        FileOutcome(
            c.source,
            "failed",
            message=f"{c.source}: internal error (Ray task failed: {why})",
            size_bytes=_size(c.path),
        )  # fmt: skip
        for c in task.candidates
    ]
    return TaskResult(outcomes, [], [], {})


def _commit_task(writer: LakeWriter, result: TaskResult) -> None:
    """A finished task's partitions moved into place, its small-table rows merged, the catalog committed."""
    con = writer.store.con
    for name, rows in result.rows.items():
        con.register(f"task_{name}", rows)
    try:
        with writer.store.transaction():
            q(con, "DELETE FROM runs WHERE run_id IN (SELECT run_id FROM task_runs)")
            q(con, "INSERT INTO runs SELECT * FROM task_runs")
            sources = sorted({o.source for o in result.outcomes})
            q(con, "DELETE FROM files WHERE run_id IN (SELECT run_id FROM task_runs) OR list_contains(?, source)",
              [sources])  # fmt: skip
            q(con, "INSERT INTO files SELECT * FROM task_files")
            q(con, "INSERT INTO jobs SELECT * FROM task_jobs WHERE job_id NOT IN (SELECT job_id FROM jobs)")
    finally:
        for name in result.rows:
            con.unregister(f"task_{name}")
    placed = set()
    for written, final in result.moves:
        Path(final).parent.mkdir(parents=True, exist_ok=True)
        os.replace(written, final)  # atomic: a reader sees the old partition file or the new one
        placed.add(Path(final))
    for run in result.runs:  # files of the run's old partition that the new one does not replace
        for table in DATA_TABLES:
            for path in (writer.root / table).glob(f"job_id=*/run_id={int(run)}/*.parquet"):
                if path not in placed:
                    path.unlink()
    new_tables = {Path(final).parts[-4] for _, final in result.moves}
    commit_catalog(writer, refresh=bool(new_tables - getattr(writer, "viewed", set())))
    writer.viewed = getattr(writer, "viewed", set()) | new_tables  # type: ignore[attr-defined]


def commit_catalog(writer: LakeWriter, refresh: bool) -> None:
    """The catalog's small tables and sequences replaced from the staging database in one transaction; the
    views refreshed when a table got its first partition (a view reads every partition without it)."""
    con = writer.store.con
    starts = _sequence_starts(con)
    rows = {t: con.execute(f'SELECT * FROM "{t}"').to_arrow_table() for t in SMALL_TABLES}
    cat = _connect(catalog_path(writer.root), read_only=False)
    try:
        q(cat, "BEGIN TRANSACTION")
        for table, arrow in rows.items():
            cat.register("staged_rows", arrow)
            q(cat, f'DELETE FROM "{table}"')
            q(cat, f'INSERT INTO "{table}" SELECT * FROM staged_rows')
            cat.unregister("staged_rows")
        _set_sequences(cat, starts)
        if refresh:
            _refresh_views(cat, writer.root)
        q(cat, "COMMIT")
    finally:
        cat.close()


def _reseed(writer: LakeWriter, next_ids: dict[str, int]) -> None:
    """After the tasks: the staging database sees the lake as it is now (the catalog re-attached, the rows of
    no run reloaded: tasks may have added some), and draws ids past every task's block."""
    con = writer.store.con
    q(con, f"ATTACH {sql_literal(catalog_path(writer.root).as_posix())} AS cat (READ_ONLY)")
    for table in DATA_TABLES:
        if "run_id" in TABLE_BY_NAME[table].column_names:
            q(con, f'DELETE FROM "{table}" WHERE run_id IS NULL')
            q(con, f'INSERT INTO "{table}" SELECT * FROM cat."{table}" WHERE run_id IS NULL')
    writer.before = dict(q(con, "SELECT run_id, job_id FROM cat.runs"))
    writer.store.stored_runs = set(writer.before)  # type: ignore[attr-defined]
    writer.files_before = set(q(con, "SELECT file_id, run_id FROM cat.files WHERE status <> 'failed'"))
    _set_sequences(con, {seq: max(start, _sequence_starts(con)[seq]) for seq, start in next_ids.items()})


@contextmanager
def lake_wide_spans(writer: LakeWriter) -> Iterator[None]:
    """While regrouping: the capture windows ``diag.grouping`` reads from ``comm_ops`` and ``steps`` cover the
    runs whose rows are only in the lake (the tasks' runs, the runs this ingest left alone), not only those in
    the staging database. Views in a schema of their own, first on the search path, for the regroup only."""
    con = writer.store.con
    ids = ", ".join(str(int(r)) for r in sorted(writer.store.loaded))  # type: ignore[attr-defined]
    q(con, "CREATE SCHEMA IF NOT EXISTS lake_wide")
    for table, cols in (("comm_ops", "run_id, start_ns, elapse_ns"), ("steps", "run_id, start_ns, end_ns")):
        q(con, f"CREATE OR REPLACE VIEW lake_wide.{table} AS SELECT {cols} FROM main.{table} UNION ALL "
               f"SELECT {cols} FROM cat.{table} WHERE NOT list_contains([{ids}]::BIGINT[], run_id)")  # fmt: skip
    q(con, "SET search_path = 'lake_wide,main'")
    try:
        yield
    finally:
        q(con, "RESET search_path")
        q(con, "DROP SCHEMA lake_wide CASCADE")


def remove_task_leftovers(root: Path) -> None:
    """Incoming folders of tasks that died before their files were moved (never read by a reader)."""
    for entry in root.glob(f"{TASK_PREFIX}*"):
        shutil.rmtree(entry, ignore_errors=True)


def check_engine(engine: str, lake: str | None, address: str | None) -> bool:
    """``diag ingest --engine``: True for ray; one-line usage errors for an unknown engine, ray without --lake
    or without Ray installed, --address without ray."""
    if engine not in ("local", "ray"):
        raise EngineUsageError(f"--engine {engine}: unknown engine (local or ray)")
    if engine == "local":
        if address is not None:
            raise EngineUsageError("--address names a Ray cluster: give it with --engine ray")
        return False
    if lake is None:
        raise EngineUsageError("--engine ray writes a lake that every worker sees: give --lake DIR")
    import_ray()
    return True


def ingest_with_progress(
    ing: Ingestor, writer: LakeWriter, candidates: list[Candidate], refused: list[FileOutcome],
    progress: Any, address: str | None,
) -> IngestSummary:  # fmt: skip
    """``run_on_ray`` for the CLI: Ray joined (or started) for the ingest, a second bar over the tasks."""
    started = connect(address)
    bar: list[Any] = []
    try:
        return run_on_ray(
            ing, writer, candidates, refused,
            on_tasks=lambda n: bar.append(progress.add_task("ray tasks", total=n or 1)),
            on_task_done=lambda: progress.advance(bar[0], 1),
        )  # fmt: skip
    finally:
        if started:
            import_ray().shutdown()
