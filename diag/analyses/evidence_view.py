"""Evidence as a person reads it: an evidence dict (a finding's, a postmortem statement's, a log root cause's
records) turned into typed blocks — tables with units in their headers, log lines (file:line, the text), time
ranges in ms from the run's start — that the app (app/evidence.py) and the reports (diag.report) draw alike.

The dicts themselves stay as they are (``--json`` prints them); this view is only for people. Units come from the
keys (habit 2: ``*_ns``, ``*bytes``, ``*pct``); a point in time (``start_ns``…, or any ``*_ns`` value past 1973)
is shown from the run's start when it lies in the run's capture window, else as the clock time of its source
(a log's clock is not the trace's). Missing cells read "—"; empty entries are left out.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

from diag.store import RULES_DIR

MISSING = "—"
MAX_ROWS = 20  # rows per table, lines per log block
MAX_CELL_CHARS = 300
MAX_LINE_CHARS = 1000
CONTEXT_LINES = 2  # continuation lines of a log record shown under it
EPOCH_FLOOR_NS = 10**17  # an *_ns value this large is a point in time (after 1973), never a duration
POINT_KEYS = {"start_ns", "end_ns", "ts_ns", "eff_ns", "first_ns", "last_ns"}
PATH_KEYS = {"file", "files", "source", "path"}
CONTAINER_KEYS = {"figures", "ops", "counts"}  # dicts whose scalars join the statement's own figures
LOG_LIST_MARK = "raw"  # a list of dicts that carry their raw text is a list of log records
SKIP_KEYS = {"file_id", "record_no", "pid", "time_range_ns"}  # internal ids; the range has its own block


@dataclass(frozen=True)
class Table:
    title: str  # "" for a statement's own figures
    columns: list[str]
    rows: list[list[str]]
    more: int = 0  # rows left off (past MAX_ROWS)
    kind: str = "table"


@dataclass(frozen=True)
class LogLine:
    where: str  # shortest unambiguous path tail:line
    text: str  # the record's first line
    context: list[str] = field(default_factory=list)  # its next lines, where stored
    time: str = MISSING  # clock time of the log
    rank: str = MISSING
    code: str = MISSING
    path: str = ""  # the full path
    note: str = ""  # where in the file it came from (a console prefix), the real code a wrapper stands for


@dataclass(frozen=True)
class LogLines:
    lines: list[LogLine]
    more: int = 0
    kind: str = "log"


@dataclass(frozen=True)
class TimeRange:
    text: str
    start_ns: int | None
    end_ns: int | None
    in_run: bool  # inside the run's capture window: the timeline can show it
    kind: str = "range"


Block = Table | LogLines | TimeRange


@dataclass(frozen=True)
class RunClock:
    """The run's capture window on the trace clock; times inside it are shown from its start."""

    start_ns: int | None = None
    end_ns: int | None = None
    run_id: int | None = None  # the run a timeline button opens (None: no button)
    origin: str = "the run's start"  # what the times are counted from, as a person reads it

    def inside(self, ns: int) -> bool:
        return self.start_ns is not None and self.end_ns is not None and self.start_ns <= ns <= self.end_ns


@cache
def labels(path: Path = RULES_DIR / "evidence_labels.csv") -> dict[str, str]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = csv.DictReader(line for line in fh if not line.startswith("#"))
        return {r["key"]: r["label"] for r in rows}


def label(key: str) -> str:
    if key in labels():
        return labels()[key]
    for suffix in ("_ns", "_pct", "_bytes"):
        key = key.removesuffix(suffix)
    return key.replace("_", " ")


def path_tails(paths: list[str]) -> dict[str, str]:
    """Each path's shortest tail of components that no other path in ``paths`` ends with."""
    parts = {p: PurePosixPath(p.replace("\\", "/")).parts for p in set(paths)}
    out = {}
    for p, mine in parts.items():
        for k in range(1, len(mine) + 1):
            tail = mine[-k:]
            if not any(o != p and other[-k:] == tail for o, other in parts.items()):
                break
        out[p] = "/".join(tail) if mine else p
    return out


def clock_time(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _is_point(key: str, value: Any) -> bool:  # noqa: ANN401
    return key.endswith("_ns") and (
        key in POINT_KEYS or key.endswith(("_start_ns", "_end_ns")) or abs(value) >= EPOCH_FLOOR_NS
    )


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.3f}"


