"""The memory a PyTorch-profiler (Kineto) trace holds with ``profile_memory=True``: ``[memory]`` instant events.

Format (PyTorch ``torch/csrc/profiler/collection.cpp``: an allocation is named ``[memory]``, a failed one
``[OutOfMemory]``; ``torch/csrc/profiler/kineto_metadata.cpp`` ``AddGenericMetadata`` (Allocation): the args;
``pytorch/kineto`` ``libkineto/src/output_json.cpp`` ``handleGenericInstantEvent``: the JSON)::

    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": P, "tid": T, "ts": µs,
     "args": {"Device Type": 1, "Device Id": 0, "Addr": 139…, "Bytes": -512,
              "Total Allocated": 2147483648, "Total Reserved": 2168455168}}

``Bytes`` < 0 is a free; ``Total Allocated`` / ``Total Reserved`` are the caching allocator's totals on that
device after the event; ``Device Type`` is ``c10::DeviceType`` (0 CPU, 1 CUDA — ROCm builds report CUDA too).
PyTorch before ~1.10 (``torch/csrc/autograd/profiler_kineto.cpp``'s ``reportMemoryUsage`` then) wrote only
Device Type, Device Id and Bytes: such events give no memory samples and no pairs.

An ``[OutOfMemory]`` event (same args but ``Addr``) becomes a note on the file: what was requested against
the totals.  Stored: ``memory`` rows (``source='kineto'``, ``component='PyTorch'``, ``device`` ``cuda:N``: allocated =
Total Allocated, reserved = Total Reserved, one row per event) and ``op_memory`` rows (``parsers._memory_pairs``)
named after the innermost CPU op running the allocation on its thread.  Host (``Device Type`` 0) events are
not stored: the CPU allocator's totals are not device memory and would read as a device's peak; other device
types (XPU, MPS, PrivateUse1…) are not either, this parser being the CUDA one.

The trace's ``args`` are read with a fixed projection, and DuckDB struct fields are case-insensitive, so
``Bytes`` cannot sit next to the memcpy events' ``bytes``: when the first read found ``[memory]`` events, a
second read of the same split parts projects only these.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from diag.store import q
from parsers._base import ParseContext, ParseResult
from parsers._io import read_json_array_sql
from parsers._memory_pairs import insert_pairs

TABLE = "_ktm"
MEMORY_EVENT, OOM_EVENT = "[memory]", "[OutOfMemory]"
CUDA_DEVICE_TYPE = 1  # c10::DeviceType::CUDA
MEMORY_ARGS = ("Device Type", "Device Id", "Addr", "Bytes", "Total Allocated", "Total Reserved")
OP_CATS = ("cpu_op", "Operator", "operator")  # the CPU-op categories across Kineto generations


def stage(con: duckdb.DuckDBPyConnection, parts: list[Path], ts_sql: str) -> bool:
    """Copy the ``[memory]`` / ``[OutOfMemory]`` events of ``parts`` into TABLE when the first read (``_kt``)
    saw any."""
    names = f"'{MEMORY_EVENT}', '{OOM_EVENT}'"
    if not q(con, f"SELECT EXISTS (SELECT 1 FROM _kt WHERE name IN ({names}))")[0][0]:
        return False
    args = ", ".join(f'"{k}" VARCHAR' for k in MEMORY_ARGS)
    cols = {"name": "VARCHAR", "pid": "VARCHAR", "tid": "VARCHAR", "ts": "VARCHAR", "args": f"STRUCT({args})"}
    big = "TRY_CAST(a.{} AS BIGINT)"
    q(
        con,
        f"""CREATE OR REPLACE TEMP TABLE {TABLE} AS
        SELECT name = '{OOM_EVENT}' AS oom, TRY_CAST(pid AS BIGINT) AS pid, TRY_CAST(tid AS BIGINT) AS tid, {ts_sql} AS ts_ns,
               {big.format('"Device Type"')} AS device_type, {big.format('"Device Id"')} AS device_id,
               nullif(trim(a."Addr"), '') AS addr, {big.format('"Bytes"')} AS bytes,
               {big.format('"Total Allocated"')} AS total_allocated,
               {big.format('"Total Reserved"')} AS total_reserved
        FROM (SELECT name, pid, tid, ts, args AS a FROM {read_json_array_sql(parts, cols)})
        WHERE name IN ({names})""",
    )
    return True


def insert(ctx: ParseContext, result: ParseResult) -> None:
    """The ``memory`` and ``op_memory`` rows of the staged events (see the module doc)."""
    con, run, file = ctx.con, ctx.run_id, ctx.file_id
    _out_of_memory(con, result)
    cuda = f"NOT oom AND device_type = {CUDA_DEVICE_TYPE} AND ts_ns IS NOT NULL"
    cuda_m = f"NOT m.oom AND m.device_type = {CUDA_DEVICE_TYPE} AND m.ts_ns IS NOT NULL"
    n = q(
        con,
        f"""INSERT INTO memory (run_id, file_id, source, component, ts_ns, allocated_bytes, reserved_bytes,
               active_bytes, stream_ptr, device)
        SELECT {run}, {file}, 'kineto', 'PyTorch', ts_ns, total_allocated, total_reserved, NULL, NULL,
               'cuda:' || coalesce(device_id, 0)
        FROM {TABLE} WHERE {cuda} AND (total_allocated IS NOT NULL OR total_reserved IS NOT NULL)""",
    )[0][0]
    result.add("memory", n)
    host = q(con, f"SELECT count(*) FROM {TABLE} WHERE NOT oom AND device_type <> {CUDA_DEVICE_TYPE}")[0][0]
    if host:
        result.notes.append(f"{host:,} [memory] event(s) of host or non-CUDA memory not stored")
    _name_allocations(con)
    events = f"""SELECT 'cuda:' || coalesce(m.device_id, 0), m.addr, m.ts_ns, m.bytes, m.total_allocated,
                        m.total_reserved, o.name
                 FROM {TABLE} m LEFT JOIN _ktm_op o ON o.pid = m.pid AND o.tid = m.tid AND o.ts_ns = m.ts_ns
                 WHERE {cuda_m}"""
    result.add("op_memory", insert_pairs(con, run, file, events))


def _out_of_memory(con: duckdb.DuckDBPyConnection, result: ParseResult) -> None:
    """A note per ``[OutOfMemory]`` event (an allocation the caching allocator could not serve), the first 3."""
    rows = q(
        con,
        f"""SELECT 'cuda:' || coalesce(device_id, 0), bytes, total_allocated, total_reserved, count(*) OVER ()
        FROM {TABLE} WHERE oom AND device_type = {CUDA_DEVICE_TYPE} ORDER BY ts_ns LIMIT 3""",
    )

    def size(v: int | None) -> str:
        return "—" if v is None else f"{v:,} B"

    for device, requested, allocated, reserved, _ in rows:
        result.notes.append(
            f"[OutOfMemory] on {device}: {size(requested)} requested with {size(allocated)} allocated and "
            f"{size(reserved)} reserved by PyTorch"
        )
    if rows and rows[0][4] > len(rows):
        result.notes.append(f"… and {rows[0][4] - len(rows):,} more [OutOfMemory] event(s)")


def _name_allocations(con: duckdb.DuckDBPyConnection) -> None:
    """``_ktm_op`` (pid, tid, ts_ns, name): the innermost CPU op running each allocation, on its thread.

    One sweep per thread over op starts (+1), op ends (-1) and allocations, in time order: the depth at an
    allocation is the running sum, and the innermost op holding it is the last op that started at that depth
    (an ASOF join on thread and depth), kept only if it has not ended (ops that do not nest properly name
    nothing).  At one timestamp ends go first, then starts (outer first), then allocations: an allocation at
    an op's first µs is inside it, at its last µs (timestamps cut to µs) it belongs to the op around it."""
    cats = ", ".join(f"'{c}'" for c in OP_CATS)
    q(
        con,
        f"""CREATE OR REPLACE TEMP TABLE _ktm_op AS
        WITH allocs AS (SELECT DISTINCT pid, tid, ts_ns FROM {TABLE}
                        WHERE NOT oom AND bytes > 0 AND device_type = {CUDA_DEVICE_TYPE} AND ts_ns IS NOT NULL),
        ops AS (SELECT o.pid, o.tid, o.ts_ns, o.ts_ns + o.dur_ns AS end_ns, o.name FROM _kt o
                WHERE o.ph = 'X' AND o.cat IN ({cats}) AND o.dur_ns >= 0
                  AND (o.pid, o.tid) IN (SELECT DISTINCT pid, tid FROM allocs)),
        marks AS (SELECT pid, tid, ts_ns AS t, 1 AS ord, ts_ns - end_ns AS sub, 1 AS step, name, end_ns FROM ops
                  UNION ALL SELECT pid, tid, end_ns, 0, 0, -1, NULL, NULL FROM ops
                  UNION ALL SELECT pid, tid, ts_ns, 2, 0, 0, NULL, NULL FROM allocs),
        depth AS (SELECT *, sum(step) OVER (PARTITION BY pid, tid ORDER BY t, ord, sub
                                            ROWS UNBOUNDED PRECEDING) AS d FROM marks),
        starts AS (SELECT pid, tid, d, t, name, end_ns FROM depth WHERE ord = 1),
        points AS (SELECT pid, tid, d, t FROM depth WHERE ord = 2)
        SELECT p.pid, p.tid, p.t AS ts_ns, CASE WHEN s.end_ns >= p.t THEN s.name END AS name
        FROM points p ASOF LEFT JOIN starts s ON s.pid = p.pid AND s.tid = p.tid AND s.d = p.d AND s.t <= p.t""",
    )


def drop(con: duckdb.DuckDBPyConnection) -> None:
    for t in (TABLE, "_ktm_op"):
        q(con, f"DROP TABLE IF EXISTS {t}")
