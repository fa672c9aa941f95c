"""The host side of an msprof / torch_npu SQLite export: host ops, flows, steps, memory, counters.

Used by ``parsers.ascend_profiler_db`` once the tables are staged (``_ns_<table>``, strings in ``_adb_str``,
the device tasks kept in ``_adb_task``).  Each block maps onto the rows the text export's parser writes:

* ``PYTORCH_API`` (start/end declared TEXT by torch_npu) → ``host_ops`` of process ``Python``: type 50001
  ``cpu_op``, 50002 ``enqueue``/``dequeue``, 50003 ``python_function``, 50004 ``mstx``; call stacks from
  ``PYTORCH_CALLCHAINS``; ``CANN_API`` → process ``CANN``, named ``AscendCL@…``/``Node@…`` as in trace_view;
  ``GC_RECORD`` → ``Python GC``.
* flows (``links``): ``async_npu`` torch op → device task (``CONNECTION_IDS``), ``HostToDevice`` CANN API →
  device task (``connectionId``), ``async_task_queue`` enqueue → dequeue.  (``fwdbwd`` is not derived.)
* ``STEP_TIME`` → ``steps``; ``MEMORY_RECORD`` (+ ``NPU_MEM`` app rows as component ``APP``) and
  ``NPU_MODULE_MEM`` → ``memory``; ``OP_MEMORY`` → ``op_memory`` (bytes and ns already);
  ``AICORE_FREQ`` → ``counters``; ``OVERLAP_ANALYSIS`` (newest msprof) → ``overlap_slices``.
"""

from __future__ import annotations

from diag.store import q
from parsers._base import ParseContext, ParseResult
from parsers._sqlite_export import Cols


def _b(col: str) -> tuple[str, str]:
    return (col, "BIGINT")


TABLES: dict[str, Cols] = {
    "PYTORCH_API": {
        "start": _b("startNs"), "end": _b("endNs"), "gtid": _b("globalTid"), "conn": _b("connectionId"),
        "name": _b("name"), "in_dtypes": _b("inputDtypes"), "in_shapes": _b("inputShapes"),
        "chain": _b("callchainId"), "type": _b("type"),
    },
    "CONNECTION_IDS": {"id": _b("id"), "conn": _b("connectionId")},
    "PYTORCH_CALLCHAINS": {"id": _b("id"), "stack": _b("stack"), "depth": _b("stackDepth")},
    "CANN_API": {
        "start": _b("startNs"), "end": _b("endNs"), "type": _b("type"), "gtid": _b("globalTid"),
        "conn": _b("connectionId"), "name": _b("name"),
    },
    "ENUM_API_TYPE": {"id": _b("id"), "name": ("name", "VARCHAR")},
    "GC_RECORD": {"start": _b("startNs"), "end": _b("endNs"), "gtid": _b("globalTid")},
    "STEP_TIME": {"id": _b("id"), "start": _b("startNs"), "end": _b("endNs")},
    "MEMORY_RECORD": {
        "component": _b("component"), "ts": _b("timestamp"), "allocated": _b("totalAllocated"),
        "reserved": _b("totalReserved"), "active": _b("totalActive"), "stream_ptr": _b("streamPtr"),
        "device": _b("deviceId"),
    },
    "OP_MEMORY": {
        "name": _b("name"), "size": _b("size"), "alloc": _b("allocationTime"), "release": _b("releaseTime"),
        "active_release": _b("activeReleaseTime"), "dur": _b("duration"), "active_dur": _b("activeDuration"),
        "a_alloc": _b("allocationTotalAllocated"), "a_res": _b("allocationTotalReserved"),
        "a_act": _b("allocationTotalActive"), "r_alloc": _b("releaseTotalAllocated"),
        "r_res": _b("releaseTotalReserved"), "r_act": _b("releaseTotalActive"), "stream_ptr": _b("streamPtr"),
        "device": _b("deviceId"),
    },
    "NPU_MODULE_MEM": {"module": _b("moduleId"), "ts": _b("timestampNs"), "reserved": _b("totalReserved"),
                       "device": _b("deviceId")},
    "ENUM_MODULE": {"id": _b("id"), "name": ("name", "VARCHAR")},
    "NPU_MEM": {"type": _b("type"), "ddr": _b("ddr"), "hbm": _b("hbm"), "ts": _b("timestampNs"),
                "device": _b("deviceId")},
    "AICORE_FREQ": {"device": _b("deviceId"), "ts": _b("timestampNs"), "freq": ("freq", "DOUBLE")},
    "OVERLAP_ANALYSIS": {"device": _b("deviceId"), "start": _b("startNs"), "end": _b("endNs"), "type": _b("type")},
}  # fmt: skip

