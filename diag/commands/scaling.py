"""``diag scaling``: attention, matmul and step time against sequence / KV length, and where Ascend departs from
its CUDA baseline (diag.analyses.scaling)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from diag.analyses.ops import figures_table
from diag.analyses.runs import list_runs
from diag.analyses.scaling import scaling as scaling_result
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.commands._format import cell, escape, fmt_count, fmt_ms, fmt_num, fmt_ratio, table
from diag.errors import DiagError
from diag.i18n import t
from diag.store import Store

RunOption = Annotated[
    int | None, typer.Option("--run", help="Run id (default: the only non-CUDA run with kernels).")
]
BaselineOption = Annotated[
    int | None,
    typer.Option("--baseline", help="Run id of the CUDA baseline (default: the only CUDA run, if one)."),
]


class RunChoiceError(DiagError):
    """Which run is meant cannot be told: a usage matter."""

    exit_code = 2


def pick_runs(store: Store, run: int | None, baseline: int | None) -> tuple[int, int | None]:
    """The run and its baseline: as given, else the only non-CUDA run with kernels and the only CUDA one."""
    runs = {r["run_id"]: r["platform"] for r in list_runs(store)}
    for rid in (run, baseline):
        if rid is not None and rid not in runs:
            raise DiagError(f"no run {rid} in {store.path}")
    with_kernels = [rid for rid in runs if figures_table(store, rid) != "none"]
    if not with_kernels:
        raise DiagError(f"no run with kernels in {store.path}: ingest a profile first")
    cuda = [rid for rid in with_kernels if runs[rid] in ("cuda", "rocm")]
    if run is None:
        others = [rid for rid in with_kernels if rid not in cuda]
        if len(others) != 1:
            choices = ", ".join(map(str, others or with_kernels))
            raise RunChoiceError(t("cli.pick_run_non_cuda", n=len(others), choices=choices))
        run = others[0]
    if baseline is None and runs[run] not in ("cuda", "rocm") and len(cuda) == 1:
        baseline = cuda[0]
    return run, baseline


def scaling(
    db: DbOption = DEFAULT,
    run: RunOption = None,
    baseline: BaselineOption = None,
    as_json: JsonOption = False,
) -> None:
    """Time of attention prefill / decode, matmul and the whole step against the length the shapes give, the
    fitted slope per platform and the length from which this run's ratio to the baseline departs."""
    with Store(db, read_only=True) as store:
        run_id, baseline_id = pick_runs(store, run, baseline)
        result = scaling_result(store, run_id, baseline_id)
        platforms = {r["run_id"]: r["platform"] for r in list_runs(store)}
    if as_json:
        print_json(result)
        return
    _print(result, platforms)


def _platform(platforms: dict[int, str], run_id: int) -> str:
    p = platforms.get(run_id) or "run"
    return {"ascend": "Ascend", "cuda": "CUDA", "rocm": "ROCm"}.get(p, p)


def _slope(s: dict[str, float] | None) -> str:
    return "—" if s is None else f"length^{s['exponent']:.2f}, {fmt_num(s['ns_per_token'], 'ns/token', 1)}"


def _print(result: dict[str, Any], platforms: dict[int, str]) -> None:
    out = console()
    run_id, base = result["run_id"], result["baseline_run_id"]
    out.print(escape(result["answer"]))
    a = f"{_platform(platforms, run_id)} ms"
    b = f"{_platform(platforms, base)} ms" if base is not None else None
    for g in result["groups"]:
        headers = [f"length ({g['unit']})", a] + ([b, "ratio"] if b else []) + ["steps"]
        title = f"{g['label']}: run {run_id}" + (f" vs run {base}" if base is not None else "")
        tbl = table(*headers, title=escape(title))
        for p in g["points"]:
            cells = [fmt_count(p["length"]), _ms(p["time_ns"])]
            if b:
                cells += [_ms(p["baseline_time_ns"]), fmt_ratio(p["ratio"])]
            tbl.add_row(*cells, fmt_count(p["steps"]))
        out.print(tbl)
        line = f"slope: {_slope(g['slope'])}" + (f"; baseline {_slope(g['baseline_slope'])}" if b else "")
        out.print(escape(line))
    for note in result["notes"]:
        out.print(escape(t("scaling.note", note=note)))
    if base is None:
        out.print(t("scaling.no_baseline"))
    if result["groups"]:
        out.print(cell(t("scaling.legend")))


def _ms(ns: float | None) -> str:
    return fmt_ms(None if ns is None else ns / 1e6)


def register(app: typer.Typer) -> None:
    app.command("scaling")(scaling)
