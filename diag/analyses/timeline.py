"""Timeline of one run: device streams, HCCL, Overlap Analysis and host threads on one time axis.

What leaves this module is bounded whatever the run's size: when a window holds more than ``max_marks``
events, it returns per-lane occupancy by time bin instead (interval arithmetic: each event's overlap with
each bin it touches), so the browser never receives millions of marks; zooming into a smaller window gets
the events themselves back.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from diag.store import Store

DEFAULT_MAX_MARKS = 8000
LANE_GROUPS = ("Device", "HCCL", "Overlap Analysis", "Host")

# One row per mark source; lane names say which process/stream they are.
_EVENTS = """
    SELECT CASE WHEN task_kind IN ('COMMUNICATION', 'COMM_TASK') AND stream NOT LIKE 'Stream%'
                THEN 'HCCL · ' || stream ELSE 'NPU · ' || stream END AS lane,
           CASE WHEN task_kind IN ('COMMUNICATION', 'COMM_TASK') AND stream NOT LIKE 'Stream%' THEN 1 ELSE 0 END AS grp,
           coalesce(stream_id, 0) AS lane_order, name, task_kind AS kind, start_ns, dur_ns, 'device' AS source
    FROM device_tasks WHERE run_id = $run
    UNION ALL
    SELECT 'Overlap · ' || kind, 2, CASE kind WHEN 'Computing' THEN 0 WHEN 'Communication' THEN 1
                                      WHEN 'Communication(Not Overlapped)' THEN 2 ELSE 3 END,
           kind, 'OVERLAP', start_ns, dur_ns, 'overlap'
    FROM overlap_slices WHERE run_id = $run
    UNION ALL
    SELECT coalesce(process, 'host') || ' · tid ' || coalesce(CAST(tid AS VARCHAR), '?'), 3, coalesce(tid, 0),
           name, upper(category), start_ns, dur_ns, 'host'
    FROM host_ops WHERE run_id = $run
"""


@dataclass(frozen=True)
class Timeline:
    run_id: int
    run_start_ns: int
    run_end_ns: int
    window_start_ns: int
    window_end_ns: int
    mode: str  # "events" | "bins"
    marks_in_window: int  # events overlapping the window
    lanes: list[str]  # display order, top to bottom
    events: pa.Table | None  # lane, name, kind, start_ns, dur_ns, detail
    bins: pa.Table | None  # lane, bin_start_ns, bin_ns, busy_ns, count, top_kind, ai_cpu
    bin_ns: int | None = None

    @property
    def marks(self) -> int:
        """Marks the figure draws: bars or heatmap cells, plus one ▼ per AI_CPU task (or per bin holding some)."""
        if self.mode == "events":
            if self.events is None:
                return 0
            kinds = self.events.column("kind").to_pylist()
            return len(kinds) + sum(1 for k in kinds if k == "AI_CPU")
        if self.bins is None:
            return 0
        return self.bins.num_rows + sum(1 for n in self.bins.column("ai_cpu").to_pylist() if n)


def run_span(store: Store, run_id: int) -> tuple[int, int] | None:
    rows = store.cursor().execute("SELECT start_ns, end_ns FROM runs WHERE run_id = ?", [run_id]).fetchall()
    if not rows or rows[0][0] is None:
        return None
    return int(rows[0][0]), int(rows[0][1])


def list_steps(store: Store, run_id: int) -> list[tuple[int, int, int]]:
    """(step, start_ns, end_ns): ProfilerStep ranges, else the span of the kernels tagged with each step."""
    cur = store.cursor()
    rows = cur.execute(
        "SELECT step, min(start_ns), max(end_ns) FROM steps WHERE run_id = ? AND step IS NOT NULL "
        "GROUP BY step ORDER BY step",
        [run_id],
    ).fetchall()
    if rows:
        return [(int(s), int(a), int(b)) for s, a, b in rows]
    rows = cur.execute(
        "SELECT step, min(start_ns), max(start_ns + dur_ns) FROM device_tasks WHERE run_id = ? AND step IS NOT NULL "
        "GROUP BY step ORDER BY step",
        [run_id],
    ).fetchall()
    return [(int(s), int(a), int(b)) for s, a, b in rows]


def build_timeline(
    store: Store,
    run_id: int,
    start_ns: int | None = None,
    end_ns: int | None = None,
    max_marks: int = DEFAULT_MAX_MARKS,
) -> Timeline | None:
    span = run_span(store, run_id)
    if span is None:
        return None
    lo = max(span[0], start_ns) if start_ns is not None else span[0]
    hi = min(span[1], end_ns) if end_ns is not None else span[1]
    hi = max(hi, lo + 1)
    cur = store.cursor()
    params = {"run": run_id, "lo": lo, "hi": hi}
    windowed = f"SELECT * FROM ({_EVENTS}) WHERE start_ns < $hi AND start_ns + dur_ns > $lo"
    lane_rows = cur.execute(
        f"SELECT lane, grp, min(lane_order) AS o, count(*) FROM ({_EVENTS}) GROUP BY lane, grp ORDER BY grp, o, lane",
        {"run": run_id},
    ).fetchall()
    lanes = [r[0] for r in lane_rows]
    n = cur.execute(f"SELECT count(*) FROM ({windowed})", params).fetchall()[0][0]
    common = dict(
        run_id=run_id,
        run_start_ns=span[0],
        run_end_ns=span[1],
        window_start_ns=lo,
        window_end_ns=hi,
        marks_in_window=int(n),
        lanes=lanes,
    )
    if n <= max_marks:
        events = cur.sql(
            f"""SELECT e.lane, e.name, coalesce(k.task_kind, e.kind) AS kind, e.start_ns, e.dur_ns,
                       concat_ws(' · ', k.op_type, k.input_shapes, k.input_dtypes) AS detail
                FROM ({windowed}) e
                LEFT JOIN (SELECT DISTINCT ON (start_ns, name) start_ns, name, task_kind, op_type, input_shapes,
                                  input_dtypes
                           FROM kernels WHERE run_id = $run AND start_ns BETWEEN $lo - 1000000 AND $hi) k
                  ON e.source = 'device' AND k.start_ns = e.start_ns AND k.name = e.name
                ORDER BY e.lane, e.start_ns""",
            params=params,
        ).to_arrow_table()
        return Timeline(**common, mode="events", events=events, bins=None)
    n_bins = max(50, min(2000, max_marks // max(1, len(lanes))))
    bin_ns = max(1, -(-(hi - lo) // n_bins))
    bins = cur.sql(
        f"""WITH w AS (SELECT lane, kind, start_ns, dur_ns,
                              greatest(0, (start_ns - $lo) // $bin) AS b0,
                              least($nb - 1, (start_ns + greatest(dur_ns, 1) - 1 - $lo) // $bin) AS b1
                       FROM ({windowed})),
                 x AS (SELECT lane, kind, start_ns, dur_ns, unnest(range(b0, b1 + 1)) AS b FROM w)
            SELECT lane, $lo + b * $bin AS bin_start_ns, $bin AS bin_ns,
                   CAST(sum(least(start_ns + dur_ns, $lo + (b + 1) * $bin) - greatest(start_ns, $lo + b * $bin)) AS BIGINT)
                       AS busy_ns,
                   count(*) AS count, mode(kind) AS top_kind,
                   count(*) FILTER (WHERE kind = 'AI_CPU') AS ai_cpu
            FROM x GROUP BY lane, b ORDER BY lane, b""",
        params={**params, "bin": bin_ns, "nb": n_bins},
    ).to_arrow_table()
    return Timeline(**common, mode="bins", events=None, bins=bins, bin_ns=bin_ns)
