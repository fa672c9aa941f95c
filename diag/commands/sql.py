"""``diag sql "SELECT …"``: a read-only query on the database, printed as a table (or JSON)."""

from __future__ import annotations

from typing import Annotated

import duckdb
import typer
from rich.table import Table

from diag.commands._common import DEFAULT, DbOption, JsonOption, console, print_json
from diag.errors import DiagError
from diag.store import Store


def sql(
    query: Annotated[str, typer.Argument(help="A SQL query; the database is opened read-only.")],
    db: DbOption = DEFAULT,
    as_json: JsonOption = False,
    limit: Annotated[int, typer.Option("--limit", help="Print at most this many rows.")] = 1000,
) -> None:
    """Run a read-only SQL query (power users, incident scripts)."""
    with Store(db, read_only=True) as store:
        try:
            cur = store.cursor().execute(query)
        except duckdb.Error as exc:
            raise DiagError(f"query failed: {' '.join(str(exc).split())}") from None
        names = [d[0] for d in cur.description or []]
        rows = cur.fetchmany(limit) if names else []
    if as_json:
        print_json({"columns": names, "rows": [dict(zip(names, r, strict=True)) for r in rows]})
        return
    table = Table(*names)
    for r in rows:
        table.add_row(*("NULL" if v is None else str(v) for v in r))
    console().print(table)


def register(app: typer.Typer) -> None:
    app.command("sql")(sql)
