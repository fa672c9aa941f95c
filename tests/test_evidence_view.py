"""diag.analyses.evidence_view: evidence dicts of every finding category and of log root causes, as the tables, log
lines and time ranges a person reads (figures from the bundled samples, a trap fixture and the real corpus)."""

from __future__ import annotations

import re
from dataclasses import asdict
from pathlib import Path

import pytest

from diag.analyses import log_diagnosis
from diag.analyses.cpu_fallback import FallbackOp
from diag.analyses.evidence_view import (
    LogLines,
    RunClock,
    Table,
    TimeRange,
    evidence_blocks,
    finding_blocks,
    label,
    labels,
    log_blocks,
    path_tails,
)
from diag.analyses.findings import _host_fallback_findings, device_findings
from diag.analyses.postmortem import build_postmortem
from diag.analyses.runs import list_runs
from diag.store import Store
from tests.conftest import FIXTURES, SAMPLES, ingest_into

EPOCH_NS = re.compile(r"\d{13,}")  # what a person must never read


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory):
    store = Store(tmp_path_factory.mktemp("ev") / "samples.duckdb")
    ingest_into(store, [SAMPLES])
    yield store
    store.close()


def _run(store: Store, prefix: str) -> tuple[int, RunClock]:
    run = next(r for r in list_runs(store) if r["name"].startswith(prefix))
    return run["run_id"], RunClock(run["start_ns"], run["end_ns"], run["run_id"])


def _by_category(store: Store, prefix: str) -> tuple[dict[str, list], RunClock]:
    run_id, clock = _run(store, prefix)
    out = {}
    for f in device_findings(store, run_id):
        out[f.category] = finding_blocks(f.evidence, f.start_ns, f.end_ns, clock, f.category)
    return out, clock


def _tables(blocks: list) -> dict[str, Table]:
    return {b.title: b for b in blocks if isinstance(b, Table)}


def _text(blocks: list) -> str:
    return repr([asdict(b) for b in blocks if not isinstance(b, TimeRange)])


@pytest.fixture(scope="module")
def rank0(samples):
    return _by_category(samples, "rank0_")  # the generated TP=2 Ascend decode, rank 0


def test_cpu_fallback_is_an_ops_table_with_the_run_relative_range(rank0):
    blocks, _ = rank0
    ops = _tables(blocks["cpu_fallback"])["ops"]
    assert ops.columns == [
        "op",
        "calls",
        "total (ms)",
        "kernel names",
        "input dtypes",
        "input shapes",
        "host ops",
    ]
    assert ops.rows[0] == ["ArgMaxV2", "4", "0.986", "aclnnArgMax_ArgMaxV2AiCpu_ArgMaxV2", "FLOAT;INT64 -> INT64",
                           "16,152064;", "aclnnArgMax"]  # fmt: skip
    assert ops.rows[1][:3] == ["IndexPut", "4", "0.673"]
    (rng,) = [b for b in blocks["cpu_fallback"] if isinstance(b, TimeRange)]
    assert rng.text == "0.713 → 16.492 ms from the run's start (15.778 ms)" and rng.in_run


def test_top_ops_table_has_calls_total_and_share(rank0):
    ops = _tables(rank0[0]["top_ops"])["ops"]
    assert ops.columns == ["op", "kind", "calls", "total (ms)", "share (%)"]
    assert ops.rows[0] == ["MatMulV2", "AI_CORE", "68", "3.882", "24.60"]


def test_idle_gaps_are_in_ms_from_the_run_start_never_epoch_ns(rank0):
    gaps = _tables(rank0[0]["idle"])["gaps"]
    assert gaps.columns == ["start (ms from the run's start)", "end (ms from the run's start)", "gap (ms)",
                            "host busy with"]  # fmt: skip
    assert gaps.rows[0] == ["13.429", "15.341", "1.912",
                            "npu::npu_rms_norm 0.037 ms; aclnnRmsNorm 0.020 ms; Dequeue@aclnnRmsNorm 0.012 ms"]  # fmt: skip
    for blocks in rank0[0].values():
        assert not EPOCH_NS.search(_text(blocks)), _text(blocks)


