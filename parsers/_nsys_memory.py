"""Device memory in an Nsight Systems export (``nsys profile --cuda-memory-usage=true``).

Tables (Nsight Systems SQLite schema reference, https://docs.nvidia.com/nsight-systems/UserGuide/index.html
#sqlite-schema-reference; the columns as 2024.6 exports write them)::

    CUDA_GPU_MEMORY_USAGE_EVENTS (start ns, globalPid, deviceId, contextId, address, pc, bytes (B),
        memKind -> ENUM_CUDA_MEM_KIND, memoryOperationType -> ENUM_CUDA_DEV_MEM_EVENT_OPER (0 Allocation,
        1 Deallocation), name (a variable's), correlationId -> CUPTI_ACTIVITY_KIND_RUNTIME, streamId,
        localMemoryPoolAddress, localMemoryPoolReleaseThreshold, localMemoryPoolSize, localMemoryPoolUtilizedSize,
        importedMemoryPoolAddress, importedMemoryPoolProcessId)
    CUDA_GPU_MEMORY_POOL_EVENTS (start, globalPid, deviceId, address (the pool's), operationType ->
        ENUM_CUDA_MEMPOOL_OPER (1 Created, 2 Destroyed, 3 Trimmed), poolType, correlationId, minBytesToKeep,
        localMemoryPoolReleaseThreshold, localMemoryPoolSize, localMemoryPoolUtilizedSize)

Stored: ``memory`` rows ``source='nsys'``, ``component='CUDA'``, one per allocation or free of device memory
(``memKind`` Device, Device Static or Array; pageable / pinned host memory and managed memory, which migrates,
are left out), ``allocated_bytes`` the running total of the bytes allocated on that device, reserved NULL (the
export does not say what a caching allocator above CUDA keeps).  A capture that starts after the program made
allocations sees frees of blocks it never saw allocated: when the running total goes below zero the series is
raised by that much, a lower bound, and a note says so.  ``op_memory`` rows: the alloc/free pairs by address
(``parsers._memory_pairs``), named after the CUDA API call that made the allocation (``cudaMalloc``,
``cudaMallocAsync``…: the correlation id into the runtime rows already stored), else the variable's name.
Stream-ordered pools (``cudaMallocAsync``): ``memory`` rows ``component='CUDA pool'`` with the pools' size
summed per device as ``reserved_bytes`` and their utilized size as ``allocated_bytes``, from the pool events
and the pool columns of the usage events (a destroyed pool counts 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from diag.store import q
from parsers._base import ParseContext, ParseResult
from parsers._memory_pairs import insert_pairs

if TYPE_CHECKING:  # nsys_sqlite imports this module
    from parsers._sqlite_export import Export, Stager

USAGE_TABLE, POOL_TABLE = "CUDA_GPU_MEMORY_USAGE_EVENTS", "CUDA_GPU_MEMORY_POOL_EVENTS"
USAGE = {
    "start": ("start", "BIGINT"), "gpid": ("globalPid", "BIGINT"), "device": ("deviceId", "BIGINT"),
    "address": ("address", "BIGINT"), "bytes": ("bytes", "BIGINT"), "kind": ("memKind", "BIGINT"),
    "op": ("memoryOperationType", "BIGINT"), "var": ("name", "VARCHAR"), "corr": ("correlationId", "BIGINT"),
    "pool": ("localMemoryPoolAddress", "BIGINT"), "pool_size": ("localMemoryPoolSize", "BIGINT"),
    "pool_used": ("localMemoryPoolUtilizedSize", "BIGINT"),
}  # fmt: skip
POOL = {
    "start": ("start", "BIGINT"), "device": ("deviceId", "BIGINT"), "pool": ("address", "BIGINT"),
    "op": ("operationType", "BIGINT"), "pool_size": ("localMemoryPoolSize", "BIGINT"),
    "pool_used": ("localMemoryPoolUtilizedSize", "BIGINT"),
}  # fmt: skip
# ENUM_CUDA_MEM_KIND names of device memory; the ids when an export has no ENUM table (as 2023.1-2026.1 write it)
DEVICE_KINDS = {
    "CUDA_MEMOPR_MEMORY_KIND_DEVICE": 2, "CUDA_MEMOPR_MEMORY_KIND_ARRAY": 3,
    "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC": 5,
}  # fmt: skip
ALLOCATION, DEALLOCATION = 0, 1  # ENUM_CUDA_DEV_MEM_EVENT_OPER
POOL_DESTROYED = 2  # ENUM_CUDA_MEMPOOL_OPER


def plan(ex: Export) -> dict[str, tuple[str, dict, str]]:
    """The memory tables the export has, as nsys_sqlite's copy plan wants them: key -> (table, columns, filter)."""
    wanted = {"gpumem": (USAGE_TABLE, USAGE), "mempool": (POOL_TABLE, POOL)}
    return {k: (t, cols, "") for k, (t, cols) in wanted.items() if ex.has(t, "start")}


