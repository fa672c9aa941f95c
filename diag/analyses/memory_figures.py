"""The SQL behind the memory figures (diag/analyses/memory.py): peaks per series, slack, live allocations, churn.

Every function pushes its row work into DuckDB and returns a handful of values.  A memory *series* is one
(source, component) pair of the ``memory`` table; which series is the process total is data
(rules/memory_components.toml), never a sum of overlapping series.
"""

from __future__ import annotations

import functools
import tomllib
from typing import Any

import duckdb

from diag.store import RULES_DIR

COMPONENTS = RULES_DIR / "memory_components.toml"

# Device memory only: the PyTorch profiler also records host (CPU) allocations, and a run's figures are the device's.
MEM = """(SELECT source, component, ts_ns, allocated_bytes, reserved_bytes, active_bytes, device FROM memory
          WHERE run_id = $run AND ts_ns IS NOT NULL AND NOT coalesce(upper(device) LIKE 'CPU%', false)
            AND (CAST($dev AS VARCHAR) IS NULL OR device = $dev))"""
# An allocation with a size (operator_memory.csv writes a negative size for a block allocated before the window).
ALLOCS = """(SELECT name, size_bytes, alloc_ns, release_ns FROM op_memory
             WHERE run_id = $run AND size_bytes > 0 AND alloc_ns IS NOT NULL
               AND NOT coalesce(upper(device) LIKE 'CPU%', false) AND (CAST($dev AS VARCHAR) IS NULL OR device = $dev))"""


@functools.cache
def component_rules() -> dict[str, Any]:
    with open(COMPONENTS, "rb") as fh:
        return tomllib.load(fh)


def series_peaks(cur: duckdb.DuckDBPyConnection, run_id: int, dev: str | None = None) -> list[dict[str, Any]]:
    """Per series: samples, peak reserved / allocated (bytes) and the first time each was reached."""
    rows = cur.execute(
        f"""SELECT source, component, count(*), max(reserved_bytes), max(allocated_bytes),
                   min(ts_ns) FILTER (WHERE reserved_bytes = pr), min(ts_ns) FILTER (WHERE allocated_bytes = pa)
            FROM (SELECT *, max(reserved_bytes) OVER w AS pr, max(allocated_bytes) OVER w AS pa FROM {MEM}
                  WINDOW w AS (PARTITION BY source, component))
            GROUP BY 1, 2 ORDER BY 1, 4 DESC NULLS LAST, 2""",
        {"run": run_id, "dev": dev},
    ).fetchall()
    keys = ("source", "component", "samples", "peak_reserved_bytes", "peak_allocated_bytes")
    out = []
    for r in rows:
        d = dict(zip(keys, r[:5], strict=True))
        d["peak_reserved_ts_ns"], d["peak_allocated_ts_ns"] = r[5], r[6]
        out.append(d)
    return out


def pick(series: list[dict[str, Any]], order_key: str, figure: str) -> dict[str, Any] | None:
    """The first series of rules/memory_components.toml ``order_key`` that holds ``figure`` (``peak_reserved_bytes``
    or ``peak_allocated_bytes``).  An entry ``source:component@allocated_bytes`` takes the figure from that column
    of the series (nsys stores the bytes a process holds through the CUDA API as its allocated total)."""
    by_name = {f"{s['source']}:{s['component']}": s for s in series}
    for entry in component_rules()[order_key]:
        name, _, column = entry.partition("@")
        s = by_name.get(name)
        if s is None:
            continue
        if column:
            held = column.removesuffix("_bytes")
            s = {**s, figure: s[f"peak_{held}_bytes"], figure[:-6] + "_ts_ns": s[f"peak_{held}_ts_ns"]}
        if s[figure] is not None:
            return s
    return None


