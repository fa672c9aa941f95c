"""``diag moe``: MoE expert load per layer and phase, the hot experts, and the hot rank's cost to its EP group."""

from __future__ import annotations

from typing import Annotated

import typer

from diag.analyses.finding import thresholds
from diag.analyses.moe import MoeView, moe_view
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.commands._format import cell, escape, fmt_count, fmt_ns, fmt_num, fmt_pct, table
from diag.errors import DiagError
from diag.i18n import t
from diag.store import Store, q

JobOption = Annotated[
    int | None, typer.Option("--job", help="Job id (default: the job with expert load data).")
]
RunOption = Annotated[
    int | None, typer.Option("--run", help="One run: its expert load only, no cross-rank figures.")
]


def no_load(where: str) -> str:
    """No expert load data here, and which files diag reads for it (cli.no_moe_load)."""
    return t("cli.no_moe_load", where=where)


class MoeUsageError(DiagError):
    """``--job`` and ``--run`` together, or an id that names nothing: a usage error (exit 2), one line."""

    exit_code = 2


def _default_job(store: Store) -> int | None:
    rows = q(store.cursor(), """SELECT r.job_id FROM expert_load e JOIN runs r USING (run_id)
                               WHERE r.job_id IS NOT NULL GROUP BY r.job_id
                               ORDER BY count(DISTINCT e.run_id) DESC, r.job_id LIMIT 1""")  # fmt: skip
    return rows[0][0] if rows else None


def _hot_ratio() -> float:
    return thresholds()["moe"]["hot_ratio"]


def _view(store: Store, job: int | None, run: int | None) -> MoeView | None:
    if job is not None and run is not None:
        raise MoeUsageError("give --job or --run, not both")
    try:
        if run is not None:
            return moe_view(store, run_id=run)
        job = job if job is not None else _default_job(store)
        return moe_view(store, job_id=job) if job is not None else None
    except LookupError as exc:
        raise MoeUsageError(f"{exc} in {store.path} (see `diag runs` / `diag cluster`)") from None


def _print(view: MoeView) -> None:
    out = console()
    scope = t("cli.run", run=view.run_id) if view.run_id is not None else t("cli.job", job=view.job_id)
    if not view.layers:
        out.print(escape(no_load(t("cli.no_moe_where", scope=scope))))
    for f in view.findings:
        out.print(f"[bold]{escape(f.title)}[/]")
        out.print(escape(f.suggestion))
    any_hot = any(layer["hot"] for layer in view.layers)
    if view.layers and not view.findings:
        if not any_hot:
            out.print(t("cli.moe_no_hot", scope=scope, ratio=_hot_ratio()))
        elif not view.multi_rank:
            out.print(t("cli.moe_hot_single_rank", scope=scope))
        else:
            out.print(t("cli.moe_hot_not_slower", scope=scope))
    hot = table("phase", "layer", "expert", "rank", "tokens", "× mean", "layer gini", "layer CV",
                title="hot experts (tokens ≥ hot_ratio × the layer's mean)")  # fmt: skip
    for layer in view.layers:
        for h in layer["hot"]:
            hot.add_row(cell(layer["phase"]), cell(layer["layer"]), cell(h["expert"]), cell(h["rank"]),
                        fmt_count(h["tokens"]), fmt_num(h["ratio"], "×", 1), fmt_num(layer["gini"], digits=2),
                        fmt_num(layer["cv"], digits=2))  # fmt: skip
    if any_hot:
        out.print(hot)
    if view.ranks:
        ranks = table("rank", "run", "expert-load tokens", "GroupedMatmul tokens / step", "GroupedMatmul / step", "vs median",
                      "all-to-all wait / step", title=f"per rank (wait from {view.wait_source or '—'})")  # fmt: skip
        for r in view.ranks:
            ranks.add_row(cell(r["rank"]), cell(r["run_id"]), fmt_count(r["tokens"]),
                          fmt_count(r["grouped_matmul_tokens"]), fmt_ns(r["grouped_matmul_ns"]),
                          fmt_pct(r["vs_median_pct"], signed=True), fmt_ns(r["alltoall_wait_ns"]))  # fmt: skip
        out.print(ranks)
    elif view.layers:
        by_phase: dict[str, list[str]] = {}
        for x in view.rank_tokens:
            by_phase.setdefault(cell(x["phase"]), []).append(f"rank {x['rank']}: {fmt_count(x['tokens'])}")
        for phase, parts in by_phase.items():
            out.print(t("cli.moe_tokens_per_rank", phase=escape(phase), parts=escape(", ".join(parts))))


def moe(
    db: DbOption = DEFAULT, job: JobOption = None, run: RunOption = None, as_json: JsonOption = False
) -> None:
    """MoE expert load: hot experts per layer and phase (prefill / decode), Gini and CV of the load, and per rank
    GroupedMatmul vs the EP group's median with the all-to-all wait it causes."""
    with Store(db, read_only=True) as store:
        view = _view(store, job, run)
    if as_json:
        empty = {"job_id": None, "run_id": None, "layers": [], "ranks": [], "findings": []}
        print_json(view.to_json() if view else empty)
        return
    if view is None:
        console().print(escape(no_load(t("cli.no_moe_where_db"))))
        return
    _print(view)


def register(app: typer.Typer) -> None:
    app.command("moe")(moe)