def load(
    ctx: ParseContext, result: ParseResult, ex: Export, tables: dict[str, str], st: Stager, off: int
) -> None:
    """Insert the memory and op_memory rows (see the module doc); ``off`` makes export times epoch ns."""
    if "gpumem" in tables:
        usage = st.load(tables["gpumem"])
        _usage(ctx, result, ex, usage, off)
        _pools(ctx, result, usage, st.load(tables["mempool"]) if "mempool" in tables else None, off)
    elif "mempool" in tables:
        _pools(ctx, result, None, st.load(tables["mempool"]), off)


def _device_kinds(ex: Export) -> str:
    names = ex.enum("ENUM_CUDA_MEM_KIND", "name")
    ids = [i for i, n in names.items() if n in DEVICE_KINDS] if names else list(DEVICE_KINDS.values())
    return ", ".join(str(i) for i in sorted(ids)) or "NULL"


def _usage(ctx: ParseContext, result: ParseResult, ex: Export, usage: str, off: int) -> None:
    con, run, file = ctx.con, ctx.run_id, ctx.file_id
    q(
        con,
        f"""CREATE OR REPLACE TEMP TABLE _nsm_run AS
        WITH e AS (SELECT *, CASE op WHEN {ALLOCATION} THEN bytes ELSE -bytes END AS delta FROM {usage}
                   WHERE kind IN ({_device_kinds(ex)}) AND op IN ({ALLOCATION}, {DEALLOCATION})
                     AND start IS NOT NULL AND bytes IS NOT NULL AND device IS NOT NULL),
        r AS (SELECT *, sum(delta) OVER (PARTITION BY device ORDER BY start, delta ROWS UNBOUNDED PRECEDING) AS seen
              FROM e)
        SELECT r.*, r.seen - least(min(r.seen) OVER (PARTITION BY r.device), 0) AS total FROM r""",
    )
    lows = q(con, "SELECT device, -min(seen) FROM _nsm_run GROUP BY 1 HAVING min(seen) < 0 ORDER BY 1")
    for device, raised in lows:
        result.notes.append(
            f"GPU {device}: frees of {raised:,} B more than the capture saw allocated (allocations made before "
            "it): its allocated bytes are a lower bound, raised by that much"
        )
    n = q(
        con,
        f"""INSERT INTO memory (run_id, file_id, source, component, ts_ns, allocated_bytes, reserved_bytes,
               active_bytes, stream_ptr, device)
        SELECT {run}, {file}, 'nsys', 'CUDA', start + {off}, total, NULL, NULL, NULL, 'cuda:' || device
        FROM _nsm_run""",
    )[0][0]
    result.add("memory", n)
    pid = "((x.gpid >> 24) & 16777215)"  # serialized GlobalId: pid in bits 24-47
    api = f"""SELECT pid, correlation, any_value(name) AS name FROM host_ops
              WHERE run_id = {run} AND file_id = {file} AND correlation IS NOT NULL
                AND category IN ('cuda_runtime', 'cuda_driver') GROUP BY 1, 2"""
    events = f"""SELECT 'cuda:' || x.device, CAST(x.address AS VARCHAR), x.start + {off}, x.delta, x.total, NULL,
                        coalesce(a.name, nullif(x.var, ''))
                 FROM _nsm_run x LEFT JOIN ({api}) a ON a.correlation = x.corr AND a.pid = {pid}"""
    result.add("op_memory", insert_pairs(con, run, file, events))
    q(con, "DROP TABLE IF EXISTS _nsm_run")


def _pools(ctx: ParseContext, result: ParseResult, usage: str | None, pools: str | None, off: int) -> None:
    """The stream-ordered pools' size and use per device over time (each pool's latest figures summed)."""
    parts = []
    if usage:
        parts.append(f"SELECT device, pool, start, pool_size, pool_used FROM {usage} WHERE pool IS NOT NULL")
    if pools:
        parts.append(
            f"""SELECT device, pool, start, CASE WHEN op = {POOL_DESTROYED} THEN 0 ELSE pool_size END,
                       CASE WHEN op = {POOL_DESTROYED} THEN 0 ELSE pool_used END FROM {pools}"""
        )
    n = q(
        ctx.con,
        f"""INSERT INTO memory (run_id, file_id, source, component, ts_ns, allocated_bytes, reserved_bytes,
               active_bytes, stream_ptr, device)
        WITH e AS (SELECT * FROM ({" UNION ALL ".join(parts)}) x(device, pool, start, size, used)
                   WHERE device IS NOT NULL AND start IS NOT NULL AND size IS NOT NULL),
        f AS (SELECT device, pool, start, size, coalesce(used, last_value(used IGNORE NULLS) OVER (
                     PARTITION BY device, pool ORDER BY start ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0)
                     AS used FROM e),
        d AS (SELECT device, start, size - coalesce(lag(size) OVER w, 0) AS d_size,
                     used - coalesce(lag(used) OVER w, 0) AS d_used
              FROM f WINDOW w AS (PARTITION BY device, pool ORDER BY start))
        SELECT {ctx.run_id}, {ctx.file_id}, 'nsys', 'CUDA pool', start + {off},
               sum(d_used) OVER t, sum(d_size) OVER t, NULL, NULL, 'cuda:' || device
        FROM d WINDOW t AS (PARTITION BY device ORDER BY start, d_size ROWS UNBOUNDED PRECEDING)""",
    )[0][0]
    result.add("memory", n)