def slack(
    cur: duckdb.DuckDBPyConnection, run_id: int, source: str, component: str, dev: str | None = None
) -> dict[str, Any]:
    """Reserved − allocated of the allocator's series: its peak over time, and at the reserved peak.

    At the peak, slack is peak reserved minus the MOST allocated while reserved stood at its peak: the part of the
    peak reservation that was never used at once.  Taking the most allocated (not the allocated of one sample) keeps a
    plateau where allocations come and go from reading as fragmentation."""
    row = cur.execute(
        f"""WITH s AS (SELECT ts_ns, reserved_bytes AS r, allocated_bytes AS a FROM {MEM}
                       WHERE source = $src AND component = $comp AND reserved_bytes IS NOT NULL
                         AND allocated_bytes IS NOT NULL)
            SELECT max(r - a), min(ts_ns) FILTER (WHERE r - a = (SELECT max(r - a) FROM s)), max(r),
                   max(a) FILTER (WHERE r = (SELECT max(r) FROM s))
            FROM s""",
        {"run": run_id, "dev": dev, "src": source, "comp": component},
    ).fetchall()[0]
    peak_slack, ts, reserved, used = row
    at_peak = None if reserved is None or used is None else int(reserved) - int(used)
    return {
        "slack_peak_bytes": None if peak_slack is None else int(peak_slack),
        "slack_peak_ts_ns": None if ts is None else int(ts),
        "slack_at_peak_bytes": at_peak,
        "allocator_reserved_bytes": None if reserved is None else int(reserved),
        "allocator_used_at_peak_bytes": None if used is None else int(used),
    }


def live_at(
    cur: duckdb.DuckDBPyConnection, run_id: int, ts_ns: int, limit: int, dev: str | None = None
) -> list[dict[str, Any]]:
    """Allocations live at ``ts_ns`` by operator name: bytes and count, largest first, and the latest one's time."""
    rows = cur.execute(
        f"""SELECT name, sum(size_bytes), count(*), max(alloc_ns) FROM {ALLOCS}
            WHERE alloc_ns <= $t AND (release_ns IS NULL OR release_ns > $t)
            GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT $n""",
        {"run": run_id, "dev": dev, "t": ts_ns, "n": limit},
    ).fetchall()
    return [{"name": n, "bytes": int(b), "count": int(c), "last_alloc_ns": int(t)} for n, b, c, t in rows]


def live_total(cur: duckdb.DuckDBPyConnection, run_id: int, ts_ns: int, dev: str | None = None) -> int:
    row = cur.execute(
        f"SELECT coalesce(sum(size_bytes), 0) FROM {ALLOCS} "
        "WHERE alloc_ns <= $t AND (release_ns IS NULL OR release_ns > $t)",
        {"run": run_id, "dev": dev, "t": ts_ns},
    ).fetchall()[0]
    return int(row[0])


def op_at(cur: duckdb.DuckDBPyConnection, run_id: int, ts_ns: int, dev: str | None = None) -> str | None:
    """The op the process was in at ``ts_ns``: the latest allocation still live then (op_memory is recorded on the
    host, as the memory samples are), else a device kernel running then (the device runs behind the host, so this
    is only a fallback)."""
    row = cur.execute(
        f"""SELECT arg_max(name, alloc_ns) FROM {ALLOCS}
            WHERE alloc_ns <= $t AND (release_ns IS NULL OR release_ns > $t)""",
        {"run": run_id, "dev": dev, "t": ts_ns},
    ).fetchall()[0]
    if row[0] is not None:
        return str(row[0])
    row = cur.execute(
        """SELECT arg_max(name, dur_ns) FROM device_tasks
           WHERE run_id = $run AND start_ns <= $t AND start_ns + dur_ns > $t""",
        {"run": run_id, "t": ts_ns},
    ).fetchall()[0]
    return None if row[0] is None else str(row[0])


def top_allocators(
    cur: duckdb.DuckDBPyConnection, run_id: int, end_ns: int, limit: int, dev: str | None = None
) -> list[dict[str, Any]]:
    """Operators by bytes × time held (a block never released is held to ``end_ns``, the run's last record)."""
    rows = cur.execute(
        f"""SELECT name, sum(size_bytes), sum(held), count(*), sum(CAST(size_bytes AS HUGEINT) * held)
            FROM (SELECT *, greatest(coalesce(release_ns, $end) - alloc_ns, 0) AS held FROM {ALLOCS})
            GROUP BY 1 ORDER BY 5 DESC, 2 DESC, 1 LIMIT $n""",
        {"run": run_id, "dev": dev, "end": end_ns, "n": limit},
    ).fetchall()
    return [
        {"name": n, "bytes": int(b), "held_ns": int(h), "count": int(c), "byte_seconds": float(bs) / 1e9}
        for n, b, h, c, bs in rows
    ]


