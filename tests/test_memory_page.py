"""The Memory page under AppTest: the answer line, the figures, the tables and the plots on a run with memory
records of known figures (tests/memory_run.py), an OOM log of no run alone, and a run with no memory records."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from diag.store import Store
from tests.conftest import FIXTURES, ingest_into, open_page
from tests.memory_run import (
    DEVICE_NAME,
    GIB,
    PEAK_RESERVED,
    RANK0,
    capacity_bytes,
    headroom,
    memory_run,
    peak_text,
)

PAGE = "app_pages/13_memory.py"
# a real torch_npu OOM (vllm-project/vllm-ascend#5020, tests/fixtures/logs_wild/INDEX_w2.csv)
OOM_LOG = next((FIXTURES / "logs_wild").glob("w2_072_npu_oom_2gib_*.log"))


@pytest.fixture(scope="module")
def mem_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mem")
    run = memory_run(root / "profile")
    (root / "logs").mkdir()
    shutil.copy(OOM_LOG, root / "logs" / "worker_oom.log")  # a log of no run
    db = root / "mem.duckdb"
    with Store(db) as store:
        ingest_into(store, [run, root / "logs"])
        # an Ascend text export does not name its chip: say it, as an export with a .db would (device table: 64 GiB)
        store.cursor().execute("UPDATE runs SET device_name = ?", [DEVICE_NAME])
    return db


def _values(array: list | dict) -> list[float]:
    """A Plotly array as numbers (Plotly ships numeric arrays as base64 ``{"dtype", "bdata"}``)."""
    if isinstance(array, dict):
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=array["dtype"]).tolist()
    return list(array)


def _texts(at) -> list[str]:  # noqa: ANN001
    return [m.value for m in at.markdown]


def _cells(at, first_column: str) -> list[dict]:  # noqa: ANN001
    """The rows, as drawn, of the table whose first column is ``first_column``."""
    frame = next(d.value for d in at.dataframe if d.value.columns[0] == first_column)
    return frame.to_dict("records")


def test_answer_line_figures_and_tables(monkeypatch, mem_db):
    at = open_page(monkeypatch, mem_db, PAGE)
    cap = capacity_bytes(
        DEVICE_NAME
    )  # 60.97 GiB: the 910B3 as torch_npu reports it (diag/rules/devices.toml)
    assert _texts(at)[0] == (
        f"**Peak reserved {peak_text(PEAK_RESERVED, cap)} at 9.0 ms, step 13, during aten::mm — headroom "
        f"{headroom(PEAK_RESERVED, cap)}; peak allocated 40.00 GiB.**"
    )
    assert {m.label: m.value for m in at.metric} == {
        "peak reserved": "60.00 GiB",
        "peak allocated": "40.00 GiB",
        "device capacity": f"{cap / GIB:.2f} GiB",
        "headroom": headroom(PEAK_RESERVED, cap),
        "slack peak (reserved − allocated)": "18.00 GiB",
    }
    assert "capacity from the device table (Ascend 910B3)" in [c.value for c in at.caption]
    assert _cells(at, "operator") == [
        {"operator": "aten::mm", "held (MiB)": 8192.0, "held for (ms)": 4.0, "allocations": 1},
        {"operator": "aten::empty_strided", "held (MiB)": 1024.0, "held for (ms)": 1.0, "allocations": 1},
    ]
    components = {(r["source"], r["component"]): r["peak reserved (GiB)"] for r in _cells(at, "source")}
    assert components[("memory_record", "APP")] == 60.0 and components[("memory_record", "PTA+GE")] == 48.0
    assert components[("npu_module_mem", "HCCL")] == 4.0 and components[("npu_module_mem", "RUNTIME")] == 1.0
    titles = [t for t in _texts(at) if t.startswith(":red-badge") or t.startswith(":orange-badge")]
    assert titles[0].startswith(
        ":red-badge[high] **Peak reserved 60.0 GiB of "
    )  # the headroom finding (< 10 %)
    assert titles[0].endswith(
        f"headroom {headroom(PEAK_RESERVED, capacity_bytes(DEVICE_NAME))}, under the 10% to keep**"
    )
    assert any("fragmentation" in t for t in titles)


def test_timeline_marks_the_peak_and_stacks_the_modules(monkeypatch, mem_db):
    at = open_page(monkeypatch, mem_db, PAGE)
    timeline, stack = (json.loads(c.proto.spec) for c in at.get("plotly_chart")[:2])
    names = [t["name"] for t in timeline["data"]]
    assert names == [
        "APP reserved (process total)",
        "PTA+GE allocated",
        "PTA+GE reserved",
        "PTA+GE active",
        "peak reserved",
    ]
    peak = timeline["data"][-1]
    assert _values(peak["x"]) == [pytest.approx(9.008545)] and _values(peak["y"]) == [60.0]
    assert max(_values(timeline["data"][1]["y"])) == 40.0  # allocated, GiB
    assert len(timeline["layout"]["shapes"]) == 4  # one band per step (11 … 14)
    assert [t["name"] for t in stack["data"]] == ["APP", "HCCL", "RUNTIME"]  # SLOG holds nothing: left out
    assert set(_values(stack["data"][1]["y"])) == {4.0}


def test_log_of_no_run_shows_its_oom_figures_and_verdict(monkeypatch, mem_db):
    at = open_page(monkeypatch, mem_db, PAGE)
    at.radio(key="mem_scope").set_value("A log of no run").run()
    assert not at.exception, at.exception
    assert _texts(at)[0] == (
        "**Out of memory: tried to allocate 2.00 GiB with 1.80 GiB free of 60.96 GiB — the device was full.**"
    )
    assert _cells(at, "verdict") == [
        {
            "verdict": "the device was full",
            "requested (GiB)": 2.0,
            "free (GiB)": 1.8,
            "allocated (GiB)": 55.91,
            "reserved (GiB)": 58.73,
            "capacity (GiB)": 60.96,
            "logged at": "worker_oom.log:1",
        }
    ]
    bars = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert bars["data"][0]["y"] == ["requested", "free", "allocated", "reserved", "active"]
    assert bars["layout"]["shapes"][0]["x0"] == pytest.approx(65455301591 / GIB)  # the capacity line
    assert any(
        t.startswith(":red-badge[high] **OOM: the device was full (asked for 2.0 GiB)") for t in _texts(at)
    )


def test_run_without_memory_records_says_what_to_capture(monkeypatch, tmp_path):
    run = tmp_path / RANK0.name
    (run / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    shutil.copy(RANK0 / "profiler_info_0.json", run)
    shutil.copy(RANK0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", run / "ASCEND_PROFILER_OUTPUT")
    db = tmp_path / "plain.duckdb"
    with Store(db) as store:
        ingest_into(store, [run])
    at = open_page(monkeypatch, db, PAGE)
    (info,) = at.info
    assert info.value.startswith(
        "No memory figures for this run. Capture them on Ascend with `torch_npu.profiler.profile(profile_memory=True"
    )
    assert "`memory_record.csv`, `operator_memory.csv` and `npu_module_mem.csv`" in info.value
    assert not at.get("plotly_chart") and not at.metric


def test_log_with_a_negative_kv_budget_shows_the_split(monkeypatch, tmp_path):
    """Only a log in the store (vLLM's negative KV budget, tests/fixtures/memory_logs/w1_008): the page opens on
    it, the answer says why, the budget split is drawn with its figures."""
    (tmp_path / "logs").mkdir()
    shutil.copy(FIXTURES / "memory_logs" / "w1_008_negative_kv_cache.log", tmp_path / "logs")
    db = tmp_path / "kv.duckdb"
    with Store(db) as store:
        ingest_into(store, [tmp_path / "logs"])
    at = open_page(monkeypatch, db, PAGE)
    assert _texts(at)[0] == (
        "**Out of memory — the device was full: vLLM's KV-cache budget is -890.88 MiB: the weights and activation "
        "peak take all the memory gpu_memory_utilization allows.**"
    )
    kv = {r["figure"]: r["value"] for r in _cells(at, "figure")}
    assert (kv["model weights"], kv["KV cache"], kv["verdict"]) == ("27.54 GiB", "-0.87 GiB", "negative")
    (split,) = (json.loads(c.proto.spec) for c in at.get("plotly_chart"))
    assert [t["name"] for t in split["data"]] == ["model weights", "KV cache"]
    assert split["data"][1]["marker"]["color"] == "#d62728"  # negative: drawn red, to the left


def test_generated_run_answer_matches_its_ground_truth(monkeypatch, tmp_path):
    """The generator's memory files (``--files … memory``): the answer line states its truth's peak, step and op
    (the text export names no chip, so no capacity: the headroom is not judged rather than guessed)."""
    from sample_traces.generate import generate

    files = ("kernel_details", "step_trace_time", "memory")  # no trace_view: the figures need none of it
    truth = generate(tmp_path / "gen", steps=4, layers=1, ranks=1, seed=3, files=files)
    memory = truth["ranks"]["0"]["memory"]
    db = tmp_path / "gen.duckdb"
    with Store(db) as store:
        ingest_into(store, [tmp_path / "gen"])
        (start_ns,) = store.cursor().execute("SELECT start_ns FROM runs").fetchone()
    at = open_page(monkeypatch, db, PAGE)
    when = (memory["peak_ts_ns"] - start_ns) / 1e6
    assert _texts(at)[0] == (
        f"**Peak reserved {memory['peak_reserved_bytes'] / GIB:.2f} GiB at {when:,.1f} ms, step "
        f"{memory['peak_step']}, during aten::cat — device capacity unknown: headroom not judged; peak allocated "
        f"{memory['peak_allocated_bytes'] / GIB:.2f} GiB.**"
    )
    assert memory["peak_reserved_bytes"] == 59920 << 20 and memory["peak_step"] == 13
