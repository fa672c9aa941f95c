"""Ranked device findings for a run: what costs the most step time, with evidence and a suggestion.

Each finding carries its impact as a share of the run's device time (the breakdown's E2E) and a severity
from that impact (thresholds in rules/thresholds.toml, msprof-analyze's 5% / 3% by default).
"""

from __future__ import annotations

from typing import Any

from diag.analyses.advice import advice
from diag.analyses.cluster_findings import single_rank_wait
from diag.analyses.counts import KERNEL_FILTER, OP_TYPE_SQL, kernel_counts, unique_tasks_sql
from diag.analyses.cpu_fallback import FallbackOp, device_fallbacks, host_fallbacks
from diag.analyses.env_check import env_findings
from diag.analyses.finding import THRESHOLDS, Finding, thresholds
from diag.analyses.finding import pct as _pct
from diag.analyses.finding import severity as _severity
from diag.analyses.host_sync import host_sync
from diag.analyses.memory import memory_findings
from diag.analyses.op_util_findings import utilization_findings
from diag.analyses.shape_churn import extend_recompile
from diag.analyses.stall_breakdown import Breakdown, breakdown
from diag.i18n import t as tr
from diag.store import Store

# Finding, thresholds and THRESHOLDS live in diag.analyses.finding and stay importable from here.
__all__ = ["THRESHOLDS", "Finding", "device_findings", "thresholds"]


def device_findings(store: Store, run_id: int, bd: Breakdown | None = None) -> list[Finding]:
    t = thresholds()
    bd = bd or breakdown(store, run_id)
    total = bd.total
    e2e = total.e2e_ns if total else 0
    out: list[Finding] = []
    out += single_rank_wait(store, run_id, e2e)  # also for a rank with collectives but no device data
    out += env_findings(store, run_id)  # also for a run without device data
    if total is None or e2e == 0:
        return out + memory_findings(store, run_id)
    platform = _platform(store, run_id)
    if platform == "ascend":  # AI CPU tasks and torch_npu host fallbacks exist only there
        out += _fallback_findings(run_id, device_fallbacks(store, run_id, e2e), e2e, t)
        out += _host_fallback_findings(run_id, host_fallbacks(store, run_id, e2e), e2e)
    b = total.buckets
    if b["comm_exposed"]:
        pct = _pct(b["comm_exposed"], e2e)
        out.append(
            Finding(
                run_id,
                "communication",
                _severity(pct, t),
                tr("finding.communication.exposed.title", pct=pct),
                pct,
                b["comm_exposed"],
                {
                    "comm_total_ns": total.comm_total_ns,
                    "comm_exposed_ns": b["comm_exposed"],
                    **_comm_wait_transit(store, run_id),
                },
                advice("communication", platform),
                total.start_ns,
                total.end_ns,
                code="communication.exposed",
            )
        )
    movement = b["memcpy_exposed"] + b["layout"]
    if movement:
        pct = _pct(movement, e2e)
        out.append(
            Finding(
                run_id,
                "data_movement",
                _severity(pct, t),
                tr(
                    "finding.data_movement.exposed.title",
                    pct=pct,
                    copies_ms=b["memcpy_exposed"] / 1e6,
                    layout_ms=b["layout"] / 1e6,
                ),
                pct,
                movement,
                {
                    "memcpy_exposed_ns": b["memcpy_exposed"],
                    "memcpy_total_ns": total.memcpy_total_ns,
                    "layout_cast_ns": b["layout"],
                    **_top_names(store, run_id),
                },
                advice("data_movement", platform),
                total.start_ns,
                total.end_ns,
                code="data_movement.exposed",
            )
        )
    out += _idle_findings(store, run_id, b["idle"], e2e, t, bd, platform)
    out += _host_sync_findings(store, run_id, platform, e2e, t, bd)
    out += _recompile_findings(store, run_id, t, platform)
    out += utilization_findings(store, run_id, e2e)
    out.sort(key=lambda f: (-f.impact_pct, f.category))
    top = _top_ops(store, run_id, e2e, t["top_ops"]["count"], platform)
    if top:
        out.append(top)
    out += _data_quality_findings(store, run_id, bd)
    return out + memory_findings(store, run_id)


