"""``diag ingest --jobs N``: several runs ingested at once, with what a serial ingest would store."""

from __future__ import annotations

import copy
import re
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from diag.discover import Candidate, job_origin, parent_shown
from diag.identity import find_run, joins_only
from diag.ingest import FileOutcome, Ingestor, _size
from diag.store import ingest_memory_limit, q


def run_parallel(ing: Ingestor, candidates: list[Candidate], jobs: int) -> list[FileOutcome]:
    """Runs in parallel, each run's files in order on one worker.

    Workers are threads, each with its own connection (its own transactions) to the one database: DuckDB
    allows a single writing process per file but many concurrent transactions inside it, and the heavy
    parts — DuckDB's readers and inserts, Polars' log parsing — release the GIL.  Keeping a run's files
    on one worker keeps the cross-file steps of a run (a trace replacing kernel_details stand-ins, metadata
    updating the run) as ordered as in a serial ingest; jobs are created and run ids reserved up front,
    in input order (see ``_prepare``).  Largest runs start first, so the slowest run does not start last.
    Within a run, files that make it go before files that join it (``Plan.order``), as in a serial ingest.
    """
    groups: dict[str, list[int]] = {}
    for i in ing._plan.order(candidates):
        groups.setdefault(ing._plan.group_of(candidates[i]), []).append(i)
    order = sorted(groups.values(), key=lambda idx: -sum(_size(candidates[i].path) for i in idx))
    created_jobs, ing._reserved_runs = _prepare(ing, candidates)
    # the workers' transactions share the database's memory limit: give each the serial ingest's share
    q(ing.store.con, f"SET memory_limit='{scaled(ingest_memory_limit(), jobs)}'")
    outcomes: list[FileOutcome | None] = [None] * len(candidates)
    local = threading.local()
    done_lock = threading.Lock()
    workers: list[Ingestor] = []

    def worker() -> Ingestor:
        if not hasattr(local, "ingestor"):
            clone = copy.copy(ing)
            clone.store = ing.store.sibling()
            clone.fit_memory = False  # the workers share the one limit set above
            # temporaries are named after their source file ('trace_view.json' in every rank): one folder each
            clone._tmp = Path(tempfile.mkdtemp(prefix="worker-", dir=ing._tmp))
            local.ingestor = clone
            with done_lock:
                workers.append(clone)
        return local.ingestor

    def ingest_group(indices: list[int]) -> None:
        me = worker()
        for i in indices:
            outcome = me.ingest_one(candidates[i])
            outcomes[i] = outcome
            with done_lock:
                ing._done(outcome)

    try:
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="diag-ingest") as pool:
            for future in [pool.submit(ingest_group, g) for g in order]:
                future.result()
    finally:
        for w in workers:
            w.store.close()
        q(ing.store.con, f"SET memory_limit='{ingest_memory_limit()}'")
        ing._reserved_runs = {}
        _drop_empty_jobs(ing, created_jobs)
    return [o for o in outcomes if o is not None]


def _prepare(ing: Ingestor, candidates: list[Candidate]) -> tuple[list[int], dict[str, int]]:
    """Before the workers start: the jobs created, and run ids reserved in input order.

    Two workers then never race to create the same job, and runs are numbered as a serial ingest numbers
    them whichever worker finishes first — without a run row existing before its first file is stored
    (a reader, or a kill, never sees an empty run). A job row may precede its runs: it holds no data.
    """
    jobs: list[int] = []
    reserved: dict[str, int] = {}
    with ing.store.transaction() as con:
        for cand in candidates:
            # None: unreadable or unknown, which the file's own ingest reports, as a serial one would
            parser = ing._plan.parsers.get(cand)
            if parser is None or joins_only(parser):
                continue
            key = f"path:{job_origin(cand)}"
            if not q(con, "SELECT 1 FROM jobs WHERE job_key = ?", [key]):
                name = cand.run_root.parent.name or cand.run_root.name
                jobs.append(ing.store.ensure_job(key, name, parent_shown(cand)))
            ident = ing._plan.identities.get(cand)
            if ident is None:
                continue  # its identity is its bytes' hash: numbered when it is stored
            if ident.run_key not in reserved and find_run(ing.store, ident) is None:
                reserved[ident.run_key] = ing.store.reserve_run_id()
    return jobs, reserved


def _drop_empty_jobs(ing: Ingestor, job_ids: list[int]) -> None:
    """Jobs created ahead that no run was stored in."""
    if job_ids:
        q(
            ing.store.con,
            "DELETE FROM jobs WHERE list_contains(?, job_id) "
            "AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.job_id = jobs.job_id)",
            [job_ids],
        )


def scaled(limit: str, factor: int) -> str:
    """A DuckDB memory size ('160MB', '1.5GiB') times ``factor``, in bytes."""
    m = re.fullmatch(r"\s*([\d.]+)\s*([KMGT]?)(i?)B?\s*", limit, re.I)
    if not m:
        return limit
    base = 1024 if m.group(3) or not m.group(2) else 1000
    power = " KMGT".index(m.group(2).upper() or " ")
    return f"{int(float(m.group(1)) * base**power * factor)}B"