API_PREFIX = {"acl": "AscendCL", "node": "Node", "runtime": "Runtime", "hccl": "Hccl", "model": "Model"}
OVERLAP_KINDS = {0: "Computing", 1: "Communication", 2: "Communication(Not Overlapped)", 3: "Free"}
PID, TID = "(x.gtid >> 32)", "(x.gtid & 4294967295)"  # globalTid = pid << 32 | tid


# Columns holding STRING_IDS ids, replaced by their text once per table (joins; a lookup per use blows up).
RESOLVE: dict[str, tuple[str, ...]] = {
    "COMPUTE_TASK_INFO": (
        "name", "type", "op_type", "op_state", "hf32", "in_shapes", "in_dtypes", "in_formats", "out_shapes",
        "out_dtypes", "out_formats",
    ),
    "COMMUNICATION_TASK_INFO": ("type",),
    "COMMUNICATION_OP": ("name", "grp", "op_type"),
    "TASK_PMU_INFO": ("name",),
    "PYTORCH_API": ("name", "in_dtypes", "in_shapes"),
    "PYTORCH_CALLCHAINS": ("stack",),
    "CANN_API": ("name",),
    "MEMORY_RECORD": ("component",),
    "OP_MEMORY": ("name",),
    "NPU_MEM": ("type",),
}  # fmt: skip


def resolve_strings(con, temps: dict[str, str]) -> None:  # noqa: ANN001
    """Views ``<temp>_s`` of the staged tables of RESOLVE with the id columns as their strings.

    Views, not tables: the joins then run inside each INSERT, streaming, instead of materialising wide string
    rows (1M tasks × 11 strings) in the ingest's memory limit."""
    for table, ids in RESOLVE.items():
        if table not in temps:
            continue
        temp = temps[table]
        cols = [r[0] for r in q(con, f"SELECT column_name FROM (DESCRIBE {temp})")]
        sel, joins = [], []
        for i, c in enumerate(cols):
            if c in ids:
                sel.append(f's{i}.value AS "{c}"')
                joins.append(f'LEFT JOIN _adb_str s{i} ON s{i}.id = x."{c}"')
            else:
                sel.append(f'x."{c}"')
        q(
            con,
            f"CREATE OR REPLACE TEMP VIEW {temp}_s AS SELECT {', '.join(sel)} FROM {temp} x {' '.join(joins)}",
        )
        temps[table] = f"{temp}_s"


class _Out:
    def __init__(self, ctx: ParseContext, temps: dict[str, str], result: ParseResult) -> None:
        self.ctx, self.temps, self.result = ctx, temps, result
        self.owner = f"{ctx.run_id}, {ctx.file_id}"

    def insert(self, table: str, cols: str, select: str) -> None:
        n = q(self.ctx.con, f"INSERT INTO {table} (run_id, file_id, {cols}) {select}")[0][0]
        self.result.add(table, n)


def load(ctx: ParseContext, temps: dict[str, str], result: ParseResult) -> None:
    out = _Out(ctx, temps, result)
    _host_ops(out)
    _links(out)
    _memory(out)
    t, o = temps, out.owner
    if "STEP_TIME" in t:
        out.insert("steps", "step, start_ns, end_ns", f'SELECT {o}, id, start, "end" FROM {t["STEP_TIME"]}')
    if "AICORE_FREQ" in t:
        out.insert(
            "counters",
            "process, name, series, ts_ns, value",
            f"SELECT {o}, 'AI Core Freq', 'AI Core Freq', 'MHz', ts, freq FROM {t['AICORE_FREQ']}",
        )
    if "OVERLAP_ANALYSIS" in t:
        kinds = " ".join(f"WHEN {k} THEN '{v}'" for k, v in OVERLAP_KINDS.items())
        out.insert(
            "overlap_slices",
            "kind, start_ns, dur_ns",
            f'SELECT {o}, CASE type {kinds} END, start, "end" - start FROM {t["OVERLAP_ANALYSIS"]} '
            f"WHERE type IN ({', '.join(map(str, OVERLAP_KINDS))})",
        )


