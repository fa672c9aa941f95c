"""``diag runs``: the runs in the database."""

from __future__ import annotations

import typer
from rich.table import Table

from diag.analyses.runs import list_runs
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, fmt_ns, print_json
from diag.store import Store


def runs(db: DbOption = DEFAULT, as_json: JsonOption = False) -> None:
    """List runs: platform, rank, device, source, span, op and task counts."""
    with Store(db, read_only=True) as store:
        rows = list_runs(store)
    if as_json:
        print_json({"db": db, "runs": rows})
        return
    table = Table(
        "run",
        "platform",
        "device",
        "rank",
        "dev",
        "level",
        "span",
        "host ops",
        "device tasks",
        "AI_CPU",
        "steps",
        "source",
        title=f"{len(rows)} runs in {db}",
    )
    for r in rows:
        table.add_row(
            str(r["run_id"]),
            r["platform"],
            r["device_name"] or "-",
            _s(r["rank"]),
            _s(r["device"]),
            r["profiler_level"] or "-",
            fmt_ns(r["duration_ns"]),
            str(r["host_ops"]),
            str(r["device_tasks"]),
            str(r["ai_cpu_tasks"]),
            str(r["steps"]),
            r["source"] or "-",
        )
    console().print(table)


def _s(v: object) -> str:
    return "-" if v is None else str(v)


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)
