"""Options and output helpers shared by the commands."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console

from diag.commands._format import escape, fmt_bytes, fmt_ns  # noqa: F401 - the names commands imported from here
from diag.i18n import t
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