def _host_ops(out: _Out) -> None:
    t, o = out.temps, out.owner
    cols = "pid, tid, process, category, name, start_ns, dur_ns, correlation, api_level, input_dims, input_types, call_stack"
    if "PYTORCH_API" in t:
        stack, join = "NULL", ""
        if "PYTORCH_CALLCHAINS" in t:
            q(
                out.ctx.con,
                f"""CREATE OR REPLACE TEMP TABLE _adb_stack AS SELECT id, string_agg(stack, ';\r\n'
                    ORDER BY depth) AS stack FROM {t["PYTORCH_CALLCHAINS"]} GROUP BY id""",
            )
            stack, join = "k.stack", "LEFT JOIN _adb_stack k ON k.id = x.chain"
        out.insert(
            "host_ops",
            cols,
            f"""SELECT {o}, {PID}, {TID}, 'Python',
                   CASE x.type WHEN 50001 THEN 'cpu_op' WHEN 50003 THEN 'python_function' WHEN 50004 THEN 'mstx'
                        WHEN 50002 THEN CASE WHEN x.name LIKE 'Dequeue%' THEN 'dequeue' ELSE 'enqueue' END
                        ELSE 'torch' END,
                   x.name, x.start, x."end" - x.start, CASE WHEN x.type = 50002 THEN x.conn END, NULL,
                   x.in_shapes, x.in_dtypes, {stack}
            FROM {t["PYTORCH_API"]} x {join}""",
        )
    if "CANN_API" in t:
        join = f"LEFT JOIN {t['ENUM_API_TYPE']} e ON e.id = x.type" if "ENUM_API_TYPE" in t else ""
        level = "e.name" if join else "NULL"
        prefix = " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in API_PREFIX.items())
        out.insert(
            "host_ops",
            cols,
            f"""SELECT {o}, {PID}, {TID}, 'CANN', 'cann_api',
                   CASE {level} {prefix} ELSE coalesce({level}, 'CANN') END || '@' || x.name,
                   x.start, x."end" - x.start, x.conn, {level}, NULL, NULL, NULL
            FROM {t["CANN_API"]} x {join}""",
        )
    if "GC_RECORD" in t:
        out.insert(
            "host_ops",
            cols,
            f"""SELECT {o}, {PID}, {TID}, 'Python GC', 'gc', 'GC', x.start, x."end" - x.start,
                   NULL, NULL, NULL, NULL, NULL FROM {t["GC_RECORD"]} x""",
        )


