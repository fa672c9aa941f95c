"""``diag runs``: the runs in the database."""

from __future__ import annotations

import typer

from diag.analyses.runs import list_runs
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.commands._format import cell, escape, fmt_count, fmt_ns, path_tails, table
from diag.store import Store


def runs(db: DbOption = DEFAULT, as_json: JsonOption = False) -> None:
    """List runs: platform, rank, device, source, span, op and task counts (a source is shown by the shortest
    tail of its path that no other run's source shares; ``--json`` holds the full path)."""
    with Store(db, read_only=True) as store:
        rows = list_runs(store)
    if as_json:
        print_json({"db": db, "runs": rows})
        return
    tails = path_tails(r["source"] for r in rows)
    tbl = table(
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
        title=escape(f"{len(rows)} runs in {db}"),
    )
    for r in rows:
        tbl.add_row(
            cell(r["run_id"]),
            cell(r["platform"]),
            cell(r["device_name"]),
            cell(r["rank"]),
            cell(r["device"]),
            cell(r["profiler_level"]),
            fmt_ns(r["duration_ns"]),
            fmt_count(r["host_ops"]),
            fmt_count(r["device_tasks"]),
            fmt_count(r["ai_cpu_tasks"]),
            fmt_count(r["steps"]),
            cell(tails.get(r["source"] or "")),
        )
    console().print(tbl)


def register(app: typer.Typer) -> None:
    app.command("runs")(runs)
