"""Platforms (issue #16): AMD ROCm traces are `rocm`, advice per platform from rules/advice.toml, host-sync finding.

Inputs are real: HTA's MI250 ROCm 6.2 Kineto trace (tests/fixtures/kineto/rocm_mi250_minitoy.*), HTA's CUDA
event-sync trace (traps/host_sync), the bundled real Ascend samples and ../shared/corpus/cuda.
"""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import pytest

from diag.analyses.advice import ADVICE, advice
from diag.analyses.compare import compare
from diag.analyses.findings import device_findings
from diag.analyses.host_sync import host_sync, sync_rules
from diag.analyses.stall_breakdown import breakdown
from diag.store import Store
from parsers._gpu_vendor import platform_rules
from tests.conftest import FIXTURES, REAL_AICPU_TRACE, REAL_LEVEL2, SAMPLES, ingest_into, open_page

ROCM_TRACE = FIXTURES / "kineto" / "rocm_mi250_minitoy.pt.trace.json.gz"
CUDA_TRACE = FIXTURES / "kineto" / "ok_rank2.pt.trace.json.gz"
TRAPS = FIXTURES / "traps"
HOST_SYNC_TRAP = TRAPS / "host_sync" / "cuda_event_sync.pt.trace.json.gz"
ROCM_TRAP = TRAPS / "rocm_trace" / "no_device_properties.pt.trace.json.gz"
RULES = tomllib.loads(ADVICE.read_text(encoding="utf-8"))
TERMS = RULES.pop("terms")
PLATFORMS = ("ascend", "cuda", "rocm")


def _store(tmp_path: Path, *paths: Path) -> Store:
    store = Store(tmp_path / "t.duckdb")
    assert ingest_into(store, paths).ok
    return store


def _runs(store: Store) -> dict[str, tuple[int, str]]:
    rows = store.cursor().execute("SELECT name, run_id, platform FROM runs").fetchall()
    return {name: (rid, platform) for name, rid, platform in rows}


def _foreign(text: str, platform: str) -> list[str]:
    """The other platform's terms found in ``text`` (ROCm texts may name torch.cuda: it is ROCm's API too)."""
    terms = TERMS["ascend_only"] if platform in ("cuda", "rocm") else TERMS["cuda_only"]
    return [t for t in terms if re.search(t, text, re.I)]


# -- 1. ROCm / HIP traces ---------------------------------------------------------------------------------------
def test_rocm_trace_is_stored_as_rocm(tmp_path):
    store = _store(tmp_path, ROCM_TRACE, CUDA_TRACE)
    runs = _runs(store)
    assert runs[ROCM_TRACE.name][1] == "rocm"
    assert runs[CUDA_TRACE.name][1] == "cuda"
    rid = runs[ROCM_TRACE.name][0]
    kinds = dict(
        store.cursor()
        .execute("SELECT task_kind, count(*) FROM device_tasks WHERE run_id = ? GROUP BY 1", [rid])
        .fetchall()
    )
    assert kinds == {"CUDA_KERNEL": 14, "MEMCPY": 2}


def test_rocm_trap_without_device_properties_is_told_by_hip_calls(tmp_path):
    store = _store(tmp_path, ROCM_TRAP)
    ((rid, platform),) = _runs(store).values()
    assert platform == "rocm"
    n = store.cursor().execute("SELECT count(*) FROM device_tasks WHERE run_id = ? AND task_kind = 'CUDA_KERNEL'",
                               [rid]).fetchall()[0][0]  # fmt: skip
    assert n == 6


@pytest.mark.parametrize(
    ("name", "amd"),
    [("AMD Instinct MI300X", True), ("AMD Radeon Graphics", True), ("gfx90a", True), ("gfx942", True), ("gfx1100", True), ("gfx90a:sramecc+:xnack-", True),
     ("NVIDIA H100 80GB HBM3", False), ("Tesla V100-SXM2-16GB", False), ("NVIDIA GeForce RTX 4090", False),
     ("NVIDIA A100-SXM4-80GB", False)],
)  # fmt: skip
def test_platform_rule_device_names(name, amd):
    rules = platform_rules()["rocm"]["device_name"]
    assert any(re.search(r, name, re.I) for r in rules) is amd


