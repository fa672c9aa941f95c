"""Which framework op got slower: each framework (aten / torch_npu / custom) op of a run with the device kernels it
launched, matched by name against the baseline run — the op-to-op view beneath the op classes of ``compare``.

A kernel's framework op is found from how the profiler links host and device:

* **flows** (``links``): torch_npu's ``async_npu`` flow (the aclnn op on the host → the task on the NPU), Kineto's
  ``ac2g`` / ``async_cpu_to_gpu`` (the CUDA runtime launch → the kernel) — the flow's destination is the task's
  start;
* **correlation**: a CUDA runtime / driver call (Kineto ``cuda_runtime``, nsys CUPTI runtime) carries the
  correlation id its kernel carries (``device_tasks.connection_id``), flows or not.

The launching call sits on a host thread inside the framework ops the model called; the kernel belongs to the
**outermost** one there whose name is a namespaced op (``aten::linear``, ``npu::npu_rms_norm``,
``vllm::unified_attention``; an NVTX range ``aten::mm, seq = 3, …`` counts by its op name). The outermost is what
the model code called, which is what both platforms share: the ops inside it (``aten::addmm``, ``aclnnAddmm``,
``cudaLaunchKernel``) are each platform's own dispatch.

Per op and side: ``calls`` (instances that launched at least one device task), ``kernels`` (device tasks, copies
included; syncs and a collective's hardware sub-tasks not), ``kernels_per_call``, ``device_ns`` (the tasks' summed time) and, when both runs have steps,
the time per step; ``ratio`` is A ÷ B per step (else of the totals) and ``delta_per_step_ms`` what A loses per step
(``delta_ms``: of the totals, without steps). An op on one side only has ``only`` = ``"a"`` or ``"b"``: the
platforms name their custom ops differently (``npu::npu_rms_norm`` against ``_C::rms_norm``), so each is listed
with its top kernel rather than paired by guess. ``linked_pct`` per side says how much of the run's device time
has a framework op at all: a run captured without flows or correlation (kernel_details only, nsys without CUDA
API tracing, a Kineto trace without its cpu_ops) has none — ``unlinked`` names such a side, and then no op is
compared (``rows`` is empty): its ops would otherwise all read as lost time on the other side.
"""

from __future__ import annotations

from typing import Any

from diag.analyses.counts import MARKER_TASK_TYPES
from diag.store import Store

LAUNCH_FLOWS = ("async_npu", "ac2g", "async_cpu_to_gpu")
RUNTIME_CATEGORIES = ("cuda_runtime", "cuda_driver", "cuda_api")
FRAMEWORK_CATEGORIES = ("cpu_op", "nvtx")
# a namespaced op name (the part before an NVTX range's ", seq = …")
FRAMEWORK_NAME = r"^[A-Za-z_][A-Za-z0-9_.]*::[^,]+"
# not counted as an op's kernels: syncs and the hardware sub-tasks of a collective (Notify Wait, SDMA…: the
# collective's own task is counted), and scheduler place holders — as diag.analyses.counts defines device kernels
NOT_LAUNCHED = ("SYNC", "COMM_TASK")

__all__ = ["framework_op_table", "launches_sql", "op_launches"]


