"""Memory where people read it besides the Memory page: an OOM incident's postmortem leads with its memory story
(md / html / json, and the Postmortem page), the serving acceptance memory check reads the deployment's peak
reserved from diag.analyses.memory (CUDA profiles included), and ``diag compare`` has a memory block."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from diag import report
from diag.analyses import serving
from diag.analyses.compare import compare
from diag.analyses.postmortem import build_postmortem
from diag.commands.compare import compare as compare_command
from diag.store import Store
from tests.conftest import FIXTURES, SAMPLES, ingest_into, open_page
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
from tests.test_memory_page import OOM_LOG

CUDA_TRACE = SAMPLES / "generated" / "llm_decode_cuda" / "h100_decode_tp1.pt.trace.json"
CUDA_RESERVED_GIB = [40, 60, 76, 70]  # the Kineto allocator's totals written into the CUDA run (GiB)
CUDA_ALLOCATED_GIB = [30, 50, 70, 52]
OOM_TEXT = (
    "Out of memory — the device was full: tried to allocate 2.00 GiB with 1.80 GiB free of 60.96 GiB (allocated "
    "55.91 GiB, reserved 58.73 GiB) — 58.73 GiB of 60.96 GiB reserved (55.91 GiB allocated), 1.80 GiB free: the "
    "device is full; the 2.82 GiB cached but unused (4.8% of reserved) is too small a share to call fragmentation "
    "for the 2.00 GiB request."
)
NPU_CAP = capacity_bytes(DEVICE_NAME)
GPU_CAP = capacity_bytes("NVIDIA H100 80GB HBM3")  # the trace's deviceProperties name: 79.11 GiB
PEAK_TEXT = (
    f"Peak reserved {peak_text(PEAK_RESERVED, NPU_CAP)} in step 13, during aten::mm — headroom "
    f"{headroom(PEAK_RESERVED, NPU_CAP)}; reserved − allocated peaked at 18.00 GiB"
)


def _kineto_memory(store: Store, run_id: int) -> None:
    """Kineto [memory] totals for the CUDA run, as the kineto parser stores them (source kineto, PyTorch)."""
    cur = store.cursor()
    file_id, start = cur.execute(
        "SELECT f.file_id, r.start_ns FROM files f JOIN runs r USING (run_id) WHERE r.run_id = ? LIMIT 1",
        [run_id],
    ).fetchone()
    for k, (res, alloc) in enumerate(zip(CUDA_RESERVED_GIB, CUDA_ALLOCATED_GIB, strict=True)):
        cur.execute(
            "INSERT INTO memory (run_id, file_id, source, component, ts_ns, allocated_bytes, reserved_bytes,"
            " active_bytes, device) VALUES (?, ?, 'kineto', 'PyTorch', ?, ?, ?, ?, 'cuda:0')",
            [run_id, file_id, start + 1000 * k, alloc * GIB, res * GIB, alloc * GIB],
        )


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    """(db, Ascend run with memory records and an OOM in its log, CUDA run with Kineto memory totals)."""
    root = tmp_path_factory.mktemp("mempair")
    npu = memory_run(root / "npu")
    shutil.copy(OOM_LOG, npu / "train.log")  # the run's own log: the OOM joins its profile
    gpu = root / "gpu"
    gpu.mkdir()
    shutil.copy(CUDA_TRACE, gpu)
    shutil.copy(FIXTURES / "serving" / "ok_vllm_save_result.json", gpu / "h100_result.json")
    db = root / "pair.duckdb"
    with Store(db) as store:
        ingest_into(store, [npu, gpu])
        runs = dict(store.cursor().execute("SELECT platform, run_id FROM runs").fetchall())
        store.cursor().execute("UPDATE runs SET device_name = ? WHERE platform = 'ascend'", [DEVICE_NAME])
        _kineto_memory(store, runs["cuda"])
    return db, runs["ascend"], runs["cuda"]


# -- the postmortem ----------------------------------------------------------------------------------------------
def test_oom_incident_report_leads_with_the_memory_story(pair):
    db, npu, _ = pair
    with Store(db, read_only=True) as store:
        pm = build_postmortem(store, npu)
    names = [name for name, _ in report.sections(pm)]
    assert names[:3] == ["Memory", "What happened", "Impact"] and pm.memory_oom
    texts = [s.text for s in pm.memory]
    assert texts[:2] == [OOM_TEXT, PEAK_TEXT]
    knobs = [t for t in texts if t.startswith("Knob — ")]
    assert any("PYTORCH_NPU_ALLOC_CONF=expandable_segments:True" in t for t in knobs)
    assert any("--gpu-memory-utilization" in t and t.endswith("(owner of the fix: config)") for t in knobs)
    md, html = report.to_markdown(pm), report.to_html(pm)
    assert (
        md.index("## Memory") < md.index("## What happened") and "- Out of memory — the device was full" in md
    )
    assert html.index("<h2>Memory</h2>") < html.index("<h2>What happened</h2>")
    assert json.loads(report.to_json(pm))["memory"][0]["evidence"]["figures"]["verdict"] == "out_of_memory"


def test_report_without_an_oom_puts_memory_after_the_impact(pair):
    db, _, gpu = pair
    with Store(db, read_only=True) as store:
        pm = build_postmortem(store, gpu)
    names = [name for name, _ in report.sections(pm)]
    assert names[:3] == ["What happened", "Impact", "Memory"] and not pm.memory_oom
    assert pm.memory[0].text == (
        f"Peak reserved {peak_text(76 * GIB, GPU_CAP)} in step 11 — headroom {headroom(76 * GIB, GPU_CAP)}; "
        "reserved − allocated peaked at 18.00 GiB"
    )


def test_log_only_oom_incident_leads_with_memory(tmp_path):
    (tmp_path / "logs").mkdir()
    shutil.copy(OOM_LOG, tmp_path / "logs" / "worker.log")
    with Store(tmp_path / "log.duckdb") as store:
        ingest_into(store, [tmp_path / "logs"])
        pm = build_postmortem(store)
    assert report.sections(pm)[0][0] == "Memory"
    assert [s.text for s in pm.memory][0] == OOM_TEXT
    assert pm.memory[1].text.startswith(
        "Knob — The device was full: lower vLLM-Ascend's --gpu-memory-utilization"
    )


def test_job_report_names_the_rank_that_ran_out(tmp_path):
    """A TP=2 job (the generated sample's ranks) whose rank 0 has the memory records and the OOM."""
    job = tmp_path / "tp2"
    rank0 = memory_run(job)
    shutil.copy(OOM_LOG, rank0 / "train.log")
    rank1 = RANK0.parent / "rank1_3003034_20250115093320983_ascend_pt"
    (job / rank1.name / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    shutil.copy(rank1 / "profiler_info_1.json", job / rank1.name)
    shutil.copy(
        rank1 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", job / rank1.name / "ASCEND_PROFILER_OUTPUT"
    )
    with Store(tmp_path / "job.duckdb") as store:
        ingest_into(store, [job])
        (job_id,) = store.cursor().execute("SELECT DISTINCT job_id FROM runs").fetchone()
        pm = build_postmortem(store, job_id=job_id)
    assert report.sections(pm)[0][0] == "Memory" and pm.memory_oom
    assert pm.memory[0].text.startswith(
        "rank 0: Out of memory — the device was full: tried to allocate 2.00 GiB"
    )
    assert not any(s.text.startswith("rank 1") for s in pm.memory)  # rank 1 holds no memory figure


def _app_copy(db: Path, tmp_path: Path) -> Path:
    """The app keeps its database open for writing: it gets a copy, the other tests read the original."""
    return Path(shutil.copy(db, tmp_path / db.name))


def test_postmortem_page_draws_the_memory_section_first(monkeypatch, pair, tmp_path):
    db, npu, _ = pair
    at = open_page(monkeypatch, _app_copy(db, tmp_path), "app_pages/09_postmortem.py")
    at.selectbox(key="pm_run").select(npu).run()
    assert not at.exception, at.exception
    assert [h.value for h in at.subheader][:2] == ["Memory", "What happened"]
    assert any(m.value.startswith("- Out of memory — the device was full") for m in at.markdown)


# -- serving acceptance ----------------------------------------------------------------------------------------
def test_serving_memory_check_reads_a_cuda_profile(pair):
    db, _, gpu = pair
    with duckdb.connect(str(db), read_only=True) as con:
        rows = serving.accept(con)
    (row,) = [r for r in rows if Path(r["file"]).name == "h100_result.json"]
    check = next(c for c in row["checks"] if c["figure"] == "memory")
    assert check["peak"] == {"run_id": gpu, "component": "PyTorch", "peak_bytes": 76 * GIB}
    # the profiled device's capacity (as diag memory has it), not the nominal 80 GiB the result's path names
    assert (check["value"], check["verdict"]) == (pytest.approx(100 * 76 * GIB / GPU_CAP), "fail")
    assert (check["capacity_bytes"], check["capacity_from"]) == (GPU_CAP, "profile device_table")
    assert check["detail"] == f"76.00 GiB reserved (PyTorch, run {gpu}) of 79.11 GiB"


# -- Ascend vs CUDA ------------------------------------------------------------------------------------------------
def test_compare_has_a_memory_block_per_side(pair):
    db, npu, gpu = pair
    with Store(db, read_only=True) as store:
        block = compare(store, npu, gpu).to_json()["memory"]
    a, b = block["a"], block["b"]
    assert (a["peak_allocated_bytes"], a["peak_reserved_bytes"], a["slack_peak_bytes"]) == (
        40 * GIB,
        60 * GIB,
        18 * GIB,
    )
    assert (a["capacity_bytes"], a["headroom_pct"], a["oom"]) == (
        NPU_CAP,
        pytest.approx(100 - 6000 * GIB / NPU_CAP),
        1,
    )
    assert (b["peak_allocated_bytes"], b["peak_reserved_bytes"], b["slack_peak_bytes"]) == (
        70 * GIB,
        76 * GIB,
        18 * GIB,
    )
    assert (b["capacity_bytes"], b["headroom_pct"], b["kv_cache_bytes"]) == (
        GPU_CAP,
        pytest.approx(100 - 7600 * GIB / GPU_CAP),
        None,
    )


def test_compare_cli_prints_the_memory_table(pair, capsys):
    db, npu, gpu = pair
    compare_command(npu, gpu, db=db, as_json=False)  # diag compare, in-process
    text = capsys.readouterr().out
    cells = [[c.strip() for c in line.split("│")[1:4]] for line in text.splitlines() if line.count("│") == 4]
    rows = {c[0]: c[1:] for c in cells}
    assert list(rows) == [
        "peak allocated (GiB)",
        "peak reserved (GiB)",
        "device capacity (GiB)",
        "headroom (%)",
        "slack peak (reserved − allocated) (GiB)",
    ]  # no side has a KV-cache budget: no row for it
    assert rows["peak reserved (GiB)"] == ["60.00", "76.00"]
    assert rows["headroom (%)"] == [headroom(PEAK_RESERVED, NPU_CAP)[:-1], headroom(76 * GIB, GPU_CAP)[:-1]]


def test_compare_page_memory_section(monkeypatch, pair, tmp_path):
    db, npu, gpu = pair
    at = open_page(monkeypatch, _app_copy(db, tmp_path), "app_pages/08_compare.py")
    assert not at.exception, at.exception
    frame = next(d.value for d in at.dataframe if list(d.value.columns) == ["figure", "A", "B"])
    cells = {r["figure"]: (r["A"], r["B"]) for r in frame.to_dict("records")}
    assert cells["peak reserved (GiB)"] == (60.0, 76.0)
    assert cells["headroom (%)"] == (
        float(headroom(PEAK_RESERVED, NPU_CAP)[:-1]),
        float(headroom(76 * GIB, GPU_CAP)[:-1]),
    )
    assert cells["slack peak (reserved − allocated) (GiB)"] == (18.0, 18.0)
