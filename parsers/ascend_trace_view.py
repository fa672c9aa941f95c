"""torch_npu ``trace_view.json`` and msprof ``msprof_*.json``: a bare JSON array of Chrome-trace events.

One pass of DuckDB's ``read_json`` projects the fields used (``args`` as a struct of named keys, so the big
free-text values that are not needed are never built), into a temporary table; processes are then resolved
by their ``process_name`` metadata (never by pid: the pid scheme changed between versions) and the events
are split into device tasks, host ops, flows, Overlap Analysis slices, steps and counters.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from diag.errors import BadInputError
from diag.store import q
from parsers._base import ParseContext, ParseResult, Probe
from parsers._io import JSON_MAX_OBJECT, json_array_is_complete, json_array_prefix, one_line
from parsers._sql import dur_us_to_ns, task_kind, ts_us_to_ns

COUNTER_KEYS = (
    "MHz",
    "KB",
    "Read(MB/s)",
    "Write(MB/s)",
    "Throughput(MB/s)",
    "Hit Rate(%)",
    "value",
    "Mata Bw Level",
    "L2 Buffer Bw Level",
)
DEVICE_PROCESSES = ("Ascend Hardware",)
COMM_PROCESSES = ("HCCL", "Communication")
OVERLAP_PROCESS = "Overlap Analysis"
_COLUMNS = {
    "ph": "VARCHAR",
    "name": "VARCHAR",
    "cat": "VARCHAR",
    "pid": "VARCHAR",
    "tid": "VARCHAR",
    "ts": "VARCHAR",
    "dur": "VARCHAR",
    "id": "VARCHAR",
    "args": "JSON",
}


def read_json_sql(path: Path) -> str:
    """``args`` stays raw JSON text: cheapest to read, and its keys vary by version and case."""
    p = str(path).replace("'", "''")
    cols = "{" + ", ".join(f"'{k}': '{v}'" for k, v in _COLUMNS.items()) + "}"
    return f"read_json('{p}', format='array', columns={cols}, maximum_object_size={JSON_MAX_OBJECT})"


def args_of(alias: str, keys: tuple[str, ...]) -> str:
    """Extract several ``args`` keys with one JSON parse per row: a list, indexed 1.. in ``keys`` order."""
    paths = ", ".join("'$.\"" + k + "\"'" for k in keys)
    return f"json_extract_string({alias}.args, [{paths}])"


_EVENT_START = re.compile(r"^\s*\[\s*(\{|\])")


class AscendTraceViewParser:
    name = "ascend_trace_view"
    version = 1
    platform = "ascend"

    def detect(self, probe: Probe) -> bool:
        if not _EVENT_START.match(probe.text):
            return False
        head = probe.text[:4096]
        return (
            '"ph"' in head
            and '"ts"' in head
            or probe.name in ("trace_view.json",)
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
                validate=lambda p: q(con, f"SELECT count(*) FROM {read_json_sql(p)}"),
            )
        try:
            self._load(ctx, src_path, result)
        finally:
            if src_path != ctx.path:
                src_path.unlink(missing_ok=True)
            for t in ("_tv", "_procs", "_threads", "_c"):
                q(con, f"DROP TABLE IF EXISTS {t}")
        return result

    def _load(self, ctx: ParseContext, path: Path, result: ParseResult) -> None:
        con = ctx.con
        try:
            q(
                con,
                f"""CREATE TEMP TABLE _tv AS
                SELECT ph, name, cat, TRY_CAST(pid AS BIGINT) AS pid, TRY_CAST(tid AS BIGINT) AS tid,
                       {ts_us_to_ns("ts")} AS ts_ns, {dur_us_to_ns("dur")} AS dur_ns, id, args
                FROM {read_json_sql(path)}""",
            )
        except duckdb.Error as exc:
            raise BadInputError(ctx.display, f"cannot read as a trace event array: {one_line(exc)}") from None
        q(
            con,
            "CREATE TEMP TABLE _procs AS SELECT pid, any_value(args->>'$.name') AS process FROM _tv "
            "WHERE ph = 'M' AND name = 'process_name' GROUP BY pid",
        )
        q(
            con,
            "CREATE TEMP TABLE _threads AS SELECT pid, tid, any_value(args->>'$.name') AS thread FROM _tv "
            "WHERE ph = 'M' AND name = 'thread_name' GROUP BY pid, tid",
        )
        run, file = ctx.run_id, ctx.file_id
        # kernel_details rows stood in for device tasks while the run had no trace; the trace replaces them.
        replaced = q(
            con,
            "DELETE FROM device_tasks WHERE run_id = ? AND source = 'kernel_details' RETURNING file_id",
            [run],
        )
        if replaced:
            q(con, "UPDATE files SET rows = rows - ? WHERE file_id = ?", [len(replaced), replaced[0][0]])

        def x_events(keys: tuple[str, ...], where: str) -> str:
            # A trace cut before its metadata events still has device tasks: they carry a Task Type.
            process = (
                "coalesce(p.process, CASE WHEN json_exists(e.args, '$.\"Task Type\"') "
                "THEN 'Ascend Hardware' END)"
            )
            return (
                f"(SELECT e.*, t.thread, {args_of('e', keys)} AS a FROM "
                f"(SELECT e.*, {process} AS process FROM _tv e LEFT JOIN _procs p USING (pid) "
                f"WHERE e.ph = 'X') e LEFT JOIN _threads t USING (pid, tid) WHERE {where}) e"
            )

        device = ", ".join(f"'{p}'" for p in DEVICE_PROCESSES)
        comm = ", ".join(f"'{p}'" for p in COMM_PROCESSES)
        hw_keys = (
            "Physic Stream Id",
            "Stream Id",
            "Task Type",
            "Task Id",
            "connection_id",
            "data size(Byte)",
            "size(B)",
            "memcpy direction",
            "operation",
        )
        result.add(
            "device_tasks",
            self._count(
                con.execute(
                    f"""INSERT INTO device_tasks (run_id, file_id, source, stream, stream_id, task_kind, task_type, name,
                    start_ns, dur_ns, hw_task_id, connection_id, memcpy_bytes, memcpy_direction)
            SELECT {run}, {file}, 'trace_view', coalesce(e.thread, 'Stream ' || e.tid),
                   TRY_CAST(coalesce(e.a[1], e.a[2]) AS BIGINT), {task_kind("e.a[3]")}, e.a[3], e.name,
                   e.ts_ns, e.dur_ns, TRY_CAST(e.a[4] AS BIGINT), TRY_CAST(e.a[5] AS BIGINT),
                   TRY_CAST(coalesce(e.a[6], e.a[7]) AS BIGINT), coalesce(e.a[8], e.a[9])
            FROM {x_events(hw_keys, f"e.process IN ({device})")}"""
                )
            ),
        )
        # HCCL: 'Group … Communication' threads carry the collective ops, 'Plane n' threads their small tasks.
        comm_keys = ("stream id", "task type", "task id", "connection_id", "size(Byte)")
        result.add(
            "device_tasks",
            self._count(
                con.execute(
                    f"""INSERT INTO device_tasks (run_id, file_id, source, stream, stream_id, task_kind, task_type, name,
                    start_ns, dur_ns, hw_task_id, connection_id, memcpy_bytes)
            SELECT {run}, {file}, 'trace_view', coalesce(e.thread, e.process || ' ' || e.tid),
                   TRY_CAST(e.a[1] AS BIGINT),
                   CASE WHEN e.thread LIKE 'Plane%' THEN 'COMM_TASK' ELSE 'COMMUNICATION' END,
                   coalesce(e.a[2], 'HCCL'), e.name, e.ts_ns, e.dur_ns,
                   TRY_CAST(e.a[3] AS BIGINT), TRY_CAST(e.a[4] AS BIGINT), TRY_CAST(e.a[5] AS BIGINT)
            FROM {x_events(comm_keys, f"e.process IN ({comm})")}"""
                )
            ),
        )
        result.add(
            "overlap_slices",
            self._count(
                con.execute(
                    f"""INSERT INTO overlap_slices (run_id, file_id, kind, start_ns, dur_ns)
            SELECT {run}, {file}, e.name, e.ts_ns, e.dur_ns
            FROM {x_events((), f"e.process = '{OVERLAP_PROCESS}'")}"""
                )
            ),
        )
        host_keys = ("connection_id", "correlation_id", "level", "Input Dims", "Input type", "Call stack")
        result.add(
            "host_ops",
            self._count(
                con.execute(
                    f"""INSERT INTO host_ops (run_id, file_id, pid, tid, process, category, name, start_ns, dur_ns,
                    correlation, api_level, input_dims, input_types, call_stack)
            SELECT {run}, {file}, e.pid, e.tid, e.process,
                   coalesce(e.cat, CASE e.process WHEN 'CANN' THEN 'cann_api' WHEN 'Python GC' THEN 'gc'
                                   ELSE lower(coalesce(e.process, 'unknown')) END),
                   e.name, e.ts_ns, e.dur_ns, TRY_CAST(coalesce(e.a[1], e.a[2]) AS BIGINT), e.a[3],
                   e.a[4], e.a[5], e.a[6]
            FROM {x_events(host_keys, f"coalesce(e.process, '') NOT IN ({device}, {comm}, '{OVERLAP_PROCESS}')")}"""
                )
            ),
        )
        result.add(
            "steps",
            self._count(
                con.execute(
                    f"""INSERT INTO steps (run_id, file_id, step, start_ns, end_ns)
            SELECT {run}, {file}, TRY_CAST(split_part(name, '#', 2) AS BIGINT), min(ts_ns), max(ts_ns + dur_ns)
            FROM _tv WHERE ph = 'X' AND name LIKE 'ProfilerStep#%' GROUP BY name"""
                )
            ),
        )
        result.add(
            "links",
            self._count(
                con.execute(
                    f"""INSERT INTO links (run_id, file_id, flow_cat, flow_id, src_pid, src_tid, src_ts_ns,
                    dst_pid, dst_tid, dst_ts_ns)
            WITH s AS (SELECT cat, id, arg_min(pid, ts_ns) AS pid, arg_min(tid, ts_ns) AS tid, min(ts_ns) AS ts
                       FROM _tv WHERE ph = 's' GROUP BY cat, id),
                 f AS (SELECT cat, id, arg_min(pid, ts_ns) AS pid, arg_min(tid, ts_ns) AS tid, min(ts_ns) AS ts
                       FROM _tv WHERE ph = 'f' GROUP BY cat, id)
            SELECT {run}, {file}, cat, id, s.pid, s.tid, s.ts, f.pid, f.tid, f.ts FROM s JOIN f USING (cat, id)"""
                )
            ),
        )
        q(
            con,
            f"""CREATE TEMP TABLE _c AS SELECT p.process, e.name, e.ts_ns, {args_of("e", COUNTER_KEYS)} AS a
               FROM _tv e LEFT JOIN _procs p USING (pid) WHERE e.ph = 'C'""",
        )
        series = " UNION ALL ".join(
            f"SELECT process, name, '{k}' AS series, ts_ns, TRY_CAST(a[{i}] AS DOUBLE) AS value "
            f"FROM _c WHERE a[{i}] IS NOT NULL"
            for i, k in enumerate(COUNTER_KEYS, start=1)
        )
        result.add(
            "counters",
            self._count(
                con.execute(
                    f"INSERT INTO counters (run_id, file_id, process, name, series, ts_ns, value) "
                    f"SELECT {run}, {file}, * FROM ({series})"
                )
            ),
        )

    @staticmethod
    def _count(cursor: object) -> int:
        rows = cursor.fetchall()  # type: ignore[attr-defined]
        return int(rows[0][0]) if rows else 0


PARSER = AscendTraceViewParser()
