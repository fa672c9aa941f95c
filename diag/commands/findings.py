"""``diag findings`` and ``diag breakdown``: ranked device findings and the device-time breakdown of runs."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from diag.analyses import owners
from diag.analyses.cluster_ray import device_findings_on_ray, lake_of_engine
from diag.analyses.counts import KernelCounts, kernel_counts
from diag.analyses.findings import device_findings
from diag.analyses.log_diagnosis import log_findings
from diag.analyses.runs import list_runs
from diag.analyses.stall_breakdown import BUCKETS, Breakdown, StepBreakdown, breakdown, bucket_label
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, per_run, print_failed, print_json
from diag.commands._format import (
    MISSING,
    cell,
    escape,
    fmt_count,
    fmt_ns,
    fmt_pct,
    fmt_share,
    path_tails,
    table,
)
from diag.commands.cluster import AddressOption, EngineOption
from diag.errors import DiagError
from diag.i18n import t
from diag.store import Store

# Finding categories that are not a share of device time (shown as — rather than a measured 0.0 %).
NOT_DEVICE_TIME = frozenset({"memory", "environment"})

RunOption = Annotated[int | None, typer.Option("--run", help="Run id (default: every run).")]


def _run_ids(store: Store, run: int | None) -> list[int]:
    ids = [r["run_id"] for r in list_runs(store) if r["start_ns"] is not None]
    if run is not None:
        if run not in {r["run_id"] for r in list_runs(store)}:
            raise DiagError(f"no run {run} in {store.path}")
        return [run]
    return ids


def _device_findings_on_ray(lake, ids: list[int], address: str | None):
    """#23: each run's device findings as a Ray task over the lake (equal to the local ones, tested)."""
    from diag.engine_ray import ray_session

    with ray_session(address):
        return device_findings_on_ray(lake, ids)


def findings(
    db: DbOption = DEFAULT,
    run: RunOption = None,
    as_json: JsonOption = False,
    engine: EngineOption = "local",
    address: AddressOption = None,
) -> None:
    """Ranked findings per run (device time and logs): category, severity, impact, evidence, suggestion."""
    lake = lake_of_engine(engine, db, address)
    with Store(db, read_only=True) as store:
        ids = _run_ids(store, run)
        if lake is not None:
            done, failed = _device_findings_on_ray(lake, ids, address)
        else:
            done, failed = per_run(ids, lambda rid: device_findings(store, rid))
        result: dict[int | None, list] = dict(done)
        if run is not None:
            result[run] = result.get(run, []) + log_findings(store, run)
        else:  # every log once, whether or not it belongs to a run
            logs = log_findings(store, None)
            if logs:
                result[None] = logs
        sources = {r["run_id"]: r["source"] for r in list_runs(store)}
    if as_json:
        print_json(
            {
                "db": db,
                "findings": [f.to_json() for fs in result.values() for f in fs],
                "failed_runs": [{"run_id": rid, "error": why} for rid, why in failed.items()],
            }
        )
        return
    out = console()
    tails = path_tails(sources.values())
    for rid, fs in result.items():
        where = f"run {rid} · {tails.get(sources.get(rid) or '', MISSING)}" if rid is not None else "logs"
        tbl = table(
            "severity",
            "impact",
            "category",
            "owner",
            "finding",
            "suggestion",
            title=escape(where),
            show_lines=True,
        )
        for f in fs:
            # a log, memory or environment finding has no share of device time: its 0.0 is "not measured", not "none"
            impact = None if f.category.startswith("log:") or f.category in NOT_DEVICE_TIME else f.impact_pct
            tbl.add_row(
                cell(f.severity),
                fmt_pct(impact),
                cell(f.category),
                cell(owners.of_finding(f).owner),
                cell(f.title),
                cell(f.suggestion),
            )
        out.print(tbl)
    print_failed(out, failed, "findings")


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

        def one(rid: int) -> tuple[Breakdown, KernelCounts]:
            bd = breakdown(store, rid)
            return bd, kernel_counts(store, rid, bd)

        done, failed = per_run(_run_ids(store, run), one)
    if as_json:
        runs = [breakdown_json(bd, c) for bd, c in done.values()]
        failed_runs = [{"run_id": rid, "error": why} for rid, why in failed.items()]
        print_json({"db": db, "runs": runs, "failed_runs": failed_runs})
        return
    out = console()
    for bd, c in done.values():
        try:
            _print_breakdown(out, bd, c)
        except Exception as exc:  # noqa: BLE001 - one run's odd figures must not hide the next runs
            failed[bd.run_id] = " ".join(f"{type(exc).__name__}: {exc}".split())
    print_failed(out, failed, "breakdown")


def _print_breakdown(out: Console, bd: Breakdown, c: KernelCounts) -> None:
    out.print(
        t(
            "cli.kernel_counts",
            run=bd.run_id,
            kernels=fmt_count(c.device_kernels),
            types=fmt_count(c.operator_types),
            per_step=fmt_count(c.kernels_per_step, 1),
        )
    )
    if c.note():
        out.print(f"[yellow]{t('cli.data_quality')}[/] {escape(c.note() or '')}")
    tbl = table("step", "E2E", *[bucket_label(b) for b in BUCKETS], title=t("cli.run", run=bd.run_id))
    for s in [*bd.steps, *([bd.total] if bd.total and len(bd.steps) > 1 else [])]:
        label = t("cli.total") if s is bd.total else cell(s.step)
        tbl.add_row(label, fmt_ns(s.e2e_ns), *[fmt_share(s.buckets.get(b), s.e2e_ns) for b in BUCKETS])
    out.print(tbl)
    for s in bd.steps:
        for r in s.ours_vs_export():
            flag = t("cli.mismatch") if r["mismatch"] else ""
            diff = "" if r["diff_pct"] is None else f" ({fmt_pct(r['diff_pct'], 3, signed=True)})"
            out.print(
                t(
                    "cli.ours_vs_export",
                    step=cell(s.step),
                    metric=escape(r["metric"]),
                    ours=fmt_ns(r["ours_ns"]),
                    export=fmt_ns(r["export_ns"]),
                    diff=diff,
                    flag=flag,
                )
            )


def register(app: typer.Typer) -> None:
    app.command("findings")(findings)
    app.command("breakdown")(breakdown_cmd)
