"""Allocation/free events → ``op_memory`` rows: each allocation paired with its free by address, in time order.

Shared by the Kineto (``[memory]`` events) and Nsight Systems (``CUDA_GPU_MEMORY_USAGE_EVENTS``) parsers.  The
convention is torch_npu's for ``operator_memory.csv`` (``Ascend/pytorch``
``torch_npu/profiler/analysis/prof_view/prepare_parse/_memory_prepare_parser.py``: records keyed by pointer, an
allocation matched with the next release of the same pointer and the same size):

- an allocation and the next event on its (device, address), a free of the same size → one row, ``release_ns`` set;
- an allocation with no such free (freed after the window, or its free lost) → ``release_ns`` NULL;
- a free with no allocation before it (allocated before the window) → ``size_bytes`` negative, ``name`` and
  ``alloc_ns`` NULL, the totals after the free as the release totals.

Events at the same nanosecond on one address are ordered the only way that pairs: the free first when the address
was held just before (a block freed and reused), the allocation first otherwise (a block taken and given back).
"""

from __future__ import annotations

import duckdb

from diag.store import q

# (device VARCHAR, addr VARCHAR, ts_ns BIGINT, bytes BIGINT (< 0: a free), total_allocated BIGINT,
#  total_reserved BIGINT, name VARCHAR (the allocating op; any value for a free))
EVENT_COLUMNS = ("device", "addr", "ts_ns", "bytes", "total_allocated", "total_reserved", "name")


def insert_pairs(con: duckdb.DuckDBPyConnection, run_id: int, file_id: int, events_sql: str) -> int:
    """Insert the ``op_memory`` rows of the events ``events_sql`` yields (columns: EVENT_COLUMNS); their count."""
    cols = ", ".join(EVENT_COLUMNS)
    return q(
        con,
        f"""INSERT INTO op_memory (run_id, file_id, name, size_bytes, alloc_ns, release_ns, dur_ns,
               alloc_total_allocated_bytes, alloc_total_reserved_bytes, release_total_allocated_bytes,
               release_total_reserved_bytes, device)
        WITH e AS (SELECT *, bytes > 0 AS is_alloc FROM ({events_sql}) x({cols})
                   WHERE addr IS NOT NULL AND ts_ns IS NOT NULL AND bytes IS NOT NULL AND bytes <> 0),
        held AS (SELECT *, coalesce(last_value(is_alloc) OVER (PARTITION BY device, addr ORDER BY ts_ns
                            RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), false) AS held_before FROM e),
        seq AS (SELECT *, lead(is_alloc) OVER w AS next_alloc, lead(bytes) OVER w AS next_bytes,
                       lead(ts_ns) OVER w AS next_ts, lead(total_allocated) OVER w AS next_allocated,
                       lead(total_reserved) OVER w AS next_reserved, lag(is_alloc) OVER w AS prev_alloc,
                       lag(bytes) OVER w AS prev_bytes
                FROM held WINDOW w AS (PARTITION BY device, addr
                                       ORDER BY ts_ns, CASE WHEN is_alloc = held_before THEN 1 ELSE 0 END)),
        paired AS (SELECT *, coalesce(NOT next_alloc AND next_bytes = -bytes, false) AS freed,
                          coalesce(prev_alloc AND prev_bytes = -bytes, false) AS from_alloc FROM seq)
        SELECT {run_id}, {file_id}, name, bytes, ts_ns, CASE WHEN freed THEN next_ts END,
               CASE WHEN freed THEN next_ts - ts_ns END, total_allocated, total_reserved,
               CASE WHEN freed THEN next_allocated END, CASE WHEN freed THEN next_reserved END, device
        FROM paired WHERE is_alloc
        UNION ALL
        SELECT {run_id}, {file_id}, NULL, bytes, NULL, ts_ns, NULL, NULL, NULL, total_allocated, total_reserved,
               device
        FROM paired WHERE NOT is_alloc AND NOT from_alloc""",
    )[0][0]
