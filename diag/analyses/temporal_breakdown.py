"""Idle / compute / non-compute time of a CUDA run, as HolisticTraceAnalysis' ``get_temporal_breakdown``.

Per rank (a CUDA run is one rank: one Kineto file or one nsys export), all GPU streams together, over the
GPU events — kernels, memcpy and memset (HTA: the events with a stream):

* ``kernel_time`` = end of the last event − start of the first (the span);
* ``idle`` = span − the length of the union of all GPU events;
* ``compute`` = the length of the union of the compute kernels (kernels that are not NCCL communication,
  memcpy or memset: ``task_kind = 'CUDA_KERNEL'``);
* ``non_compute`` = span − compute − idle: communication and memory work not hidden under compute.

Interval arithmetic in DuckDB: events sorted by start, a new merged interval wherever an event starts after
the running maximum end of those before it, and the merged lengths summed.  Two things HTA does around the
definition are not done here: its loader drops the kernels of the last ProfilerStep (and those without a CPU
launch) when a trace has two steps or more, and its frames count ``cuda_sync`` events (which carry a stream)
as non-compute; here the whole trace counts and synchronisation waits are not GPU work.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from diag.store import Store

GPU_KINDS = ("CUDA_KERNEL", "COMMUNICATION", "MEMCPY")
COMPUTE_KIND = "CUDA_KERNEL"


@dataclass(frozen=True)
class TemporalBreakdown:
    run_id: int
    rank: int | None
    kernel_time_ns: int  # span of the GPU events
    idle_ns: int
    compute_ns: int
    non_compute_ns: int
    start_ns: int
    end_ns: int

    def pct(self, part_ns: int) -> float:
        return round(100.0 * part_ns / self.kernel_time_ns, 2) if self.kernel_time_ns else 0.0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out |= {
            "idle_pct": self.pct(self.idle_ns),
            "compute_pct": self.pct(self.compute_ns),
            "non_compute_pct": self.pct(self.non_compute_ns),
        }
        return out


_SQL = f"""
WITH ev AS (
    SELECT d.run_id, d.start_ns AS s, d.start_ns + d.dur_ns AS e, d.task_kind = '{COMPUTE_KIND}' AS compute
    FROM device_tasks d JOIN runs r USING (run_id)
    WHERE r.platform IN ('cuda', 'rocm') AND d.task_kind IN ({", ".join(f"'{k}'" for k in GPU_KINDS)})
      AND d.start_ns IS NOT NULL AND d.dur_ns IS NOT NULL {{where}}),
sets AS (SELECT run_id, 'all' AS what, s, e FROM ev UNION ALL SELECT run_id, 'compute', s, e FROM ev WHERE compute),
o AS (SELECT *, max(e) OVER (PARTITION BY run_id, what ORDER BY s, e
                             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_end FROM sets),
g AS (SELECT *, sum(CASE WHEN before_end IS NULL OR s > before_end THEN 1 ELSE 0 END)
                  OVER (PARTITION BY run_id, what ORDER BY s, e ROWS UNBOUNDED PRECEDING) AS grp FROM o),
m AS (SELECT run_id, what, min(s) AS ms, max(e) AS me FROM g GROUP BY run_id, what, grp)
SELECT m.run_id, any_value(r.rank), min(ms) FILTER (what = 'all'), max(me) FILTER (what = 'all'),
       coalesce(sum(me - ms) FILTER (what = 'all'), 0), coalesce(sum(me - ms) FILTER (what = 'compute'), 0)
FROM m JOIN runs r USING (run_id) GROUP BY m.run_id ORDER BY m.run_id
"""


def temporal_breakdown(store: Store, run_id: int | None = None) -> list[TemporalBreakdown]:
    """One breakdown per CUDA run that has GPU events (all of them, or ``run_id`` only)."""
    where = "AND d.run_id = $run" if run_id is not None else ""
    params = {"run": run_id} if run_id is not None else {}
    rows = store.cursor().execute(_SQL.format(where=where), params).fetchall()
    out = []
    for run, rank, start, end, busy, compute in rows:
        span = int(end - start)
        idle = span - int(busy)
        out.append(
            TemporalBreakdown(
                run_id=int(run),
                rank=rank,
                kernel_time_ns=span,
                idle_ns=idle,
                compute_ns=int(compute),
                non_compute_ns=span - int(compute) - idle,
                start_ns=int(start),
                end_ns=int(end),
            )
        )
    return out
