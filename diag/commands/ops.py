"""``diag ops``: the kernel / op table of a run (calls, total, mean, min, max, share, core type, shapes, dtypes)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from diag.analyses.ops import figures_table, op_table
from diag.analyses.ops_shapes import op_shapes, varying_axes
from diag.analyses.runs import list_runs
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.commands._format import cell, escape, fmt_count, fmt_ms, fmt_num, fmt_pct, fmt_ratio, table
from diag.commands.ops_util import print_util, with_utilization
from diag.errors import DiagError
from diag.i18n import t
from diag.store import Store

TOP_SHOWN = 25  # rows printed when --top is not given (--json prints every row then)


class By(StrEnum):
    op = "op"
    kernel = "kernel"
    op_class = "class"


class RunChoiceError(DiagError):
    """No --run given and the database holds several runs: a usage matter."""

    exit_code = 2


RunOption = Annotated[int | None, typer.Option("--run", help="Run id (default: the only run with kernels).")]
ByOption = Annotated[By, typer.Option("--by", help="Group by operator type, kernel name or op class.")]
BaselineOption = Annotated[
    int | None,
    typer.Option("--baseline", help="Run id of the baseline (the CUDA run): its op classes side by side."),
]
TopOption = Annotated[
    int | None,
    typer.Option("--top", min=0, help=f"Rows shown, largest total first (default {TOP_SHOWN}; 0: all)."),
]


UtilOption = Annotated[
    bool, typer.Option("--util", help="Utilization: achieved TFLOPS and GB/s, MFU, bandwidth %, bound class.")
]
ShapesOption = Annotated[
    str | None,
    typer.Option(
        "--shapes", metavar="NAME", help="Instead: the distinct input shapes of this op type (or kernel)."
    ),
]


def _pick_run(store: Store, run: int | None) -> int:
    known = [r["run_id"] for r in list_runs(store)]
    if run is not None:
        if run not in known:
            raise DiagError(f"no run {run} in {store.path}")
        return run
    with_kernels = [rid for rid in known if figures_table(store, rid) != "none"]
    if len(with_kernels) == 1:
        return with_kernels[0]
    if not with_kernels:
        raise DiagError(f"no run with kernels in {store.path}: ingest a profile first")
    raise RunChoiceError(
        t("cli.pick_run_kernels", n=len(with_kernels), choices=", ".join(map(str, with_kernels)))
    )


def ops(
    db: DbOption = DEFAULT,
    run: RunOption = None,
    by: ByOption = By.op,
    baseline: BaselineOption = None,
    top: TopOption = None,
    shapes: ShapesOption = None,
    util: UtilOption = False,
    as_json: JsonOption = False,
) -> None:
    """Per operator type, kernel name or op class: calls, total, mean, min, max, share of kernel time, core type,
    distinct input shapes and dtypes; with --baseline, the baseline's op class figures and the per-step ratio."""
    if shapes is not None:
        _shapes(db, run, by.value, shapes, as_json)
        return
    with Store(db, read_only=True) as store:
        run_id = _pick_run(store, run)
        if baseline is not None and baseline not in {r["run_id"] for r in list_runs(store)}:
            raise DiagError(f"no run {baseline} in {store.path}")
        rows = op_table(store, run_id, by.value, baseline)
        if util:  # the utilization keys added to each row (#20); printed as their own table
            rows = with_utilization(store, run_id, by.value, rows)
    shown = rows if top == 0 or (top is None and as_json) else rows[: top or TOP_SHOWN]
    if util:
        print_util(run_id, by.value, shown, len(rows), as_json)
        return
    if as_json:
        print_json({"run_id": run_id, "by": by.value, "baseline_run_id": baseline, "rows": shown})
        return
    _print(run_id, by.value, baseline, shown, len(rows))


def _shapes(db: str, run: int | None, by: str, name: str, as_json: bool) -> None:
    """``--shapes NAME``: per distinct input shape, calls and time, and the value of each varying dimension."""
    if by == "class":
        raise RunChoiceError("--shapes is per op type or kernel: use --by op or --by kernel")
    with Store(db, read_only=True) as store:
        run_id = _pick_run(store, run)
        rows = op_shapes(store, run_id, name, by)
    if not rows:
        raise DiagError(f"no {'op type' if by == 'op' else 'kernel'} {name!r} in run {run_id}")
    summary = varying_axes([r["input_shapes"] for r in rows], name)
    if as_json:
        print_json({"run_id": run_id, "by": by, "name": name, "varying": summary, "shapes": rows})
        return
    out = console()
    tbl = table("input shapes", "varying", "calls", "total ms", "mean µs", "min µs", "max µs", "steps", "OP State",
                title=escape(f"run {run_id}: {len(rows)} distinct input shape(s) of {name}"))  # fmt: skip
    for r in rows:
        varying = " · ".join(f"{v['label']} = {v['value']:,}" for v in r["varying"])
        tbl.add_row(cell(r["input_shapes"]), cell(varying), fmt_count(r["calls"]), _ms(r["total_ns"]),
                    _us(r["mean_ns"]), _us(r["min_ns"]), _us(r["max_ns"]), fmt_count(r["steps"]), cell(r["op_state"]))  # fmt: skip
    out.print(tbl)
    if not summary:
        out.print(t("cli_rest.ops.no_activity_dim"))


def _us(ns: float | None) -> str:
    return fmt_num(None if ns is None else ns / 1e3, digits=1)


def _ms(ns: float | None) -> str:
    return fmt_ms(None if ns is None else ns / 1e6)


def _print(run_id: int, by: str, baseline: int | None, rows: list[dict[str, Any]], total_rows: int) -> None:
    out = console()
    headers = [{"op": "op type", "kernel": "kernel", "class": "op class"}[by]]
    headers += [] if by == "class" else ["class"]
    headers += ["core", "calls", "total ms", "mean µs", "min µs", "max µs", "share", "shapes", "dtypes"]
    if baseline is not None:
        headers += ["B calls", "B total ms", "A/B per step"]
    title = t("cli_rest.ops.title", run=run_id, by=t(f"cli_rest.ops.by_{by}"))
    title += t("cli_rest.ops.baseline", run=baseline) if baseline else ""
    tbl = table(*headers, title=escape(title))
    for r in rows:
        cells = [cell(r["name"])] + ([] if by == "class" else [cell(r["op_class"])])
        cells += [cell(r["core_type"]), fmt_count(r["calls"]), _ms(r["total_ns"]), _us(r["mean_ns"])]
        cells += [_us(r["min_ns"]), _us(r["max_ns"]), fmt_pct(r["share_pct"]), fmt_count(r["shapes"])]
        cells += [cell(r["dtypes"])]
        if baseline is not None:
            cells += [fmt_count(r["baseline_calls"]), _ms(r["baseline_total_ns"]), fmt_ratio(r["ratio"])]
        tbl.add_row(*cells)
    out.print(tbl)
    if total_rows > len(rows):
        out.print(t("cli_rest.ops.more_rows", n=total_rows - len(rows)))
    out.print(t("cli_rest.ops.share_note"))


def register(app: typer.Typer) -> None:
    app.command("ops")(ops)