def _bytes(n: float) -> str:
    return f"{n / 2**30:,.2f} GiB" if abs(n) >= 2**30 else f"{n / 2**20:,.2f} MiB"


def _number(v: float) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:,.3f}".rstrip("0").rstrip(".")


class _View:
    """One evidence dict's formatting context: its clock and the path tails of every file it names."""

    def __init__(self, clock: RunClock | None, paths: list[str]) -> None:
        self.clock = clock or RunClock()
        self.tails = path_tails(paths)

    def point(self, ns: int) -> str:
        if self.clock.inside(ns):
            return f"{_ms(ns - self.clock.start_ns)} ms from {self.clock.origin}"  # type: ignore[operator]
        return clock_time(ns)

    def cell(self, key: str, v: Any) -> str:  # noqa: ANN401
        """A value with its unit, for a key/value row or inside a compound cell."""
        if v is None or v == "" or v == [] or v == {}:
            return MISSING
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, int | float):
            if key.endswith("_ns") or key == "ns":
                return self.point(int(v)) if _is_point(key, v) else f"{_ms(v)} ms"
            if key.endswith("pct"):
                return f"{v:.2f}%"
            if key.endswith("bytes"):
                return _bytes(v)
            return _number(v)
        if isinstance(v, dict):
            return ", ".join(f"{k}: {self.cell(str(k), x)}" for k, x in v.items())
        if isinstance(v, list):
            if v and all(isinstance(x, dict) for x in v):
                return "; ".join(" ".join(self.cell(k, x) for k, x in d.items()) for d in v)
            return ", ".join(self.cell(key.removesuffix("s") if key in PATH_KEYS else key, x) for x in v)
        text = " ".join(str(v).split())
        if key in PATH_KEYS:
            text = self.tails.get(str(v), text)
        return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"

    def column(self, key: str, values: list[Any]) -> tuple[str, list[str]]:
        """A table column: its header with the unit, its cells without it."""
        nums = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if nums and len(nums) == len([v for v in values if v is not None]):
            if key.endswith("_ns") or key == "ns":
                if all(_is_point(key, v) for v in nums):
                    if all(self.clock.inside(int(v)) for v in nums):
                        start = self.clock.start_ns or 0
                        cells = [MISSING if v is None else _ms(v - start) for v in values]
                        return f"{label(key)} (ms from {self.clock.origin})", cells
                    return f"{label(key)} (clock)", [MISSING if v is None else clock_time(v) for v in values]
                return f"{label(key)} (ms)", [MISSING if v is None else _ms(v) for v in values]
            if key.endswith("pct"):
                return f"{label(key)} (%)", [MISSING if v is None else f"{v:.2f}" for v in values]
        return label(key), [self.cell(key, v) for v in values]

    def table(self, title: str, items: list[dict[str, Any]]) -> Table:
        shown = items[:MAX_ROWS]
        keys = [k for k in dict.fromkeys(k for d in shown for k in d) if k not in SKIP_KEYS]
        cols = [self.column(k, [d.get(k) for d in shown]) for k in keys]
        rows = [[c[1][i] for c in cols] for i in range(len(shown))]
        return Table(title, [c[0] for c in cols], rows, len(items) - len(shown))

    def mapping(self, title: str, values: dict[str, Any], unit_key: str = "") -> Table:
        """Key/value rows; ``unit_key`` (the mapping's own key, e.g. ``buckets_ns``) gives every value its unit."""
        items = [(str(k), v) for k, v in values.items() if v not in (None, "", [], {})]
        unit = unit_key if unit_key.endswith(("_ns", "pct", "bytes")) else ""
        rows = [[label(k), self.cell(unit or k, v)] for k, v in items[:MAX_ROWS]]
        return Table(title, ["figure", "value"], rows, len(items) - len(rows))

    def log_lines(self, records: list[dict[str, Any]]) -> LogLines:
        lines = []
        for r in records[:MAX_ROWS]:
            path = str(r.get("file") or r.get("source") or "")
            raw = str(r.get("raw") or "").splitlines() or [""]
            stored = [str(x) for x in r.get("context_after") or []]
            ts = r.get("ts_ns") if r.get("ts_ns") is not None else r.get("eff_ns")
            lines.append(
                LogLine(
                    f"{self.tails.get(path, path) or MISSING}:{r.get('line_no') or MISSING}",
                    raw[0][:MAX_LINE_CHARS],
                    [x[:MAX_LINE_CHARS] for x in (raw[1:] + stored)[:CONTEXT_LINES]],
                    MISSING if ts is None else clock_time(int(ts)),
                    MISSING if r.get("rank") is None else str(r["rank"]),
                    str(r.get("code") or MISSING),
                    path,
                    "; ".join(
                        ([str(r["origin"])] if r.get("origin") else [])
                        + ([f"wraps {r['wraps']}"] if r.get("wraps") else [])
                    ),
                )
            )
        return LogLines(lines, len(records) - len(lines))

    def time_range(self, start: int | None, end: int | None) -> TimeRange | None:
        if start is None and end is None:
            return None
        ends = [x for x in (start, end) if x is not None]
        in_run = all(self.clock.inside(x) for x in ends)
        span = f" ({_ms(end - start)} ms)" if start is not None and end is not None else ""
        if in_run:
            s = MISSING if start is None else _ms(start - self.clock.start_ns)  # type: ignore[operator]
            e = MISSING if end is None else _ms(end - self.clock.start_ns)  # type: ignore[operator]
            return TimeRange(f"{s} → {e} ms from {self.clock.origin}{span}", start, end, True)
        s = MISSING if start is None else clock_time(start)
        e = MISSING if end is None else clock_time(end)
        return TimeRange(f"{s} → {e}{span}, clock of the source", start, end, False)