def last_record_ns(cur: duckdb.DuckDBPyConnection, run_id: int, dev: str | None = None) -> int | None:
    row = cur.execute(
        f"""SELECT greatest((SELECT max(ts_ns) FROM {MEM}),
                            (SELECT max(greatest(alloc_ns, coalesce(release_ns, alloc_ns))) FROM {ALLOCS}))""",
        {"run": run_id, "dev": dev},
    ).fetchall()[0]
    return None if row[0] is None else int(row[0])


def churn(
    cur: duckdb.DuckDBPyConnection, run_id: int, steps: list[dict[str, Any]], dev: str | None = None
) -> dict[str, Any] | None:
    """Allocations and frees per step (op_memory), when there are steps and allocations."""
    if not steps:
        return None
    rows = cur.execute(
        f"""WITH w AS (SELECT unnest($steps) AS step, unnest($lo) AS lo, unnest($hi) AS hi)
            SELECT step, (SELECT count(*) FROM {ALLOCS} a WHERE a.alloc_ns >= w.lo AND a.alloc_ns < w.hi),
                   (SELECT count(*) FROM {ALLOCS} a WHERE a.release_ns >= w.lo AND a.release_ns < w.hi)
            FROM w ORDER BY 1""",
        {
            "run": run_id,
            "dev": dev,
            "steps": [s["step"] for s in steps],
            "lo": [s["start_ns"] for s in steps],
            "hi": [s["end_ns"] for s in steps],
        },
    ).fetchall()
    if not any(a or f for _, a, f in rows):
        return None
    per_step = [{"step": int(s), "allocs": int(a), "frees": int(f)} for s, a, f in rows]
    n = len(per_step)
    return {
        "allocs_per_step": sum(p["allocs"] for p in per_step) / n,
        "frees_per_step": sum(p["frees"] for p in per_step) / n,
        "per_step": per_step,
    }


def non_framework(
    cur: duckdb.DuckDBPyConnection, run_id: int, dev: str | None = None
) -> dict[str, Any] | None:
    """npu_module_mem: memory held by CANN modules other than the framework's (APP), at its most (one sample
    time: modules are sampled together), and each module's peak."""
    module = component_rules()["framework_module"]
    rows = cur.execute(
        f"""SELECT component, max(reserved_bytes) FROM {MEM}
            WHERE source = 'npu_module_mem' AND component <> $app AND reserved_bytes > 0
            GROUP BY 1 ORDER BY 2 DESC, 1""",
        {"run": run_id, "dev": dev, "app": module},
    ).fetchall()
    if not rows:
        return None
    peak = cur.execute(
        f"""SELECT max(s) FROM (SELECT ts_ns, device, sum(reserved_bytes) AS s FROM {MEM}
            WHERE source = 'npu_module_mem' AND component <> $app AND reserved_bytes > 0 GROUP BY 1, 2)""",
        {"run": run_id, "dev": dev, "app": module},
    ).fetchall()[0][0]
    return {
        "peak_bytes": int(peak),
        "modules": [{"module": m, "peak_reserved_bytes": int(b)} for m, b in rows],
    }


def alloc_calls(cur: duckdb.DuckDBPyConnection, run_id: int) -> list[dict[str, Any]]:
    """The device memory API calls on the host (rules/memory_components.toml slow_alloc_calls): count and time."""
    rows = cur.execute(
        """SELECT name, count(*), sum(dur_ns) FROM host_ops WHERE run_id = $run AND list_contains($names, name)
           GROUP BY 1 ORDER BY 3 DESC, 1""",
        {"run": run_id, "names": component_rules()["slow_alloc_calls"]},
    ).fetchall()
    return [{"name": n, "count": int(c), "total_ns": int(t or 0)} for n, c, t in rows]


def peak_device(cur: duckdb.DuckDBPyConnection, run_id: int) -> str | None:
    """The device whose memory is reported when a run's rows name several (an nsys capture of a multi-GPU process):
    the one holding the most; None when the rows name one device or none (then no filter applies)."""
    rows = cur.execute(
        f"""SELECT device, max(greatest(coalesce(reserved_bytes, 0), coalesce(allocated_bytes, 0))) AS most
            FROM {MEM} WHERE device IS NOT NULL GROUP BY 1 ORDER BY 2 DESC, 1""",
        {"run": run_id, "dev": None},
    ).fetchall()
    return str(rows[0][0]) if len(rows) > 1 else None
