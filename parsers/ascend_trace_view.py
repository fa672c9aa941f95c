"""torch_npu ``trace_view.json`` and msprof ``msprof_*.json``: a bare JSON array of Chrome-trace events.

One pass of DuckDB's ``read_json`` projects the fields used — ``args`` as a struct of the named keys only,
so the free-text values that are not needed are never built — and converts them into the typed columns of a
temporary table; processes are then resolved by their ``process_name`` metadata (never by a pid scheme: it
changed between versions), as pid lists, and the events are split into device tasks, host ops, flows,
Overlap Analysis slices, steps and counters.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import duckdb

from diag.errors import BadInputError
from diag.store import q
from parsers._base import ParseContext, ParseResult, Probe
from parsers._io import (
    add_partial,
    drop_untimed_events,
    json_array_is_complete,
    json_array_prefix,
    one_line,
    read_json_array_sql,
)
from parsers._json_split import remove as remove_parts
from parsers._json_split import split_array
from parsers._sql import task_kind, us_text_to_ns
from parsers.ascend_kernel_details import retire_stand_ins, stand_ins

# args keys read, all as text (their JSON types vary by version). DuckDB struct fields are case-insensitive,
# so HCCL plane tasks' lower-case 'task type' / 'stream id' / 'task id' cannot sit beside 'Task Type' &c.:
# a plane task's name is its task type, and its stream and task ids are the Ascend Hardware task's.
ARG_KEYS = (
    "name", "Task Type", "Physic Stream Id", "Stream Id", "Task Id", "connection_id", "correlation_id",
    "data size(Byte)", "memcpy direction", "size(B)", "operation", "size(Byte)",
    "Input Dims", "Input type", "Call stack", "level",
)  # fmt: skip
COUNTER_KEYS = (
    "MHz", "KB", "Read(MB/s)", "Write(MB/s)", "Throughput(MB/s)", "Hit Rate(%)", "value",
    "Mata Bw Level", "L2 Buffer Bw Level",
)  # fmt: skip
DEVICE_PROCESSES = ("Ascend Hardware",)
COMM_PROCESSES = ("HCCL", "Communication")
OVERLAP_PROCESS = "Overlap Analysis"


# The exporters write ts as a string; a trace rewritten by another tool may carry JSON numbers, which DuckDB
# hands over as text only after a trip through float64 (~0.25 µs at epoch magnitude): such a trace reads ts
# as DECIMAL instead, exact from numbers and strings alike (1-2 s more per GB here, so not by default).
_NUMERIC_TS = re.compile(rb'"ts"\s*:\s*-?[0-9]')
_SNIFF_BYTES = 1 << 20


def numeric_ts(path: Path) -> bool:
    with open(path, "rb") as fh:
        return _NUMERIC_TS.search(fh.read(_SNIFF_BYTES)) is not None


def read_json_sql(path: Path | list[Path], exact_numbers: bool = False) -> str:
    args = ", ".join(f'"{k}" VARCHAR' for k in (*ARG_KEYS, *COUNTER_KEYS))
    cols = {
        "ph": "VARCHAR", "name": "VARCHAR", "cat": "VARCHAR", "pid": "VARCHAR", "tid": "VARCHAR",
        "ts": "DECIMAL(38,9)" if exact_numbers else "VARCHAR", "dur": "VARCHAR", "id": "VARCHAR",
        "args": f"STRUCT({args})",
    }  # fmt: skip
    return read_json_array_sql(path, cols)


def _ts(col: str, exact_numbers: bool = False) -> str:
    """Trace ``ts``: epoch µs text, usually with exactly 3 decimals → exact ns (see parsers._sql)."""
    # lenient: a value that does not read (``"abc"``, ``1e30``) is NULL, and the event is left out with a note
    # (parsers._io.drop_untimed_events) instead of failing the whole trace
    if exact_numbers:
        return f"CASE WHEN abs({col}) < 1e20 THEN TRY_CAST(round({col} * 1000) AS BIGINT) END"
    return (
        f"CASE WHEN {col}[-4] = '.' AND NOT contains({col}, 'e') THEN TRY_CAST(replace({col}, '.', '') AS BIGINT) "
        f"WHEN abs(TRY_CAST({col} AS DOUBLE)) < 1e20 THEN TRY_CAST(round(TRY_CAST({col} AS DECIMAL(38,9)) * 1000) AS BIGINT) END"
    )


def _dur(col: str) -> str:
    return us_text_to_ns(col, strict=False)


_EVENT_START = re.compile(r"^\s*\[\s*(\{|\])")


class AscendTraceViewParser:
    name = "ascend_trace_view"
    version = 2
    fits_memory = True  # a temporary table that spills: DuckDB's limit fitted to the file (diag.store)
    platform = "ascend"

    def detect(self, probe: Probe) -> bool:
        if not _EVENT_START.match(probe.text):
            return False
        head = probe.text[:4096]
        return (
            ('"ph"' in head and '"ts"' in head)
            or probe.name == "trace_view.json"
            or (probe.name.startswith("msprof_") and probe.name.endswith(".json"))
        )

    def parse(self, ctx: ParseContext) -> ParseResult:
        result = ParseResult()
        con, src_path = ctx.con, ctx.path
        if not json_array_is_complete(src_path):
            src_path, result.partial = json_array_prefix(
                src_path,
                ctx.display,
                ctx.tmpdir,
                # on a connection of its own: a failed try must not abort the ingest transaction
                validate=lambda p: q(con.cursor(), f"SELECT count(*) FROM {read_json_sql(p)}"),
            )
        try:
            self._load(ctx, src_path, result)
        finally:
            if src_path != ctx.path:
                src_path.unlink(missing_ok=True)
            # After a failed statement the transaction is aborted and takes these with it: never mask the error.
            with contextlib.suppress(duckdb.Error):
                for t in ("_tv", "_procs", "_threads"):
                    q(con, f"DROP TABLE IF EXISTS {t}")
        return result

    def _load(self, ctx: ParseContext, path: Path, result: ParseResult) -> None:
        con = ctx.con
        threads = int(q(con, "SELECT current_setting('threads')")[0][0])
        exact = numeric_ts(path)
        parts = split_array(
            path, threads, ctx.tmpdir
        )  # one part per thread: DuckDB reads one file per thread
        try:
            # every args value converted here, on the parallel read, into the typed column its table takes:
            # the temporary table holds no struct of texts, and the inserts below only pick columns
            q(
                con,
                f"""CREATE TEMP TABLE _tv AS
                SELECT ph, name, cat, TRY_CAST(pid AS BIGINT) AS pid, TRY_CAST(tid AS BIGINT) AS tid,
                       {_ts("ts", exact)} AS ts_ns, {_dur("dur")} AS dur_ns, id, {_ARG_COLUMNS}
                FROM {read_json_sql(parts, exact)}""",
            )
        except duckdb.Error as exc:
            raise BadInputError(ctx.display, f"cannot read as a trace event array: {one_line(exc)}") from None
        finally:
            if parts != [path]:
                remove_parts(parts)
        add_partial(result, drop_untimed_events(con, "_tv", ctx.display))
        q(con, "CREATE TEMP TABLE _procs AS SELECT pid, any_value(meta_name) AS process FROM _tv "
               "WHERE ph = 'M' AND name = 'process_name' GROUP BY pid")  # fmt: skip
        q(con, "CREATE TEMP TABLE _threads AS SELECT pid, tid, any_value(meta_name) AS thread FROM _tv "
               "WHERE ph = 'M' AND name = 'thread_name' GROUP BY pid, tid")  # fmt: skip
        run, file = ctx.run_id, ctx.file_id
        # Newer torch_npu packs device-side pids as (host_pid << 10) | (sort_index << 5) | device_id.
        # Only trusted when the high bits are the host (Python) pid: older traces used other schemes.
        q(
            con,
            """UPDATE runs SET device = (
                    SELECT min(d.pid & 31) FROM _procs d JOIN _procs h ON h.process = 'Python' AND d.pid >> 10 = h.pid
                    WHERE d.process IN ('Ascend Hardware', 'HCCL', 'Communication', 'Overlap Analysis'))
                  WHERE run_id = ? AND device IS NULL""",
            [run],
        )
        # kernel_details rows stood in for device tasks while the run had no trace; the trace replaces them.
        stood_in = stand_ins(con, run)
        kinds = _ProcessFilters(q(con, "SELECT pid, process FROM _procs"))

        def insert(table: str, sql: str) -> None:
            result.add(table, q(con, sql)[0][0])

        # Each insert selects its events by a pid list (from the process_name metadata) on _tv itself, so the
        # filter runs in the scan and the process / thread names are joined to the selected rows only.
        insert(
            "device_tasks",
            f"""INSERT INTO device_task_rows (run_id, file_id, source, stream, stream_id, task_kind,
                task_type, name, start_ns, dur_ns, hw_task_id, connection_id, memcpy_bytes, memcpy_direction)
            SELECT {run}, {file}, 'trace_view', coalesce(thread, 'Stream ' || tid), stream_id,
                   {task_kind("task_type")}, task_type, name, ts_ns, dur_ns, hw_task_id, connection_id,
                   task_bytes, memcpy_direction
            FROM {_complete(kinds.device)}""",
        )
        # HCCL: 'Group … Communication' threads carry the collective ops, 'Plane n' threads their small tasks.
        insert(
            "device_tasks",
            f"""INSERT INTO device_task_rows (run_id, file_id, source, stream, task_kind, task_type,
                name, start_ns, dur_ns, connection_id, memcpy_bytes)
            SELECT {run}, {file}, 'trace_view', coalesce(thread, process || ' ' || tid),
                   CASE WHEN thread LIKE 'Plane%' THEN 'COMM_TASK' ELSE 'COMMUNICATION' END,
                   CASE WHEN thread LIKE 'Plane%' THEN name ELSE 'HCCL' END, name, ts_ns, dur_ns,
                   connection_id, comm_bytes
            FROM {_complete(kinds.comm)}""",
        )
        retire_stand_ins(con, run, stood_in, result)
        insert(
            "overlap_slices",
            f"""INSERT INTO overlap_slices (run_id, file_id, kind, start_ns, dur_ns)
            SELECT {run}, {file}, name, ts_ns, dur_ns FROM _tv WHERE ph = 'X' AND {kinds.overlap}""",
        )
        insert(
            "host_ops",
            f"""INSERT INTO host_ops (run_id, file_id, pid, tid, process, category, name, start_ns,
                dur_ns, correlation, api_level, input_dims, input_types, call_stack)
            SELECT {run}, {file}, pid, tid, process,
                   coalesce(cat, CASE process WHEN 'CANN' THEN 'cann_api' WHEN 'Python GC' THEN 'gc'
                                 ELSE lower(coalesce(process, 'unknown')) END),
                   name, ts_ns, dur_ns, correlation, api_level, input_dims, input_types, call_stack
            FROM {_complete(kinds.host, threads=False)}""",
        )
        insert(
            "steps",
            f"""INSERT INTO steps (run_id, file_id, step, start_ns, end_ns)
            SELECT {run}, {file}, TRY_CAST(split_part(name, '#', 2) AS BIGINT), min(ts_ns), max(ts_ns + dur_ns)
            FROM _tv WHERE ph = 'X' AND name LIKE 'ProfilerStep#%' GROUP BY name""",
        )
        insert(
            "links",
            f"""INSERT INTO links (run_id, file_id, flow_cat, flow_id, src_pid, src_tid, src_ts_ns,
                dst_pid, dst_tid, dst_ts_ns)
            SELECT {run}, {file}, cat, id, s_pid, s_tid, s_ts, f_pid, f_tid, f_ts FROM (
                SELECT cat, id,
                       arg_min(pid, ts_ns) FILTER (WHERE ph = 's') AS s_pid,
                       arg_min(tid, ts_ns) FILTER (WHERE ph = 's') AS s_tid, min(ts_ns) FILTER (WHERE ph = 's') AS s_ts,
                       arg_min(pid, ts_ns) FILTER (WHERE ph = 'f') AS f_pid,
                       arg_min(tid, ts_ns) FILTER (WHERE ph = 'f') AS f_tid, min(ts_ns) FILTER (WHERE ph = 'f') AS f_ts,
                       count(*) FILTER (WHERE ph = 's') AS n_s, count(*) FILTER (WHERE ph = 'f') AS n_f
                FROM _tv WHERE ph IN ('s', 'f') GROUP BY cat, id)
            WHERE n_s > 0 AND n_f > 0""",
        )
        series = ", ".join(f"('{k}', e.counter_values[{i}])" for i, k in enumerate(COUNTER_KEYS, 1))
        insert(
            "counters",
            f"""INSERT INTO counters (run_id, file_id, process, name, series, ts_ns, value)
            SELECT {run}, {file}, p.process, e.name, v.series, e.ts_ns, v.value
            FROM _tv e LEFT JOIN _procs p USING (pid),
                 LATERAL (SELECT * FROM (VALUES {series}) AS v(series, value) WHERE v.value IS NOT NULL) v
            WHERE e.ph = 'C'""",
        )


# The args values each table takes, as the typed columns of _tv (names as the inserts use them).
_ARG_COLUMNS = f"""CASE WHEN ph = 'M' THEN args.name END AS meta_name, args."Task Type" AS task_type,
    TRY_CAST(coalesce(args."Physic Stream Id", args."Stream Id") AS BIGINT) AS stream_id,
    TRY_CAST(args."Task Id" AS BIGINT) AS hw_task_id, TRY_CAST(args.connection_id AS BIGINT) AS connection_id,
    TRY_CAST(coalesce(args.connection_id, args.correlation_id) AS BIGINT) AS correlation,
    TRY_CAST(coalesce(args."data size(Byte)", args."size(B)") AS BIGINT) AS task_bytes,
    TRY_CAST(args."size(Byte)" AS BIGINT) AS comm_bytes,
    coalesce(args."memcpy direction", args.operation) AS memcpy_direction, args.level AS api_level,
    args."Input Dims" AS input_dims, args."Input type" AS input_types, args."Call stack" AS call_stack,
    CASE WHEN ph = 'C' THEN [{", ".join(f'TRY_CAST(args."{k}" AS DOUBLE)' for k in COUNTER_KEYS)}]
    END AS counter_values"""


class _ProcessFilters:
    """Which process an event belongs to, as conditions on ``pid`` (and ``task_type``) alone.

    An event's process is its pid's ``process_name``; a pid without one (a trace cut before its metadata)
    counts as Ascend Hardware when the event carries a Task Type, else as a host process of no name.
    """

    def __init__(self, procs: list[tuple]) -> None:
        def pids(names: tuple[str, ...] | None) -> str:
            """``pid`` is one of the processes called ``names`` (None: of any name)."""
            chosen = [
                p for p, n in procs if p is not None and n is not None and (names is None or n in names)
            ]
            return (
                f"coalesce(pid IN ({', '.join(str(int(p)) for p in chosen)}), false)" if chosen else "false"
            )

        self.device = f"({pids(DEVICE_PROCESSES)} OR (NOT {pids(None)} AND task_type IS NOT NULL))"
        self.comm = pids(COMM_PROCESSES)
        self.overlap = pids((OVERLAP_PROCESS,))
        self.host = f"NOT {self.device} AND NOT {self.comm} AND NOT {self.overlap}"


def _complete(where: str, threads: bool = True) -> str:
    """The complete events matching ``where`` (on _tv's own columns), with their process and thread names."""
    thread = " LEFT JOIN _threads USING (pid, tid)" if threads else ""
    return f"(SELECT * FROM _tv WHERE ph = 'X' AND {where}) e LEFT JOIN _procs USING (pid){thread}"


PARSER = AscendTraceViewParser()