def test_communication_and_data_movement_figures_carry_their_unit(rank0):
    blocks = rank0[0]
    assert _tables(blocks["communication"])[""].rows == [
        ["communication total", "1.285 ms"],
        ["communication not overlapped", "1.133 ms"],
    ]
    top = _tables(blocks["data_movement"])["top"]
    assert top.columns == ["name", "calls", "total (ms)"] and top.rows[0] == ["MEMCPY_ASYNC", "14", "0.040"]
    assert ["copies not overlapped", "0.030 ms"] in _tables(blocks["data_movement"])[""].rows


def test_host_sync_callers_and_calls_per_step(rank0):
    tables = _tables(rank0[0]["host_sync"])
    assert tables["callers"].columns == ["caller", "call", "kind", "calls", "device idle (ms)", "wait (ms)"]
    assert tables["callers"].rows == [
        [
            "(step top level)",
            "AscendCL@aclrtSynchronizeStreamWithTimeout",
            "stream_sync",
            "6",
            "0.073",
            "2.111",
        ],
        # a device-to-host copy ("device to host" in torch_npu's trace) holds the host too
        ["(step top level)", "AscendCL@aclrtMemcpyAsync", "d2h_copy", "1", "0.000", "0.015"],
    ]
    assert tables["calls in each step"].rows == [["11", "2"], ["12", "2"], ["13", "1"], ["14", "2"]]


def test_recompile_has_no_time_range_when_the_finding_has_none(rank0):
    blocks = rank0[0]["recompile"]
    assert [b.kind for b in blocks] == ["table"] and blocks[0].rows == [["dynamic-shape kernels", "172"]]


def test_without_the_run_clock_times_are_clock_times_and_no_timeline(samples):
    run_id, _ = _run(samples, "rank0_")
    f = next(f for f in device_findings(samples, run_id) if f.category == "idle")
    blocks = finding_blocks(f.evidence, f.start_ns, f.end_ns)
    gaps = _tables(blocks)["gaps"]
    assert gaps.columns[0] == "start (clock)" and gaps.rows[0][0] == "2025-01-15 09:33:20.997007"
    (rng,) = [b for b in blocks if isinstance(b, TimeRange)]
    assert not rng.in_run and rng.text.endswith("(1.912 ms), clock of the source")


def test_data_quality_duplicates_table(tmp_path):
    store = Store(tmp_path / "dup.duckdb")
    ingest_into(store, [FIXTURES / "traps" / "duplicate_kernel_rows"])
    (run_id,) = [r for (r,) in store.con.execute("SELECT run_id FROM runs").fetchall()]
    f = next(f for f in device_findings(store, run_id) if f.category == "data_quality")
    tables = _tables(finding_blocks(f.evidence, f.start_ns, f.end_ns))
    assert tables["duplicates"].columns[:3] == ["table", "file", "rows"]
    assert [r[:3] for r in tables["duplicates"].rows] == [
        ["device_tasks", "kernel_details.csv", "4"],  # one file: its name is the shortest unambiguous tail
        ["kernels", "kernel_details.csv", "4"],
    ]
    assert ["device kernels", "10"] in tables[""].rows


def test_host_fallback_ops_table():
    op = FallbackOp(
        "aten::nonzero", "host", 3, 4_500_000, 2_000_000, None, [], [], [], [], None, 0, 0, "hint"
    )
    (f,) = _host_fallback_findings(7, [op], 100_000_000)
    ops = _tables(finding_blocks(f.evidence, f.start_ns, f.end_ns, category=f.category))["ops"]
    assert ops.columns == ["op", "calls", "host self time (ms)"] and ops.rows == [
        ["aten::nonzero", "3", "4.500"]
    ]


