"""Options and output helpers shared by the commands."""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from diag.commands._format import escape, fmt_bytes, fmt_ns  # noqa: F401 - the names commands imported from here
from diag.i18n import t
from diag.lake import LakeUsageError, catalog_path, open_lake
from diag.store import DEFAULT_DB

DbOption = Annotated[str, typer.Option("--db", help="DuckDB file to use.", envvar="DIAG_DB")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (a stable interface, see README).")]
DEFAULT = DEFAULT_DB
T = TypeVar("T")


def console(stderr: bool = False) -> Console:
    """Wide when writing to a file or pipe, so that tables stay readable in logs."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=None if stream.isatty() else 200)


def print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2, default=str) + "\n")


def per_run(ids: Iterable[int], compute: Callable[[int], T]) -> tuple[dict[int, T], dict[int, str]]:
    """``compute(run)`` for each run; a run whose computation fails gets a one-line reason instead of stopping the
    others (one odd export must not hide every other run's answer)."""
    done: dict[int, T] = {}
    failed: dict[int, str] = {}
    for rid in ids:
        try:
            done[rid] = compute(rid)
        except Exception as exc:  # noqa: BLE001 - reported per run, the other runs carry on
            failed[rid] = " ".join(f"{type(exc).__name__}: {exc}".split())
    return done, failed


def print_failed(out: Console, failed: dict[int, str], what: str) -> None:
    for rid, why in failed.items():
        out.print(f"[yellow]{t('cli.run', run=rid)}:[/] {t('cli.no_what', what=what)} ({escape(why)})")


def wrote(path: Path, size_bytes: int | None = None, detail: str = "") -> None:
    """The one line (on stderr) a command that writes a file prints: ``wrote report.html (12.3 KB, 4 sections)``."""
    size = path.stat().st_size if size_bytes is None else size_bytes
    what = ", ".join(x for x in (fmt_bytes(size), detail) if x)
    console(stderr=True).print(
        t("cli.wrote", path=escape(str(path)), what=what)
    )  # stdout stays the data: empty


LakeOption = Annotated[
    str | None,
    typer.Option(
        "--lake", help="Parquet lake folder to read (written by `diag ingest --lake`) instead of --db."
    ),
]


def refuse_db_with_lake(db: str | None, lake: str | None) -> None:
    """--lake and --db name two stores: one line, exit 2. --db counts as given when its value is not the one it
    has without the option (the default, or DIAG_DB): DIAG_DB is a default, a --lake on the command line wins."""
    if lake is not None and db is not None and db not in (DEFAULT, os.environ.get("DIAG_DB")):
        raise LakeUsageError("--lake and --db name two stores: give one of them")


def lake_catalog(db: str | None, lake: str) -> str:
    """The catalog file of ``lake``, which the read commands open as their database (read-only)."""
    refuse_db_with_lake(db, lake)
    open_lake(lake).close()  # a missing or foreign folder: one line here, before the command starts
    return str(catalog_path(lake))


def _with_lake(command: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(command, eval_str=True)
    lake_param = inspect.Parameter(
        "lake", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=LakeOption
    )

    @functools.wraps(command)
    def run(*args: Any, lake: str | None = None, **kwargs: Any) -> Any:
        if lake is not None:
            kwargs["db"] = lake_catalog(kwargs.get("db"), lake)
        return command(*args, **kwargs)

    run.__signature__ = signature.replace(parameters=[*signature.parameters.values(), lake_param])  # type: ignore[attr-defined]
    run.__annotations__ = {**{n: p.annotation for n, p in signature.parameters.items()}, "lake": LakeOption}
    return run


def add_lake_option(app: typer.Typer) -> None:
    """``--lake DIR`` on every command that reads the store through ``--db`` and has no lake option of its own
    (ingest and app handle theirs): the lake's catalog is a read-only Store, so the command runs unchanged."""
    for info in app.registered_commands:
        params = inspect.signature(info.callback).parameters if info.callback else {}
        if "db" in params and "lake" not in params:
            info.callback = _with_lake(info.callback)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            add_lake_option(group.typer_instance)
