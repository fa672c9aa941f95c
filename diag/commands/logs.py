"""``diag logs``: ranked root causes found in the CANN / torch_npu logs, then the classified records.

``diag logs [--db FILE] [--run ID | --job ID] [--episode N | --all-episodes] [--limit N] [--json]``; ``--run``
keeps the logs of one run (those ingested from its folder), ``--job`` those of every run of a job.  With neither,
the root causes are those of the *latest incident episode* (``diag.analyses.log_episodes``: time-consistent
records of one job / run / the logs of no run), named with its files, origins and time range, the other episodes
listed; ``--episode N`` picks another, ``--all-episodes`` every one.

JSON (``--json``, a stable interface)::

    {"db": str, "run": int | null, "job": int | null,
     "scope": str,                      # what the root causes cover, in words
     "episode": int | null,             # the episode they cover; null: every episode of the run / job / store
     "episodes": [{"episode", "start_ns", "end_ns", "records", "files", "origins", "runs", "ranks",
                   "root_cause": {"rank", "category", "title", "severity", "role"} | null, "incident"}],
     "root_causes": [{"rank": 1, "episode": int, "category": str, "title": str,
                      "severity": "high|medium|low|info", "role": "cause|symptom|consequence|wrapper",
                      "echo_of": int | null, "count": int, "first_ns": int | null, "last_ns": int | null,
                      "rule_ids": [str], "codes": [{"code", "component", "meaning", "typical_fix"}],
                      "ranks": [int], "files": [str], "explanation": str, "fix": str,
                      "evidence": [{"file", "file_id", "record_no", "line_no", "ts_ns", "rank", "pid", "level",
                                    "code", "rule_id", "raw", "wraps", "origin", "eff_ns"}],
                      "origins": [str], "figures": {str: number}, "advice": [str]}],
     "records": [{"file_id", "source", "record_no", "line_no", "line_count", "ts_ns", "level", "module", "pid",
                  "tid", "process_name", "device_id", "rank", "source_loc", "code", "category", "rule_id",
                  "severity", "message", "raw"}],
     "records_shown": int}

``root_causes`` is ranked (``rank`` 1 = the most likely root cause; ``echo_of`` names the rank a symptom,
consequence or wrapper of the same episode most likely follows from; ``episode`` is its episode). ``records``
are the records a rule flagged (noise excluded) of the run / job / store, most severe first, at most ``--limit``. Times are int64 ns of the logs' local time, as if UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer

from diag.analyses.log_diagnosis import LogScope, RootCause, classified_records, log_scope
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.commands._format import MISSING, cell, escape, fmt_count, path_tails, table
from diag.errors import DiagError
from diag.i18n import role_word, severity_word, t
from diag.store import Store

RunOption = Annotated[int | None, typer.Option("--run", help="Logs of this run only (default: every log).")]
JobOption = Annotated[int | None, typer.Option("--job", help="Logs of every run of this job.")]
EpisodeOption = Annotated[
    int | None, typer.Option("--episode", help="This episode (default: the latest incident episode).")
]
AllOption = Annotated[bool, typer.Option("--all-episodes", help="Every episode of the scope, not one.")]
LimitOption = Annotated[int, typer.Option("--limit", help="At most this many classified records.")]


def _time(ns: int | None) -> str:
    if ns is None:
        return MISSING
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _check_scope(store: Store, run: int | None, job: int | None) -> None:
    if run is not None and job is not None:
        raise DiagError("give --run or --job, not both")
    for what, key in (("run", run), ("job", job)):
        sql = f"SELECT 1 FROM {what}s WHERE {what}_id = ?"
        if key is not None and not store.cursor().execute(sql, [key]).fetchall():
            raise DiagError(f"no {what} {key} in {store.path}")


def logs(
    db: DbOption = DEFAULT,
    run: RunOption = None,
    job: JobOption = None,
    episode: EpisodeOption = None,
    all_episodes: AllOption = False,
    limit: LimitOption = 200,
    as_json: JsonOption = False,
) -> None:
    """Ranked root causes of one incident episode (first cause vs. its echoes on other ranks), then the flagged
    records."""
    with Store(db, read_only=True) as store:
        _check_scope(store, run, job)
        try:
            scope = log_scope(store, run, job, episode, all_episodes)
        except ValueError as exc:
            raise DiagError(str(exc)) from None
        causes = scope.causes
        records = classified_records(store, run, limit=limit, job_id=job)
    if as_json:
        print_json(
            {
                "db": db,
                "run": run,
                "job": job,
                "scope": scope.scope + (f". {scope.others}" if scope.others else ""),
                "episode": scope.episode.episode if scope.episode else None,
                "episodes": [e.to_json() for e in scope.episodes],
                "root_causes": [c.to_json() for c in causes],
                "records": records,
                "records_shown": len(records),
            }
        )
        return
    _print(scope, causes, records)


def _first_line(text: str | None, limit: int = 240) -> str:
    """The first line of ``text``, cut at ``limit`` characters with a visible ``…``."""
    line = (text or "").splitlines()[0] if text else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _print(scope: LogScope, causes: list[RootCause], records: list[dict]) -> None:
    out = console()
    out.print(escape(t("cli.logs_scope", scope=scope.scope) + (f". {scope.others}" if scope.others else "")))
    if not causes:
        out.print(t("cli.logs_none"))
    # a file reads as the shortest tail of its path that no other file of this output shares
    tails = path_tails([*(e.file for c in causes for e in c.evidence[:1]), *(r["source"] for r in records)])
    tbl = table("#", "severity", "category", "role", "ranks", "records", "first", "evidence", "fix",
                title="Root causes (most likely first)", show_lines=True)  # fmt: skip
    for c in causes:
        # the words in the reader's language; --json keeps the stored ones (high, cause)
        role = role_word(c.role) + (t("cli.logs_echo_of", rank=c.echo_of) if c.echo_of else "")
        first = c.evidence[0] if c.evidence else None
        where = f"{tails.get(first.file, first.file)}:{first.line_no}" if first else ""
        evidence = f"{where}\n{_first_line(first.raw)}" if first else ""
        tbl.add_row(
            cell(c.rank),
            cell(severity_word(c.severity)),
            cell(c.category),
            cell(role),
            cell(",".join(map(str, c.ranks))),
            fmt_count(c.count),
            _time(c.first_ns),
            cell(evidence),
            cell(c.fix),
        )
    if causes:
        out.print(tbl)
    recs = table(
        "time", "file:line", "level", "module", "code", "category", "message", title="Classified records"
    )
    for r in records:
        recs.add_row(
            _time(r["ts_ns"]),
            cell(f"{tails.get(r['source'], r['source'])}:{r['line_no']}"),
            cell(r["level"]),
            cell(r["module"]),
            cell(r["code"]),
            cell(r["category"]),
            cell(_first_line(r["message"])),
        )
    if records:
        out.print(recs)


def register(app: typer.Typer) -> None:
    app.command("logs")(logs)
