"""``diag cluster --lake DIR --engine ray``: the cluster view from per-run summaries computed on Ray workers.

A 1,024-rank job's events never meet on one machine: each run's task opens the lake's catalog read-only and
reads only that run's partitions (a literal ``run_id`` filter prunes the others), and returns a summary of a
few rows per step, group, link and transport:

* ``step_trace``: its steps' rows of one file (as ``diag.analyses.cluster._one_file`` picks); ``steps``: the
  ProfilerStep spans when it has none;
* ``comm_ops``: per group, the ops counted and their transit / wait / sync / elapse times summed;
* ``comm_matrix``: the rows ``cluster._LINKS_SQL`` picks for a reporter (a group's ``*-total`` entries where it
  has some), summed per group, link ends, transport and kind of numbering; the kind is kept in a synthetic
  ``op_key`` suffix so the driver's pick and mapping see what they saw in the raw rows;
* ``comm_bandwidth``: per transport, the bytes and transit time summed.

The driver loads the summaries as tables of the store's names into an in-memory DuckDB beside the catalog's
``jobs`` and ``runs`` and runs ``diag.analyses.cluster``'s own queries and Python over them: sums of sums and
the same picks, so the reduced view equals ``cluster_view`` on the whole job (a test checks it, field by
field).  Per-run findings (``device_findings``) are tasks the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from diag.analyses import cluster as c
from diag.analyses.cluster_findings import ClusterFinding, link_findings, open_next, pp_stage, rank_findings
from diag.analyses.finding import thresholds
from diag.grouping import is_multi_rank, job_grouping
from diag.lake import catalog_path, open_lake
from diag.sql_text import sql_literal
from diag.store import q

_STEP_COLS = ", ".join(c.STEP_COLS)
_ONE_FILE = "(SELECT min(file_id) FROM {t} WHERE run_id = {run})"
# per run: every query names the run as a literal, so the lake's views prune the other runs' partitions
_SUMMARY_SQL = {
    "step_trace": f"SELECT run_id, 0 AS file_id, step, {_STEP_COLS} FROM step_trace "
    "WHERE run_id = {run} AND file_id = " + _ONE_FILE.format(t="step_trace", run="{run}"),
    "steps": "SELECT run_id, step, start_ns, end_ns FROM steps WHERE run_id = {run}",
    "comm_ops": "SELECT run_id, group_name, count(*) AS ops, sum(transit_ns)::BIGINT AS transit_ns, "
    "sum(wait_ns)::BIGINT AS wait_ns, sum(sync_ns)::BIGINT AS sync_ns, sum(elapse_ns)::BIGINT AS elapse_ns "
    "FROM comm_ops "
    "WHERE run_id = {run} AND group_name IS NOT NULL AND file_id = "
    + _ONE_FILE.format(t="comm_ops", run="{run}")
    + " GROUP BY ALL",
    "comm_matrix": """
WITH raw AS (
  SELECT run_id, group_name, src_rank, dst_rank, upper(transport) AS transport, size_bytes, transit_ns,
         regexp_matches(op_key, '-(top\\d|middle|bottom\\d|total)$') AS local_ids, op_key LIKE '%-total' AS is_total
  FROM comm_matrix WHERE run_id = {run} AND file_id = """
    + _ONE_FILE.format(t="comm_matrix", run="{run}")
    + """
    AND transport IS NOT NULL AND upper(transport) <> 'LOCAL' AND src_rank IS DISTINCT FROM dst_rank),
picked AS (SELECT * FROM raw QUALIFY NOT bool_or(is_total) OVER (PARTITION BY group_name) OR is_total)
SELECT run_id, 0 AS file_id, group_name, src_rank, dst_rank, transport,
       CASE WHEN is_total THEN 'summary-total' WHEN local_ids THEN 'summary-top0' ELSE 'summary' END AS op_key,
       sum(size_bytes)::BIGINT AS size_bytes, sum(transit_ns)::BIGINT AS transit_ns
