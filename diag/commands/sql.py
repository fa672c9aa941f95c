"""``diag sql "SELECT …"``: a read-only query on the database, printed as a table (or JSON)."""

from __future__ import annotations

from typing import Annotated

import duckdb
import typer

from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.commands._format import MISSING, escape, table
from diag.errors import DiagError
from diag.lake import lake_sandbox
from diag.store import Store

SANDBOX = ("SET enable_external_access = false", "SET lock_configuration = true")


def sql(
    query: Annotated[str, typer.Argument(help="A SQL query; the database is opened read-only.")],
    db: DbOption = DEFAULT,
    as_json: JsonOption = False,
    limit: Annotated[int, typer.Option("--limit", help="Print at most this many rows.")] = 1000,
) -> None:
    """Run a read-only SQL query (power users, incident scripts)."""
    with Store(db, read_only=True) as store:
        # the store's tables and views only: no file read or written (COPY, EXPORT, read_text, glob, ATTACH),
        # no extension installed or loaded, and no setting changed back
        for setting in (*lake_sandbox(db, query), *SANDBOX):  # a lake's views read its Parquet files (#23)
            store.con.execute(setting)
        try:
            cur = store.cursor().execute(query)
        except duckdb.PermissionException as exc:
            raise DiagError(
                f"query refused: diag sql reads the database's own tables and views only ({_one_line(exc)})"
            ) from None
        except duckdb.Error as exc:
            raise DiagError(f"query failed: {_one_line(exc)}") from None
        names = [d[0] for d in cur.description or []]
        rows = cur.fetchmany(limit + 1) if names else []
    more, rows = len(rows) > limit, rows[:limit]
    if as_json:
        print_json({"columns": names, "rows": [dict(zip(names, r, strict=True)) for r in rows]})
        return
    # a cell is text, never Rich markup: a log line holding "[/usr/local/Ascend/…]" is no closing tag
    caption = f"first {limit} rows (--limit)" if more else None
    tbl = table(*(escape(n) for n in names), caption=caption)
    for r in rows:
        tbl.add_row(*(MISSING if v is None else escape(str(v)) for v in r))
    console().print(tbl)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


def register(app: typer.Typer) -> None:
    app.command("sql")(sql)
