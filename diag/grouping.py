"""Which stored runs form one job: the evidence in the data, never the folders the files came from.

Two runs belong to one multi-rank job when every one of these holds (rules in ``rules/grouping.toml``):

* both have a **known rank**, and the ranks differ (a job never holds a rank twice);
* the **same platform** and equal values in every ``[compatible]`` field both know (world size, profiler level,
  AI Core metrics), the rank below the other's world size, and no HCCL
  group (``parallel_group_info``) that the two describe with different members;
* **overlapping capture windows** (first to last event: device and host events, collectives, ProfilerSteps),
  by at least ``min_overlap`` of the shorter window, with ``clock_slack_ms`` for skew between hosts.

A job is a connected set of such runs in which every pair holds (a clique) and no rank repeats; a connected set
that breaks either is ambiguous (two captures of rank 0 overlap: which belongs with which, the data cannot say),
and its runs stay ungrouped.  Every other run is a job of its own: "a run with no peers is in no multi-rank job".

The decision is a function of the stored runs only, so the jobs do not depend on the order files were walked or
ingested, nor on whether a job's ranks came in one ingest or several.  ``regroup`` runs after every ingest;
a group that only gains members keeps its job id (each group takes the old job that holds most of its runs).
Each job records its evidence in ``jobs.grouping``: ``multi_rank``, ``ranks``, ``basis`` (one line per kind of
evidence) and ``guess`` — true when a rank comes only from a folder or file name (``rank3_…``), or ``why_alone``
for a job of one run.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import duckdb

from diag.grouping_text import describe_grouping, rank_or_run  # noqa: F401 - their home before #24
from diag.store import RULES_DIR, Store, q

RULES = RULES_DIR / "grouping.toml"
_NAME_RANK = re.compile(r"(?i)rank[_-]?(\d+)")  # the pattern finalize_run reads a rank from a name with
_INFO_RANK = re.compile(r"(?:^|/)profiler_info_(\d+)\.json$")  # torch_npu names it so when distributed
_DB_RANK = re.compile(r"(?:^|/)ascend_pytorch_profiler_(\d+)\.db$")


def rules() -> dict[str, Any]:
    with open(RULES, "rb") as fh:
        return tomllib.load(fh)


@dataclass
class RunFacts:
    """What one run says about which job it belongs to."""

    run_id: int
    run_key: str
    job_id: int | None
    platform: str
    source: str
    rank: int | None
    rank_basis: str | None
    lo_ns: int | None  # capture window (epoch ns), None when the data has no absolute time
    hi_ns: int | None
    fields: dict[str, Any] = field(default_factory=dict)  # the [compatible] fields the run knows
    groups: dict[str, list[int]] = field(default_factory=dict)  # HCCL group id -> global ranks
    group_names: dict[str, str] = field(default_factory=dict)


_FACTS_SQL = """
WITH spans AS (
  SELECT run_id, start_ns AS lo, end_ns AS hi FROM runs
  UNION ALL SELECT run_id, min(start_ns), max(start_ns + coalesce(elapse_ns, 0)) FROM comm_ops GROUP BY run_id
  UNION ALL SELECT run_id, min(start_ns), max(end_ns) FROM steps GROUP BY run_id),
w AS (SELECT run_id, min(lo) AS lo, max(hi) AS hi FROM spans GROUP BY run_id),
rel AS (SELECT run_id, list(relpath) AS relpaths FROM files WHERE run_id IS NOT NULL AND status <> 'failed'
        GROUP BY run_id)
SELECT r.run_id, r.run_key, r.job_id, r.name, r.platform, r.source, r.rank, w.lo, w.hi,
       r.profiler_level, r.aic_metrics, r.device_name, r.torch_npu_version, r.cann_version,
       json_extract_string(r.metadata, '$.distributed_args.world_size') AS world_size,
       json_extract_string(r.metadata, '$.distributed_args.rank') AS meta_rank,
       json_extract(r.metadata, '$.parallel_group_info')::VARCHAR AS groups,
       json_extract_string(r.versions, '$.distributed_backend') AS backend,
       r.config IS NOT NULL AS has_info, coalesce(rel.relpaths, []) AS relpaths
