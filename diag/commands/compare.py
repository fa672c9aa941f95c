"""``diag compare RUN_A RUN_B``: an Ascend run against its CUDA baseline, op class by op class."""

from __future__ import annotations

from typing import Annotated

import typer

from diag.analyses.before_after import before_after, same_platform
from diag.analyses.compare import Comparison
from diag.analyses.compare import compare as compare_runs
from diag.analyses.compare_memory import has_memory, memory_rows
from diag.analyses.stall_breakdown import bucket_label
from diag.commands._before_after import print_before_after
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.commands._format import cell, escape, fmt_count, fmt_ms, fmt_num, fmt_ratio, table
from diag.commands._framework_ops import print_framework_ops
from diag.errors import DiagError
from diag.i18n import t
from diag.store import Store


def compare(
    run_a: Annotated[int, typer.Argument(help="Run id of the run under study (usually Ascend).")],
    run_b: Annotated[int, typer.Argument(help="Run id of the baseline (usually CUDA).")],
    db: DbOption = DEFAULT,
    as_json: JsonOption = False,
) -> None:
    """Per op class: count, total, mean, share, ratio A/B and time lost per step; overall buckets; warnings.

    Two runs of the same platform (before and after an upgrade or a changed setting): per op type and class,
    what got slower or faster beyond the step-to-step spread, and which versions or settings differ."""
    with Store(db, read_only=True) as store:
        try:
            # two runs of one platform (an upgrade, a changed setting): before (A) / after (B), #21
            pair = before_after(store, run_a, run_b) if same_platform(store, run_a, run_b) else None
            if pair is not None and not as_json:
                print_before_after(pair)  # the cross-platform figures are not printed: not computed
                return
            result = compare_runs(store, run_a, run_b)
        except ValueError as exc:
            raise DiagError(str(exc)) from None
    if as_json:
        print_json({"db": db, **result.to_json(), "before_after": pair})
        return
    _print(result)


def _print(result: Comparison) -> None:
    out = console()
    for w in result.warnings:
        out.print(f"[yellow]warning:[/] {escape(w)}")
    for note in result.notes():
        out.print(f"[yellow]data quality:[/] {escape(note)}")
    a, b = result.run_a, result.run_b
    steps = {side: (f"{n} steps" if src == "timeline" else "no steps: nsys stats kernel summary")
             for side, n, src in (("A", result.steps_a, result.source_a), ("B", result.steps_b, result.source_b))}  # fmt: skip
    title = (
        f"A = run {a['run_id']} {a['name']} ({a['platform']}) vs B = run {b['run_id']} {b['name']} "
        f"({b['platform']}); A: {steps['A']}, B: {steps['B']}"
    )
    tbl = table(
        "op class", "A calls", "B calls", "A ms/step", "B ms/step", "A/B", "lost ms/step", title=escape(title)
    )
    for c in result.classes:
        tbl.add_row(
            cell(c.op_class),
            fmt_count(c.count_a),
            fmt_count(c.count_b),
            fmt_ms(_ns_to_ms(c.per_step_a_ns)),
            fmt_ms(_ns_to_ms(c.per_step_b_ns)),
            fmt_ratio(c.ratio),
            fmt_ms(c.delta_per_step_ms, signed=True),
        )
    out.print(tbl)
    overall = table("bucket", "A ms/step", "B ms/step", "A/B", title="device time per step, same definitions")
    for o in result.overall:
        overall.add_row(
            cell(o["bucket"]), fmt_ms(o["per_step_a_ms"]), fmt_ms(o["per_step_b_ms"]), fmt_ratio(o["ratio"])
        )
    out.print(overall)
    loss = result.biggest_loss()
    if loss:
        out.print(
            t(
                "cli.biggest_loss",
                label=escape(bucket_label(loss["bucket"])),
                delta=fmt_ms(loss["delta_per_step_ms"], signed=True),
                a=fmt_ms(loss["per_step_a_ms"]),
                b=fmt_ms(loss["per_step_b_ms"]),
            )
        )
    _print_memory(result)
    print_framework_ops(result.framework_ops)


def _print_memory(result: Comparison) -> None:
    """Memory of both sides (diag.analyses.compare_memory), when either has a figure."""
    if not has_memory(result.memory):
        return
    tbl = table("memory", "A", "B", title="device memory, same definitions (diag memory)")
    for label, a, b in memory_rows(result.memory):
        digits = 1 if label.endswith("(%)") else 2
        tbl.add_row(cell(label), fmt_num(a, digits=digits), fmt_num(b, digits=digits))
    console().print(tbl)


def _ns_to_ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)