def _links(out: _Out) -> None:
    t, o = out.temps, out.owner
    cols = "flow_cat, flow_id, src_pid, src_tid, src_ts_ns, dst_pid, dst_tid, dst_ts_ns"
    have_tasks = "TASK" in t  # then _adb_task holds the device tasks kept
    dst = "SELECT conn, pid, stream, start FROM _adb_task"
    if "COMMUNICATION_OP" in t:
        dst += f" UNION ALL SELECT conn, NULL, NULL, start FROM {t['COMMUNICATION_OP']}"
    if have_tasks and "PYTORCH_API" in t and "CONNECTION_IDS" in t:
        out.insert(  # one flow per device task, from the innermost (latest-starting) torch op linked to it
            "links",
            cols,
            f"""WITH d AS ({dst}),
                 src AS (SELECT i.conn, x.gtid, x.start FROM {t["PYTORCH_API"]} x
                         JOIN {t["CONNECTION_IDS"]} i ON i.id = x.conn WHERE x.type = 50001)
            SELECT {o}, 'async_npu', CAST(d.conn AS VARCHAR), arg_max(src.gtid >> 32, src.start),
                   arg_max(src.gtid & 4294967295, src.start), max(src.start), any_value(d.pid), any_value(d.stream), d.start
            FROM d JOIN src ON src.conn = d.conn GROUP BY d.conn, d.start""",
        )
    if have_tasks and "CANN_API" in t:
        rank = (
            "CASE x.type WHEN 10000 THEN 0 WHEN 5500 THEN 1 WHEN 5000 THEN 2 ELSE 3 END"  # Node@launch first
        )
        out.insert(
            "links",
            cols,
            f"""WITH d AS ({dst})
            SELECT {o}, 'HostToDevice', CAST(d.conn AS VARCHAR), arg_min(x.gtid >> 32, {rank}),
                   arg_min(x.gtid & 4294967295, {rank}), arg_min(x.start, {rank}), any_value(d.pid),
                   any_value(d.stream), d.start
            FROM d JOIN {t["CANN_API"]} x ON x.conn = d.conn GROUP BY d.conn, d.start""",
        )
    if "PYTORCH_API" in t:
        out.insert(
            "links",
            cols,
            f"""WITH qx AS (SELECT x.*, x.name LIKE 'Dequeue%' AS deq FROM {t["PYTORCH_API"]} x
                          WHERE x.type = 50002 AND x.conn IS NOT NULL)
            SELECT {o}, 'async_task_queue', CAST(e.conn AS VARCHAR), e.gtid >> 32, e.gtid & 4294967295, e.start,
                   d.gtid >> 32, d.gtid & 4294967295, d.start
            FROM qx e JOIN qx d ON d.conn = e.conn AND d.deq AND NOT e.deq""",
        )


def _memory(out: _Out) -> None:
    t, o = out.temps, out.owner
    cols = "source, component, ts_ns, allocated_bytes, reserved_bytes, active_bytes, stream_ptr, device"
    if "MEMORY_RECORD" in t:
        out.insert(
            "memory",
            cols,
            f"""SELECT {o}, 'memory_record', x.component, x.ts, x.allocated, x.reserved, x.active,
                   CAST(x.stream_ptr AS VARCHAR), 'NPU:' || x.device FROM {t["MEMORY_RECORD"]} x""",
        )
    if "NPU_MEM" in t:  # the process as CANN sees it: memory_record.csv's APP rows
        out.insert(
            "memory",
            cols,
            f"""SELECT {o}, 'memory_record', 'APP', x.ts, NULL, coalesce(x.ddr, 0) + coalesce(x.hbm, 0), NULL,
                   NULL, 'NPU:' || x.device FROM {t["NPU_MEM"]} x WHERE lower(x.type) = 'app'""",
        )
    if "NPU_MODULE_MEM" in t:
        join = f"LEFT JOIN {t['ENUM_MODULE']} e ON e.id = x.module" if "ENUM_MODULE" in t else ""
        module = "e.name" if join else "NULL"
        out.insert(
            "memory",
            cols,
            f"""SELECT {o}, 'npu_module_mem', coalesce({module}, CAST(x.module AS VARCHAR)), x.ts, NULL,
                   x.reserved, NULL, NULL, 'NPU:' || x.device FROM {t["NPU_MODULE_MEM"]} x {join}""",
        )
    if "OP_MEMORY" in t:
        out.insert(
            "op_memory",
            """name, size_bytes, alloc_ns, release_ns, active_release_ns, dur_ns, active_dur_ns,
               alloc_total_allocated_bytes, alloc_total_reserved_bytes, alloc_total_active_bytes,
               release_total_allocated_bytes, release_total_reserved_bytes, release_total_active_bytes,
               stream_ptr, device""",
            f"""SELECT {o}, x.name, x.size, x.alloc, x.release, x.active_release, x.dur, x.active_dur,
                   x.a_alloc, x.a_res, x.a_act, x.r_alloc, x.r_res, x.r_act, CAST(x.stream_ptr AS VARCHAR),
                   'NPU:' || x.device FROM {t["OP_MEMORY"]} x""",
        )
