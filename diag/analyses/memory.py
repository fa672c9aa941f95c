"""Memory of a run: peak allocated / reserved (when, in which step, during which op), headroom against the device's
capacity, caching-allocator slack, top allocators, memory outside the framework, churn, OOMs and the KV budget.

Generic over ``memory.source`` (Ascend: memory_record, npu_module_mem; CUDA: kineto, nsys): which series is the
process total is data (rules/memory_components.toml).  ``memory_summary`` is ``diag memory --json``.
"""

from __future__ import annotations

from typing import Any

from diag.analyses import memory_figures as mf
from diag.analyses import memory_logs
from diag.analyses.finding import Finding, thresholds
from diag.analyses.timeline import list_steps
from diag.devices import device_for_run
from diag.errors import DiagError
from diag.store import Store

TIMELINE_POINTS = 2000  # per series; the bins keep each one's maxima, so no peak is lost


def memory_steps(store: Store, run_id: int) -> list[dict[str, Any]]:
    """The run's step windows (ProfilerStep ranges, else the span of each step's kernels) to mark on the timeline."""
    return [{"step": s, "start_ns": a, "end_ns": b} for s, a, b in list_steps(store, run_id)]


def memory_timeline(store: Store, run_id: int, max_points: int = TIMELINE_POINTS) -> list[dict[str, Any]]:
    """Memory over time per series (source, component): ts_ns, allocated / reserved / active / slack bytes.

    A series with more than ``max_points`` samples is binned by time, each bin holding the first time and the
    maximum of each figure in it (an envelope: the peak and the slack peak survive).  npu_module_mem modules that
    never hold memory are left out; of a run whose rows name several devices, the device memory_summary reports."""
    rows = (
        store.cursor()
        .execute(
            f"""WITH m AS (SELECT * FROM {mf.MEM} WHERE source <> 'npu_module_mem' OR component IN
                           (SELECT component FROM {mf.MEM} WHERE source = 'npu_module_mem' AND reserved_bytes > 0)),
                 span AS (SELECT source, component, count(*) AS n, min(ts_ns) AS lo, max(ts_ns) AS hi
                          FROM m GROUP BY 1, 2),
                 b AS (SELECT m.*, CASE WHEN n <= $pts THEN ts_ns  -- few samples: each time its own point
                                   ELSE CAST(floor((ts_ns - lo) / ((hi - lo + 1) / $pts::DOUBLE)) AS BIGINT) END AS bin
                       FROM m JOIN span USING (source, component))
            SELECT min(ts_ns), source, component, max(allocated_bytes), max(reserved_bytes), max(active_bytes),
                   max(reserved_bytes - allocated_bytes)
            FROM b GROUP BY source, component, bin ORDER BY 2, 3, 1""",
            {"run": run_id, "dev": mf.peak_device(store.cursor(), run_id), "pts": max_points},
        )
        .fetchall()
    )
    keys = (
        "ts_ns",
        "source",
        "component",
        "allocated_bytes",
        "reserved_bytes",
        "active_bytes",
        "slack_bytes",
    )
    return [dict(zip(keys, r, strict=True)) for r in rows]


def runs_with_memory(store: Store) -> list[int]:
    rows = (
        store.cursor()
        .execute(
            "SELECT DISTINCT run_id FROM memory UNION SELECT DISTINCT run_id FROM op_memory "
            "UNION SELECT DISTINCT run_id FROM static_op_memory ORDER BY 1"
        )
        .fetchall()
    )
    return [int(r[0]) for r in rows]


def memory_summary(store: Store, run_id: int | None = None, log_file: str | None = None) -> dict[str, Any]:
    """The ``diag memory --json`` object of ``run_id`` (default: the last run with memory data), with the OOMs and
    KV-cache budget of its logs (or of ``log_file``)."""
    known = {int(r[0]) for r in store.cursor().execute("SELECT run_id FROM runs").fetchall()}
    if run_id is not None and run_id not in known:
        raise DiagError(f"no run {run_id} in {store.path}")
    if run_id is None and log_file is not None:
        run_id = _log_run(store, log_file)  # the log's own run, so that its OOM joins that run's profile
    elif run_id is None:
        with_memory = runs_with_memory(store)
        run_id = with_memory[-1] if with_memory else None
    fig = _figures(store, run_id) if run_id is not None else _empty(None)
    oom, kv = _log_figures(store, run_id, log_file)
    fig["oom"], fig["kv_cache"] = oom, kv
    # memory settings the logs state (HCCL_BUFFSIZE, npuMemSize, *_ALLOC_CONF, pool init failures)
    fig["log_settings"] = memory_logs.memory_log_lines(store, run_id=run_id, log_file=log_file)
    _capacity(store, run_id, fig, oom)
    fig["findings"] = [f.to_json() for f in _findings(run_id, fig)]
    return fig


