"""The timeline's dense mode (per-lane occupancy by time bin): exact figures, and one pass fewer over the run."""

from __future__ import annotations

from pathlib import Path

from diag.analyses.timeline import build_timeline
from diag.store import Store

T0 = 1_736_405_443_000_000_000
# (start after T0 ns, dur ns, kind) on Stream 2; the last one makes the run 5,000 ns long: 50 bins of 100 ns
TASKS = [
    (0, 50, "AI_CORE"),
    (60, 30, "AI_CORE"),
    (70, 10, "AI_CPU"),
    (150, 100, "AI_VECTOR_CORE"),
    (4999, 1, "AI_CORE"),
]


def _store(tmp_path: Path) -> tuple[Store, int]:
    store = Store(tmp_path / "t.duckdb")
    run = store.ensure_run("t:bins", name="bins", platform="ascend", source="test", job_id=None)
    for start, dur, kind in TASKS:
        store.con.execute(
            "INSERT INTO device_task_rows (run_id, file_id, source, stream, stream_id, task_kind, name, start_ns, dur_ns)"
            " VALUES (?, 0, 'trace_view', 'Stream 2', 2, ?, ?, ?, ?)",
            [run, kind, kind.lower(), T0 + start, dur],
        ).fetchall()
    store.refresh_run_span(run)
    return store, run


def test_bins_hold_each_events_share_count_top_kind_and_ai_cpu(tmp_path: Path) -> None:
    store, run = _store(tmp_path)
    tl = build_timeline(store, run, max_marks=2)
    assert (tl.mode, tl.marks_in_window, tl.bin_ns, tl.lanes) == ("bins", 5, 100, ["NPU · Stream 2"])
    rows = [
        (r["bin_start_ns"] - T0, r["busy_ns"], r["count"], r["top_kind"], r["ai_cpu"])
        for r in tl.bins.to_pylist()
    ]
    # the AI_VECTOR_CORE task (150–250 ns) is split 50 / 50 across bins 1 and 2
    assert rows == [
        (0, 90, 3, "AI_CORE", 1),
        (100, 50, 1, "AI_VECTOR_CORE", 0),
        (200, 50, 1, "AI_VECTOR_CORE", 0),
        (4900, 1, 1, "AI_CORE", 0),
    ]
    assert tl.marks == 5  # 4 cells + 1 AI_CPU marker


def test_dense_timeline_reads_the_events_twice_not_three_times(tmp_path: Path, monkeypatch) -> None:
    store, run = _store(tmp_path)
    scans: list[str] = []
    cursor = store.cursor

    class Counting:
        def __init__(self) -> None:
            self.cur = cursor()

        def execute(self, sql: str, *args):  # noqa: ANN002, ANN201
            if "device_tasks" in sql:
                scans.append(sql)
            return self.cur.execute(sql, *args)

        def sql(self, sql: str, **kwargs):  # noqa: ANN003, ANN201
            if "device_tasks" in sql:
                scans.append(sql)
            return self.cur.sql(sql, **kwargs)

    monkeypatch.setattr(store, "cursor", Counting)
    build_timeline(store, run, max_marks=2)
    assert len(scans) == 2  # lanes with their counts, then the bins