def _platform(store: Store, run_id: int) -> str:
    rows = store.cursor().execute("SELECT platform FROM runs WHERE run_id = ?", [run_id]).fetchall()
    return rows[0][0] if rows and rows[0][0] in ("cuda", "rocm") else "ascend"


def _host_sync_findings(
    store: Store, run_id: int, platform: str, e2e: int, t: dict[str, Any], bd: Breakdown
) -> list[Finding]:
    """Synchronisation calls inside the steps with the device idle behind them (diag/analyses/host_sync.py)."""
    lo, hi = bd.total.start_ns, bd.total.end_ns  # type: ignore[union-attr]
    hs = host_sync(store, run_id, platform, lo, hi, t["host_sync"]["max_callers"])
    pct = _pct(hs.idle_ns, e2e)
    if (
        not hs.calls
        or hs.idle_ns < t["host_sync"]["min_lost_us"] * 1000
        or pct < t["host_sync"]["min_lost_pct"]
    ):
        return []
    top = hs.callers[0]
    return [
        Finding(
            run_id,
            "host_sync",
            _severity(pct, t),
            tr("finding.host_sync.idle.title", calls=hs.calls, steps=hs.steps, per_step=hs.calls_per_step,
                 idle_ms=hs.idle_ns / 1e6, pct=pct, caller=top["caller"], call=top["call"]),
            pct,
            hs.idle_ns,
            {"calls": hs.calls, "steps": hs.steps, "calls_per_step": round(hs.calls_per_step, 2),
             "per_step": hs.per_step, "idle_ns": hs.idle_ns, "host_wait_ns": hs.wait_ns, "callers": hs.callers},
            advice("host_sync", platform),
            hs.first_start_ns,
            hs.last_end_ns,
            code="host_sync.idle",
        )
    ]  # fmt: skip


def _data_quality_findings(store: Store, run_id: int, bd: Breakdown) -> list[Finding]:
    """Duplicate kernel rows: counted once everywhere, and said (how many rows, which file)."""
    counts = kernel_counts(store, run_id, bd)
    if not counts.duplicates:
        return []
    return [
        Finding(
            run_id,
            "data_quality",
            "info",
            tr("finding.data_quality.duplicate_kernels.title", rows=counts.duplicate_rows),
            0.0,
            0,
            {"duplicates": counts.duplicates, "device_kernels": counts.device_kernels, "note": counts.note()},
            code="data_quality.duplicate_kernels",
        )
    ]


def _fallback_findings(run_id: int, ops: list[FallbackOp], e2e: int, t: dict[str, Any]) -> list[Finding]:
    if not ops or max(o.max_ns for o in ops) < t["ai_cpu"]["min_task_us"] * 1000:
        return []
    total = sum(o.total_ns for o in ops)
    pct = _pct(total, e2e)
    names = ", ".join(f"{o.op_type}×{o.count}" for o in ops[:5])
    return [
        Finding(
            run_id,
            "cpu_fallback",
            _severity(pct, t),
            tr("finding.cpu_fallback.aicpu_ops.title", count=sum(o.count for o in ops), names=names, pct=pct),
            pct,
            total,
            {
                "ops": [
                    {
                        "op_type": o.op_type,
                        "count": o.count,
                        "total_ns": o.total_ns,
                        "names": o.names,
                        "input_dtypes": o.input_dtypes,
                        "input_shapes": o.input_shapes,
                        "host_ops": o.host_ops,
                    }
                    for o in ops
                ]
            },
            ops[0].hint,
            min(o.first_start_ns for o in ops),
            max(o.last_end_ns for o in ops),
            code="cpu_fallback.aicpu_ops",
        )
    ]