def _log_run(store: Store, log_file: str) -> int | None:
    try:
        ids = memory_logs.file_ids(store, log_file)
    except ValueError as exc:
        raise DiagError(str(exc)) from None
    rows = (
        store.cursor()
        .execute("SELECT max(run_id) FROM files WHERE list_contains(?, file_id)", [ids])
        .fetchall()
    )
    return None if rows[0][0] is None else int(rows[0][0])


def memory_findings(store: Store, run_id: int) -> list[Finding]:
    """Findings of category ``memory`` for ``diag findings``: headroom, fragmentation, one op holding the peak,
    OOM verdicts and the KV-cache budget (thresholds in rules/thresholds.toml [memory])."""
    fig = _figures(store, run_id)
    fig["oom"], fig["kv_cache"] = _log_figures(store, run_id, None)
    _capacity(store, run_id, fig, fig["oom"])
    return _findings(run_id, fig)


def _findings(run_id: int | None, fig: dict[str, Any]) -> list[Finding]:
    from diag.analyses.memory_findings import findings_from_figures  # builds on this module's figures

    return findings_from_figures(run_id, fig)


def _platform(store: Store, run_id: int | None) -> str | None:
    if run_id is None:
        return None
    rows = store.cursor().execute("SELECT platform FROM runs WHERE run_id = ?", [run_id]).fetchall()
    return rows[0][0] if rows else None


def _empty(run_id: int | None, platform: str | None = None) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "platform": platform,
        "capacity_bytes": None,
        "capacity_from": None,
        "peak_allocated_bytes": None,
        "peak_reserved_bytes": None,
        "peak_ts_ns": None,
        "peak_step": None,
        "headroom_pct": None,
        "slack_peak_bytes": None,
        "components": [],
        "top_allocators": [],
        "oom": [],
        "kv_cache": None,
        "findings": [],
        # additions (README): the series used, when and where the peak was, what was live at it
        "sources": [],
        "reserved_series": None,
        "allocator_series": None,
        "capacity_pct": None,
        "device_name": None,
        "peak_ts_ms": None,
        "peak_op": None,
        "peak_allocated_ts_ns": None,
        "slack_peak_ts_ns": None,
        "slack_at_peak_bytes": None,
        "slack_at_peak_pct": None,
        "allocator_reserved_bytes": None,
        "peak_allocators": [],
        "non_app_bytes": None,
        "non_app_modules": [],
        "churn": None,
        "alloc_calls": [],
        "log_settings": [],
        "device": None,  # set when the run's rows name several devices: the one reported (holding the most)
        "static_graph": None,  # graph mode: static_op_mem.csv's planned memory (static_graph below)
    }


def _figures(store: Store, run_id: int) -> dict[str, Any]:
    cur = store.cursor()
    fig = _empty(run_id, _platform(store, run_id))
    dev = fig["device"] = mf.peak_device(cur, run_id)
    series = mf.series_peaks(cur, run_id, dev)
    fig["sources"] = sorted({s["source"] for s in series})
    fig["components"] = [
        {k: s[k] for k in ("source", "component", "peak_reserved_bytes", "peak_allocated_bytes", "samples")}
        for s in series
        # a module that never held memory (0), or of which only releases were seen (-1 in npu_module_mem), is no row
        if (s["peak_reserved_bytes"] or 0) > 0 or (s["peak_allocated_bytes"] or 0) > 0
    ]
    total = mf.pick(series, "reserved_total", "peak_reserved_bytes")
    alloc = mf.pick(series, "allocator", "peak_allocated_bytes")
    steps = memory_steps(store, run_id)
    if total is not None:
        fig["reserved_series"] = f"{total['source']}:{total['component']}"
        fig["peak_reserved_bytes"] = int(total["peak_reserved_bytes"])
        _place_peak(store, run_id, fig, int(total["peak_reserved_ts_ns"]), steps, dev)
    if alloc is not None:
        fig["allocator_series"] = f"{alloc['source']}:{alloc['component']}"
        fig["peak_allocated_bytes"] = int(alloc["peak_allocated_bytes"])
        fig["peak_allocated_ts_ns"] = int(alloc["peak_allocated_ts_ns"])
        sl = mf.slack(cur, run_id, alloc["source"], alloc["component"], dev)
        fig.update({k: sl[k] for k in ("slack_peak_bytes", "slack_peak_ts_ns", "slack_at_peak_bytes")})
        if sl["slack_at_peak_bytes"] is not None and sl["allocator_reserved_bytes"]:
            fig["slack_at_peak_pct"] = 100.0 * sl["slack_at_peak_bytes"] / sl["allocator_reserved_bytes"]
        fig["allocator_reserved_bytes"] = sl["allocator_reserved_bytes"]
    end = mf.last_record_ns(cur, run_id, dev)
    if end is not None:
        fig["top_allocators"] = mf.top_allocators(cur, run_id, end, _limit(), dev)
    outside = mf.non_framework(cur, run_id, dev)
    if outside:
        fig["non_app_bytes"], fig["non_app_modules"] = outside["peak_bytes"], outside["modules"]
    fig["churn"] = mf.churn(cur, run_id, steps, dev)
    fig["alloc_calls"] = mf.alloc_calls(cur, run_id)
    fig["static_graph"] = static_graph(store, run_id)
    return fig


