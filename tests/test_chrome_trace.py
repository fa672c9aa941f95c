"""diag.chrome_trace: a run as a Trace Event Format file that Perfetto and chrome://tracing read correctly.

Field names checked against the Trace Event Format: top level ``traceEvents`` / ``displayTimeUnit`` /
``otherData``; complete events ``ph: "X"`` with ``name, cat, ts, dur, pid, tid, args`` (µs), optional ``cname``;
metadata events ``ph: "M"`` named ``process_name`` / ``thread_name`` (``args.name``) and ``*_sort_index``
(``args.sort_index``)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import REAL_AICPU_TRACE, REAL_LEVEL2, SAMPLES, cli_json, query

CUDA_TRACE = SAMPLES / "generated" / "llm_decode_cuda" / "h100_decode_tp1.pt.trace.json"
METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict, dict]]:
    """name → (database, the loaded trace, the export's --json) for the real Ascend samples and the CUDA one."""
    tmp = tmp_path_factory.mktemp("chrome")
    db = tmp / "c.duckdb"
    code, _ = cli_json("ingest", str(REAL_AICPU_TRACE), str(REAL_LEVEL2), str(CUDA_TRACE), "--db", str(db))
    assert code == 0
    out = {}
    for run_id, name in query(db, "SELECT run_id, name FROM runs"):
        path = tmp / f"{run_id}.json"
        code, payload = cli_json(
            "export", "--format", "chrome", str(run_id), "-o", str(path), "--db", str(db)
        )
        assert code == 0, payload
        out[name] = (db, json.loads(path.read_text(), parse_float=Decimal), payload)
    return out


def _x_events(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def _device_pid(trace: dict) -> int:
    return next(e["pid"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name")


def test_every_event_has_the_format_fields(traces):
    for _db, trace, _ in traces.values():
        assert trace["displayTimeUnit"] == "ms" and isinstance(trace["traceEvents"], list)
        for e in trace["traceEvents"]:
            assert e["ph"] in {"X", "M"}, e
            if e["ph"] == "M":
                assert e["name"] in METADATA and isinstance(e["pid"], int) and isinstance(e["args"], dict), e
                key = "sort_index" if e["name"].endswith("sort_index") else "name"
                assert key in e["args"], e
            else:
                assert {"name", "cat", "ts", "dur", "pid", "tid", "args"} <= e.keys(), e
                assert isinstance(e["ts"], Decimal | int) and e["dur"] >= 0, e


def test_every_thread_is_exactly_nested(traces):
    for _db, trace, _ in traces.values():
        lanes = defaultdict(list)
        for e in _x_events(trace):
            lanes[(e["pid"], e["tid"])].append((Decimal(e["ts"]), -Decimal(e["dur"])))
        for key, spans in lanes.items():
            stack: list[Decimal] = []
            for start, neg_dur in sorted(spans):
                end = start - neg_dur
                while stack and stack[-1] <= start:
                    stack.pop()
                assert not stack or end <= stack[-1], (
                    f"{key}: [{start}, {end}] crosses an enclosing event's end"
                )
                stack.append(end)


def test_device_events_are_the_runs_device_tasks(traces):
    for name, (db, trace, payload) in traces.items():
        (n,) = query(
            db, "SELECT count(*) FROM device_tasks d JOIN runs r USING (run_id) WHERE r.name = ?", [name]
        )[0]
        pid = _device_pid(trace)
        assert sum(1 for e in _x_events(trace) if e["pid"] == pid) == n == payload["by_source"]["device"]
        assert payload["events"] == len(_x_events(trace))
    level2 = traces["msinsight_level2_rank0_ascend_pt"][2]
    # 835 tasks; HCCL tasks of Stream 4 overlap without nesting: 5 overflow threads there, 7 in all
    assert (level2["by_source"]["device"], level2["overflow_threads"]) == (835, 7)


def test_ai_cpu_tasks_carry_category_colour_and_exact_times(traces):
    trace = traces["mstt_timeline_advice"][1]
    ai = sorted((e for e in _x_events(trace) if e["cat"] == "ai_cpu"), key=lambda e: e["ts"])
    assert [(e["name"], e["ts"], e["dur"], e["cname"]) for e in ai] == [
        ("aclnnReduceSum_CastAiCpu_Cast", Decimal("13527.093"), Decimal("188.148"), "terrible"),
        ("aclnnCast_CastAiCpu_Cast", Decimal("13729.961"), Decimal("139.419"), "terrible"),
    ]
    assert traces["mstt_timeline_advice"][2]["ai_cpu_events"] == 2
    cuda = traces["h100_decode_tp1.pt.trace.json"][1]
    assert not [e for e in _x_events(cuda) if e["cat"] == "ai_cpu"]


def test_times_are_relative_to_the_run_start(traces):
    for _db, trace, _ in traces.values():
        starts = [e["ts"] for e in _x_events(trace)]
        assert min(starts) == 0  # the run's first event
        assert int(trace["otherData"]["run_start_ns"]) > 10**18  # the epoch origin, kept exactly as a string


def test_lanes_are_named_per_platform_and_findings_are_a_track(traces):
    def names(trace: dict, kind: str) -> list[str]:
        return [e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == kind]

    cuda = traces["h100_decode_tp1.pt.trace.json"][1]
    assert names(cuda, "process_name") == ["GPU 0", "python (pid 4242)", "Run"]
    assert names(cuda, "thread_name") == ["Stream 7", "tid 4242", "Steps", "Findings"]
    ascend = traces["msinsight_level2_rank0_ascend_pt"][1]
    assert names(ascend, "process_name")[0] == "NPU 0"
    findings = [e for e in _x_events(ascend) if e["cat"] == "finding"]
    assert len(findings) == traces["msinsight_level2_rank0_ascend_pt"][2]["findings"] > 0
    assert all(e["args"]["severity"] in {"high", "medium", "low", "info"} for e in findings)
    steps = Counter(e["cat"] for e in _x_events(cuda))
    assert steps["step"] == 4
