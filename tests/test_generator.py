"""The synthetic Ascend profile generator: deterministic output, and diag's ingest finds exactly its ground truth."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from diag.store import Store
from sample_traces.generate import generate
from tests.conftest import ingest_into

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "sample_traces" / "generated" / "llm_decode_tp2"
SMALL = {"steps": 3, "layers": 2, "ranks": 2, "seed": 5}


def tree_bytes(top: Path) -> dict[str, bytes]:
    return {p.relative_to(top).as_posix(): p.read_bytes() for p in sorted(top.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict, Store, dict[str, int]]]:
    """The small profile, its ground truth, and a store it was ingested into (run id by run folder)."""
    out = tmp_path_factory.mktemp("gen")
    truth = generate(out, **SMALL)
    store = Store(tmp_path_factory.mktemp("db") / "diag.duckdb")
    summary = ingest_into(store, [out])
    statuses = Counter(f.status for f in summary.files)
    assert statuses == {"ok": 12, "skipped": 3}, [(f.source, f.status, f.message) for f in summary.files]
    runs = dict(store.con.execute("SELECT name, run_id FROM runs").fetchall())
    yield truth, store, runs
    store.close()


def one(store: Store, sql: str, *params: object) -> object:
    return store.con.execute(sql, list(params)).fetchall()[0][0]


def test_same_arguments_give_byte_identical_output(tmp_path: Path) -> None:
    generate(tmp_path / "a", **SMALL)
    generate(tmp_path / "b", **SMALL)
    a, b = tree_bytes(tmp_path / "a"), tree_bytes(tmp_path / "b")
    assert a.keys() == b.keys() and len(a) == 1 + 2 * 7
    assert a == b
    generate(tmp_path / "c", **{**SMALL, "seed": 6})
    assert tree_bytes(tmp_path / "c") != a


def test_ingested_counts_equal_ground_truth(ingested) -> None:
    truth, store, runs = ingested
    assert set(runs) == {r["run_dir"] for r in truth["ranks"].values()}
    for r in truth["ranks"].values():
        run, trace = runs[r["run_dir"]], r["trace"]
        assert trace["device_tasks"] == trace["ascend_hardware_x"] + trace["hccl_x"]
        assert (
            one(store, "SELECT count(*) FROM device_tasks WHERE run_id=? AND source='trace_view'", run)
            == (trace["device_tasks"])
        )
        assert one(store, "SELECT count(*) FROM host_ops WHERE run_id=?", run) == trace["host_x"]
        assert (
            one(store, "SELECT count(*) FROM overlap_slices WHERE run_id=?", run) == trace["overlap_slices"]
        )
        assert one(store, "SELECT count(*) FROM links WHERE run_id=?", run) == trace["flow_pairs"]
        assert (
            one(store, "SELECT count(*) FROM steps WHERE run_id=?", run)
            == r["steps"]["count"]
            == SMALL["steps"]
        )
        kd = r["kernel_details"]
        assert one(store, "SELECT count(*) FROM kernels WHERE run_id=?", run) == kd["rows"]
        assert one(store, "SELECT sum(dur_ns) FROM kernels WHERE run_id=?", run) == kd["dur_ns_sum"]
        names = store.con.execute(
            "SELECT name FROM kernels WHERE run_id=? AND task_kind='AI_CPU'", [run]
        ).fetchall()
        assert Counter(n for (n,) in names) == r["ai_cpu"]["names"]
        assert r["ai_cpu"]["count"] == 2 * SMALL["steps"]
        memcpy = store.con.execute(
            "SELECT count(*), sum(memcpy_bytes) FROM device_tasks "
            "WHERE run_id=? AND source='trace_view' AND task_kind='MEMCPY'",
            [run],
        ).fetchall()[0]
        assert memcpy == (r["memcpy"]["count"], r["memcpy"]["bytes"])


def test_ingested_time_figures_equal_ground_truth(ingested) -> None:
    truth, store, runs = ingested
    for r in truth["ranks"].values():
        run = runs[r["run_dir"]]
        per_step = {s["step"]: s for s in r["per_step"]}
        rows = store.con.execute(
            "SELECT step, computing_ns, comm_not_overlapped_ns, free_ns FROM step_trace WHERE run_id=? ORDER BY step",
            [run],
        ).fetchall()
        assert [row[0] for row in rows] == sorted(per_step)
        for step, computing, cno, free in rows:
            s = per_step[step]
            assert (computing, cno, free) == (s["computing_ns"], s["comm_not_overlapped_ns"], s["free_ns"])
        by_kind = dict(
            store.con.execute(
                "SELECT kind, sum(dur_ns) FROM overlap_slices WHERE run_id=? GROUP BY kind", [run]
            ).fetchall()
        )
        dt = r["device_time_ns"]
        assert by_kind == {
            "Computing": dt["computing"],
            "Communication": dt["communication"],
            "Communication(Not Overlapped)": dt["comm_not_overlapped"],
            "Free": dt["free"],
        }
        steps = store.con.execute(
            "SELECT step, start_ns, end_ns FROM steps WHERE run_id=? ORDER BY step", [run]
        )
        assert [tuple(x) for x in steps.fetchall()] == [
            (s["step"], s["start_ns"], s["end_ns"]) for s in r["per_step"]
        ]


def test_ingested_run_metadata(ingested) -> None:
    truth, store, runs = ingested
    for r in truth["ranks"].values():
        row = store.con.execute(
            "SELECT rank, profiler_level, aic_metrics, torch_npu_version, cann_version FROM runs WHERE run_id=?",
            [runs[r["run_dir"]]],
        ).fetchall()[0]
        assert row == (r["rank_id"], "Level1", "ACL_AICORE_PIPE_UTILIZATION", "2.5.1", "8.0.RC3")


def test_ground_truth_is_self_consistent(tmp_path: Path) -> None:
    truth = generate(tmp_path, **SMALL)
    for r in truth["ranks"].values():
        dt, steps = r["device_time_ns"], r["per_step"]
        assert sum(dt["buckets"].values()) == dt["window"]
        assert dt["computing"] + dt["comm_not_overlapped"] + dt["free"] == dt["window"]
        assert dt["computing"] == sum(
            dt["buckets"][c] for c in ("matmul", "attention", "layout", "vector", "ai_cpu")
        )
        assert dt["comm_not_overlapped"] == dt["buckets"]["communication"]
        for key in ("computing", "communication", "comm_not_overlapped", "free"):
            assert dt[key] == sum(s[f"{key}_ns"] for s in steps)
        for s in steps:
            assert s["computing_ns"] + s["comm_not_overlapped_ns"] + s["free_ns"] == s["stage_ns"]
            assert s["start_ns"] <= s["window_start_ns"] < s["window_end_ns"] <= s["end_ns"]
        assert 0 < dt["ai_cpu_exposed"] <= dt["buckets"]["ai_cpu"] <= dt["task_sums"]["ai_cpu"]
        stalls = r[
            "stalls"
        ]  # the device idles about as long as the host stalled (an AI_CPU task may overlap)
        assert (
            stalls["count"] == 1
            and stalls["host_stall_ns"] / 2 < stalls["device_gap_ns"] <= dt["buckets"]["idle"]
        )
        # per step: input ids and block tables in, next tokens out; each stall adds one more copy out
        assert r["memcpy"]["count"] == 3 * SMALL["steps"] + r["stalls"]["count"]
        assert r["trace"]["events_by_phase"]["s"] == r["trace"]["flow_pairs"]


def test_targets_grow_the_run_and_files_can_be_chosen(tmp_path: Path) -> None:
    truth = generate(tmp_path, ranks=1, layers=2, kernel_rows=400, files=("kernel_details",))
    (r,) = truth["ranks"].values()
    output = tmp_path / r["run_dir"] / "ASCEND_PROFILER_OUTPUT"
    assert not (output / "trace_view.json").exists()
    lines = (output / "kernel_details.csv").read_bytes().split(b"\r\n")
    assert lines[-1] == b"" and len(lines) - 2 == r["kernel_details"]["rows"] >= 400
    truth = generate(tmp_path, ranks=1, layers=1, target_trace_bytes=300_000)
    (r,) = truth["ranks"].values()
    assert r["files"]["trace_view.json"] >= 300_000 and r["steps"]["count"] > 4


def test_script_entry_point(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "sample_traces" / "generate.py"),
            str(tmp_path),
            "--steps",
            "2",
            "--layers",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    truth = json.loads((tmp_path / "ground_truth.json").read_text())
    assert truth["generator"]["steps"] == 2 and len(truth["ranks"]) == 2


def test_bundled_demo_is_what_the_defaults_generate(tmp_path: Path) -> None:
    if not DEMO.is_dir():
        pytest.skip("sample_traces/generated/llm_decode_tp2 is not bundled")
    generate(tmp_path)
    assert tree_bytes(tmp_path) == tree_bytes(DEMO)