def test_compare_with_a_rocm_run_warns_different_vendor(tmp_path):
    store = _store(tmp_path, ROCM_TRACE, CUDA_TRACE, REAL_AICPU_TRACE)
    runs = _runs(store)
    rocm, cuda = runs[ROCM_TRACE.name][0], runs[CUDA_TRACE.name][0]
    ascend = next(rid for rid, p in runs.values() if p == "ascend")
    on_ascend = [w for w in compare(store, ascend, rocm).warnings if w.startswith("different vendor")]
    assert len(on_ascend) == 1
    assert "A is Huawei Ascend, B is AMD ROCm" in on_ascend[0] and "GPU baseline (ROCm)" in on_ascend[0]
    assert any(
        w.startswith("different vendor: A is AMD ROCm, B is NVIDIA CUDA")
        for w in compare(store, rocm, cuda).warnings
    )
    assert not any(w.startswith("different vendor") for w in compare(store, ascend, cuda).warnings)


# -- 2. advice per platform -------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", sorted(RULES))
def test_advice_row_names_every_platform_and_no_foreign_term(key):
    for platform in PLATFORMS:
        text = advice(key, platform)
        assert text, (key, platform)
        assert _foreign(text, platform) == [], (key, platform)


@pytest.mark.parametrize(("term", "hit", "miss"), [("\\bnpu\\b", "torch.npu.synchronize()", "pad inputs"),
                                                   ("\\bCANN\\b", "CANN 8.0", "cannot"),
                                                   ("\\bHIP\\b", "HIP graphs", "relationship")])  # fmt: skip
def test_advice_terms_are_words(term, hit, miss):
    assert re.search(term, hit, re.I) and not re.search(term, miss, re.I)


def _check_findings(store: Store) -> int:
    checked = 0
    for _, (rid, platform) in _runs(store).items():
        for f in device_findings(store, rid):
            assert _foreign(f"{f.title} {f.suggestion}", platform) == [], (platform, f.category, f.suggestion)
            checked += 1
    return checked


def test_findings_hold_no_foreign_advice_on_samples(tmp_path):
    store = _store(tmp_path, SAMPLES / "generated", REAL_LEVEL2, REAL_AICPU_TRACE, ROCM_TRACE, HOST_SYNC_TRAP)
    platforms = {p for _, p in _runs(store).values()}
    assert platforms == {"ascend", "cuda", "rocm"}
    idle = [
        f for rid, _ in _runs(store).values() for f in device_findings(store, rid) if f.category == "idle"
    ]
    assert len(idle) >= 3  # the idle text held torchair for every platform before
    assert _check_findings(store) > 20


def test_findings_hold_no_ascend_advice_on_the_cuda_corpus(tmp_path, corpus):
    store = Store(tmp_path / "t.duckdb")
    ingest_into(store, [corpus / "cuda"])
    assert {p for _, p in _runs(store).values()} == {"cuda"}
    assert _check_findings(store) > 20


# -- 3. host sync -----------------------------------------------------------------------------------------------
def test_host_sync_trap_counts_nested_calls_once(tmp_path):
    store = _store(tmp_path, HOST_SYNC_TRAP)
    ((rid, _),) = _runs(store).values()
    (f,) = [f for f in device_findings(store, rid) if f.category == "host_sync"]
    assert (f.evidence["calls"], f.evidence["per_step"], f.impact_ns) == (3, {"100": 3}, 59_000)
    assert f.severity == "high" and f.evidence["host_wait_ns"] == 87_000
    callers = [(c["caller"], c["call"], c["kind"], c["idle_ns"]) for c in f.evidence["callers"]]
    assert callers == [("aten::is_nonzero", "aten::item", "scalar_read", 43_000),
                       ("(step top level)", "cudaEventSynchronize", "stream_sync", 8_000),
                       ("(step top level)", "cudaDeviceSynchronize", "stream_sync", 8_000)]  # fmt: skip
    assert "cudaStreamSynchronize" in f.suggestion and "torch_npu" not in f.suggestion


def test_host_sync_outside_steps_is_not_counted(tmp_path):
    # the MI250 trace's hipDeviceSynchronize comes after ProfilerStep#2 ends
    store = _store(tmp_path, ROCM_TRACE)
    ((rid, platform),) = _runs(store).values()
    total = breakdown(store, rid).total
    assert host_sync(store, rid, platform, total.start_ns, total.end_ns).calls == 0
    assert not [f for f in device_findings(store, rid) if f.category == "host_sync"]


