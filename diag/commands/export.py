"""``diag export --format parquet OUT/``: the store as a Parquet dataset partitioned by job and run.

DuckDB, Polars and Spark read it as one table per folder (``OUT/<table>/job_id=…/run_id=…/*.parquet``):
the path for jobs too big for one machine, or for sharing a store without DuckDB.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.errors import DiagError
from diag.schema import TABLES
from diag.store import Store, sql_literal


def export(
    out: Annotated[Path, typer.Argument(help="Folder to write the dataset into (created; must be empty).")],
    db: DbOption = DEFAULT,
    fmt: Annotated[str, typer.Option("--format", help="Only 'parquet' for now.")] = "parquet",
    as_json: JsonOption = False,
) -> None:
    """Write every table as Parquet, partitioned by job_id and run_id where rows have them."""
    if fmt != "parquet":
        raise DiagError(f"unknown export format {fmt!r}: only 'parquet' is supported")
    if out.exists() and any(out.iterdir()):
        raise DiagError(f"{out}: folder is not empty")
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, int] = {}
    with Store(db, read_only=True) as store:
        cur = store.cursor()
        for table in TABLES:
            n = cur.execute(f'SELECT count(*) FROM "{table.name}"').fetchall()[0][0]
            if not n:
                continue
            target = (out / table.name).as_posix()
            if "run_id" in table.column_names and table.name not in ("runs", "files"):
                source = (
                    f'SELECT t.*, coalesce(r.job_id, -1) AS job_id FROM "{table.name}" t '
                    f"LEFT JOIN runs r USING (run_id)"
                )
                if "job_id" in table.column_names:
                    source = f'SELECT * FROM "{table.name}"'
                cur.execute(
                    f"COPY ({source}) TO {sql_literal(target)} (FORMAT parquet, PARTITION_BY (job_id, run_id), "
                    "OVERWRITE_OR_IGNORE)"
                ).fetchall()
            else:
                cur.execute(
                    f'COPY "{table.name}" TO {sql_literal(target + ".parquet")} (FORMAT parquet)'
                ).fetchall()
            written[table.name] = int(n)
    if as_json:
        print_json({"db": db, "out": str(out), "format": fmt, "rows": written})
    else:
        console().print(f"wrote {sum(written.values()):,} rows of {len(written)} tables to {out}")


def register(app: typer.Typer) -> None:
    app.command("export")(export)