def _lit(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


def _counted() -> str:
    return (
        f"coalesce(task_kind, '') NOT IN ({_lit(NOT_LAUNCHED)}) "
        f"AND coalesce(task_type, '') NOT IN ({_lit(MARKER_TASK_TYPES)})"
    )


def launches_sql() -> str:
    """CTEs (run ``$run``) ending in ``launches``: one row per device task that a host call launched — task name,
    start_ns, dur_ns and the launching call's thread (tid) and time (ts)."""
    return f"""
        -- a task stored twice (two exports of one run) is one task; min/max, not DISTINCT ON's arbitrary row,
        -- so the same database gives the same table on every call
        tasks AS (SELECT name, start_ns, max(dur_ns) AS dur_ns, min(connection_id) AS connection_id
                  FROM device_tasks WHERE run_id = $run AND {_counted()} GROUP BY name, start_ns),
        by_flow AS (SELECT t.name, t.start_ns, t.dur_ns, l.src_tid AS tid, l.src_ts_ns AS ts, 1 AS pref
                    FROM links l JOIN tasks t ON t.start_ns = l.dst_ts_ns
                    WHERE l.run_id = $run AND l.flow_cat IN ({_lit(LAUNCH_FLOWS)})),
        by_corr AS (SELECT t.name, t.start_ns, t.dur_ns, h.tid, h.start_ns AS ts, 0 AS pref
                    FROM tasks t JOIN host_ops h ON h.run_id = $run AND h.correlation = t.connection_id
                    WHERE h.category IN ({_lit(RUNTIME_CATEGORIES)})),
        -- one launching call per task: the correlation id's (exact) before a flow arrow's, then the earliest
        picked AS (SELECT name, start_ns, any_value(dur_ns) AS dur_ns,
                          arg_min({{'tid': tid, 'ts': ts}}, [pref, ts, coalesce(tid, -1)]) AS call
                   FROM (SELECT * FROM by_corr UNION ALL SELECT * FROM by_flow) GROUP BY name, start_ns),
        launches AS (SELECT name, start_ns, dur_ns, call.tid AS tid, call.ts AS ts FROM picked)"""


def _owner_sql() -> str:
    """SELECT per framework op: calls, kernels, device ns and the kernel name with the most time."""
    return f"""
        WITH {launches_sql()},
             fw AS (SELECT tid, start_ns, dur_ns, regexp_extract(name, '{FRAMEWORK_NAME}', 0) AS op
                    FROM host_ops WHERE run_id = $run AND category IN ({_lit(FRAMEWORK_CATEGORIES)})
                         AND regexp_matches(name, '{FRAMEWORK_NAME}')),
             owned AS (SELECT x.name, x.start_ns, any_value(x.dur_ns) AS dur_ns, any_value(x.tid) AS tid,
                              arg_min(h.op, (h.start_ns, -h.dur_ns, h.op)) AS op,  -- ties: by name
                              min(h.start_ns) AS call_ns
                       FROM launches x JOIN fw h ON h.tid = x.tid AND x.ts BETWEEN h.start_ns AND h.start_ns + h.dur_ns
                       GROUP BY x.name, x.start_ns),
             per_kernel AS (SELECT op, name, sum(dur_ns) AS ns FROM owned GROUP BY op, name)
        SELECT o.op, count(DISTINCT (o.tid, o.call_ns)), count(*), sum(o.dur_ns)::BIGINT,
               (SELECT k.name FROM per_kernel k WHERE k.op = o.op ORDER BY k.ns DESC, k.name LIMIT 1)
        FROM owned o GROUP BY o.op"""


def op_launches(store: Store, run_id: int) -> dict[str, dict[str, Any]]:
    """Framework op → {calls, kernels, device_ns, top_kernel} for one run (module doc)."""
    rows = store.cursor().execute(_owner_sql(), {"run": run_id}).fetchall()
    return {
        op: {"calls": int(calls), "kernels": int(n), "device_ns": int(ns), "top_kernel": top}
        for op, calls, n, ns, top in rows
    }


def _device_ns(store: Store, run_id: int) -> int:
    row = (
        store.cursor()
        .execute(
            f"""SELECT sum(dur_ns) FROM (SELECT DISTINCT ON (name, start_ns) dur_ns FROM device_tasks
                WHERE run_id = ? AND {_counted()})""",
            [run_id],
        )
        .fetchone()
    )
    return int(row[0] or 0)


def _side(got: dict[str, Any] | None, steps: int, suffix: str) -> dict[str, Any]:
    calls = got["calls"] if got else None
    ns = got["device_ns"] if got else None
    return {
        f"calls_{suffix}": calls,
        f"kernels_{suffix}": got["kernels"] if got else None,
        f"kernels_per_call_{suffix}": got["kernels"] / calls if got and calls else None,
        f"device_{suffix}_ns": ns,
        f"per_step_{suffix}_ms": ns / steps / 1e6 if ns is not None and steps else None,
        f"top_kernel_{suffix}": got["top_kernel"] if got else None,
    }


def _row(op: str, a: dict | None, b: dict | None, steps_a: int, steps_b: int) -> dict[str, Any]:
    row: dict[str, Any] = {"op": op, "only": None if a and b else ("a" if a else "b")}
    row |= _side(a, steps_a, "a") | _side(b, steps_b, "b")
    ta, tb = row["device_a_ns"] or 0, row["device_b_ns"] or 0
    per_step = bool(steps_a and steps_b)
    pa, pb = (ta / steps_a, tb / steps_b) if per_step else (ta, tb)
    row["ratio"] = pa / pb if a and b and pb else None
    row["delta_per_step_ms"] = (pa - pb) / 1e6 if per_step else None
    row["delta_ms"] = (ta - tb) / 1e6
    return row


def framework_op_table(store: Store, run_a: int, run_b: int, steps_a: int, steps_b: int) -> dict[str, Any]:
    """Per framework op on A and B (module doc), the largest loss of A first: {"rows": [...], "linked_pct_a",
    "linked_pct_b"}. ``steps_*`` = 0 where a side has no steps (its figures are totals then)."""
    oa, ob = op_launches(store, run_a), op_launches(store, run_b)
    # a side without any link is not "every op on the other side only": it says nothing, so nothing is compared
    unlinked = [side for side, got in (("a", oa), ("b", ob)) if not got]
    ops = set() if unlinked else set(oa) | set(ob)
    rows = [_row(op, oa.get(op), ob.get(op), steps_a, steps_b) for op in ops]
    key = "delta_per_step_ms" if steps_a and steps_b else "delta_ms"
    rows.sort(key=lambda r: (-r[key], r["op"]))
    out: dict[str, Any] = {"rows": rows, "per_step": bool(steps_a and steps_b), "unlinked": unlinked}
    for side, run, got in (("a", run_a, oa), ("b", run_b, ob)):
        whole = _device_ns(store, run)
        linked = sum(g["device_ns"] for g in got.values())
        out[f"linked_pct_{side}"] = 100.0 * linked / whole if whole else None
    return out
