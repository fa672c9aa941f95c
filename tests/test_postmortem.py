"""The incident postmortem (diag.analyses.postmortem), its renderings (diag.report) and ``diag report``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from diag.analyses.compare import compare
from diag.analyses.postmortem import build_postmortem
from diag.ingest import Ingestor
from diag.report import to_html, to_json, to_markdown
from diag.store import Store
from tests.conftest import SAMPLES, run_cli

ASCEND_RANK0 = next((SAMPLES / "generated" / "llm_decode_tp2").glob("rank0_*_ascend_pt"), None)
CUDA_TWIN = SAMPLES / "generated" / "llm_decode_cuda"

CASES = {  # file: (category, key line) — from ../shared/corpus/cann_logs/INDEX.md
    "042_oom_ei0011_qp_device_memory_hicann_hccl.log": (
        "oom",
        "Resource_Error_Insufficient_Device_Memory(EI0011)",
    ),
    "006_oom_vllm_ascend_19.log": ("oom", "NPU out of memory. Tried to allocate 22.00 MiB"),
    "035_hccl_task_exception_timeout_plog_hicann_hccl.log": (
        "hccl_timeout",
        "Task run failed, base information is streamID:[2]",
    ),
    "001_aivec_ez9999_vllm_ascend_2763.log": ("device_exception", "there is an exception of aivec error"),
    "046_op_not_found_aclnn_libopapi_lightning_indexer_vllm_ascend_5056.log": (
        "op_unsupported",
        "aclnnLightningIndexerGetWorkspaceSize not in libopapi.so",
    ),
    "028_version_atb_undefined_symbol_cann850_ascend_pytorch_99.log": (
        "version_mismatch",
        "undefined symbol",
    ),
}


def _ingest(db: Path, *paths: Path) -> Store:
    store = Store(db)
    ing = Ingestor(store)
    try:
        summary = ing.ingest(list(paths))
    finally:
        ing.close()
    assert not [f for f in summary.files if f.status == "failed"], [f.message for f in summary.files]
    return store


@pytest.fixture
def cann_logs(corpus: Path) -> Path:
    folder = corpus / "cann_logs"
    if not (folder / "INDEX.md").is_file():
        pytest.skip("../shared/corpus/cann_logs is not present")
    return folder


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(CASES))
def test_postmortem_of_a_real_log(cann_logs, tmp_path, name):
    category, key = CASES[name]
    index = (cann_logs / "INDEX.md").read_text()
    assert re.search(rf"^\| `{re.escape(name)}` \|[^|]+\| `{category}` \|", index, re.M)
    store = _ingest(tmp_path / "db.duckdb", cann_logs / name)
    pm = build_postmortem(store)
    assert pm.run_id is None and pm.scope == "every log in the store"
    assert pm.root_cause and pm.root_cause["source"] == "log" and pm.root_cause["category"] == category
    lines = pm.root_cause["statement"]["evidence"]["log_lines"]
    hit = [ln for ln in lines if key in ln["raw"]]
    assert hit and hit[0]["file"].endswith(name) and hit[0]["line_no"] >= 1
    assert pm.what_happened and "First error" in pm.what_happened[0].text
    assert pm.actions and all(a.evidence.get("from") for a in pm.actions)
    md, page = to_markdown(pm), to_html(pm)
    assert f"{hit[0]['file']}:{hit[0]['line_no']}: " in md and key in md  # fenced, verbatim
    assert category.replace("_", r"\_") in md
    import html

    assert html.escape(key) in page
    assert json.loads(to_json(pm))["root_cause"]["category"] == category
    store.close()


@pytest.fixture
def pair(tmp_path) -> tuple[Store, int, int]:
    if ASCEND_RANK0 is None or not CUDA_TWIN.is_dir():
        pytest.skip("sample_traces/generated is not bundled")
    store = _ingest(tmp_path / "pair.duckdb", ASCEND_RANK0, CUDA_TWIN)
    rows = store.cursor().execute("SELECT run_id, platform FROM runs ORDER BY run_id").fetchall()
    ascend = next(r for r, p in rows if p == "ascend")
    cuda = next(r for r, p in rows if p == "cuda")
    yield store, ascend, cuda
    store.close()


def test_baseline_top_losses_match_compare(pair):
    store, ascend, cuda = pair
    cmp = compare(store, ascend, cuda)
    losses = cmp.top_losses(3)
    assert len(losses) == 3
    pm = build_postmortem(store, ascend, cuda)
    assert [c["op_class"] for c in pm.comparison["top_losses"]] == [c.op_class for c in losses]
    assert [c["delta_per_step_ms"] for c in pm.comparison["top_losses"]] == [
        c.delta_per_step_ms for c in losses
    ]
    e2e = next(o for o in cmp.overall if o["bucket"] == "e2e")
    assert pm.comparison["e2e"] == e2e
    md, page = to_markdown(pm), to_html(pm)
    for c in losses:
        row = f"{c.per_step_a_ns / 1e6:.3f} | {c.per_step_b_ns / 1e6:.3f} | {c.ratio:.2f} | {c.delta_per_step_ms:.3f} |"
        assert row in md, row
        assert f"<td>{c.delta_per_step_ms:.3f}</td>" in page
        assert any(
            c.op_class in s.text and f"{c.delta_per_step_ms:.3f} ms per step" in s.text for s in pm.impact
        )
    assert f"{e2e['ratio']:.2f}×".replace(".", r"\.") in md and f"{e2e['ratio']:.2f}×" in page
    # the device story: the breakdown's figures, the AI-CPU fallback as a contributing factor, the environment
    assert pm.chart and sum(c["ns"] for c in pm.chart) == pm.what_happened[0].evidence["figures"]["e2e_ns"]
    assert pm.root_cause and pm.root_cause["source"] == "device"
    assert any("AI_CPU" in s.text or "AI_CPU" in s.evidence.get("ops", {}).__repr__() for s in pm.impact)
    assert (
        pm.environment["platform"] == "ascend"
        and "ASCEND_GLOBAL_LOG_LEVEL" in pm.environment["env_variables"]
    )
    assert "<svg" in page


EVIL = (
    "[ERROR] RUNTIME(3813,python3):2025-01-10-17:53:52.846.403 [device_error_proc.cc:1409] 3813 "
    "ProcessStarsCoreErrorInfo: there is an aivector error exception <script>alert(1)</script> "
    "[click](http://evil) ```x"
)


def _evil_postmortem(tmp_path: Path):
    log = tmp_path / "evil[x](javascript:alert).log"
    log.write_text(EVIL + "\n", encoding="utf-8")
    store = _ingest(tmp_path / "evil.duckdb", log)
    pm = build_postmortem(store)
    store.close()
    lines = pm.root_cause["statement"]["evidence"]["log_lines"]
    assert any(ln["raw"] == EVIL for ln in lines), lines  # the hostile line is real evidence
    pm.notes = {"title": "<img src=x onerror=alert(1)>", "follow_ups": "[click](http://evil)"}
    return pm


def test_untrusted_text_is_escaped(tmp_path):
    pm = _evil_postmortem(tmp_path)
    page = to_html(pm)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page and "[x](javascript:alert).log" in page  # a path, as text
    assert "<script" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert "http" not in " ".join(re.findall(r"""(?:src|href)\s*=\s*["'][^"']*["']""", page, re.I))
    md = to_markdown(pm)
    fence = re.search(r"^\s*(`{4,})text\n((?:.*\n)*?)\s*\1$", md, re.M)  # EVIL has ``` so the fence is ≥ 4
    assert fence and EVIL in fence.group(2) and "evil[x](javascript:alert).log:1: " in fence.group(2)
    outside = md.replace(fence.group(0), "")
    assert "[click](http://evil)" not in outside and r"\[click\]\(http://evil\)" in outside
    assert not re.search(r"(?<!\\)<(img|script)", outside) and r"\<img src=x onerror=alert\(1\)\>" in md


def test_html_is_self_contained_and_small(pair):
    store, ascend, cuda = pair
    pm = build_postmortem(store, ascend, cuda)
    many = pm.impact[0]
    pm.impact = [many] * 100_000  # a huge run: tables are capped
    pm.contributing = [many] * 100_000
    page = to_html(pm)
    assert len(page.encode()) < 5_000_000 and "100 more" not in page and "99980 more" in page
    assert "<script" not in page.lower() and "<link" not in page.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?[^"'>]*http""", page, re.I)


