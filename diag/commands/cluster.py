"""``diag cluster``: a multi-rank job — step time per rank, slow rank and slow link, the rank to open next."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from diag.analyses.cluster import ClusterView, cluster_view, list_jobs
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, fmt_ns, print_json
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
        f"[bold]job {view.job_id}[/] {escape(view.name or '')}: {len(view.ranks)} ranks ({view.step_source})"
    )
    out.print(escape(describe_grouping(view.grouping)))
    table = Table("rank", "run", "steps", "step", "computing", "comm not ovl.", "free", "wait", "vs median",
                  title="per rank (totals over its steps)")  # fmt: skip
    for r in view.ranks:
        vs = "-" if r["vs_median_pct"] is None else f"{r['vs_median_pct']:+.1f}%"
        table.add_row("?" if r["rank"] is None else str(r["rank"]), str(r["run_id"]), str(r["steps"]), fmt_ns(r["step_ns"]),
                      fmt_ns(r["computing_ns"]), fmt_ns(r["comm_not_overlapped_ns"]), fmt_ns(r["free_ns"]),
                      fmt_ns(r.get("wait_ns")), vs)  # fmt: skip
    out.print(table)
    findings = Table("severity", "impact", "category", "finding", title="cluster findings", show_lines=True)
    for f in view.findings:
        findings.add_row(f.severity, f"{f.impact_pct:.1f}%", f.category, escape(f.title))
    out.print(findings)
    slow = [x for x in view.links if x["slow"]]
    for x in slow:
        out.print(
            f"slow link {x['src_rank']}->{x['dst_rank']} {escape(str(x['transport']))}: {x['bandwidth_gbps']:.2f} GB/s"
        )
    if view.open_next:
        out.print(f"[bold]open next:[/] rank {view.open_next.rank} (run {view.open_next.run_id}): "
                  f"{escape(view.open_next.why)}")  # fmt: skip


def cluster(db: DbOption = DEFAULT, job: JobOption = None, as_json: JsonOption = False) -> None:
    """A multi-rank job: step time per rank and step, slow ranks and links, the rank to open next."""
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
