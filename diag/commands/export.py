"""``diag export``: the store for other tools.

- ``--format parquet OUT/``: the store as a Parquet dataset partitioned by job and run. DuckDB, Polars and Spark
  read it as one table per folder (``OUT/<table>/job_id=…/run_id=…/*.parquet``): the path for jobs too big for
  one machine, or for sharing a store without DuckDB. ``OUT/catalog.duckdb`` makes the folder a lake
  (``diag.lake``): every read command takes ``--lake OUT``, and ``diag ingest --lake OUT`` adds to it.
- ``--format chrome RUN -o FILE``: one run as a Chrome / Perfetto trace (Trace Event Format JSON) for
  ui.perfetto.dev and chrome://tracing, times relative to the run's start (``diag.chrome_trace``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from diag.chrome_trace import write_chrome_trace
from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.errors import DiagError
from diag.i18n import t
from diag.lake import catalog_from_database
from diag.schema import TABLES, read_name
from diag.store import Store, sql_literal

FORMATS = ("parquet", "chrome")


def export(
    out: Annotated[
        str,
        typer.Argument(
            help="parquet: the folder to write the dataset into (created; must be empty). chrome: the run id."
        ),
    ],
    db: DbOption = DEFAULT,
    fmt: Annotated[
        str, typer.Option("--format", help="parquet (the whole store) | chrome (one run's trace).")
    ] = ("parquet"),
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="chrome: the JSON file to write (default runN.json)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Write every table as Parquet (partitioned by job_id and run_id), or one run as a Chrome / Perfetto trace."""
    if fmt not in FORMATS:
        raise DiagError(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")
    if fmt == "chrome":
        _export_chrome(out, db, output, as_json)
    else:
        _export_parquet(Path(out), db, fmt, as_json)


def _export_chrome(run: str, db: str, output: Path | None, as_json: bool) -> None:
    if not run.isdigit():
        raise DiagError(f"--format chrome takes a run id (diag runs lists them), not {run!r}")
    run_id = int(run)
    path = output or Path(f"run{run_id}.json")
    with Store(db, read_only=True) as store:
        summary = write_chrome_trace(store, run_id, path)
    if as_json:
        print_json({"db": db, **summary.to_json()})
        return
    overflow = (
        f"; {summary.overflow_threads} extra thread(s) for events that overlap without nesting"
        if summary.overflow_threads
        else ""
    )
    console().print(
        f"wrote {summary.events:,} events of run {run_id} ({summary.ai_cpu_events:,} AI_CPU, "
        f"{summary.findings} finding(s)) on {summary.threads} threads to {path}{overflow}. "
        "Open it in ui.perfetto.dev or chrome://tracing.",
        markup=False,
    )


def _export_parquet(out: Path, db: str, fmt: str, as_json: bool) -> None:
    if out.exists() and any(out.iterdir()):
        raise DiagError(f"{out}: folder is not empty")
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, int] = {}
    with Store(db, read_only=True) as store:
        cur = store.cursor()
        for table in TABLES:
            name = read_name(table.name)  # device_task_rows: the view device_tasks, kernel stand-ins included
            n = cur.execute(f'SELECT count(*) FROM "{name}"').fetchall()[0][0]
            if not n:
                continue
            target = (out / name).as_posix()
            if "run_id" in table.column_names and table.name not in ("runs", "files"):
                source = (
                    f'SELECT t.*, coalesce(r.job_id, -1) AS job_id FROM "{name}" t '
                    f"LEFT JOIN runs r USING (run_id)"
                )
                if "job_id" in table.column_names:
                    source = f'SELECT * FROM "{name}"'
                cur.execute(
                    f"COPY ({source}) TO {sql_literal(target)} (FORMAT parquet, PARTITION_BY (job_id, run_id), "
                    "OVERWRITE_OR_IGNORE)"
                ).fetchall()
            else:
                cur.execute(
                    f'COPY "{name}" TO {sql_literal(target + ".parquet")} (FORMAT parquet)'
                ).fetchall()
            written[name] = int(n)
    catalog_from_database(out, db)  # after the database is closed: the catalog attaches it
    if as_json:
        print_json({"db": db, "out": str(out), "format": fmt, "rows": written})
    else:
        console().print(
            t("cli.export_wrote", rows=f"{sum(written.values()):,}", tables=len(written), out=out)
        )


def register(app: typer.Typer) -> None:
    app.command("export")(export)
