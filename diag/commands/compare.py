"""``diag compare RUN_A RUN_B``: an Ascend run against its CUDA baseline, op class by op class."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from diag.analyses.compare import compare as compare_runs
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.errors import DiagError
from diag.store import Store


def compare(
    run_a: Annotated[int, typer.Argument(help="Run id of the run under study (usually Ascend).")],
    run_b: Annotated[int, typer.Argument(help="Run id of the baseline (usually CUDA).")],
    db: DbOption = DEFAULT,
    as_json: JsonOption = False,
) -> None:
    """Per op class: count, total, mean, share, ratio A/B and time lost per step; overall buckets; warnings."""
    with Store(db, read_only=True) as store:
        try:
            result = compare_runs(store, run_a, run_b)
        except ValueError as exc:
            raise DiagError(str(exc)) from None
    if as_json:
        print_json({"db": db, **result.to_json()})
        return
    out = console()
    for w in result.warnings:
        out.print(f"[yellow]warning:[/] {w}")
    for note in result.notes():
        out.print(f"[yellow]data quality:[/] {note}")
    a, b = result.run_a, result.run_b
    steps = {side: (f"{n} steps" if src == "timeline" else "no steps: nsys stats kernel summary")
             for side, n, src in (("A", result.steps_a, result.source_a), ("B", result.steps_b, result.source_b))}  # fmt: skip
    table = Table(
        "op class",
        "A calls",
        "B calls",
        "A ms/step",
        "B ms/step",
        "A/B",
        "lost ms/step",
        title=f"A = run {a['run_id']} {a['name']} ({a['platform']}) vs B = run {b['run_id']} "
        f"{b['name']} ({b['platform']}); A: {steps['A']}, B: {steps['B']}",
    )
    for c in result.classes:
        table.add_row(
            c.op_class,
            str(c.count_a),
            str(c.count_b),
            f"{c.per_step_a_ns / 1e6:.3f}",
            f"{c.per_step_b_ns / 1e6:.3f}",
            "-" if c.ratio is None else f"{c.ratio:.2f}×",
            f"{c.delta_per_step_ms:+.3f}",
        )
    out.print(table)
    overall = Table("bucket", "A ms/step", "B ms/step", "A/B", title="device time per step, same definitions")
    for o in result.overall:
        overall.add_row(
            o["bucket"],
            _ms(o["per_step_a_ms"]),
            _ms(o["per_step_b_ms"]),
            "-" if o["ratio"] is None else f"{o['ratio']:.2f}×",
        )
    out.print(overall)
    loss = result.biggest_loss()
    if loss:
        out.print(
            f"biggest loss: {loss['label']} +{loss['delta_per_step_ms']:.3f} ms/step "
            f"({_ms(loss['per_step_a_ms'])} vs {_ms(loss['per_step_b_ms'])} ms)"
        )


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def register(app: typer.Typer) -> None:
    app.command("compare")(compare)
