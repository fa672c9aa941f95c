"""CPU-fallback ops: device tasks that ran on the AI CPU instead of the AI Core, and inferred host fallbacks.

Device fallbacks are certain: the profiler says so (trace Task Type / kernel_details Accelerator Core
``AI_CPU``).  Host fallbacks (torch_npu running an aten op on the host CPU) have no profiler flag; they are
inferred — an aten op with long host self time and no device time at all — and reported as such.
Log lines that explain a fallback (W11001, "fall back to run on the CPU") join through ``log_evidence``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from diag.i18n import current_language
from diag.i18n import t as tr
from diag.store import Store

RULES = Path(__file__).resolve().parent.parent / "rules" / "fallback_hints.csv"
HOST_MIN_SELF_NS = 1_000_000  # per call: a real host fallback of a tensor op costs milliseconds
# aten ops that are host-only by nature (allocation, views, metadata): never a fallback.
HOST_ONLY = (
    "empty", "empty_strided", "empty_like", "view", "reshape", "as_strided", "select", "slice", "size",
    "detach", "t", "expand", "permute", "unsqueeze", "squeeze", "set_", "resize_", "item", "_local_scalar_dense",
    "to", "_to_copy", "copy_", "contiguous", "alias", "lift_fresh", "zeros", "ones", "full", "arange",
    "record_stream", "is_nonzero", "_unsafe_view", "split", "chunk", "unbind", "narrow", "transpose",
    "result_type", "flatten", "detach_", "numel", "dim", "stride", "broadcast_tensors", "expand_as", "view_as",
    "reshape_as", "type_as", "_reshape_alias", "unflatten", "movedim", "squeeze_", "unsqueeze_",
)  # fmt: skip


@dataclass
class FallbackOp:
    op_type: str
    where: str  # "AI_CPU" (device, certain) | "host" (inferred)
    count: int
    total_ns: int
    max_ns: int
    share_of_step_pct: float | None  # of the device time of the steps they fall in
    names: list[str]
    input_shapes: list[str]
    input_dtypes: list[str]
    host_ops: list[str]  # the framework ops that launched them (via flows)
    call_stack: str | None
    first_start_ns: int
    last_end_ns: int
    hint: str
    log_evidence: list[int] = field(default_factory=list)  # log_records ids, filled by the logs analysis


def _op_type_sql() -> str:
    # aclnn kernels are named aclnn<Api>_<Impl>_<OpType>: the last part is the op type when kernel_details
    # did not say (Level0, or a trace without kernel_details).
    return (
        """coalesce(d.op, CASE WHEN d.name LIKE 'aclnn%' THEN split_part(d.name, '_', -1) ELSE d.name END)"""
    )


def device_fallbacks(store: Store, run_id: int, e2e_ns: int | None = None) -> list[FallbackOp]:
    cur = store.cursor()
    rows = cur.execute(
        f"""
        WITH ai AS (  -- AI_CPU by the trace's task type or by kernel_details' (selective joins, not a full one)
            SELECT d.start_ns, d.dur_ns, d.name, {_op_type_sql()} AS op_type, d.input_shapes,
                   NULLIF(concat_ws(' -> ', d.input_dtypes, d.output_dtypes), '') AS input_dtypes
            -- each task once by (name, start), as diag.analyses.counts: a duplicated row is a data-quality note
            FROM (SELECT DISTINCT ON (d0.name, d0.start_ns) * FROM (
                  SELECT d.*, coalesce(d.op_type, k.op_type) AS op, k.input_shapes, k.input_dtypes, k.output_dtypes
                  FROM device_tasks d LEFT JOIN kernels k
                    ON k.run_id = d.run_id AND k.start_ns = d.start_ns AND k.name = d.name
                  WHERE d.run_id = $run AND d.task_kind = 'AI_CPU'
                  UNION ALL
                  SELECT d.*, coalesce(d.op_type, k.op_type), k.input_shapes, k.input_dtypes, k.output_dtypes
                  FROM kernels k JOIN device_tasks d
                    ON d.source = 'trace_view' AND k.run_id = d.run_id AND k.start_ns = d.start_ns AND k.name = d.name
                  WHERE k.run_id = $run AND k.task_kind = 'AI_CPU' AND d.task_kind <> 'AI_CPU') d0) d),
        launch AS (  -- the host op that launched each task: flow into the task, innermost enclosing op
            SELECT l.dst_ts_ns AS ts, arg_max(h.name, h.start_ns) AS host_op, arg_max(h.call_stack, h.start_ns) AS stack
            FROM links l JOIN host_ops h ON h.run_id = l.run_id AND h.tid = l.src_tid
                 AND l.src_ts_ns BETWEEN h.start_ns AND h.start_ns + h.dur_ns
            WHERE l.run_id = $run AND l.flow_cat = 'async_npu' AND h.category = 'cpu_op'
              AND l.dst_ts_ns IN (SELECT start_ns FROM ai)
            GROUP BY l.dst_ts_ns)
        SELECT ai.op_type, count(*), sum(ai.dur_ns), max(ai.dur_ns), list(DISTINCT ai.name),
               list(DISTINCT ai.input_shapes) FILTER (WHERE ai.input_shapes IS NOT NULL),
               list(DISTINCT ai.input_dtypes) FILTER (WHERE ai.input_dtypes IS NOT NULL),
               list(DISTINCT launch.host_op) FILTER (WHERE launch.host_op IS NOT NULL),
               any_value(launch.stack) FILTER (WHERE launch.stack IS NOT NULL),
               min(ai.start_ns), max(ai.start_ns + ai.dur_ns)
        FROM ai LEFT JOIN launch ON launch.ts = ai.start_ns
        GROUP BY ai.op_type ORDER BY sum(ai.dur_ns) DESC""",
        {"run": run_id},
    ).fetchall()
    hints = _hints(store)
    out = []
    for op_type, n, total, mx, names, shapes, dtypes, host_ops, stack, lo, hi in rows:
        out.append(
            FallbackOp(
                op_type=op_type or "?",
                where="AI_CPU",
                count=int(n),
                total_ns=int(total),
                max_ns=int(mx),
                share_of_step_pct=(100.0 * total / e2e_ns) if e2e_ns else None,
                names=sorted(names)[:10],
                input_shapes=sorted(shapes or [])[:10],
                input_dtypes=sorted(dtypes or [])[:10],
                host_ops=sorted(host_ops or [])[:10],
                call_stack=stack,
                first_start_ns=int(lo),
                last_end_ns=int(hi),
                hint=_hint_for(hints, op_type or "", " ".join(dtypes or [])),
            )
        )
    return out


def host_fallbacks(store: Store, run_id: int, e2e_ns: int | None = None) -> list[FallbackOp]:
    """aten ops with a call of ≥1 ms host self time and no device time at all (operator_details).

    Host-only ops (allocation, views, metadata) are never reported.  This is an inference, shown as such.
    """
    cur = store.cursor()
    host_only = ", ".join(f"'aten::{n}'" for n in HOST_ONLY)
    rows = cur.execute(
        f"""SELECT name, count(*), sum(host_self_ns), max(host_self_ns), list(DISTINCT input_shapes),
                   any_value(call_stack)
            FROM op_details
            WHERE run_id = $run AND name LIKE 'aten::%' AND name NOT IN ({host_only})
              AND coalesce(device_total_ns, 0) = 0
            GROUP BY name HAVING max(host_self_ns) >= {HOST_MIN_SELF_NS} ORDER BY sum(host_self_ns) DESC""",
        {"run": run_id},
    ).fetchall()
    out = []
    for name, n, total, mx, shapes, stack in rows:
        out.append(
            FallbackOp(
                op_type=name,
                where="host",
                count=int(n),
                total_ns=int(total),
                max_ns=int(mx),
                share_of_step_pct=(100.0 * total / e2e_ns) if e2e_ns else None,
                names=[name],
                input_shapes=sorted(s for s in shapes if s)[:10],
                input_dtypes=[],
                host_ops=[name],
                call_stack=stack,
                first_start_ns=0,
                last_end_ns=0,
                hint=tr("finding.host_fallback.inferred.suggestion"),
            )
        )
    return out


def _hints(store: Store) -> list[tuple[str, str, str]]:
    """The hint rules, by priority (read in Python: the rules path may hold glob characters DuckDB would expand),
    in the current language (the ``hint_zh`` column beside ``hint``)."""
    with open(RULES, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(line for line in fh if not line.lstrip().startswith("#")))
    rows.sort(key=lambda r: int(r["priority"]))
    lang = f"hint_{current_language()}"
    return [(r["op_pattern"], r["dtype_pattern"] or "", r.get(lang) or r["hint"]) for r in rows]


def _hint_for(hints: list[tuple[str, str, str]], op_type: str, dtypes: str) -> str:
    import re

    for op_pat, dtype_pat, hint in hints:
        if re.search(op_pat, op_type.lower()) and (not dtype_pat or re.search(dtype_pat, dtypes.upper())):
            return hint
    return ""
