"""One run as a Chrome / Perfetto trace (Trace Event Format JSON), streamed from the store.

The file is ``{"displayTimeUnit": "ms", "traceEvents": [...], "otherData": {...}}``: one process per device /
host process (plus "Overlap Analysis", "Communication ops" and "Run" for steps and findings), one thread per
stream or host thread, named by ``M`` metadata events. Times are **relative to the run's start** and written as
exact decimal µs with 3 decimals (``ts`` = (start_ns − run_start_ns) / 1000): absolute epoch µs do not fit a
double at ns precision, so viewers mis-nest them. Each thread is exactly nested: an event that overlaps another
of its thread without nesting in it goes to an overflow thread of the same lane ("Stream 2 · overlap 1").

Rows are read from DuckDB in Arrow batches and written as they come; memory does not grow with the run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from diag.errors import DiagError
from diag.store import Store

BATCH_ROWS = 50_000
AI_CPU_CNAME = (
    "terrible"  # a reserved colour of chrome://tracing's palette (red): CPU-fallback tasks stand out
)
PLATFORM_DEVICE = {"ascend": "NPU", "cuda": "GPU", "rocm": "GPU"}

# Every source yields the same columns; rows come sorted by process, lane, start, longest first (nesting order).
_COLUMNS = "proc_order, proc_key, proc_name, lane_order, lane_key, lane_name, rel_ns, dur_ns, name, cat, args"
_ORDER = "ORDER BY proc_order, proc_key, lane_order, lane_key, rel_ns, dur_ns DESC"
_SOURCES = {
    "device": """
        SELECT 0, 'device', $device, CASE WHEN stream LIKE 'Stream%' THEN 0 ELSE 1 END * 1000000000
                   + coalesce(stream_id, 999999999), coalesce(stream, '?'), coalesce(stream, 'stream ?'),
               start_ns - $origin, greatest(coalesce(dur_ns, 0), 0), coalesce(name, '?'),
               coalesce(lower(task_kind), 'device'),
               to_json(struct_pack(kind := task_kind, op_type := op_type, task_type := task_type, step := step,
                                   memcpy_bytes := memcpy_bytes, connection_id := connection_id))
        FROM device_tasks WHERE run_id = $run AND start_ns IS NOT NULL""",
    "host": """
        SELECT 1, 'host ' || coalesce(CAST(pid AS VARCHAR), '?'),
               coalesce(process, 'host') || ' (pid ' || coalesce(CAST(pid AS VARCHAR), '?') || ')',
               coalesce(tid, 0), coalesce(CAST(tid AS VARCHAR), '?'), 'tid ' || coalesce(CAST(tid AS VARCHAR), '?'),
               start_ns - $origin, greatest(coalesce(dur_ns, 0), 0), coalesce(name, '?'),
               coalesce(lower(category), 'host'),
               to_json(struct_pack(category := category, api_level := api_level, correlation := correlation,
                                   input_dims := input_dims))
        FROM host_ops WHERE run_id = $run AND start_ns IS NOT NULL""",
    "overlap": """
        SELECT 2, 'overlap', 'Overlap Analysis', CASE kind WHEN 'Computing' THEN 0 WHEN 'Communication' THEN 1
                   WHEN 'Communication(Not Overlapped)' THEN 2 ELSE 3 END, kind, kind,
               start_ns - $origin, greatest(coalesce(dur_ns, 0), 0), kind, 'overlap', '{}'
        FROM overlap_slices WHERE run_id = $run AND start_ns IS NOT NULL""",
    "comm_ops": """
        SELECT 3, 'comm_ops', 'Communication ops (communication.json)', 0, coalesce(group_name, '?'),
               'group ' || coalesce(group_name, '?'), start_ns - $origin, greatest(coalesce(elapse_ns, 0), 0),
               coalesce(op_name, '?'), 'communication_op',
               to_json(struct_pack(kind := kind, step := step, transit_ns := transit_ns, wait_ns := wait_ns))
        FROM comm_ops WHERE run_id = $run AND start_ns IS NOT NULL""",
    "steps": """
        SELECT 4, 'run', 'Run', 0, 'steps', 'Steps', start_ns - $origin, greatest(end_ns - start_ns, 0),
               'step ' || CAST(step AS VARCHAR), 'step', to_json(struct_pack(step := step))
        FROM steps WHERE run_id = $run AND start_ns IS NOT NULL AND end_ns IS NOT NULL""",
}


def us_text(ns: int) -> str:
    """Exact µs with 3 decimals (ns precision kept): 1234567 → '1234.567'."""
    sign, ns = ("-", -ns) if ns < 0 else ("", ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


@dataclass
class ChromeTraceSummary:
    path: Path
    run_id: int
    platform: str
    events: int = 0  # X and instant events (metadata not counted)
    by_source: dict[str, int] = field(default_factory=dict)
    ai_cpu_events: int = 0
    threads: int = 0
    overflow_threads: int = 0  # threads opened because two events of one lane overlapped without nesting
    findings: int = 0
    findings_without_time: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "format": "chrome",
            "path": str(self.path),
            "run_id": self.run_id,
            "platform": self.platform,
            "events": self.events,
            "by_source": self.by_source,
            "ai_cpu_events": self.ai_cpu_events,
            "threads": self.threads,
            "overflow_threads": self.overflow_threads,
            "findings": self.findings,
            "findings_without_time": self.findings_without_time,
        }


class _Writer:
    """Assigns pids / tids, keeps each thread exactly nested and writes events with their metadata first."""

    def __init__(self, out: IO[str], summary: ChromeTraceSummary) -> None:
        self.out, self.summary = out, summary
        self.pids: dict[str, int] = {}
        self.lanes: dict[
            tuple[str, str], list[tuple[int, list[int]]]
        ] = {}  # (tid, stack of ends) per sub-lane
        self.next_tid: dict[int, int] = {}
        self.first = True

    def _emit(self, text: str) -> None:
        self.out.write(text if self.first else "," + text)
        self.first = False

    def _meta(self, pid: int, tid: int | None, kind: str, args: dict[str, Any]) -> None:
        where = f'"pid":{pid}' + (f',"tid":{tid}' if tid is not None else "")
        self._emit(f'\n{{"ph":"M","name":"{kind}",{where},"args":{json.dumps(args)}}}')

    def pid(self, proc_key: str, proc_name: str) -> int:
        if proc_key not in self.pids:
            pid = self.pids[proc_key] = len(self.pids) + 1
            self._meta(pid, None, "process_name", {"name": proc_name})
            self._meta(pid, None, "process_sort_index", {"sort_index": pid})
        return self.pids[proc_key]

    def tid(self, pid: int, lane: tuple[str, str], lane_name: str, start: int, end: int) -> int:
        """The thread of this lane where [start, end] nests or is disjoint (events come sorted by start)."""
        subs = self.lanes.setdefault(lane, [])
        for tid, stack in subs:
            while stack and stack[-1] <= start:
                stack.pop()
            if not stack or end <= stack[-1]:
                stack.append(end)
                return tid
        tid = self.next_tid[pid] = self.next_tid.get(pid, 0) + 1
        subs.append((tid, [end]))
        overflow = len(subs) - 1
        self._meta(
            pid, tid, "thread_name", {"name": lane_name + (f" · overlap {overflow}" if overflow else "")}
        )
        self._meta(pid, tid, "thread_sort_index", {"sort_index": tid})
        self.summary.threads += 1
        self.summary.overflow_threads += 1 if overflow else 0
        return tid

    def raw_events(self, lines: list[str], ai_cpu: int) -> None:
        """Complete events already rendered (each a newline and an object); thread metadata is out before them."""
        if lines:
            self._emit(lines[0])
            self.out.write("," + ",".join(lines[1:]) if len(lines) > 1 else "")
        self.summary.events += len(lines)
        self.summary.ai_cpu_events += ai_cpu

    def complete(self, pid: int, tid: int, rel_ns: int, dur_ns: int, name: str, cat: str, args: str) -> None:
        colour = f',"cname":"{AI_CPU_CNAME}"' if cat == "ai_cpu" else ""
        self._emit(
            f'\n{{"ph":"X","pid":{pid},"tid":{tid},"ts":{us_text(rel_ns)},"dur":{us_text(dur_ns)},'
            f'"name":{json.dumps(name)},"cat":{json.dumps(cat)}{colour},"args":{args or "{}"}}}'
        )
        self.summary.events += 1
        self.summary.ai_cpu_events += cat == "ai_cpu"


def _run_row(store: Store, run_id: int) -> tuple[int, str, str, int | None, str | None]:
    rows = (
        store.cursor()
        .execute("SELECT start_ns, platform, name, device, source FROM runs WHERE run_id = ?", [run_id])
        .fetchall()
    )
    if not rows:
        raise DiagError(f"no run {run_id} in the database (diag runs lists them)")
    if rows[0][0] is None:
        raise DiagError(f"run {run_id} has no timed events: nothing to put on a trace")
    start, platform, name, device, source = rows[0]
    return int(start), str(platform), str(name or ""), device, source


def _us_sql(col: str) -> str:
    """SQL for exact µs with 3 decimals of an ns column (``us_text`` in DuckDB, for non-negative values)."""
    return f"CAST({col} // 1000 AS VARCHAR) || '.' || lpad(CAST({col} % 1000 AS VARCHAR), 3, '0')"


# The event text after pid and tid, built in DuckDB (vectorised): Python only picks the thread
_BODY = f"""'"ts":' || {_us_sql("rel_ns")} || ',"dur":' || {_us_sql("dur_ns")} || ',"name":' || to_json(name)
        || ',"cat":' || to_json(cat) || CASE WHEN cat = 'ai_cpu' THEN ',"cname":"{AI_CPU_CNAME}"' ELSE '' END
        || ',"args":' || coalesce(args, '{{}}') || '}}'"""


def _write_source(store: Store, writer: _Writer, source: str, params: dict[str, Any]) -> int:
    source_sql = _SOURCES[source]  # one of the module's own queries (a KeyError for any other name)
    sql = (
        f"SELECT proc_key, proc_name, lane_key, lane_name, rel_ns, dur_ns, cat = 'ai_cpu' AS ai_cpu, {_BODY} AS body "
        f"FROM ({source_sql}) AS t({_COLUMNS}) {_ORDER}"
    )
    used = {k: v for k, v in params.items() if f"${k}" in sql}  # DuckDB refuses a parameter a query lacks
    reader = store.cursor().sql(sql, params=used).to_arrow_reader(BATCH_ROWS)
    n = 0
    for batch in reader:
        cols = batch.to_pydict()
        proc_keys, lane_keys, rels, durs = cols["proc_key"], cols["lane_key"], cols["rel_ns"], cols["dur_ns"]
        lines = []
        for i in range(batch.num_rows):
            pid = writer.pid(proc_keys[i], cols["proc_name"][i])
            tid = writer.tid(
                pid, (proc_keys[i], lane_keys[i]), cols["lane_name"][i], rels[i], rels[i] + durs[i]
            )
            lines.append(f'\n{{"ph":"X","pid":{pid},"tid":{tid},{cols["body"][i]}')
        writer.raw_events(lines, sum(cols["ai_cpu"]))
        n += batch.num_rows
    return n


def _write_findings(store: Store, writer: _Writer, run_id: int, origin: int) -> None:
    from diag.analyses import findings as findings_analysis
    from diag.analyses import log_diagnosis

    items = findings_analysis.device_findings(store, run_id) + log_diagnosis.log_findings(store, run_id)
    pid = writer.pid("run", "Run")
    for f in items:
        args = json.dumps(
            {"severity": f.severity, "category": f.category, "impact_pct": round(f.impact_pct, 3),
             "suggestion": f.suggestion}
        )  # fmt: skip
        if f.start_ns is None:
            writer.summary.findings_without_time += 1
            continue
        rel = int(f.start_ns) - origin
        dur = max(int(f.end_ns) - int(f.start_ns), 0) if f.end_ns is not None else 0
        tid = writer.tid(pid, ("run", "findings"), "Findings", rel, rel + dur)
        writer.complete(pid, tid, rel, dur, f.title, "finding", args)
        writer.summary.findings += 1


def write_chrome_trace(
    store: Store, run_id: int, path: Path, with_findings: bool = True
) -> ChromeTraceSummary:
    """Write run ``run_id`` as a Trace Event Format JSON file at ``path``."""
    origin, platform, name, device, source = _run_row(store, run_id)
    summary = ChromeTraceSummary(path=path, run_id=run_id, platform=platform)
    word = PLATFORM_DEVICE.get(platform, "device")
    params = {"run": run_id, "origin": origin, "device": f"{word} {device}" if device is not None else word}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        out.write('{"displayTimeUnit":"ms","traceEvents":[')
        writer = _Writer(out, summary)
        for src in _SOURCES:
            summary.by_source[src] = _write_source(store, writer, src, params)
        if with_findings:
            _write_findings(store, writer, run_id, origin)
        other = {
            "run_id": run_id, "run_name": name, "platform": platform, "source": source,
            "run_start_ns": str(origin), "time_origin": "ts and dur are µs since the run's start (run_start_ns)",
        }  # fmt: skip
        out.write(f'\n],"otherData":{json.dumps(other)}}}\n')
    return summary
