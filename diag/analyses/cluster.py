"""A multi-rank job at a glance: step time per rank and step, slow ranks, slow links, the rank to open next.

Inputs are the exporter's own tables of every run of the job: ``step_trace`` (step_trace_time.csv; the
ProfilerStep spans of ``steps`` when a run has none), ``comm_ops`` / ``comm_bandwidth`` (communication.json)
and ``comm_matrix`` (communication_matrix.json); group names come from the runs' ``parallel_group_info``.

* **slow rank**: computing (else step time) per step above the job's median by more than ``slow_rank_ratio``
  and a robust outlier (modified z-score over the MAD); its peers' collective *wait* says they wait for it.
  Several ranks above the median with no outlier is an *imbalance* (e.g. one pipeline stage computes more).
* **slow link**: per src → dst link and transport, Σ bytes / Σ transit time over the job (the matrix's
  ``*-total`` entries), against the median of the links of the same transport.  Newer exports number the
  link ends by rank *within the group*: they are mapped to global ranks through the group's members (the
  ranks whose communication.json names the group, in order), as msprof-analyze does.
* **rank transport**: per rank and transport, Σ bytes / Σ transit (comm_bandwidth) against the other ranks.

All sums run in DuckDB; thresholds are in rules/thresholds.toml ``[cluster]``.  Times are int ns, sizes
bytes, bandwidth GB/s (= bytes/ns).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from diag.analyses.cluster_findings import (
    ClusterFinding,
    OpenNext,
    link_findings,
    open_next,
    pp_stage,
    rank_findings,
)
from diag.analyses.finding import thresholds
from diag.grouping import is_multi_rank, job_grouping
from diag.store import Store, q

STEP_COLS = ("computing_ns", "comm_not_overlapped_ns", "overlapped_ns", "communication_ns", "free_ns",
             "preparing_ns")  # fmt: skip
# The rank as the data states it: a multi-rank job (diag.grouping) only holds runs of known, distinct ranks, and
# a run of unknown rank (a job of one run) stays NULL rather than borrowing its device or run id.
_JOB_RUNS = "jr AS (SELECT run_id, rank::INTEGER AS rank FROM runs WHERE job_id = $job)"


def _one_file(table: str) -> str:
    """The rows of one file per run (a run exported as text and as db holds the same data twice)."""
    return (
        f"f AS (SELECT run_id, min(file_id) AS file_id FROM {table} "
        f"WHERE run_id IN (SELECT run_id FROM jr) GROUP BY run_id)"
    )


@dataclass
class ClusterView:
    job_id: int
    name: str | None
    source: str | None
    step_source: str  # step_trace | profiler_step | none
    ranks: list[dict[str, Any]]  # one per rank: totals over its steps, vs the median
    steps: list[dict[str, Any]]  # rank × step
    groups: list[dict[str, Any]]  # per communication group: members, wait vs transit per rank
    links: list[dict[str, Any]]  # per src → dst link and transport
    transports: list[dict[str, Any]]  # per rank and transport
    findings: list[ClusterFinding]
    open_next: OpenNext | None
    grouping: dict[str, Any] | None = None  # diag.grouping's evidence; cluster findings need multi_rank

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["findings"] = [f.to_json() for f in self.findings]
        return out


def list_jobs(store: Store) -> list[dict[str, Any]]:
    """Every job with runs; ``multi_rank`` only where the evidence grouped several ranks (diag.grouping)."""
    cur = store.cursor()
    rows = q(
        cur,
        "SELECT j.job_id, j.name, j.source, count(r.run_id), count(DISTINCT r.rank), j.grouping::VARCHAR "
        "FROM jobs j JOIN runs r USING (job_id) GROUP BY ALL ORDER BY count(r.run_id) DESC, j.job_id",
    )
    out = []
    for *head, grouping in rows:
        job = dict(zip(("job_id", "name", "source", "runs", "ranks"), head, strict=True))
        job["grouping"] = json.loads(grouping) if grouping else None
        job["multi_rank"] = is_multi_rank(job["grouping"])
        out.append(job)
    return out


def cluster_view(store: Store, job_id: int) -> ClusterView:
    cur = store.cursor()
    job = q(cur, "SELECT name, source, parallel_groups FROM jobs WHERE job_id = ?", [job_id])
    if not job:
        raise LookupError(f"no job {job_id}")
    grouping = job_grouping(cur, job_id)
    t = thresholds()["cluster"]
    steps, source = _steps(cur, job_id)
    ranks = _rank_totals(steps)
    comm = _comm_by_group(cur, job_id)
    members = _members(comm)
    meta = _group_info(cur, job_id, job[0][2])
    groups = _groups(comm, members, meta)
    links = _links(cur, job_id, members, meta, t)
    transports = _transports(cur, job_id, t)
    _add_comm_totals(ranks, comm)
    findings: list[ClusterFinding] = []
    real = is_multi_rank(grouping)  # ranks are compared only when the data says they are ranks of one job
    if real:
        findings = rank_findings(ranks, t, pp_stage(meta)) + link_findings(links, transports, ranks, t)
    findings.sort(key=lambda f: -f.impact_ns)
    return ClusterView(
        job_id, job[0][0], job[0][1], source, ranks, steps, groups, links, transports, findings,
        open_next(findings, ranks) if real else None, grouping,
    )  # fmt: skip


# -- step time -----------------------------------------------------------------------------------------------


def _steps(cur, job_id: int) -> tuple[list[dict[str, Any]], str]:
    cols = ", ".join(f"s.{c}" for c in STEP_COLS)
    rows = q(
        cur,
        f"WITH {_JOB_RUNS}, {_one_file('step_trace')} "
        f"SELECT jr.rank, s.run_id, coalesce(s.step, 0), "
        f"coalesce(s.computing_ns, 0) + coalesce(s.comm_not_overlapped_ns, 0) + coalesce(s.free_ns, 0), {cols} "
        f"FROM step_trace s JOIN f USING (run_id, file_id) JOIN jr USING (run_id) ORDER BY 1, 3",
        {"job": job_id},
    )
    names = ("rank", "run_id", "step", "step_ns", *STEP_COLS)
    out = [dict(zip(names, r, strict=True)) for r in rows]
    have = {r["run_id"] for r in out}
    spans = q(
        cur,
        f"WITH {_JOB_RUNS} SELECT jr.rank, s.run_id, coalesce(s.step, 0), s.end_ns - s.start_ns "
        f"FROM steps s JOIN jr USING (run_id) WHERE NOT list_contains($have, s.run_id) ORDER BY 1, 3",
        {"job": job_id, "have": sorted(have)},
    )
    out += [dict(zip(names, (*r, *[None] * len(STEP_COLS)), strict=True)) for r in spans]
    source = "step_trace" if have else ("profiler_step" if spans else "none")
    return sorted(out, key=lambda r: (r["rank"], r["step"])), source


def _rank_totals(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    ranks: dict[int, dict[str, Any]] = {}
    for s in steps:
        r = ranks.setdefault(s["rank"], {"rank": s["rank"], "run_id": s["run_id"], "steps": 0, "step_ns": 0,
                                         "vs_median_pct": None, "robust_z": None} | dict.fromkeys(STEP_COLS))  # fmt: skip
        r["steps"] += 1
        r["step_ns"] += s["step_ns"] or 0
        for c in STEP_COLS:
            if s[c] is not None:
                r[c] = (r[c] or 0) + s[c]
    out = list(ranks.values())
    for r in out:
        r["mean_step_ns"] = r["step_ns"] // max(r["steps"], 1)
        comp = r["computing_ns"]
        r["mean_computing_ns"] = None if comp is None else comp // max(r["steps"], 1)
    return out


# -- communication ------------------------------------------------------------------------------------------


def _comm_by_group(cur, job_id: int) -> list[dict[str, Any]]:
    rows = q(
        cur,
        f"WITH {_JOB_RUNS}, {_one_file('comm_ops')} "
        "SELECT c.group_name, jr.rank, count(*), sum(c.transit_ns), sum(c.wait_ns), sum(c.sync_ns), "
        "sum(c.elapse_ns) FROM comm_ops c JOIN f USING (run_id, file_id) JOIN jr USING (run_id) "
        "WHERE c.group_name IS NOT NULL GROUP BY ALL ORDER BY 1, 2",
        {"job": job_id},
    )
    names = ("group", "rank", "ops", "transit_ns", "wait_ns", "sync_ns", "elapse_ns")
    return [dict(zip(names, r, strict=True)) for r in rows]


def _members(comm: list[dict[str, Any]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for c in comm:
        out.setdefault(c["group"], []).append(c["rank"])
    return {g: sorted(set(m)) for g, m in out.items()}


def _group_info(cur, job_id: int, job_groups: str | None) -> dict[int, dict[str, dict]]:
    """parallel_group_info per rank (each rank's profiler_metadata lists the groups it belongs to)."""
    rows = q(
        cur,
        f"WITH {_JOB_RUNS} SELECT jr.rank, json_extract(r.metadata, '$.parallel_group_info')::VARCHAR "
        "FROM runs r JOIN jr USING (run_id)",
        {"job": job_id},
    )
    out = {rank: json.loads(v) for rank, v in rows if v and v != "null"}
    if not out and job_groups:
        out[-1] = json.loads(job_groups)
    return {k: v for k, v in out.items() if isinstance(v, dict)}


_PRIORITY = ("tp", "pp", "ep", "dp", "cp", "sp", "mp", "dp_cp", "tp_dp", "embd", "default_group")


def _label(group: str, members: list[int], meta: dict[int, dict[str, dict]]) -> str:
    """The group's parallel name: by its HCCL id, else by the same member ranks (tp/dp/pp/ep…).

    Several groups may have the same members (Megatron's pp, mp and embd of a 2-stage job): then the first in
    ``_PRIORITY``, with the others in brackets.
    """
    names: set[str] = set()
    for info in meta.values():
        if group in info and isinstance(info[group], dict):
            return str(info[group].get("group_name") or group)
        for g in info.values():
            if isinstance(g, dict) and len(members) > 1 and sorted(g.get("global_ranks") or []) == members:
                names.add(str(g.get("group_name")))
    if not names:
        return f"group …{group[-6:]}"
    ranked = sorted(names, key=lambda n: (_PRIORITY.index(n) if n in _PRIORITY else len(_PRIORITY), n))
    return ranked[0] + (f" (= {', '.join(ranked[1:])})" if len(ranked) > 1 else "")


def _groups(comm: list[dict[str, Any]], members: dict[str, list[int]], meta) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for c in comm:
        g = out.setdefault(c["group"], {"group": c["group"], "label": _label(c["group"], members[c["group"]], meta),
                                        "members": members[c["group"]], "ops": 0, "transit_ns": 0, "wait_ns": 0,
                                        "ranks": []})  # fmt: skip
        transit, wait = c["transit_ns"] or 0, c["wait_ns"] or 0
        g["ops"] += c["ops"]
        g["transit_ns"] += transit
        g["wait_ns"] += wait
        g["ranks"].append(c | {"wait_ratio": wait / (wait + transit) if wait + transit else 0.0})
    for g in out.values():
        g["wait_ratio"] = (
            g["wait_ns"] / (g["wait_ns"] + g["transit_ns"]) if g["wait_ns"] + g["transit_ns"] else 0.0
        )
        g["least_waiting_rank"] = min(g["ranks"], key=lambda r: r["wait_ns"] or 0)["rank"]
    return sorted(out.values(), key=lambda g: -(g["wait_ns"] + g["transit_ns"]))


def _add_comm_totals(ranks: list[dict[str, Any]], comm: list[dict[str, Any]]) -> None:
    by_rank: dict[int, list[int]] = {}
    for c in comm:
        acc = by_rank.setdefault(c["rank"], [0, 0])
        acc[0] += c["wait_ns"] or 0
        acc[1] += c["transit_ns"] or 0
    for r in ranks:
        r["wait_ns"], r["transit_ns"] = by_rank.get(r["rank"], (None, None))


_LINKS_SQL = """
WITH {jr}, {f},
m AS (SELECT unnest($g) AS group_name, unnest($i) AS idx, unnest($r) AS member),
raw AS (
  SELECT jr.rank AS reporter, c.group_name, c.src_rank, c.dst_rank, upper(c.transport) AS transport,
         c.size_bytes, c.transit_ns, regexp_matches(c.op_key, '-(top\\d|middle|bottom\\d|total)$') AS local_ids,
         c.op_key LIKE '%-total' AS is_total
  FROM comm_matrix c JOIN f USING (run_id, file_id) JOIN jr USING (run_id)
  WHERE c.transport IS NOT NULL AND upper(c.transport) <> 'LOCAL' AND c.src_rank IS DISTINCT FROM c.dst_rank),
picked AS (SELECT * FROM raw QUALIFY NOT bool_or(is_total) OVER (PARTITION BY reporter, group_name) OR is_total),
mapped AS (
  SELECT p.*, (NOT p.local_ids) OR (ms.member = p.reporter AND md.member IS NOT NULL) AS ok,
         CASE WHEN NOT p.local_ids THEN p.src_rank WHEN ms.member = p.reporter THEN ms.member ELSE p.reporter END AS src,
         CASE WHEN NOT p.local_ids THEN p.dst_rank WHEN ms.member = p.reporter THEN md.member END AS dst
  FROM picked p LEFT JOIN m ms ON ms.group_name = p.group_name AND ms.idx = p.src_rank
                LEFT JOIN m md ON md.group_name = p.group_name AND md.idx = p.dst_rank),
links AS (
  SELECT group_name, src, dst, CASE WHEN ok THEN NULL ELSE dst_rank END AS dst_local, transport,
         sum(size_bytes)::BIGINT AS size_bytes, sum(transit_ns)::BIGINT AS transit_ns
  FROM mapped GROUP BY ALL),
med AS (
  SELECT transport, median(size_bytes / transit_ns) AS median_gbps, count(*) AS compared FROM links
  WHERE size_bytes >= $min_bytes AND transit_ns > 0 GROUP BY transport)
SELECT l.group_name, l.src, l.dst, l.dst_local, l.transport, l.size_bytes, l.transit_ns,
       CASE WHEN l.transit_ns > 0 THEN l.size_bytes / l.transit_ns END AS gbps, med.median_gbps, med.compared
FROM links l LEFT JOIN med USING (transport) ORDER BY gbps / med.median_gbps NULLS LAST, l.group_name, l.src, l.dst
"""


def _links(cur, job_id: int, members: dict[str, list[int]], meta, t: dict[str, Any]) -> list[dict[str, Any]]:
    flat = [(g, i, m) for g, ms in members.items() if len(ms) > 1 for i, m in enumerate(ms)]
    rows = q(
        cur,
        _LINKS_SQL.format(jr=_JOB_RUNS, f=_one_file("comm_matrix")),
        {"job": job_id, "g": [x[0] for x in flat], "i": [x[1] for x in flat], "r": [x[2] for x in flat],
         "min_bytes": t["min_link_bytes"]},
    )  # fmt: skip
    names = ("group", "src_rank", "dst_rank", "dst_local", "transport", "size_bytes", "transit_ns",
             "bandwidth_gbps", "median_gbps", "compared")  # fmt: skip
    out = []
    for r in rows:
        link = dict(zip(names, r, strict=True))
        link["label"] = _label(link["group"], members.get(link["group"], []), meta)
        bw, med = link["bandwidth_gbps"], link["median_gbps"]
        link["ratio"] = bw / med if bw is not None and med else None
        link["slow"] = bool(
            link["ratio"] is not None
            and link["ratio"] < t["slow_link_ratio"]
            and link["size_bytes"] >= t["min_link_bytes"]
            and (link["compared"] or 0) >= 3
        )
        link["compared_ok"] = link["size_bytes"] >= t["min_link_bytes"] and link["ratio"] is not None
        out.append(link)
    return sorted(out, key=lambda x: (not x["compared_ok"], x["ratio"] if x["ratio"] is not None else 1e9))


def _transports(cur, job_id: int, t: dict[str, Any]) -> list[dict[str, Any]]:
    rows = q(
        cur,
        f"WITH {_JOB_RUNS}, {_one_file('comm_bandwidth')}, "
        "b AS (SELECT jr.rank, upper(c.transport) AS transport, sum(c.size_bytes)::BIGINT AS size_bytes, "
        "sum(c.transit_ns)::BIGINT AS transit_ns FROM comm_bandwidth c JOIN f USING (run_id, file_id) "
        "JOIN jr USING (run_id) WHERE c.size_bytes > 0 AND c.transit_ns > 0 GROUP BY ALL), "
        "med AS (SELECT transport, median(size_bytes / transit_ns) AS m, count(*) AS n FROM b "
        "WHERE size_bytes >= $min_bytes GROUP BY transport) "
        "SELECT b.rank, b.transport, b.size_bytes, b.transit_ns, b.size_bytes / b.transit_ns, med.m, med.n "
        "FROM b LEFT JOIN med USING (transport) ORDER BY 1, 2",
        {"job": job_id, "min_bytes": t["min_link_bytes"]},
    )
    names = ("rank", "transport", "size_bytes", "transit_ns", "bandwidth_gbps", "median_gbps", "compared")
    out = [dict(zip(names, r, strict=True)) for r in rows]
    for x in out:
        x["ratio"] = x["bandwidth_gbps"] / x["median_gbps"] if x["median_gbps"] else None
    return out
