"""How every command prints a value for people: durations, ms, %, ratios, counts, bytes, paths and table cells.

One place, so that a missing figure reads ``—`` in every command (never ``None``, ``-`` in one and ``n/a`` in
another, never a ``TypeError`` from ``f"{None:.1f}"``), every printed string is escaped for Rich markup (a log line
holding ``[/usr/local/Ascend/…]`` is text, not a closing tag), and paths read as the shortest tail that tells them
apart in that output.
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Iterable
from functools import cache
from typing import Any

from rich.markup import escape as markup_escape
from rich.table import Table

from diag.i18n import is_chinese
from diag.store import RULES_DIR

MISSING = "—"
# C0 / C1 control characters but tab and newline: an escape sequence in a folder name would drive the terminal
CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def escape(text: str) -> str:
    """Untrusted text for a Rich console: markup escaped, control characters shown as ``\\xNN``."""
    return markup_escape(CONTROL_CHARS.sub(lambda m: f"\\x{ord(m.group()):02x}", text))


def cell(value: Any) -> str:
    """Any value as a table cell: ``—`` for None or an empty string, else its text escaped for Rich markup."""
    if value is None or value == "":
        return MISSING
    return escape(str(value))


def fmt_ns(ns: float | None) -> str:
    """A duration in nanoseconds for people: 1.234 s, 12.3 ms, 45.6 µs, 789 ns."""
    if ns is None:
        return MISSING
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3f} {unit}" if unit == "s" else f"{ns / scale:.1f} {unit}"
    return f"{int(ns)} ns"


def fmt_ms(ms: float | None, digits: int = 3, signed: bool = False, unit: str = "") -> str:
    """Milliseconds with ``digits`` decimals (``+`` sign when ``signed``), ``unit`` appended when given."""
    if ms is None:
        return MISSING
    text = f"{ms:+.{digits}f}" if signed else f"{ms:.{digits}f}"
    return f"{text} {unit}" if unit else text


def fmt_pct(pct: float | None, digits: int = 1, signed: bool = False) -> str:
    """A percentage already in percent: 12.3%, +0.012%."""
    if pct is None:
        return MISSING
    return f"{pct:+.{digits}f}%" if signed else f"{pct:.{digits}f}%"


def fmt_share(part: float | None, whole: float | None, digits: int = 1) -> str:
    """``part`` as a percentage of ``whole``; ``—`` when either is missing or the whole is zero."""
    if part is None or not whole:
        return MISSING
    return fmt_pct(100.0 * part / whole, digits)


def fmt_ratio(ratio: float | None, digits: int = 2) -> str:
    """A ratio of two figures: 1.23×."""
    return MISSING if ratio is None else f"{ratio:.{digits}f}×"


def fmt_count(n: float | None, digits: int = 0) -> str:
    """A count with thousands separators: 12,345 (``digits`` decimals for a mean count)."""
    return MISSING if n is None else f"{n:,.{digits}f}"


def fmt_num(value: Any, unit: str = "", digits: int = 2) -> str:
    """A figure of any kind: floats with ``digits`` decimals and separators, ints as they are, then ``unit``."""
    if value is None:
        return MISSING
    text = f"{value:,.{digits}f}" if isinstance(value, float) else escape(str(value))
    return f"{text} {unit}" if unit else text


def fmt_bytes(n: float | None) -> str:
    """A size: 512 B, 12.3 KB, 4.5 MB, 1.2 GB (powers of 1024)."""
    if n is None:
        return MISSING
    size = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if abs(size) < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _parts(path: str) -> tuple[str, ...]:
    return tuple(p for p in path.replace("\\", "/").split("/") if p)


def path_tails(paths: Iterable[str | None]) -> dict[str, str]:
    """For each path, the shortest tail of path components that no other path of the set ends with.

    ``{"/data/a/rank0/trace.json", "/data/b/rank0/trace.json", "/data/b/plog.log"}`` gives ``a/rank0/trace.json``,
    ``b/rank0/trace.json`` and ``plog.log``. A path that is itself a tail of another keeps all its components."""
    split = {p: _parts(p) for p in {p for p in paths if p}}
    tails: Counter[tuple[str, ...]] = Counter()
    for parts in split.values():
        for k in range(1, len(parts) + 1):
            tails[parts[-k:]] += 1
    shown = {}
    for path, parts in split.items():
        k = next((k for k in range(1, len(parts)) if tails[parts[-k:]] == 1), None)
        shown[path] = path if k is None else "/".join(parts[-k:])  # all of it: the path as given
    return shown


@cache
def _zh_headers() -> dict[str, str]:
    with open(RULES_DIR / "cli_headers.csv", newline="", encoding="utf-8") as fh:
        return {r["en"]: r["zh"] for r in csv.DictReader(line for line in fh if not line.startswith("#"))}


_RUN_TITLE = re.compile(r"^run (\d+)\b")  # "run 3 · rank0/trace.json", "run 3: kernels by op"


def header_text(text: str) -> str:
    """A table's column header or title in the current language (diag/rules/cli_headers.csv; as written in
    English, or where the file does not list it; a title's leading "run N" reads 运行 N)."""
    if not is_chinese():
        return text
    return _zh_headers().get(text) or _RUN_TITLE.sub(r"运行 \1", text)


def table(*headers: str, **options: Any) -> Table:
    """A Rich table whose cells wrap (fold) instead of being cut with ``…``, so that no value is lost; headers
    and title in the current language (``header_text``)."""
    for name in ("title", "caption"):
        if isinstance(options.get(name), str):
            options[name] = header_text(options[name])
    out = Table(**options)
    for header in headers:
        out.add_column(header_text(header), overflow="fold")
    return out
