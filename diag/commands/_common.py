"""Options and output helpers shared by the commands."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console

from diag.store import DEFAULT_DB

DbOption = Annotated[str, typer.Option("--db", help="DuckDB file to use.", envvar="DIAG_DB")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON (a stable interface, see README).")]
DEFAULT = DEFAULT_DB


def console(stderr: bool = False) -> Console:
    """Wide when writing to a file or pipe, so that tables stay readable in logs."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, highlight=False, soft_wrap=True, width=None if stream.isatty() else 200)


def print_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2, default=str) + "\n")


def fmt_ns(ns: int | None) -> str:
    """A duration for people: 1.234 s, 12.3 ms, 45.6 µs."""
    if ns is None:
        return "-"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3f} {unit}" if unit == "s" else f"{ns / scale:.1f} {unit}"
    return f"{ns} ns"


def fmt_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"
