"""Time every page's analysis queries on a run of ~5M timeline events, and count the timeline's marks.

Targets: each page query ≤ 0.5 s warm, the whole-run timeline (first paint) ≤ 1 s on 5M events with ≤ 20k
marks whatever the run size, breakdown + findings ≤ 2 s.  The default 3.45M device tasks come with 0.86M host
ops and 0.69M Overlap Analysis slices: 5.0M events on the timeline.

The run is generated straight into a fresh store with SQL (decode steps on 4 compute streams + HCCL,
AI_CPU and MEMCPY tasks sprinkled in, host ops and Overlap Analysis slices), so the benchmark needs no
input files. Prints one line per query: warm time (best of 3) and, for the timeline, marks sent.

    python bench/bench_app_queries.py [--tasks 3450000] [--db bench_app.duckdb]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diag.analyses.cpu_fallback import device_fallbacks  # noqa: E402
from diag.analyses.findings import device_findings  # noqa: E402
from diag.analyses.runs import list_runs  # noqa: E402
from diag.analyses.stall_breakdown import breakdown  # noqa: E402
from diag.analyses.timeline import build_timeline, list_steps  # noqa: E402
from diag.store import Store  # noqa: E402

T0 = 1_736_405_443_000_000_000


def populate(store: Store, tasks: int, steps: int) -> int:
    con = store.con
    run = store.ensure_run(
        "bench:app", name="bench_2M_decode", platform="ascend", source="generated", job_id=None
    )
    per_step = tasks // steps
    step_ns = per_step * 12_000  # ~12 µs per task slot incl. gaps
    con.execute(
        f"""INSERT INTO device_task_rows (run_id, file_id, source, stream, stream_id, task_kind, task_type, name,
                start_ns, dur_ns, step)
        SELECT {run}, 0, 'trace_view', 'Stream ' || (i % 4 + 2), i % 4 + 2,
               CASE WHEN i % 997 = 0 THEN 'AI_CPU' WHEN i % 211 = 0 THEN 'MEMCPY' WHEN i % 53 = 0 THEN 'COMMUNICATION'
                    WHEN i % 3 = 0 THEN 'AI_VECTOR_CORE' WHEN i % 7 = 0 THEN 'MIX_AIC' ELSE 'AI_CORE' END,
               'AI_CORE', 'op_' || (i % 37), {T0} + i * 12000 + (i // {per_step}) * 2000000, 8000 + (i * 7919) % 20000,
               i // {per_step}
        FROM range({tasks}) t(i)"""
    ).fetchall()
    # kernel_details rows for the same tasks, as a Level1 export has them (exercises the tasks view's join), with
    # their ledger line: device_tasks then plans its kernel stand-in side as on a real run (and finds a trace)
    con.execute(
        "INSERT INTO files (file_id, run_id, relpath, source, sha256, parser, status, rows) "
        f"VALUES (1, {run}, 'kernel_details.csv', 'generated', '', 'ascend_kernel_details', 'ok', 0)"
    ).fetchall()
    # kernel_details rows for the same tasks, as a Level1 export has them (exercises the tasks view's join)
    con.execute(
        f"""INSERT INTO kernels (run_id, file_id, step, name, op_type, accelerator_core, task_kind, start_ns, dur_ns,
                input_dtypes)
        SELECT run_id, 1, step, name, 'Op' || (start_ns % 37), task_kind, task_kind, start_ns, dur_ns, 'FLOAT16'
        FROM device_tasks WHERE run_id = {run} AND task_kind <> 'MEMCPY'"""
    ).fetchall()
    con.execute(
        f"""INSERT INTO host_ops (run_id, file_id, pid, tid, process, category, name, start_ns, dur_ns)
        SELECT {run}, 0, 1, 100 + i % 2, 'Python', 'cpu_op', 'aten::op_' || (i % 50), {T0} + i * 48000 - 500000, 20000
        FROM range({tasks // 4}) t(i)"""
    ).fetchall()
    con.execute(
        f"""INSERT INTO steps (run_id, file_id, step, start_ns, end_ns)
        SELECT {run}, 0, s, {T0} + s * {step_ns} + s * 2000000 - 1000000, {T0} + (s + 1) * {step_ns} + s * 2000000
        FROM range({steps}) t(s)"""
    ).fetchall()
    con.execute(
        f"""INSERT INTO overlap_slices (run_id, file_id, kind, start_ns, dur_ns)
        SELECT {run}, 0, CASE WHEN i % 2 = 0 THEN 'Computing' ELSE 'Free' END, {T0} + i * 60000, 60000
        FROM range({tasks // 5}) t(i)"""
    ).fetchall()
    store.refresh_run_span(run)
    return run


def timed(fn, repeat: int = 3):  # noqa: ANN001, ANN201
    fn()  # warm
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=3_450_000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--db", type=Path, default=None)
    args = ap.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="diag-bench-")) / "bench_app.duckdb"
    db.unlink(missing_ok=True)
    store = Store(db)
    t = time.perf_counter()
    run = populate(store, args.tasks, args.steps)
    print(f"generated run {run}: {args.tasks:,} device tasks in {time.perf_counter() - t:.1f} s ({db})")
    steps = list_steps(store, run)
    mid = steps[len(steps) // 2]
    rows = []
    for label, fn in [
        ("runs page: list_runs", lambda: list_runs(store)),
        ("runs page: list_steps", lambda: list_steps(store, run)),
        ("timeline: whole run", lambda: build_timeline(store, run)),
        ("timeline: one step", lambda: build_timeline(store, run, mid[1], mid[2])),
        ("timeline: 2 ms window", lambda: build_timeline(store, run, mid[1], mid[1] + 2_000_000)),
        ("stalls: breakdown", lambda: breakdown(store, run)),
        ("fallback: AI_CPU ops", lambda: device_fallbacks(store, run)),
        ("findings: breakdown+findings", lambda: device_findings(store, run)),
    ]:
        secs, out = timed(fn)
        marks = getattr(out, "marks", None)
        mode = getattr(out, "mode", "")
        in_window = getattr(out, "marks_in_window", None)
        rows.append(
            {
                "query": label,
                "warm_s": round(secs, 4),
                "mode": mode,
                "events_in_window": in_window,
                "marks_sent": marks,
            }
        )
        extra = f"  {mode}: {in_window:,} events in window -> {marks:,} marks" if marks is not None else ""
        print(f"{label:28} {secs * 1000:8.1f} ms{extra}")
    print(json.dumps({"tasks": args.tasks, "results": rows}))
    store.close()


if __name__ == "__main__":
    main()
