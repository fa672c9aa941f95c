"""``diag ingest PATH… --engine ray --lake DIR``: each run's parse is a Ray task; the driver commits the catalog.

The driver (the ``diag`` process) does what a local lake ingest does before parsing — walk the inputs, plan
every file's parser and identity, group the files into runs (``Plan.group_of``), create the jobs and reserve
the run ids in input order (``diag.ingest_parallel._prepare``: the run ids are the local engine's) — then
submits one task per run (largest first).  A task, on any worker that sees the lake's folder:

* seeds a private DuckDB file (worker-local temp, kept by the worker process between tasks) with the catalog's
  small tables (jobs, runs, the ledger) as the driver had them at submission, and id blocks of its own for the files, runs and serving rows it may
  create (so tasks never draw the same id);
* runs ``Ingestor.ingest_one`` over the run's files in the local engine's order (logs of the run included):
  the same parsers, the same ledger check (an unchanged file is skipped by its hash), the same one-line
  failure per file; a file that replaces one of a run already in the lake first brings in that run's rows,
  read from its own partitions only;
* writes the touched run's partitions (``LakeWriter._write_table``) into ``DIR/.incoming-ray-<token>/`` and
  returns their names, the outcomes and its rows of the small tables.

As tasks finish the driver merges their small-table rows, moves their files into place with ``os.replace``
(atomic: a reader sees the old partition or the new one) and commits the catalog in one transaction for every
task finished by then, so a killed driver leaves a lake of whole runs.  A task whose worker dies is retried (``max_retries``); its half-written incoming folder is never
read (readers glob ``DIR/<table>/**``) and is removed at the end.  Files that only join a run and were not
grouped with one (a log alone in its folder) are parsed on the driver afterwards, with orphans attached and
jobs regrouped as in a local ingest, and the usual ``LakeWriter.commit`` finishes the ingest.

Ids that may differ from the local engine's: ``file_id`` (each task draws from its own block), ``serving_id``,
and the run id of a one-file capture whose identity is its bytes (nsys, Kineto).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from diag.discover import Candidate
from diag.engine_ray_task import FAIL_ONCE_ENV, TASK_PREFIX, RunTask, TaskResult, parse_run
from diag.errors import DiagError
from diag.grouping import regroup
from diag.identity import Plan, joins_only
from diag.ingest import FileOutcome, Ingestor, IngestSummary, _size
from diag.ingest_parallel import _drop_empty_jobs, _prepare
from diag.lake import (
    SMALL_TABLES,
    LakeWriter,
    _sequence_starts,
    _set_sequences,
    catalog_path,
    partition_dir,
)
from diag.lake import refresh_views as _refresh_views
from diag.lake_grouping import lake_wide_spans
from diag.schema import DATA_TABLES, TABLE_BY_NAME
from diag.sql_text import sql_literal
from diag.store import _connect, one_line, q

INSTALL_HINT = "--engine ray needs Ray, an optional extra: pip install -e '.[ray]'"
MAX_RETRIES = 3  # a task whose worker died (node lost, OOM kill) runs again, up to this many times
_RESERVED = 1_000_000  # serving ids per task: a serving result stores one row per request


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
    try:
        ray.init(address=address, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:  # no cluster there, a bad address
        raise DiagError(f"--address {address}: cannot join a Ray cluster ({one_line(exc)})") from None
    return True


@contextmanager
def ray_session(address: str | None) -> Iterator[None]:
    """Ray joined (or started) for the block; shut down after it only when this block started it."""
    started = connect(address)
    try:
        yield
    finally:
        if started:
            import_ray().shutdown()


# -- the driver ----------------------------------------------------------------------------------------------


@dataclass
class RayStats:
    """What the bench reads: per task its wall and parse time, per commit the driver's time."""

    task_wall_s: list[float] = field(default_factory=list)
    task_parse_s: list[float] = field(default_factory=list)
    commit_s: list[float] = field(default_factory=list)
    commits_runs: list[int] = field(default_factory=list)  # tasks committed by each catalog commit


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
    if on_tasks:
        on_tasks(len(tasks))
    outcomes: dict[int, FileOutcome] = {}
    for result, idx in _run_tasks(ray, writer, tasks, remote, ing._reserved_runs, stats or RayStats()):
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


