"""``diag logs``: ranked root causes found in the CANN / torch_npu logs, then the classified records.

``diag logs [--db FILE] [--run ID] [--limit N] [--json]``; ``--run`` keeps the logs of one run (those
ingested from its folder), otherwise every log in the database counts.

JSON (``--json``, a stable interface)::

    {"db": str, "run": int | null,
     "root_causes": [{"rank": 1, "episode": int, "category": str, "title": str,
                      "severity": "high|medium|low|info", "role": "cause|symptom|consequence|wrapper",
                      "echo_of": int | null, "count": int, "first_ns": int | null, "last_ns": int | null,
                      "rule_ids": [str], "codes": [{"code", "component", "meaning", "typical_fix"}],
                      "ranks": [int], "files": [str], "explanation": str, "fix": str,
                      "evidence": [{"file", "file_id", "record_no", "line_no", "ts_ns", "rank", "pid", "level",
                                    "code", "rule_id", "raw", "wraps"}]}],
     "records": [{"file_id", "source", "record_no", "line_no", "line_count", "ts_ns", "level", "module", "pid",
                  "tid", "process_name", "device_id", "rank", "source_loc", "code", "category", "rule_id",
                  "severity", "message", "raw"}],
     "records_shown": int}

``root_causes`` is ranked (``rank`` 1 = the most likely root cause; ``echo_of`` names the rank a symptom,
consequence or wrapper most likely follows from). ``records`` are the records a rule flagged (noise
excluded), most severe first, at most ``--limit``. Times are int64 ns of the logs' local time, as if UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from diag.analyses.log_diagnosis import classified_records, root_causes
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.errors import DiagError
from diag.store import Store

RunOption = Annotated[int | None, typer.Option("--run", help="Logs of this run only (default: every log).")]
LimitOption = Annotated[int, typer.Option("--limit", help="At most this many classified records.")]


def _time(ns: int | None) -> str:
    if ns is None:
        return "-"
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def logs(
    db: DbOption = DEFAULT, run: RunOption = None, limit: LimitOption = 200, as_json: JsonOption = False
) -> None:
    """Ranked root causes from the logs (first cause vs. its echoes on other ranks), then the flagged records."""
    with Store(db, read_only=True) as store:
        if (
            run is not None
            and not store.cursor().execute("SELECT 1 FROM runs WHERE run_id = ?", [run]).fetchall()
        ):
            raise DiagError(f"no run {run} in {store.path}")
        causes = root_causes(store, run)
        records = classified_records(store, run, limit=limit)
    if as_json:
        print_json(
            {
                "db": db,
                "run": run,
                "root_causes": [c.to_json() for c in causes],
                "records": records,
                "records_shown": len(records),
            }
        )
        return
    out = console()
    if not causes:
        out.print("No error found in the logs.")
    table = Table("#", "severity", "category", "role", "ranks", "records", "first", "evidence", "fix",
                  title="Root causes (most likely first)", show_lines=True)  # fmt: skip
    for c in causes:
        role = c.role + (f" (echo of #{c.echo_of})" if c.echo_of else "")
        first = c.evidence[0] if c.evidence else None
        evidence = f"{first.file}:{first.line_no}\n{first.raw.splitlines()[0][:160]}" if first else ""
        ranks = ",".join(map(str, c.ranks)) or "-"
        table.add_row(
            str(c.rank),
            c.severity,
            c.category,
            role,
            ranks,
            str(c.count),
            _time(c.first_ns),
            escape(evidence),
            escape(c.fix),
        )
    if causes:
        out.print(table)
    recs = Table(
        "time", "file:line", "level", "module", "code", "category", "message", title="Classified records"
    )
    for r in records:
        recs.add_row(
            _time(r["ts_ns"]),
            escape(f"{r['source']}:{r['line_no']}"),
            r["level"] or "-",
            r["module"] or "-",
            r["code"] or "-",
            r["category"],
            escape((r["message"] or "").splitlines()[0][:160]) if r["message"] else "",
        )
    if records:
        out.print(recs)


def register(app: typer.Typer) -> None:
    app.command("logs")(logs)
