"""``diag cluster``: a multi-rank job — step time per rank, slow rank and slow link, the rank to open next."""

from __future__ import annotations

from typing import Annotated

import typer

from diag.analyses.cluster import ClusterView, cluster_view, list_jobs
from diag.analyses.cluster_ray import cluster_views_on_ray, lake_of_engine
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.commands._format import cell, escape, fmt_count, fmt_ns, fmt_num, fmt_pct, table
from diag.errors import DiagError
from diag.grouping import describe_grouping
from diag.store import Store

JobOption = Annotated[
    int | None, typer.Option("--job", help="Job id (default: every job the evidence grouped of 2+ ranks).")
]


def _job_ids(store: Store, job: int | None) -> list[int]:
    jobs = list_jobs(store)
    if job is not None:
        if job not in {j["job_id"] for j in jobs}:
            raise DiagError(f"no job {job} with runs in {store.path}")
        return [job]
    return [j["job_id"] for j in jobs if j["multi_rank"]]


def _print(view: ClusterView) -> None:
    out = console()
    out.print(
        f"[bold]job {view.job_id}[/] {escape(view.name or '')}: {len(view.ranks)} ranks ({escape(view.step_source)})"
    )
    out.print(escape(describe_grouping(view.grouping)))
    tbl = table("rank", "run", "steps", "step", "computing", "comm not ovl.", "free", "wait", "vs median",
                title="per rank (totals over its steps)")  # fmt: skip
    for r in view.ranks:
        tbl.add_row(cell(r["rank"]), cell(r["run_id"]), fmt_count(r["steps"]), fmt_ns(r["step_ns"]),
                    fmt_ns(r["computing_ns"]), fmt_ns(r["comm_not_overlapped_ns"]), fmt_ns(r["free_ns"]),
                    fmt_ns(r.get("wait_ns")), fmt_pct(r["vs_median_pct"], signed=True))  # fmt: skip
    out.print(tbl)
    findings = table("severity", "impact", "category", "finding", title="cluster findings", show_lines=True)
    for f in view.findings:
        findings.add_row(cell(f.severity), fmt_pct(f.impact_pct), cell(f.category), cell(f.title))
    out.print(findings if view.findings else "cluster findings: none")
    for x in (x for x in view.links if x["slow"]):
        out.print(
            f"slow link {cell(x['src_rank'])}->{cell(x['dst_rank'])} {cell(x['transport'])}: "
            f"{fmt_num(x['bandwidth_gbps'], 'GB/s')}"
        )
    if view.open_next:
        out.print(f"[bold]open next:[/] rank {cell(view.open_next.rank)} (run {view.open_next.run_id}): "
                  f"{escape(view.open_next.why)}")  # fmt: skip


EngineOption = Annotated[
    str,
    typer.Option("--engine", help="local: this machine. ray: per-run summaries on Ray workers, over --lake."),
]
AddressOption = Annotated[
    str | None, typer.Option("--address", help="With --engine ray: the cluster (auto, ray://HOST:PORT).")
]


def cluster(
    db: DbOption = DEFAULT,
    job: JobOption = None,
    as_json: JsonOption = False,
    engine: EngineOption = "local",
    address: AddressOption = None,
) -> None:
    """A multi-rank job: step time per rank and step, slow ranks and links, the rank to open next."""
    if lake_of_engine(engine, db, address) is not None:  # #23: the same view, reduced from per-run tasks
        views = cluster_views_on_ray(db, job, address, _job_ids)
    else:
        with Store(db, read_only=True) as store:
            views = [cluster_view(store, j) for j in _job_ids(store, job)]
    if as_json:
        print_json({"db": db, "jobs": [v.to_json() for v in views]})
        return
    if not views:
        console().print(
            "no multi-rank job: no runs that the data says are ranks of one job (see `diag runs`)"
        )
    for v in views:
        _print(v)


def register(app: typer.Typer) -> None:
    app.command("cluster")(cluster)