def test_postmortem_finding_statement_merges_its_figures(samples):
    run_id, clock = _run(samples, "rank0_")
    pm = build_postmortem(samples, run_id)
    stmt = next(s for s in pm.impact if "AI_CPU" in s.text)
    blocks = evidence_blocks(stmt.evidence, clock)
    assert [b.kind for b in blocks] == ["table", "table", "range"]
    assert blocks[1].rows == [["share of device time", "10.52%"], ["device time lost", "1.660 ms"],
                              ["severity", "high"]]  # fmt: skip
    profiled = next(
        s for s in pm.what_happened if s.text.startswith("Profiled")
    )  # after the log's first error
    buckets = _tables(evidence_blocks(profiled.evidence, clock))["device time by bucket"]
    assert ["ai cpu", "1.660 ms"] in buckets.rows


@pytest.fixture
def two_rank_logs(tmp_path: Path) -> Store:
    store = Store(tmp_path / "logs.duckdb")
    ingest_into(store, [FIXTURES / "cann_log" / "two_ranks"])
    yield store
    store.close()


def test_log_root_causes_as_log_lines(two_rank_logs):
    causes = log_diagnosis.root_causes(two_rank_logs, None)
    assert causes
    for rc in causes:
        (block,) = log_blocks([asdict(e) for e in rc.evidence])
        assert isinstance(block, LogLines) and len(block.lines) == len(rc.evidence[:20])
        for line, e in zip(block.lines, rc.evidence, strict=False):
            assert line.where == f"{path_tails([x.file for x in rc.evidence])[e.file]}:{e.line_no}"
            assert line.text == e.raw.splitlines()[0] and line.path == e.file


def test_log_finding_rank_is_the_cause_number(two_rank_logs):
    f = log_diagnosis.log_findings(two_rank_logs, None)[0]
    blocks = finding_blocks(f.evidence, f.start_ns, f.end_ns, category=f.category)
    figures = _tables(blocks)[""].rows
    assert ["cause #", "1"] in figures and not any(r[0] == "rank" for r in figures)
    assert any(isinstance(b, LogLines) for b in blocks)


@pytest.mark.corpus
def test_real_hccl_log_statement(corpus, tmp_path):
    name = "035_hccl_task_exception_timeout_plog_hicann_hccl.log"
    store = Store(tmp_path / "hccl.duckdb")
    ingest_into(store, [corpus / "cann_logs" / name])
    pm = build_postmortem(store)
    blocks = evidence_blocks(pm.root_cause["statement"]["evidence"])
    (logs,) = [b for b in blocks if isinstance(b, LogLines)]
    assert logs.lines[0].where == f"{name}:1" and logs.lines[0].rank == "2"
    assert logs.lines[0].time == "2025-10-24 11:18:29.597044"
    assert "Task run failed, base information is streamID:[2]" in logs.lines[0].text
    assert _tables(blocks)[""].rows[:2] == [["records", "3"], ["ranks", "2"]]
    (rng,) = [b for b in blocks if isinstance(b, TimeRange)]  # a log clock: no run window, no timeline
    assert not rng.in_run and rng.text.startswith("2025-10-24 11:18:29.597044 → ")


def test_path_tails_are_the_shortest_unambiguous():
    tails = path_tails(["/a/run1/plog/x.log", "/a/run2/plog/x.log", "/a/run2/plog/y.log"])
    assert tails == {"/a/run1/plog/x.log": "run1/plog/x.log", "/a/run2/plog/x.log": "run2/plog/x.log",
                     "/a/run2/plog/y.log": "y.log"}  # fmt: skip


def test_units_and_missing_values():
    blocks = evidence_blocks(
        {"ops": [{"op": "A", "peak_bytes": 3 * 2**30, "wait_ns": None}, {"op": "B", "peak_bytes": 5 * 2**20}]}
    )
    assert blocks[0].columns == ["op", "peak", "wait"]
    assert blocks[0].rows == [["A", "3.00 GiB", "—"], ["B", "5.00 MiB", "—"]]


def test_every_label_key_is_used_or_documented():
    assert (
        label("comm_exposed_ns") == "communication not overlapped"
        and label("unknown_thing_ns") == "unknown thing"
    )
    assert all(k and v for k, v in labels().items())