def test_host_sync_on_the_real_ascend_sample(tmp_path):
    store = _store(tmp_path, REAL_LEVEL2)
    ((rid, _),) = _runs(store).values()
    (f,) = [f for f in device_findings(store, rid) if f.category == "host_sync"]
    assert (f.evidence["calls"], f.evidence["per_step"], f.impact_ns) == (29, {"50": 29}, 7_120_740)
    top = f.evidence["callers"][0]
    assert (top["call"], top["calls"], top["idle_ns"]) == (
        "AscendCL@aclrtSynchronizeStreamWithTimeout",
        2,
        4_288_443,
    )
    # printing a tensor: .item() called from Tensor.__format__, its CANN-side sync counted once with it
    assert ("torch/_tensor.py(929): __format__", "aten::item", 4) in [
        (c["caller"], c["call"], c["calls"]) for c in f.evidence["callers"]
    ]
    assert "aclrtSynchronizeStream" in f.suggestion and "CUDA" not in f.suggestion


def test_host_sync_on_the_cuda_corpus(tmp_path, corpus):
    nsys = corpus / "cuda" / "nsys-sqlite-dlprof" / "nsys_profile_nsys2022.1_pytorch_pyprof_nvtx.sqlite"
    hta = corpus / "cuda" / "hta" / "negative_queue_length_values_check__rank0.json.gz"
    store = _store(tmp_path, nsys, hta)
    runs = _runs(store)
    by_run = {
        name: [f for f in device_findings(store, rid) if f.category == "host_sync"]
        for name, (rid, _) in runs.items()
    }
    (a,), (b,) = by_run[nsys.name], by_run[hta.name]
    assert (a.evidence["calls"], a.impact_ns, a.evidence["callers"][0]["call"]) == (
        15,
        621_536,
        "cudaEventSynchronize",
    )
    assert (b.evidence["calls"], b.evidence["steps"]) == (537, 5)
    assert b.evidence["per_step"] == {"550": 110, "551": 108, "552": 103, "553": 111, "554": 105}
    assert (b.evidence["callers"][0]["kind"], b.evidence["callers"][0]["calls"]) == ("d2h_copy", 30)


@pytest.mark.parametrize("rule", sync_rules(), ids=lambda r: r.example)
def test_host_sync_call_rule(rule):
    assert re.search("(?i)" + rule.pattern, rule.example)
    assert not re.search("(?i)" + rule.pattern, "cudaLaunchKernel")
    assert not re.search("(?i)" + rule.pattern, "aten::itemsize")


def test_postmortem_page_offers_a_rocm_run_as_gpu_baseline_not_cuda(tmp_path, monkeypatch):

    store = _store(tmp_path, REAL_AICPU_TRACE, ROCM_TRACE, CUDA_TRACE)
    runs = _runs(store)
    db = store.path
    store.close()
    at = open_page(monkeypatch, db, "app_pages/09_postmortem.py")
    box = at.selectbox(key="pm_baseline")
    assert box.label == "GPU baseline (optional: CUDA or ROCm)"
    rocm, cuda = runs[ROCM_TRACE.name][0], runs[CUDA_TRACE.name][0]
    assert box.format_func(rocm).endswith("· GPU baseline (ROCm)")
    assert "ROCm" not in box.format_func(cuda)


def test_host_sync_counts_an_ascend_device_to_host_copy(tmp_path):
    # torch_npu writes the copy's direction as "device to host" (Kineto: "DtoH") and its launch as a cann_api row
    run = tmp_path / "rank0_ascend_pt"
    shutil.copytree(REAL_LEVEL2, run)
    trace = run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    text = trace.read_text()
    assert text.count('"memcpy direction": "host to device"') == 2  # the two aclrtMemcpyAsync copies
    trace.write_text(
        text.replace('"memcpy direction": "host to device"', '"memcpy direction": "device to host"')
    )
    store = _store(tmp_path, run)
    ((rid, platform),) = _runs(store).values()
    total = breakdown(store, rid).total
    sync = host_sync(store, rid, platform, total.start_ns, total.end_ns)
    copies = [c for c in sync.callers if c["kind"] == "d2h_copy"]
    assert [(c["call"], c["calls"]) for c in copies] == [("AscendCL@aclrtMemcpyAsync", 2)]