FROM picked GROUP BY ALL""",
    "comm_bandwidth": "SELECT run_id, 0 AS file_id, upper(transport) AS transport, "
    "sum(size_bytes)::BIGINT AS size_bytes, sum(transit_ns)::BIGINT AS transit_ns FROM comm_bandwidth "
    "WHERE run_id = {run} AND size_bytes > 0 AND transit_ns > 0 AND file_id = "
    + _ONE_FILE.format(t="comm_bandwidth", run="{run}")
    + " GROUP BY ALL",
}
_EMPTY = {  # the summary tables' columns, for a job none of whose runs has any
    "step_trace": f"run_id BIGINT, file_id BIGINT, step BIGINT, {', '.join(f'{x} BIGINT' for x in c.STEP_COLS)}",
    "steps": "run_id BIGINT, step BIGINT, start_ns BIGINT, end_ns BIGINT",
    "comm_ops": "run_id BIGINT, group_name VARCHAR, ops BIGINT, transit_ns BIGINT, wait_ns BIGINT, "
    "sync_ns BIGINT, elapse_ns BIGINT",
    "comm_matrix": "run_id BIGINT, file_id BIGINT, group_name VARCHAR, src_rank INTEGER, dst_rank INTEGER, "
    "transport VARCHAR, op_key VARCHAR, size_bytes BIGINT, transit_ns BIGINT",
    "comm_bandwidth": "run_id BIGINT, file_id BIGINT, transport VARCHAR, size_bytes BIGINT, transit_ns BIGINT",
}


def run_summary(root: str, run_id: int) -> dict[str, Any]:
    """On a worker: one run's summary tables (Arrow), read from its partitions only."""
    with open_lake(root) as store:
        out = {
            name: store.con.sql(sql.format(run=int(run_id))).to_arrow_table()
            for name, sql in _SUMMARY_SQL.items()
        }
        if out["step_trace"].num_rows:  # ProfilerStep spans stand in only for a run without step_trace
            out["steps"] = out["steps"].slice(0, 0)
        return out


def reduce_summaries(root: Path, job_id: int, summaries: list[dict[str, Any]]) -> c.ClusterView:
    """On the driver: the job's cluster view from its runs' summaries (see the module doc)."""
    import pyarrow as pa  # here: every `diag` start imports this module (lake_of_engine), few reduce

    con = duckdb.connect()
    try:
        q(con, f"ATTACH {sql_literal(catalog_path(root).as_posix())} AS cat (READ_ONLY)")
        for table in ("jobs", "runs"):
            q(con, f'CREATE VIEW "{table}" AS SELECT * FROM cat."{table}"')
        for name, columns in _EMPTY.items():
            parts = [s[name] for s in summaries if s[name].num_rows]
            if parts:
                con.register("summary_rows", pa.concat_tables(parts, promote_options="permissive"))
                q(con, f'CREATE TABLE "{name}" AS SELECT * FROM summary_rows')
                con.unregister("summary_rows")
            else:
                q(con, f'CREATE TABLE "{name}" ({columns})')
        return _view(con, job_id)
    finally:
        con.close()


def _view(cur: duckdb.DuckDBPyConnection, job_id: int) -> c.ClusterView:
    """``cluster.cluster_view``'s steps over the summary tables; only the comm-by-group sum is its own."""
    job = q(cur, "SELECT name, source, parallel_groups FROM jobs WHERE job_id = ?", [job_id])
    if not job:
        raise LookupError(f"no job {job_id}")
    grouping = job_grouping(cur, job_id)
    t = thresholds()["cluster"]
    steps, source = c._steps(cur, job_id)
    ranks = c._rank_totals(steps)
    comm = _comm_by_group(cur, job_id)
    members = c._members(comm)
    meta = c._group_info(cur, job_id, job[0][2])
    groups = c._groups(comm, members, meta)
    links = c._links(cur, job_id, members, meta, t)
    transports = c._transports(cur, job_id, t)
    c._add_comm_totals(ranks, comm)
    findings: list[ClusterFinding] = []
    real = is_multi_rank(grouping)
    if real:
        findings = rank_findings(ranks, t, pp_stage(meta)) + link_findings(links, transports, ranks, t)
    findings.sort(key=lambda f: -f.impact_ns)
    return c.ClusterView(
        job_id, job[0][0], job[0][1], source, ranks, steps, groups, links, transports, findings,
        open_next(findings, ranks) if real else None, grouping,
    )  # fmt: skip


