"""Which table a trace_view.json event goes to is decided by its pid's ``process_name`` (parsers.ascend_trace_view
selects each table's events by pid lists, not by joining names): every case of that rule, row by row."""

from __future__ import annotations

import json
from pathlib import Path

from diag.store import Store
from tests.conftest import ingest_into, query

HOST, HW, HCCL, OVERLAP, UNNAMED, NAMELESS = 100, 200, 300, 400, 500, 600


def _meta(pid: int, name: str | None, tid: int | None = None) -> dict:
    kind = "thread_name" if tid is not None else "process_name"
    return {
        "ph": "M",
        "name": kind,
        "pid": pid,
        "tid": tid or 0,
        "args": {} if name is None else {"name": name},
    }


def _x(name: str, pid: int | str, tid: int, ts: int, **args: object) -> dict:
    ev = {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": f"{ts}.000", "dur": "1.5", "cat": None}
    if args:
        ev["args"] = args
    return ev


EVENTS = [
    _meta(HOST, "Python"),
    _meta(HW, "Ascend Hardware"),
    _meta(HW, "Stream 7", tid=7),
    _meta(HCCL, "HCCL"),
    _meta(HCCL, "Plane 0", tid=1),
    _meta(OVERLAP, "Overlap Analysis"),
    _meta(NAMELESS, None),  # a process_name with no name: its events are as if it had none
    _x("aten::mm", HOST, 1, 10, **{"Call stack": "a.py(1): f", "Input Dims": "2,3"}),
    _x("ProfilerStep#3", HOST, 1, 5),
    _x("MatMul", HW, 7, 11, **{"Task Type": "AI_CORE", "Stream Id": "7", "Task Id": 42}),
    _x("Notify_Wait", HCCL, 1, 12, **{"size(Byte)": 64, "connection_id": 9}),
    _x("hcom_allReduce_", HCCL, 0, 12),
    _x("Computing", OVERLAP, 0, 13),
    # no process_name at all (a trace cut before its metadata): a Task Type makes it a device task …
    _x("Cast", UNNAMED, 2, 14, **{"Task Type": "AI_VECTOR_CORE"}),
    _x("Cast", NAMELESS, 2, 15, **{"Task Type": "AI_CPU"}),
    # … and without one it is a host op of no process
    _x("mystery", UNNAMED, 3, 16, connection_id=5),
    _x("mystery", "not a pid", 3, 17, correlation_id=6),
    {"ph": "C", "name": "freq", "pid": HW, "tid": 0, "ts": "18.000", "args": {"MHz": 1800, "value": "x"}},
]


def test_each_event_goes_where_its_process_says(tmp_path: Path) -> None:
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(EVENTS))
    db = tmp_path / "t.duckdb"
    with Store(db) as store:
        ingest_into(store, [path])
    counts = {"device_tasks": 5, "host_ops": 4, "overlap_slices": 1, "steps": 1, "counters": 1, "links": 0}
    for table, n in counts.items():
        assert query(db, f"SELECT count(*) FROM {table}")[0][0] == n, table
    assert query(
        db, "SELECT name, stream, stream_id, task_kind, hw_task_id FROM device_tasks ORDER BY start_ns"
    ) == [
        ("MatMul", "Stream 7", 7, "AI_CORE", 42),
        ("Notify_Wait", "Plane 0", None, "COMM_TASK", None),
        ("hcom_allReduce_", "HCCL 0", None, "COMMUNICATION", None),
        ("Cast", "Stream 2", None, "AI_VECTOR_CORE", None),
        ("Cast", "Stream 2", None, "AI_CPU", None),
    ]
    assert query(db, "SELECT memcpy_bytes, connection_id FROM device_tasks WHERE name = 'Notify_Wait'") == [
        (64, 9)
    ]
    assert query(db, "SELECT name, pid, process, category, correlation FROM host_ops ORDER BY start_ns") == [
        ("ProfilerStep#3", HOST, "Python", "python", None),
        ("aten::mm", HOST, "Python", "python", None),
        ("mystery", UNNAMED, None, "unknown", 5),
        ("mystery", None, None, "unknown", 6),
    ]
    assert query(db, "SELECT input_dims, call_stack FROM host_ops WHERE name = 'aten::mm'") == [
        ("2,3", "a.py(1): f")
    ]
    assert query(db, "SELECT process, series, value FROM counters") == [("Ascend Hardware", "MHz", 1800.0)]