FROM runs r LEFT JOIN w USING (run_id) LEFT JOIN rel USING (run_id) ORDER BY r.run_id
"""


def load_facts(con: duckdb.DuckDBPyConnection, min_epoch_s: int) -> list[RunFacts]:
    out = []
    for row in con.execute(_FACTS_SQL).fetchall():
        (run_id, run_key, job_id, name, platform, source, rank, lo, hi, level, aic, device_name, npu, cann,
         world, meta_rank, groups, backend, has_info, relpaths) = row  # fmt: skip
        known = rank is not None and rank >= 0  # torch_npu writes rank_id -1 for a single process
        absolute = lo is not None and hi is not None and lo >= min_epoch_s * 1_000_000_000
        facts = RunFacts(
            run_id, run_key, job_id, platform, source or "", rank if known else None,
            _rank_basis(rank, name or "", platform, meta_rank, backend, has_info, relpaths) if known else None,
            lo if absolute else None, hi if absolute else None,
        )  # fmt: skip
        values = {"world_size": world, "profiler_level": level, "aic_metrics": aic, "device_name": device_name,
                  "torch_npu_version": npu, "cann_version": cann}  # fmt: skip
        facts.fields = {k: str(v) for k, v in values.items() if v not in (None, "")}
        _read_groups(facts, groups)
        out.append(facts)
    return out


def _rank_basis(rank: int, name: str, platform: str, meta_rank: Any, backend: Any, has_info: bool,
                relpaths: list[str]) -> str:  # fmt: skip
    """Where the run's rank comes from; a folder or file name is the weak one."""
    if any((m := _INFO_RANK.search(p)) and int(m[1]) == rank for p in relpaths):
        return "profiler_info"
    if meta_rank is not None and str(meta_rank).strip() == str(rank):
        return "profiler_metadata"
    if any((m := _DB_RANK.search(p)) and int(m[1]) == rank for p in relpaths):
        return "profiler db"
    named = _NAME_RANK.search(name)
    from_name = named is not None and int(named[1]) == rank
    if platform == "cuda" and backend is not None:
        return "Kineto distributedInfo"
    if from_name:
        return "folder or file name"  # finalize_run's fallback, or a parser that agrees with it: unproven
    return "profiler_info" if has_info else "export metadata"


def _read_groups(facts: RunFacts, text: str | None) -> None:
    try:
        info = json.loads(text) if text else None
    except ValueError:
        info = None
    if not isinstance(info, dict):
        return
    for gid, g in info.items():
        if isinstance(g, dict) and isinstance(g.get("global_ranks"), list):
            facts.groups[str(gid)] = sorted(int(r) for r in g["global_ranks"] if str(r).lstrip("-").isdigit())
            facts.group_names[str(gid)] = str(g.get("group_name") or gid)


# -- the decision ----------------------------------------------------------------------------------------------


def why_apart(a: RunFacts, b: RunFacts, r: dict[str, Any]) -> str | None:
    """Why ``a`` and ``b`` cannot be ranks of one job, or None when the evidence says they can."""
    if a.rank is None or b.rank is None:
        return "rank unknown"
    if a.platform != b.platform:
        return "different platforms"
    if a.rank == b.rank:
        return f"both are rank {a.rank}"
    for key in r["compatible"]["fields"]:
        if key in a.fields and key in b.fields and a.fields[key] != b.fields[key]:
            return f"different {key.replace('_', ' ')} ({a.fields[key]} vs {b.fields[key]})"
    for x, y in ((a, b), (b, a)):
        world = x.fields.get("world_size")
        if world is not None and world.isdigit() and y.rank >= int(world):
            return f"rank {y.rank} is outside world size {world}"
    for gid in a.groups.keys() & b.groups.keys():
        if a.groups[gid] != b.groups[gid]:
            return f"HCCL group {gid} has different members"
    share = window_overlap(a, b, r)
    if share is None:
        return "no absolute capture time"
    if share < r["windows"]["min_overlap"]:
        return f"capture windows overlap {100 * share:.0f}%"
    return None


def window_overlap(a: RunFacts, b: RunFacts, r: dict[str, Any]) -> float | None:
    """Overlap of the two capture windows as a share of the shorter one (clock slack allowed), capped at 1."""
    if a.lo_ns is None or b.lo_ns is None or a.hi_ns is None or b.hi_ns is None:
        return None
    slack = int(r["windows"]["clock_slack_ms"] * 1_000_000)
    common = min(a.hi_ns, b.hi_ns) - max(a.lo_ns, b.lo_ns) + slack
    shorter = min(a.hi_ns - a.lo_ns, b.hi_ns - b.lo_ns)
    if common <= 0:
        return 0.0
    return 1.0 if shorter <= 0 else min(1.0, common / shorter)