STATIC_TOTAL = "TOTAL"  # static_op_mem.csv's last row: the graph's total allocation (CANN profiling doc)
STATIC_TOP = 10


def static_graph(store: Store, run_id: int) -> dict[str, Any] | None:
    """Graph-mode memory (static_op_mem.csv): the total the graph compiler planned and the largest ops, or None.

    ``total_bytes`` is the sum of the files' TOTAL rows when they have them (planned memory reuses addresses, so the
    ops' sum can exceed it), else the ops' sum; ``total_from`` says which.  ``ops`` are the op rows (one op in one
    graph), largest first."""
    cur = store.cursor()
    head = cur.execute(
        """SELECT sum(size_bytes) FILTER (op_name = $total), count(*) FILTER (op_name = $total),
                  sum(size_bytes) FILTER (op_name <> $total), count(*) FILTER (op_name <> $total),
                  count(DISTINCT graph_id) FILTER (op_name <> $total)
           FROM static_op_memory WHERE run_id = $run""",
        {"run": run_id, "total": STATIC_TOTAL},
    ).fetchall()[0]
    totals, n_totals, ops_bytes, n_ops, n_graphs = head
    if not n_ops and not n_totals:
        return None
    ops = cur.execute(
        """SELECT op_name, size_bytes, graph_id FROM static_op_memory
           WHERE run_id = $run AND op_name <> $total AND size_bytes IS NOT NULL
           ORDER BY size_bytes DESC, op_name, graph_id LIMIT $top""",
        {"run": run_id, "total": STATIC_TOTAL, "top": STATIC_TOP},
    ).fetchall()
    by_total = n_totals > 0 and totals is not None
    return {
        "total_bytes": int(totals) if by_total else (int(ops_bytes) if ops_bytes is not None else None),
        "total_from": "TOTAL rows" if by_total else "sum of ops",
        "ops_bytes": int(ops_bytes) if ops_bytes is not None else None,
        "op_count": int(n_ops),
        "graph_count": int(n_graphs),
        "ops": [{"name": n, "bytes": int(b), "graph_id": g} for n, b, g in ops],
    }


def _place_peak(
    store: Store, run_id: int, fig: dict[str, Any], ts: int, steps: list[dict[str, Any]], dev: str | None
) -> None:
    """When the peak was (ns, and ms from the run's start), in which step, during which op, what was live then."""
    cur = store.cursor()
    fig["peak_ts_ns"] = ts
    start = cur.execute("SELECT start_ns FROM runs WHERE run_id = ?", [run_id]).fetchall()
    if start and start[0][0] is not None:
        fig["peak_ts_ms"] = (ts - int(start[0][0])) / 1e6
    fig["peak_step"] = next((s["step"] for s in steps if s["start_ns"] <= ts <= s["end_ns"]), None)
    fig["peak_op"] = mf.op_at(cur, run_id, ts, dev)
    live = mf.live_at(cur, run_id, ts, _limit(), dev)
    whole = mf.live_total(cur, run_id, ts, dev) if live else 0
    fig["peak_allocators"] = [{**r, "share_pct": 100.0 * r["bytes"] / whole} for r in live] if whole else []


def _limit() -> int:
    return int(thresholds()["memory"]["top_allocators"])


def _capacity(store: Store, run_id: int | None, fig: dict[str, Any], oom: list[dict[str, Any]]) -> None:
    """Capacity from the device table (the run's hardware), else what an OOM message states, else unknown: the
    headroom is never computed from a guess."""
    device, _ = device_for_run(store, run_id) if run_id is not None else (None, "")
    if device is not None and device.capacity_bytes:
        fig["capacity_bytes"], fig["capacity_from"] = int(device.capacity_bytes), "device_table"
        fig["device_name"] = device.name
    else:
        stated = [o["capacity_bytes"] for o in oom if o.get("capacity_bytes")]
        if stated:
            fig["capacity_bytes"], fig["capacity_from"] = int(max(stated)), "log"
    cap, peak = fig["capacity_bytes"], fig["peak_reserved_bytes"]
    if cap and peak is not None:
        fig["capacity_pct"] = 100.0 * peak / cap
        fig["headroom_pct"] = 100.0 - fig["capacity_pct"]


def _log_figures(
    store: Store, run_id: int | None, log_file: str | None
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """OOM events and the KV-cache budget from the run's logs (or ``log_file``): diag/analyses/memory_logs.py."""
    return (
        memory_logs.oom_events(store, run_id=run_id, log_file=log_file),
        memory_logs.kv_cache(store, run_id=run_id, log_file=log_file),
    )