def _comm_by_group(cur: duckdb.DuckDBPyConnection, job_id: int) -> list[dict[str, Any]]:
    """``cluster._comm_by_group`` over the per-run sums: the ops counted become the ops summed."""
    rows = q(
        cur,
        f"WITH {c._JOB_RUNS} SELECT s.group_name, jr.rank, sum(s.ops), sum(s.transit_ns), sum(s.wait_ns), "
        "sum(s.sync_ns), sum(s.elapse_ns) FROM comm_ops s JOIN jr USING (run_id) GROUP BY ALL ORDER BY 1, 2",
        {"job": job_id},
    )
    names = ("group", "rank", "ops", "transit_ns", "wait_ns", "sync_ns", "elapse_ns")
    return [dict(zip(names, r, strict=True)) for r in rows]


def cluster_view_on_ray(root: str | Path, job_id: int) -> c.ClusterView:
    """One task per run of the job (Ray connected by the caller), reduced here."""
    import ray

    with open_lake(root) as store:
        run_ids = [
            r[0] for r in q(store.con, "SELECT run_id FROM runs WHERE job_id = ? ORDER BY run_id", [job_id])
        ]
    summarise = ray.remote(run_summary)
    lake = str(Path(root).resolve())
    return reduce_summaries(Path(root), job_id, ray.get([summarise.remote(lake, r) for r in run_ids]))


def _run_findings(root: str, run_id: int) -> list[Any]:
    from diag.analyses.findings import device_findings

    with open_lake(root) as store:
        return device_findings(store, run_id)


def device_findings_on_ray(
    root: str | Path, run_ids: list[int]
) -> tuple[dict[int, list[Any]], dict[int, str]]:
    """``per_run(ids, device_findings)`` with one Ray task per run: (findings by run, one-line failure by run)."""
    import ray

    task = ray.remote(_run_findings)
    lake = str(Path(root).resolve())
    refs = {rid: task.remote(lake, rid) for rid in run_ids}
    done: dict[int, list[Any]] = {}
    failed: dict[int, str] = {}
    for rid, ref in refs.items():
        try:
            done[rid] = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # reported per run, the other runs carry on (as per_run)
            cause = exc.cause or exc
            failed[rid] = " ".join(f"{type(cause).__name__}: {cause}".split())
    return done, failed


def lake_of_engine(engine: str, db: str, address: str | None) -> Path | None:
    """For a read command's ``--engine``: the lake folder when it is ray (its catalog is ``db``), None for
    local; one-line usage errors for an unknown engine, ray over a DuckDB file, --address without ray."""
    if engine == "local" and address is None:  # the common case: nothing of the Ray engine is imported
        return None
    from diag.engine_ray import EngineUsageError, import_ray  # it imports the parsers (~0.7 s)

    if engine not in ("local", "ray"):
        raise EngineUsageError(f"--engine {engine}: unknown engine (local or ray)")
    if engine == "local":
        raise EngineUsageError("--address names a Ray cluster: give it with --engine ray")
    if Path(db).name != catalog_path(".").name:
        raise EngineUsageError("--engine ray reads a lake that every worker sees: give --lake DIR")
    import_ray()
    return Path(db).parent


def cluster_views_on_ray(db: str, job: int | None, address: str | None, job_ids: Any) -> list[c.ClusterView]:
    """``diag cluster --engine ray``: the jobs ``job_ids(store, job)`` names, each reduced from its runs' tasks."""
    from diag.engine_ray import ray_session
    from diag.store import Store

    with Store(db, read_only=True) as store:
        ids = job_ids(store, job)
    with ray_session(address):
        return [cluster_view_on_ray(Path(db).parent, j) for j in ids]
