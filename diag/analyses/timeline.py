"""Timeline of one run: device streams, HCCL, Overlap Analysis and host threads on one time axis.

What leaves this module is bounded whatever the run's size: when a window holds more than ``max_marks``
events, it returns per-lane occupancy by time bin instead (interval arithmetic: each event's overlap with
each bin it touches), so the browser never receives millions of marks; zooming into a smaller window gets
the events themselves back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from diag.store import Store

if TYPE_CHECKING:  # tables come from DuckDB's .arrow(); importing pyarrow here would slow every CLI start
    import pyarrow as pa

DEFAULT_MAX_MARKS = 8000
LANE_GROUPS = ("Device", "HCCL", "Overlap Analysis", "Host")

# What a lane is called on each platform: the device ("NPU 0 · Stream 2" on Ascend, "GPU 0 · Stream 7" on CUDA)
# and the collective library whose planes / groups are not streams (HCCL on Ascend, NCCL / RCCL elsewhere).
PLATFORM_WORDS = {"ascend": ("NPU", "HCCL"), "cuda": ("GPU", "NCCL"), "rocm": ("GPU", "RCCL")}

# One row per mark source; lane names say which process/stream they are ($dev / $comm: the platform's words).
_EVENTS = """
    SELECT CASE WHEN task_kind IN ('COMMUNICATION', 'COMM_TASK') AND stream NOT LIKE 'Stream%'
                THEN $comm || ' · ' || stream ELSE $dev || ' · ' || stream END AS lane,
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


# Per-lane occupancy by time bin.  An event inside one bin (nearly all of them: a bin is the window ÷ ≤ 2000)
# is counted there directly; only the events spanning bins are unnested, one row per bin they touch.  The
# bin's top kind is the kind with the most events, from (lane, bin, kind) sums: mode() over 5M rows cost 3×
# the whole rest of the query.
_BINS = """
    WITH w AS (SELECT lane, kind, start_ns, dur_ns,
                      greatest(0, (start_ns - $lo) // $bin) AS b0,
                      least($nb - 1, (start_ns + greatest(dur_ns, 1) - 1 - $lo) // $bin) AS b1
               FROM ({windowed})),
         x AS (SELECT lane, kind, start_ns, dur_ns, b0 AS b FROM w WHERE b1 = b0
               UNION ALL
               SELECT lane, kind, start_ns, dur_ns, unnest(range(b0, b1 + 1)) AS b FROM w WHERE b1 > b0),
         k AS (SELECT lane, b, kind, count(*) AS n,
                      sum(least(start_ns + dur_ns, $lo + (b + 1) * $bin) - greatest(start_ns, $lo + b * $bin)) AS busy
               FROM x GROUP BY lane, b, kind)
    SELECT lane, $lo + b * $bin AS bin_start_ns, $bin AS bin_ns, CAST(sum(busy) AS BIGINT) AS busy_ns,
           CAST(sum(n) AS BIGINT) AS count, arg_max(kind, n) AS top_kind,
           CAST(coalesce(sum(n) FILTER (WHERE kind = 'AI_CPU'), 0) AS BIGINT) AS ai_cpu
    FROM k GROUP BY lane, b ORDER BY lane, b
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
    platform: str = "ascend"  # ascend | cuda | rocm: decides the lane labels and which tiles the page shows

    @property
    def device_word(self) -> str:
        """'NPU' on Ascend, 'GPU' on CUDA / ROCm."""
        return PLATFORM_WORDS.get(self.platform, ("device", "comm"))[0]

    @property
    def has_ai_cpu(self) -> bool:
        """AI_CPU (CPU-fallback) tasks exist only on Ascend: elsewhere the page shows no AI_CPU tile."""
        return self.platform == "ascend"

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


def run_platform(store: Store, run_id: int) -> str:
    rows = store.cursor().execute("SELECT platform FROM runs WHERE run_id = ?", [run_id]).fetchall()
    return str(rows[0][0]) if rows and rows[0][0] else "ascend"


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
    platform = run_platform(store, run_id)
    dev, comm = PLATFORM_WORDS.get(platform, ("device", "comm"))
    params = {"run": run_id, "lo": lo, "hi": hi, "dev": dev, "comm": comm}
    windowed = f"SELECT * FROM ({_EVENTS}) WHERE start_ns < $hi AND start_ns + dur_ns > $lo"
    # lanes with a mark in the window only: an empty row is not drawn
    # one pass gives both the lanes and the number of events in the window
    lane_rows = cur.execute(
        f"SELECT lane, grp, min(lane_order) AS o, count(*) FROM ({windowed}) GROUP BY lane, grp "
        "ORDER BY grp, o, lane",
        params,
    ).fetchall()
    lanes = [r[0] for r in lane_rows]
    n = sum(int(r[3]) for r in lane_rows)
    common = dict(
        run_id=run_id,
        run_start_ns=span[0],
        run_end_ns=span[1],
        window_start_ns=lo,
        window_end_ns=hi,
        marks_in_window=int(n),
        lanes=lanes,
        platform=platform,
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
        _BINS.format(windowed=windowed), params={**params, "bin": bin_ns, "nb": n_bins}
    ).to_arrow_table()
    return Timeline(**common, mode="bins", events=None, bins=bins, bin_ns=bin_ns)


FOCUS_PAD_FRACTION = 0.05  # of the focused span, on each side: enough to see its edges, not its neighbours


def focus_window(
    store: Store, run_id: int, start_ns: int, end_ns: int, names: tuple[str, ...] = ()
) -> tuple[int, int, str | None]:
    """The window to open for a range (a finding's) or for an op: its own span, padded by a small fraction.

    With ``names``, the range is narrowed to the first device task of one of those names inside it (an op with
    several calls opens on its first). The padding stops at the nearest device task of another name on the
    same stream, so the window never holds a neighbouring op; without ``names`` it stops at the nearest device
    task wholly outside the range, on any stream. Returns (start_ns, end_ns, the op focused on or None)."""
    cur = store.cursor()
    stream = name = None
    if names:
        rows = cur.execute(
            """SELECT start_ns, start_ns + dur_ns, stream, name FROM device_tasks
               WHERE run_id = $run AND name IN (SELECT unnest($names)) AND start_ns >= $lo AND start_ns < $hi
               ORDER BY start_ns, dur_ns DESC LIMIT 1""",
            {"run": run_id, "names": list(names), "lo": start_ns, "hi": max(end_ns, start_ns + 1)},
        ).fetchall()
        if rows:
            start_ns, end_ns, stream, name = int(rows[0][0]), int(rows[0][1]), rows[0][2], rows[0][3]
    pad = max(int((end_ns - start_ns) * FOCUS_PAD_FRACTION), 1)
    neighbours = "run_id = $run" + (" AND stream = $stream AND name <> $name" if stream is not None else "")
    params: dict = {"run": run_id, "lo": start_ns, "hi": end_ns}
    if stream is not None:
        params |= {"stream": stream, "name": name}
    prev_end, next_start = cur.execute(
        f"""SELECT max(start_ns + dur_ns) FILTER (WHERE start_ns + dur_ns <= $lo),
                   min(start_ns) FILTER (WHERE start_ns >= $hi)
            FROM device_tasks WHERE {neighbours}""",
        params,
    ).fetchall()[0]
    lo = start_ns - pad if prev_end is None else max(start_ns - pad, int(prev_end))
    hi = end_ns + pad if next_start is None else min(end_ns + pad, int(next_start))
    return lo, max(hi, lo + 1), name
