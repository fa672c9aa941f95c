"""``diag findings`` and ``diag breakdown``: ranked device findings and the device-time breakdown of runs."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from diag.analyses.counts import KernelCounts, kernel_counts
from diag.analyses.findings import device_findings
from diag.analyses.log_diagnosis import log_findings
from diag.analyses.runs import list_runs
from diag.analyses.stall_breakdown import BUCKET_LABELS, BUCKETS, Breakdown, StepBreakdown, breakdown
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, fmt_ns, print_json
from diag.errors import DiagError
from diag.store import Store

RunOption = Annotated[int | None, typer.Option("--run", help="Run id (default: every run).")]


def _run_ids(store: Store, run: int | None) -> list[int]:
    ids = [r["run_id"] for r in list_runs(store) if r["start_ns"] is not None]
    if run is not None:
        if run not in {r["run_id"] for r in list_runs(store)}:
            raise DiagError(f"no run {run} in {store.path}")
        return [run]
    return ids


def findings(db: DbOption = DEFAULT, run: RunOption = None, as_json: JsonOption = False) -> None:
    """Ranked findings per run (device time and logs): category, severity, impact, evidence, suggestion."""
    with Store(db, read_only=True) as store:
        result: dict[int | None, list] = {rid: device_findings(store, rid) for rid in _run_ids(store, run)}
        if run is not None:
            result[run] = result.get(run, []) + log_findings(store, run)
        else:  # every log once, whether or not it belongs to a run
            logs = log_findings(store, None)
            if logs:
                result[None] = logs
    if as_json:
        print_json({"db": db, "findings": [f.to_json() for fs in result.values() for f in fs]})
        return
    out = console()
    for rid, fs in result.items():
        table = Table(
            "severity", "impact", "category", "finding", "suggestion", title=f"run {rid}", show_lines=True
        )
        for f in fs:
            table.add_row(
                f.severity, f"{f.impact_pct:.1f}%", f.category, escape(f.title), escape(f.suggestion)
            )
        out.print(table)


def step_json(s: StepBreakdown) -> dict:
    return {
        "step": s.step,
        "start_ns": s.start_ns,
        "end_ns": s.end_ns,
        "e2e_ns": s.e2e_ns,
        "computing_ns": s.computing_ns,
        "comm_not_overlapped_ns": s.buckets["comm_exposed"],
        "communication_ns": s.comm_total_ns,
        "preparing_ns": s.preparing_ns,
        "free_ns": s.free_ns,
        "memcpy_total_ns": s.memcpy_total_ns,
        "buckets_ns": s.buckets,
        "vs_export": s.ours_vs_export(),
    }


def breakdown_json(bd: Breakdown, counts: KernelCounts | None = None) -> dict:
    return {
        "run_id": bd.run_id,
        "step_source": bd.step_source,
        "steps": [step_json(s) for s in bd.steps],
        "total": step_json(bd.total) if bd.total else None,
        "counts": counts.to_json() if counts else None,
    }


def breakdown_cmd(db: DbOption = DEFAULT, run: RunOption = None, as_json: JsonOption = False) -> None:
    """Device time per step: compute by class, communication, data movement, idle (they sum to E2E)."""
    with Store(db, read_only=True) as store:
        result = [breakdown(store, rid) for rid in _run_ids(store, run)]
        counts = [kernel_counts(store, bd.run_id, bd) for bd in result]
    if as_json:
        print_json({"db": db, "runs": [breakdown_json(b, c) for b, c in zip(result, counts, strict=True)]})
        return
    out = console()
    for bd, c in zip(result, counts, strict=True):
        per_step = "-" if c.kernels_per_step is None else f"{c.kernels_per_step:,.1f}"
        out.print(
            f"run {bd.run_id}: {c.device_kernels:,} device kernels · {c.operator_types:,} operator types · "
            f"{per_step} kernels per step"
        )
        if c.note():
            out.print(f"[yellow]data quality:[/] {c.note()}")
        table = Table("step", "E2E", *[BUCKET_LABELS[b] for b in BUCKETS], title=f"run {bd.run_id}")
        for s in [*bd.steps, *([bd.total] if bd.total and len(bd.steps) > 1 else [])]:
            label = "total" if s is bd.total else ("-" if s.step is None else str(s.step))
            table.add_row(
                label, fmt_ns(s.e2e_ns), *[f"{100 * s.buckets[b] / max(s.e2e_ns, 1):.1f}%" for b in BUCKETS]
            )
        out.print(table)
        for s in bd.steps:
            for r in s.ours_vs_export():
                flag = "  MISMATCH" if r["mismatch"] else ""
                out.print(
                    f"  step {s.step} {r['metric']}: ours {fmt_ns(r['ours_ns'])}, export "
                    f"{fmt_ns(r['export_ns'])} ({r['diff_pct']:+.3f}%){flag}"
                )


def register(app: typer.Typer) -> None:
    app.command("findings")(findings)
    app.command("breakdown")(breakdown_cmd)
