"""Host synchronisation inside steps: calls that block the host until the device drains, and what they cost.

A sync call is a host op named in ``rules/host_sync_calls.csv`` (``cudaStreamSynchronize``, ``hipDeviceSynchronize``,
``aclrtSynchronizeStream``, ``aten::item`` …) or a runtime call that launched a device-to-host copy (``.cpu()``,
``.tolist()``: its correlated MEMCPY task goes device to host — ``DtoH`` in Kineto / nsys, ``device to host`` in
torch_npu exports, launched by an ``AscendCL@aclrtMemcpy…`` row there).  Nested calls are one call (``aten::item`` holds
``aten::_local_scalar_dense`` holds ``cudaMemcpyAsync`` + ``cudaStreamSynchronize``): only the outermost counts,
on any thread (torch_npu traces write the ``AscendCL@aclrtSynchronizeStream`` inside ``aten::item`` in the CANN
process, not the Python one), so that no idle time is counted twice.
Only calls that start inside a profiler step count; a run without steps counts its whole capture as one.

The time lost is the device idle time overlapping the calls: while the host waits it launches nothing, so
whatever part of the wait finds the device with nothing left to run is time the step loses.  The calling op is
the innermost host op (aten op, Python function, annotation) enclosing the call that is not a sync call itself
(nor Python's ``<built-in method item …>`` wrapper, which only repeats the call's name).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from diag.store import Store, sql_literal

CALLS = Path(__file__).resolve().parent.parent / "rules" / "host_sync_calls.csv"
# host rows that launch copies: Kineto's CUDA runtime / driver rows (HIP ones too), torch_npu's AscendCL calls
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver", "cann_api")
# device-to-host as each export spells it: Kineto / nsys "DtoH", torch_npu trace_view / msprof "device to host"
D2H_DIRECTION = r"(?i)^(dtoh|d2h|device[ _]to[ _]host)"


@dataclass(frozen=True)
class SyncRule:
    priority: int
    platform: str  # cuda | rocm | ascend | *
    kind: str  # scalar_read | stream_sync
    pattern: str
    example: str


def sync_rules() -> tuple[SyncRule, ...]:
    with open(CALLS, encoding="utf-8") as fh:
        rows = csv.DictReader(line for line in fh if not line.startswith("#"))
        out = [
            SyncRule(int(r["priority"]), r["platform"], r["kind"], r["pattern"], r["example"]) for r in rows
        ]
    return tuple(sorted(out, key=lambda r: r.priority))


def _kind_case(rules: tuple[SyncRule, ...]) -> str:
    whens = " ".join(
        f"WHEN regexp_matches(h.name, {sql_literal('(?i)' + r.pattern)}) THEN {sql_literal(r.kind)}"
        for r in rules
    )
    return f"CASE {whens} END"


def _sql(rules: tuple[SyncRule, ...]) -> str:
    """The calls (by the rows of ``rules``: the run's platform's) with step, caller and device idle overlapping."""
    runtime = ", ".join(sql_literal(c) for c in RUNTIME_CATEGORIES)
    return f"""
WITH kinds AS MATERIALIZED (  -- the rules' regexps once per distinct name, not once per host op (names repeat every step)
    SELECT h.name, {_kind_case(rules)} AS kind
    FROM (SELECT DISTINCT name FROM host_ops WHERE run_id = $run AND dur_ns > 0) h),
named AS (
    SELECT h.pid, h.tid, h.name, h.start_ns AS s, h.start_ns + h.dur_ns AS e, k.kind
    FROM host_ops h JOIN kinds k ON k.name = h.name AND k.kind IS NOT NULL WHERE h.run_id = $run AND h.dur_ns > 0),
d2h AS (
    SELECT DISTINCT h.pid, h.tid, h.name, h.start_ns AS s, h.start_ns + h.dur_ns AS e, 'd2h_copy' AS kind
    FROM host_ops h JOIN device_tasks d ON d.run_id = h.run_id AND d.connection_id = h.correlation
    WHERE h.run_id = $run AND h.category IN ({runtime}) AND d.task_kind = 'MEMCPY'
      AND regexp_matches(d.memcpy_direction, {sql_literal(D2H_DIRECTION)}) AND h.dur_ns > 0),
calls0 AS (SELECT pid, tid, s, e, min(name) AS name, min(kind) AS kind FROM (
             SELECT * FROM named WHERE kind IS NOT NULL UNION ALL SELECT * FROM d2h) GROUP BY pid, tid, s, e),
nested AS (SELECT DISTINCT i.pid, i.tid, i.s, i.e FROM calls0 i JOIN calls0 o
           ON o.s <= i.s AND o.e >= i.e AND (o.s, o.e, o.pid, o.tid) <> (i.s, i.e, i.pid, i.tid)
           WHERE (o.s, o.e) <> (i.s, i.e) OR o.pid < i.pid OR (o.pid = i.pid AND o.tid < i.tid)),
wins AS (SELECT step, min(start_ns) AS lo, max(end_ns) AS hi FROM steps WHERE run_id = $run AND step IS NOT NULL
         GROUP BY step
         UNION ALL SELECT NULL, $lo, $hi WHERE NOT EXISTS (SELECT 1 FROM steps WHERE run_id = $run AND step IS NOT NULL)),
calls AS (SELECT c.*, w.step FROM calls0 c ANTI JOIN nested USING (pid, tid, s, e)
          JOIN wins w ON c.s >= w.lo AND c.s < w.hi),