def _host_fallback_findings(run_id: int, ops: list[FallbackOp], e2e: int) -> list[Finding]:
    if not ops:
        return []
    total = sum(o.total_ns for o in ops)
    return [
        Finding(
            run_id,
            "host_fallback",
            "low",
            tr("finding.host_fallback.inferred.title", names=", ".join(o.op_type for o in ops[:5])),
            _pct(total, e2e),
            total,
            {"ops": [{"op": o.op_type, "count": o.count, "host_self_ns": o.total_ns} for o in ops]},
            ops[0].hint,
            code="host_fallback.inferred",
        )
    ]


def _comm_wait_transit(store: Store, run_id: int) -> dict[str, int]:
    row = (
        store.cursor()
        .execute(
            "SELECT sum(wait_ns), sum(transit_ns), sum(sync_ns) FROM comm_ops WHERE run_id = ?", [run_id]
        )
        .fetchall()[0]
    )
    if row[0] is None:
        return {}
    return {"wait_ns": int(row[0]), "transit_ns": int(row[1] or 0), "sync_ns": int(row[2] or 0)}


def _top_names(store: Store, run_id: int) -> dict[str, Any]:
    """The copies and layout/cast ops that cost most (aggregated by name before any pattern matching)."""
    rows = (
        store.cursor()
        .execute(
            f"""WITH by_name AS (SELECT name, task_kind, count(*) AS n, sum(dur_ns) AS ns
                             FROM ({unique_tasks_sql()}) GROUP BY ALL),
                kinfo AS (SELECT name, any_value(op_type) AS op_type FROM kernels WHERE run_id = $run GROUP BY name)
           SELECT b.name, sum(b.n), sum(b.ns) FROM by_name b LEFT JOIN kinfo k USING (name)
           WHERE b.task_kind = 'MEMCPY' OR regexp_matches(lower(coalesce(k.op_type, '') || ' ' || b.name),
                 'transdata|(^|[^a-z])cast|transpose|tensormove|inplacecopy')
           GROUP BY b.name ORDER BY 3 DESC, 1 LIMIT 5""",  # by name on a tie: the same top 5 every run
            {"run": run_id},
        )
        .fetchall()
    )
    return {"top": [{"name": n, "count": int(c), "total_ns": int(s)} for n, c, s in rows]}


def _idle_findings(
    store: Store, run_id: int, idle_ns: int, e2e: int, t: dict[str, Any], bd: Breakdown, platform: str
) -> list[Finding]:
    if not idle_ns:
        return []
    pct = _pct(idle_ns, e2e)
    gap_ns = int(t["idle"]["gap_us"] * 1000)
    cur = store.cursor()
    lo, hi = bd.total.start_ns, bd.total.end_ns  # type: ignore[union-attr]
    gaps = cur.execute(
        """WITH busy AS (SELECT start_ns AS s, start_ns + dur_ns AS e FROM device_tasks
                         WHERE run_id = $run AND task_kind NOT IN ('SYNC') AND dur_ns > 0
                           AND start_ns + dur_ns > $lo AND start_ns < $hi),
                ends AS (SELECT s, e, max(e) OVER (ORDER BY s ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end
                         FROM busy)
           SELECT prev_end AS gap_start, s AS gap_end, s - prev_end AS gap FROM ends
           WHERE s - prev_end >= $gap ORDER BY gap DESC LIMIT $n""",
        {"run": run_id, "lo": lo, "hi": hi, "gap": gap_ns, "n": t["idle"]["max_gaps"]},
    ).fetchall()
    evidence_gaps = []
    for g0, g1, g in gaps:
        host = cur.execute(
            """SELECT name, sum(least(start_ns + dur_ns, $b) - greatest(start_ns, $a)) AS ns FROM host_ops
               WHERE run_id = $run AND start_ns < $b AND start_ns + dur_ns > $a AND name NOT LIKE 'ProfilerStep#%'
               GROUP BY name ORDER BY ns DESC, name LIMIT 3""",
            {"run": run_id, "a": g0, "b": g1},
        ).fetchall()
        evidence_gaps.append(
            {
                "start_ns": int(g0),
                "end_ns": int(g1),
                "gap_ns": int(g),
                "host_busy_with": [{"name": n, "ns": int(ns)} for n, ns in host],
            }
        )
    first = evidence_gaps[0] if evidence_gaps else None
    return [
        Finding(
            run_id,
            "idle",
            _severity(pct, t),
            tr("finding.idle.gaps.title", pct=pct, gaps=len(gaps), gap_us=t["idle"]["gap_us"]),
            pct,
            idle_ns,
            {"gaps": evidence_gaps},
            advice("idle", platform),
            first["start_ns"] if first else None,
            first["end_ns"] if first else None,
            code="idle.gaps",
        )
    ]