def test_cli_report_json_md_html(pair, tmp_path):
    store, ascend, cuda = pair
    db = store.path
    store.close()
    proc = run_cli(
        "report", "--run", str(ascend), "--baseline", str(cuda), "--format", "json", "--db", str(db)
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["run_id"] == ascend and out["baseline_run_id"] == cuda
    assert [c["op_class"] for c in out["comparison"]["top_losses"]] == [
        c.op_class for c in compare(Store(db, read_only=True), ascend, cuda).top_losses(3)
    ]
    target = tmp_path / "pm.html"
    proc = run_cli("report", "--run", str(ascend), "--format", "html", "-o", str(target), "--db", str(db))
    assert proc.returncode == 0 and proc.stdout == "" and target.read_text().startswith("<!DOCTYPE html>")
    proc = run_cli("report", "--format", "md", "--db", str(db))
    assert proc.returncode == 0 and proc.stdout.startswith("# ")
    proc = run_cli("report", "--run", "999", "--format", "md", "--db", str(db))
    assert proc.returncode != 0 and "999" in (proc.stderr + proc.stdout)


def test_postmortem_page(pair, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    store, ascend, cuda = pair
    db = store.path
    store.close()
    monkeypatch.setenv("DIAG_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=60)
    at.run()
    at.switch_page("app_pages/09_postmortem.py").run()
    assert not at.exception, at.exception
    at.selectbox(key="pm_baseline").select(cuda).run()
    at.text_input(key="pm_note_title").input("Decode is slow on Ascend").run()
    assert not at.exception, at.exception
    md = "\n".join(m.value for m in at.markdown)
    assert "# Decode is slow on Ascend" in md and "top op classes losing time" in md