def partition(facts: list[RunFacts], r: dict[str, Any]) -> list[tuple[list[int], dict[str, Any]]]:
    """Every run in exactly one group, each with its ``grouping`` record (see the module doc)."""
    by_id = {f.run_id: f for f in facts}
    parent = {f.run_id: f.run_id for f in facts}

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    timed = sorted((f for f in facts if f.rank is not None and f.lo_ns is not None), key=lambda f: f.lo_ns)
    slack = int(r["windows"]["clock_slack_ms"] * 1_000_000)
    for i, a in enumerate(timed):  # a sweep over window starts: only runs that can overlap are compared
        for b in timed[i + 1 :]:
            if b.lo_ns > a.hi_ns + slack:  # type: ignore[operator]
                break
            if why_apart(a, b, r) is None:
                parent[root(a.run_id)] = root(b.run_id)
    components: dict[int, list[int]] = {}
    for f in facts:
        components.setdefault(root(f.run_id), []).append(f.run_id)
    out = []
    for ids in components.values():
        members = [by_id[i] for i in sorted(ids)]
        if len(members) == 1:
            out.append(([members[0].run_id], _alone(members[0], facts, r)))
            continue
        clash = _clash(members, r)
        if clash is None:
            out.append(([m.run_id for m in members], _evidence(members, r)))
        else:
            out += [([m.run_id], {"multi_rank": False, "guess": False, "basis": [], "why_alone": clash})
                    for m in members]  # fmt: skip
    return out


def _clash(members: list[RunFacts], r: dict[str, Any]) -> str | None:
    """Why a connected set of runs is no single job: a repeated rank, or a pair that cannot go together."""
    ranks = Counter(m.rank for m in members)
    twice = sorted(k for k, n in ranks.items() if n > 1 and k is not None)
    if twice:
        return (f"ambiguous: {ranks[twice[0]]} overlapping {members[0].platform} captures of rank {twice[0]} "
                "with compatible runs; which belong together the data cannot say")  # fmt: skip
    for i, a in enumerate(members):
        for b in members[i + 1 :]:
            why = why_apart(a, b, r)
            if why is not None:
                return f"ambiguous: runs {a.run_id} and {b.run_id} are linked through others but {why}"
    return None


def _alone(run: RunFacts, facts: list[RunFacts], r: dict[str, Any]) -> dict[str, Any]:
    if run.rank is None:
        why = "rank unknown (no rank in the run's metadata or name)"
    elif run.lo_ns is None:
        why = "no absolute capture time to match peers on"
    else:
        overlapping = [f for f in facts if f.run_id != run.run_id and f.platform == run.platform
                       and f.rank is not None and (window_overlap(run, f, r) or 0.0) > 0]  # fmt: skip
        why = "no run of the same platform with a known rank and an overlapping capture window"
        reasons = Counter(w for f in overlapping if (w := why_apart(run, f, r)) is not None)
        if reasons:
            why = f"no peer: the overlapping captures {reasons.most_common(1)[0][0]}"
    return {"multi_rank": False, "guess": False, "basis": [], "why_alone": why}


def _evidence(members: list[RunFacts], r: dict[str, Any]) -> dict[str, Any]:
    bases = Counter(m.rank_basis for m in members)
    basis = [f"rank ids from {b} ({n} of {len(members)} runs)" for b, n in sorted(bases.items())]
    shares = [window_overlap(a, b, r) or 0.0 for i, a in enumerate(members) for b in members[i + 1 :]]
    basis.append(f"capture windows overlap {100 * min(shares):.0f}% (least overlapping pair)")
    shared = {k: v for k, v in members[0].fields.items() if all(m.fields.get(k) == v for m in members)}
    basis.append(
        f"same platform {members[0].platform}"
        + "".join(f", {k.replace('_', ' ')} {v}" for k, v in shared.items())
    )
    ranks = sorted(m.rank for m in members if m.rank is not None)
    for gid in sorted(set.intersection(*(set(m.groups) for m in members))):
        if set(ranks) <= set(members[0].groups[gid]):
            basis.append(
                f"HCCL group {members[0].group_names[gid]} ({gid}) lists ranks {members[0].groups[gid]}"
            )
            break
    weak = set(r["guess"]["weak_rank_bases"])
    return {"multi_rank": True, "guess": any(m.rank_basis in weak for m in members), "ranks": ranks,
            "basis": basis}  # fmt: skip