def _recompile_findings(store: Store, run_id: int, t: dict[str, Any], platform: str) -> list[Finding]:
    cur = store.cursor()
    calls, compile_ns = cur.execute(
        "SELECT count(*), coalesce(sum(dur_ns), 0) FROM host_ops WHERE run_id = ? AND name LIKE '%aclopCompileAndExecute%'",
        [run_id],
    ).fetchall()[0]
    dyn, static = cur.execute(
        "SELECT count(DISTINCT (name, start_ns)) FILTER (WHERE lower(op_state) = 'dynamic'), "
        "count(DISTINCT (name, start_ns)) FILTER (WHERE lower(op_state) = 'static') FROM kernels WHERE run_id = ?",
        [run_id],
    ).fetchall()[0]
    out = []
    if calls >= t["recompile"]["compile_calls"]:
        out.append(
            Finding(
                run_id,
                "recompile",
                "medium",
                tr("finding.recompile.compile_calls.title", calls=calls),
                0.0,
                int(compile_ns),
                {"compile_calls": int(calls), "compile_host_ns": int(compile_ns)},
                advice("recompile_compile", platform),
                code="recompile.compile_calls",
            )
        )
    if dyn and not static:
        out.append(
            Finding(
                run_id,
                "recompile",
                "low",
                tr("finding.recompile.all_dynamic.title", dyn=dyn),
                0.0,
                0,
                {"dynamic_ops": int(dyn)},
                advice("recompile_dynamic", platform),
                code="recompile.all_dynamic",
            )
        )
    # #20: compile time, the step it stalls most, the buckets that would cover the observed lengths
    return extend_recompile(out, store, run_id, platform, lambda pct: _severity(pct, t))


def _top_ops(store: Store, run_id: int, e2e: int, n: int, platform: str) -> Finding | None:
    # Each kernel once (duplicate rows are a data-quality note, not twice the time), by op type.
    rows = (
        store.cursor()
        .execute(
            f"""SELECT {OP_TYPE_SQL} AS op, kind, count(*), sum(dur_ns) FROM ({unique_tasks_sql()})
                WHERE {KERNEL_FILTER} AND kind <> 'COMMUNICATION'
                GROUP BY ALL ORDER BY 4 DESC, 1 LIMIT $n""",
            {"run": run_id, "n": n},
        )
        .fetchall()
    )
    if not rows:
        return None
    top = [
        {"op": op, "kind": k, "count": c, "total_ns": int(s), "pct": round(_pct(int(s), e2e), 2)}
        for op, k, c, s in rows
    ]
    return Finding(
        run_id,
        "top_ops",
        "info",
        tr("finding.top_ops.by_device_time.title", ops=", ".join(r["op"] for r in top[:3])),
        top[0]["pct"],
        top[0]["total_ns"],
        {"ops": top},
        advice("top_ops", platform),
        code="top_ops.by_device_time",
    )