def _run_tasks(
    ray: Any, writer: LakeWriter, tasks: list[RunTask], groups: list[list[int]], reserved: dict[str, int],
    stats: RayStats,
) -> Iterator[tuple[TaskResult, list[int]]]:  # fmt: skip
    """Submit the tasks; as they finish, every task done by then is committed at once (the partitions moved,
    one catalog transaction) and yielded with its group. A task whose retries are spent yields its files as
    failed."""
    con = writer.store.con
    # what every task starts from, in the object store once: the small tables and the reserved run ids
    seed = ray.put({**{t: con.sql(f'SELECT * FROM "{t}"').to_arrow_table() for t in SMALL_TABLES},
                    "reserved": reserved})  # fmt: skip
    parse = ray.remote(max_retries=MAX_RETRIES, retry_exceptions=[OSError])(parse_run)
    pending = {parse.remote(task, seed): (task, idx) for task, idx in zip(tasks, groups, strict=True)}
    viewed: set[str] = set()  # tables whose view the catalog has (refreshed when a table gets its first file)
    while pending:
        ray.wait(list(pending), num_returns=1)
        ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
        done: list[tuple[TaskResult, list[int]]] = []
        for ref in ready:
            task, idx = pending.pop(ref)
            try:
                done.append((ray.get(ref), idx))
            except ray.exceptions.RayError as exc:  # retries spent: each file of the run fails, in one line
                done.append((_failed(task, exc), idx))
        started = time.perf_counter()
        new_tables: set[str] = set()
        for result, _ in done:
            new_tables |= _merge_task(writer, result)
        commit_catalog(writer, refresh=bool(new_tables - viewed))
        viewed |= new_tables
        stats.commit_s.append(time.perf_counter() - started)
        stats.commits_runs.append(len(done))
        stats.task_wall_s += [r.wall_s for r, _ in done]
        stats.task_parse_s += [r.parse_s for r, _ in done]
        yield from done


def _split_groups(the_plan: Plan, candidates: list[Candidate]) -> tuple[list[list[int]], list[list[int]]]:
    """The runs' groups of file indices (``Plan.group_of``, files in ``Plan.order``), largest first: those
    with a file that makes a run go to tasks; those of files that only join one stay on the driver."""
    groups: dict[str, list[int]] = {}
    for i in the_plan.order(candidates):
        groups.setdefault(the_plan.group_of(candidates[i]), []).append(i)
    ordered = sorted(groups.values(), key=lambda idx: -sum(_size(candidates[i].path) for i in idx))
    makes = [any(_makes_run(the_plan, candidates[i]) for i in g) for g in ordered]
    return [g for g, m in zip(ordered, makes, strict=True) if m], [
        g for g, m in zip(ordered, makes, strict=True) if not m
    ]


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
                dict(nxt),
                stored,
                ing.replace,
                ing.max_file_bytes,
                os.environ.get(FAIL_ONCE_ENV),  # the test hook, carried to the worker by the task
            )
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


def _merge_task(writer: LakeWriter, result: TaskResult) -> set[str]:
    """A finished task's small-table rows merged into the staging database, its partitions moved into place;
    returns the tables it wrote (the catalog is committed next, for every task done by then)."""
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
            for path in partition_dir(writer.root, table).glob(f"job_id=*/run_id={int(run)}/*.parquet"):
                if path not in placed:
                    path.unlink()
    return {Path(final).parts[-4] for _, final in result.moves}


def commit_catalog(writer: LakeWriter, refresh: bool) -> None:
    """The catalog's small tables and sequences replaced from the staging database in one transaction; the
    views refreshed when a table got its first partition (a view reads every partition without it)."""
    con = writer.store.con
    starts = _sequence_starts(con)
    rows = {t: con.sql(f'SELECT * FROM "{t}"').to_arrow_table() for t in SMALL_TABLES}
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
    progress: Any, bar: Any, address: str | None,
) -> IngestSummary:  # fmt: skip
    """``run_on_ray`` for the CLI: Ray joined (or started) for the ingest; the bytes bar ``bar`` (advanced per
    file by the caller's report) also counts the tasks done."""
    tasks = {"total": 0, "done": 0}

    def task_done() -> None:
        tasks["done"] += 1
        progress.update(bar, description=f"{tasks['done']}/{tasks['total']} Ray tasks done")

    with ray_session(address):
        return run_on_ray(
            ing, writer, candidates, refused,
            on_tasks=lambda n: tasks.update(total=n), on_task_done=task_done,
        )  # fmt: skip