def _paths(ev: Any, key: str = "") -> list[str]:  # noqa: ANN401
    if isinstance(ev, dict):
        return [p for k, v in ev.items() for p in _paths(v, k)]
    if isinstance(ev, list):
        return [p for v in ev for p in _paths(v, key)]
    return [ev] if key in PATH_KEYS and isinstance(ev, str) else []


def _walk(view: _View, ev: dict[str, Any], out: dict[str, Any]) -> None:
    """Sort ``ev``'s entries into figures (scalars), tables, log lines; containers are walked into."""
    for key, v in ev.items():
        if key in SKIP_KEYS or v in (None, "", [], {}):
            continue
        if isinstance(v, list) and all(isinstance(x, dict) for x in v):
            block = view.log_lines(v) if all(LOG_LIST_MARK in x for x in v) else view.table(label(key), v)
            out["logs" if isinstance(block, LogLines) else "tables"].append(block)
        elif isinstance(v, dict) and (key in CONTAINER_KEYS or any(isinstance(x, dict) for x in v.values())):
            _walk(view, v, out)
        elif isinstance(v, dict):
            out["tables"].append(view.mapping(label(key), v, key))
        else:
            out["figures"][key] = v


def evidence_blocks(evidence: dict[str, Any], clock: RunClock | None = None) -> list[Block]:
    """Tables (lists of ops, gaps, callers…), log lines, the statement's figures, then its time range."""
    view = _View(clock, _paths(evidence))
    out: dict[str, Any] = {"figures": {}, "tables": [], "logs": []}
    _walk(view, evidence, out)
    blocks: list[Block] = [t for t in out["tables"] if t.rows] + out["logs"]
    if out["figures"]:
        blocks.append(view.mapping("", out["figures"]))
    rng = evidence.get("time_range_ns") or [None, None]
    tr = view.time_range(rng[0], rng[1]) if len(rng) == 2 else None
    return blocks + ([tr] if tr else [])


def finding_blocks(
    evidence: dict[str, Any],
    start_ns: int | None,
    end_ns: int | None,
    clock: RunClock | None = None,
    category: str = "",
) -> list[Block]:
    """A finding's evidence, with its time range (kept apart from the dict on ``Finding``).

    A log finding's ``rank`` is its place among the root causes, not a device rank: it is shown as "cause #"."""
    if category.startswith("log:"):
        evidence = {("cause_no" if k == "rank" else k): v for k, v in evidence.items()}
    return evidence_blocks({**evidence, "time_range_ns": [start_ns, end_ns]}, clock)


def log_blocks(records: list[dict[str, Any]]) -> list[Block]:
    """A log root cause's evidence records (diag.analyses.log_diagnosis.Evidence as dicts)."""
    return [_View(None, [str(r.get("file") or "") for r in records]).log_lines(records)] if records else []