# -- applying it ---------------------------------------------------------------------------------------------


def regroup(store: Store) -> None:
    """Regroup every stored run by the evidence (see the module doc), in one transaction."""
    r = rules()
    with store.transaction() as con:
        facts = load_facts(con, int(r["windows"]["min_epoch_s"]))
        groups = partition(facts, r)
        by_id = {f.run_id: f for f in facts}
        taken: set[int] = set()
        groups.sort(key=lambda g: (-len(g[0]), g[0][0]))
        for ids, grouping in groups:
            job_id = _kept_job(ids, by_id, taken) or _new_job(con, [by_id[i] for i in ids])
            taken.add(job_id)
            q(con, "UPDATE runs SET job_id = ? WHERE list_contains(?, run_id) AND job_id IS DISTINCT FROM ?",
              [job_id, ids, job_id])  # fmt: skip
            merged: dict[str, Any] = {}
            for i in ids:
                merged |= _parallel_groups(con, i)
            q(con, "UPDATE jobs SET grouping = ?::JSON, parallel_groups = ?::JSON WHERE job_id = ?",
              [json.dumps(grouping), json.dumps(merged) if merged else None, job_id])  # fmt: skip
        q(
            con,
            "DELETE FROM jobs WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.job_id = jobs.job_id) "
            "AND NOT EXISTS (SELECT 1 FROM postmortem_notes n WHERE n.job_id = jobs.job_id)",
        )


def _kept_job(ids: list[int], by_id: dict[int, RunFacts], taken: set[int]) -> int | None:
    """The old job a group keeps: the one holding most of its runs, on a tie the one of its earliest run (a run
    just ingested sits in its folder's job until now, and must not pull an established group over there)."""
    held: dict[int, list[int]] = {}
    for i in ids:
        job = by_id[i].job_id
        if job is not None and job not in taken:
            held.setdefault(job, []).append(i)
    if not held:
        return None
    return max(held, key=lambda j: (len(held[j]), -min(held[j])))


def _parallel_groups(con: duckdb.DuckDBPyConnection, run_id: int) -> dict[str, Any]:
    row = q(con, "SELECT json_extract(metadata, '$.parallel_group_info')::VARCHAR FROM runs WHERE run_id = ?",
            [run_id])  # fmt: skip
    try:
        value = json.loads(row[0][0]) if row and row[0][0] else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _new_job(con: duckdb.DuckDBPyConnection, members: list[RunFacts]) -> int:
    """A job for a group that no existing job holds: keyed by its members, named after their common folder."""
    key = "group:" + hashlib.sha256("\n".join(sorted(m.run_key for m in members)).encode()).hexdigest()[:16]
    folders = {posixpath.dirname(m.source.replace("\\", "/").rstrip("/")) for m in members}
    source = posixpath.commonpath(sorted(folders)) if len(folders) > 1 and all(folders) else min(folders)
    name = posixpath.basename(source.rstrip("!")) or source
    existing = q(con, "SELECT job_id FROM jobs WHERE job_key = ?", [key])
    if existing:
        return int(existing[0][0])
    return int(
        q(con, "INSERT INTO jobs (job_id, job_key, name, source) VALUES (nextval('seq_job'), ?, ?, ?) "
          "RETURNING job_id", [key, name, source])[0][0]
    )  # fmt: skip


# -- reading it ----------------------------------------------------------------------------------------------


def job_grouping(con: duckdb.DuckDBPyConnection, job_id: int | None) -> dict[str, Any] | None:
    """The job's grouping record, None for a job grouped by an older diag (by folder only) or no job."""
    if job_id is None:
        return None
    row = q(con, "SELECT grouping::VARCHAR FROM jobs WHERE job_id = ?", [job_id])
    return json.loads(row[0][0]) if row and row[0][0] else None


def is_multi_rank(grouping: dict[str, Any] | None) -> bool:
    """Whether the evidence made this job a multi-rank job (cluster findings, cross-rank claims need one)."""
    return bool(grouping and grouping.get("multi_rank"))