busy0 AS (SELECT start_ns AS s, start_ns + dur_ns AS e FROM device_tasks
          WHERE run_id = $run AND task_kind <> 'SYNC' AND dur_ns > 0),
busy1 AS (SELECT s, e, max(e) OVER (ORDER BY s, e ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_end
          FROM busy0),
busy2 AS (SELECT s, e, sum(CASE WHEN before_end IS NULL OR s > before_end THEN 1 ELSE 0 END)
                         OVER (ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS grp FROM busy1),
busy AS (SELECT min(s) AS s, max(e) AS e FROM busy2 GROUP BY grp),
-- busy time before t = busy_before(t) of the last merged interval starting at or before t, so a call's busy time
-- is busy_before(e) - busy_before(s): two ASOF look-ups instead of a range join of the calls with the intervals
busy_cum AS (SELECT s, e, coalesce(sum(e - s) OVER (ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
                          AS before_ns FROM busy),
at_s AS (SELECT c.pid, c.tid, c.s, c.e, coalesce(b.before_ns + least(c.s, b.e) - b.s, 0) AS before_s
         FROM (SELECT DISTINCT pid, tid, s, e FROM calls) c ASOF LEFT JOIN busy_cum b ON b.s <= c.s),
covered AS (SELECT a.pid, a.tid, a.s, a.e, coalesce(b.before_ns + least(a.e, b.e) - b.s, 0) - a.before_s AS busy_ns
            FROM at_s a ASOF LEFT JOIN busy_cum b ON b.s <= a.e),
enclosing AS (SELECT c.pid, c.tid, c.s, c.e, arg_max(h.name, h.start_ns) AS caller
              FROM calls c JOIN host_ops h ON h.start_ns <= c.s AND h.start_ns + h.dur_ns >= c.e
              WHERE h.run_id = $run AND h.pid = c.pid AND h.tid = c.tid AND h.name NOT LIKE 'ProfilerStep%'
                AND h.name NOT LIKE '<built-in method %'
                AND h.category IN ('cpu_op', 'python_function', 'user_annotation')
                AND (h.start_ns, h.start_ns + h.dur_ns) <> (c.s, c.e)
                AND NOT EXISTS (SELECT 1 FROM calls0 x WHERE x.pid = h.pid AND x.tid = h.tid AND x.s = h.start_ns
                                AND x.e = h.start_ns + h.dur_ns)
              GROUP BY ALL)
SELECT coalesce(n.caller, '(step top level)') AS caller, c.name, c.kind, c.step, c.s, c.e,
       c.e - c.s - coalesce(v.busy_ns, 0) AS idle_ns
FROM calls c LEFT JOIN covered v USING (pid, tid, s, e) LEFT JOIN enclosing n USING (pid, tid, s, e)
ORDER BY c.s"""


@dataclass
class HostSync:
    calls: int
    steps: int  # steps holding the calls' windows (1 when the run has no steps: the whole capture)
    idle_ns: int  # device idle overlapping the calls: the time lost
    wait_ns: int  # host time in the calls
    per_step: dict[str, int]  # step (as text; "capture" without steps) -> calls
    callers: list[dict[str, Any]]  # by time lost: caller, call, kind, calls, idle_ns, wait_ns
    first_start_ns: int | None
    last_end_ns: int | None

    @property
    def calls_per_step(self) -> float:
        return self.calls / max(1, self.steps)


def host_sync(store: Store, run_id: int, platform: str, lo: int, hi: int, max_callers: int = 10) -> HostSync:
    """The host sync calls of a run inside its steps (``lo``..``hi``: the capture, used when it has no steps)."""
    cur = store.cursor()
    rules = tuple(r for r in sync_rules() if r.platform in ("*", platform))
    # the calls summed per (caller, call, kind, step) in DuckDB; Python only folds those few groups
    groups = cur.execute(
        f"""WITH sync AS ({_sql(rules)})
            SELECT caller, name, kind, step, count(*), sum(idle_ns)::BIGINT, sum(e - s)::BIGINT, min(s), max(e)
            FROM sync GROUP BY ALL ORDER BY min(s)""",
        {"run": run_id, "lo": lo, "hi": hi},
    ).fetchall()
    n_steps = cur.execute(
        "SELECT count(DISTINCT step) FROM steps WHERE run_id = ? AND step IS NOT NULL", [run_id]
    ).fetchall()[0][0]
    per_step: dict[str, int] = {}
    by_caller: dict[tuple[str, str, str], dict[str, Any]] = {}
    for caller, name, kind, step, n, idle, wait, _first, _last in groups:
        key = "capture" if step is None else str(step)
        per_step[key] = per_step.get(key, 0) + int(n)
        agg = by_caller.setdefault(
            (caller, name, kind),
            {"caller": caller, "call": name, "kind": kind, "calls": 0, "idle_ns": 0, "wait_ns": 0},
        )
        agg["calls"] += int(n)
        agg["idle_ns"] += int(idle)
        agg["wait_ns"] += int(wait)
    callers = sorted(by_caller.values(), key=lambda a: (-a["idle_ns"], -a["calls"], a["caller"]))
    return HostSync(
        calls=sum(int(g[4]) for g in groups),
        steps=max(1, int(n_steps)),
        idle_ns=sum(int(g[5]) for g in groups),
        wait_ns=sum(int(g[6]) for g in groups),
        per_step=per_step,
        callers=callers[:max_callers],
        first_start_ns=int(groups[0][7]) if groups else None,
        last_end_ns=max(int(g[8]) for g in groups) if groups else None,
    )
