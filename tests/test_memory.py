"""The memory diagnosis (diag/analyses/memory.py, diag memory): exact figures and findings on a generated run with
a known peak and fragmentation pattern, headroom from the device table, the timeline, the advice rows, slow device
allocation, the CLI's text and JSON, a run without memory and a bad --run (real and CUDA inputs:
tests/test_memory_sources.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from diag.analyses.findings import device_findings
from diag.analyses.memory import memory_steps, memory_summary, memory_timeline
from diag.analyses.memory_findings import findings_from_figures, memory_advice, size_text
from diag.cli import main
from diag.devices import match_device
from diag.store import Store
from sample_traces.generate import FILES, generate
from tests.conftest import ingest_into

MB = 1 << 20
JSON_KEYS = {
    "run_id", "platform", "capacity_bytes", "capacity_from", "peak_allocated_bytes", "peak_reserved_bytes",
    "peak_ts_ns", "peak_step", "headroom_pct", "slack_peak_bytes", "components", "top_allocators", "oom",
    "kv_cache", "findings",
}  # fmt: skip


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict, Path, int]]:
    """A one-rank, four-step profile with the memory files: its memory ground truth, its store and run id."""
    out = tmp_path_factory.mktemp("gen")
    truth = generate(out, steps=4, layers=1, ranks=1, seed=3, files=(*FILES, "memory"))
    db = tmp_path_factory.mktemp("db") / "diag.duckdb"
    with Store(db) as store:
        ingest_into(store, [out])
        run_id = store.cursor().execute("SELECT run_id FROM runs").fetchall()[0][0]
    yield truth["ranks"]["0"]["memory"], db, run_id


def test_generated_figures_equal_ground_truth(generated) -> None:
    truth, db, run_id = generated
    with Store(db, read_only=True) as store:
        s = memory_summary(store, run_id)
    assert set(s) >= JSON_KEYS
    assert (
        s["peak_reserved_bytes"] == truth["peak_reserved_bytes"] == 59920 * MB
    )  # APP: PTA + HCCL/RUNTIME/SLOG
    assert s["peak_ts_ns"] == truth["peak_ts_ns"]
    assert s["peak_step"] == truth["peak_step"] == 13  # the third step (FIRST_STEP 11)
    assert s["peak_op"] == "aten::cat"
    assert s["peak_allocated_bytes"] == truth["peak_allocated_bytes"] == 46384 * MB
    assert s["slack_at_peak_bytes"] == truth["slack_at_peak_bytes"] == 11984 * MB
    assert round(s["slack_at_peak_pct"], 2) == 20.53
    assert (s["slack_peak_bytes"], s["slack_peak_ts_ns"]) == (
        truth["slack_peak_bytes"],
        truth["slack_peak_ts_ns"],
    )
    assert s["non_app_bytes"] == truth["non_app_bytes"] == 1552 * MB
    assert {m["module"]: m["peak_reserved_bytes"] for m in s["non_app_modules"]} == truth[
        "modules_peak_bytes"
    ]
    assert (s["reserved_series"], s["allocator_series"]) == ("memory_record:APP", "memory_record:PTA+GE")
    assert (s["capacity_bytes"], s["capacity_from"], s["headroom_pct"]) == (
        None,
        None,
        None,
    )  # no device named
    assert [(a["name"], a["bytes"], a["count"]) for a in s["top_allocators"]] == [
        ("aten::empty_strided", 4 * 2048 * MB, 4),
        ("aten::mm", 4 * 4096 * MB, 4),
        ("aten::cat", 10240 * MB, 1),
    ]
    assert [(a["name"], a["bytes"], a["share_pct"]) for a in s["peak_allocators"]] == [
        ("aten::cat", 10240 * MB, 62.5),
        ("aten::mm", 4096 * MB, 25.0),
        ("aten::empty_strided", 2048 * MB, 12.5),
    ]
    assert s["churn"]["per_step"] == [
        {"step": 11, "allocs": 2, "frees": 2},
        {"step": 12, "allocs": 2, "frees": 2},
        {"step": 13, "allocs": 3, "frees": 3},
        {"step": 14, "allocs": 2, "frees": 2},
    ]
    assert [f["title"] for f in s["findings"]] == [
        "Allocator slack 11.7 GiB (20.5%) of the 57.0 GiB reserved at the peak was never allocated at once: "
        "fragmentation",
        "aten::cat holds 10.0 GiB (62.5%) of the allocations live at the peak",
    ]
    assert "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True" in s["findings"][0]["suggestion"]
    assert [f["evidence"]["owner"] for f in s["findings"]] == ["config", "code"]


def test_headroom_from_the_device_table(generated, tmp_path: Path) -> None:
    """The same run on a named 910B3: 59920 MB of its capacity (the device table's) leaves under 10% → a finding."""
    truth, db, run_id = generated
    capacity = match_device("Ascend910B3").capacity_bytes
    used = 100 * truth["peak_reserved_bytes"] / capacity
    assert used > 90  # 61 GiB as torch_npu reports it, or 64 GiB nominal: either leaves under 10%
    copy = tmp_path / "named.duckdb"
    shutil.copy(db, copy)
    with Store(copy) as store:
        store.cursor().execute("UPDATE runs SET device_name = 'Ascend910B3' WHERE run_id = ?", [run_id])
        s = memory_summary(store, run_id)
        kinds = [f.evidence["kind"] for f in device_findings(store, run_id) if f.category == "memory"]
    assert (s["capacity_bytes"], s["capacity_from"], s["device_name"]) == (
        capacity,
        "device_table",
        "Ascend 910B3",
    )
    assert s["headroom_pct"] == pytest.approx(100 - used)
    assert s["findings"][0]["title"] == (
        f"Peak reserved 58.5 GiB of {size_text(capacity)} ({used:.1f}%): headroom {100 - used:.1f}%, under the "
        "10% to keep"
    )
    assert "--gpu-memory-utilization" in s["findings"][0]["suggestion"]
    assert kinds == ["headroom", "fragmentation", "one_op"]  # diag findings shows them


def test_timeline_keeps_the_peak_and_steps(generated) -> None:
    truth, db, run_id = generated
    with Store(db, read_only=True) as store:
        full = memory_timeline(store, run_id)
        binned = memory_timeline(store, run_id, max_points=3)
        steps = memory_steps(store, run_id)
    app = [r for r in full if (r["source"], r["component"]) == ("memory_record", "APP")]
    assert len(app) == 8 and max(r["reserved_bytes"] for r in app) == truth["peak_reserved_bytes"]
    assert {r["component"] for r in full if r["source"] == "npu_module_mem"} == {
        "APP",
        "HCCL",
        "RUNTIME",
        "SLOG",
    }
    app_binned = [r for r in binned if (r["source"], r["component"]) == ("memory_record", "APP")]
    assert (
        len(app_binned) <= 4 and max(r["reserved_bytes"] for r in app_binned) == truth["peak_reserved_bytes"]
    )
    assert [s["step"] for s in steps] == [11, 12, 13, 14]


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``diag memory …`` in-process (a subprocess per call costs seconds on a busy machine)."""
    code = main(["memory", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_text_and_json(generated, capsys: pytest.CaptureFixture[str]) -> None:
    truth, db, run_id = generated
    code, out, err = _cli(capsys, "--db", str(db), "--run", str(run_id))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[1].startswith("Peak reserved 58.5 GiB at ") and lines[1].endswith(
        ", step 13, during aten::cat — headroom unknown (the device's capacity is not known: no device table "
        "entry, no OOM message)"
    )
    assert (
        "Held outside the framework (npu_module_mem): 1.5 GiB at most (HCCL 1.0 GiB, RUNTIME 512.0 MiB, "
        "SLOG 16.0 MiB)" in lines
    )
    assert "None" not in out and err == ""
    code, out, err = _cli(capsys, "--db", str(db), "--run", str(run_id), "--json")
    payload = json.loads(out)
    assert set(payload) >= JSON_KEYS
    assert payload["peak_reserved_bytes"] == truth["peak_reserved_bytes"]
    assert set(payload["components"][0]) >= {"component", "peak_reserved_bytes"}
    assert set(payload["top_allocators"][0]) >= {"name", "bytes", "held_ns"}


def test_cli_run_without_memory_and_bad_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "none.duckdb"
    with Store(db) as store:
        store.cursor().execute("INSERT INTO runs (run_id, run_key, platform) VALUES (5, 'k', 'ascend')")
    code, out, _ = _cli(capsys, "--db", str(db), "--run", "5")
    assert code == 0
    assert out.startswith("no memory records for run 5: torch_npu writes memory_record.csv")
    assert "profile_memory=True" in out and len(out.splitlines()) == 1
    assert _cli(capsys, "--db", str(db), "--run", "9") == (
        2,
        "",
        f"diag: error: no run 9 in {db} (see `diag runs`)\n",
    )


@pytest.mark.parametrize("key", sorted(memory_advice()))
def test_memory_advice_row_names_every_platform_an_owner_and_no_foreign_term(key: str) -> None:
    from tests.test_platform import PLATFORMS, _foreign

    rule = memory_advice()[key]
    assert rule["owner"] in {"code", "config", "stack", "vendor", "hardware"}
    for platform in PLATFORMS:
        assert rule[platform] and _foreign(rule[platform], platform) == [], (key, platform)


def test_slow_device_allocation_is_msprof_analyzes_memory_rule(tmp_path: Path) -> None:
    """aclMallocMemInner calls of 10 ms or more in all (msprof-analyze rules/memory.yaml) make a finding; less none."""
    with Store(tmp_path / "alloc.duckdb") as store:
        cur = store.cursor()
        cur.execute("INSERT INTO runs (run_id, run_key, platform) VALUES (1, 'k', 'ascend')")
        for i, dur in enumerate((4_000_000, 4_000_000, 2_500_000)):
            cur.execute(
                "INSERT INTO host_ops (run_id, file_id, category, name, start_ns, dur_ns) "
                "VALUES (1, 1, 'cann_api', 'AscendCL@aclMallocMemInner', ?, ?)",
                [i * 10_000_000, dur],
            )
        cur.execute(
            "INSERT INTO host_ops (run_id, file_id, category, name, start_ns, dur_ns) "
            "VALUES (1, 1, 'cann_api', 'AscendCL@aclrtFree', 0, 9999000)"
        )
        s = memory_summary(store, 1)
    assert s["alloc_calls"] == [
        {"name": "AscendCL@aclMallocMemInner", "count": 3, "total_ns": 10_500_000},
        {"name": "AscendCL@aclrtFree", "count": 1, "total_ns": 9_999_000},
    ]
    assert [f["title"] for f in s["findings"]] == [
        "Slow device memory allocation / free on the host: AscendCL@aclMallocMemInner ×3 (10.5 ms)"
    ]
    assert "PYTORCH_NPU_ALLOC_CONF=expandable_segments:True" in s["findings"][0]["suggestion"]


def test_diag_findings_lists_memory_findings_without_a_device_time_share(generated, capsys) -> None:
    _, db, run_id = generated
    assert main(["findings", "--db", str(db), "--run", str(run_id)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "│ memory " in line]
    assert len(rows) == 2 and all(line.startswith("│ medium   │ —      │ memory ") for line in rows)


def test_cli_without_run_says_which_of_several_runs_it_shows(tmp_path: Path, capsys) -> None:
    db = tmp_path / "two.duckdb"
    with Store(db) as store:
        cur = store.cursor()
        for rid in (1, 2):
            cur.execute(
                "INSERT INTO runs (run_id, run_key, platform, source) VALUES (?, ?, 'ascend', ?)",
                [rid, f"k{rid}", f"/p/run{rid}"],
            )
            cur.execute(
                "INSERT INTO memory (run_id, file_id, source, component, ts_ns, reserved_bytes, device) "
                "VALUES (?, ?, 'memory_record', 'APP', 5, ?, 'NPU:0')",
                [rid, rid, rid * 1024 * MB],
            )
    code, out, _ = _cli(capsys, "--db", str(db))
    assert code == 0
    assert out.splitlines()[:2] == [
        "run 2 · /p/run2 (the last of 2 runs with memory data; --run to choose)",
        "Peak reserved 2.0 GiB — headroom unknown (the device's capacity is not known: no device table entry, no "
        "OOM message)",
    ]


@pytest.mark.parametrize(
    ("verdict", "platform", "title", "knob", "owner"),
    [
        ("fragmentation", "cuda", "OOM from fragmentation: the request fitted in memory the allocator already held "
         "(asked for 2.0 GiB, 2 OOMs)", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "config"),
        ("out_of_memory", "ascend", "OOM: the device was full (asked for 2.0 GiB, 2 OOMs)",
         "--gpu-memory-utilization", "config"),
        ("other_process", "ascend", "OOM: memory this process does not hold was in use (another process or "
         "buffers) (asked for 2.0 GiB, 2 OOMs)", "HCCL_BUFFSIZE", "stack"),
        ("unknown", None, "OOM whose figures do not tell the cause (asked for 2.0 GiB, 2 OOMs)", "", "config"),
    ],
)  # fmt: skip
def test_oom_verdicts_become_one_finding_each(verdict, platform, title, knob, owner) -> None:
    """One finding per verdict, the advice of the OOM message's own platform (a log without a run has none)."""
    oom = {"verdict": verdict, "requested_bytes": 2 << 30, "platform": platform, "verdict_reason": "why"}
    [f] = findings_from_figures(None, {"platform": None, "oom": [oom, dict(oom)]})
    assert (f.category, f.severity, f.title, f.evidence["owner"], f.evidence["count"]) == (
        "memory",
        "high",
        title,
        owner,
        2,
    )
    assert knob in f.suggestion and (f.suggestion == "") == (platform is None)
