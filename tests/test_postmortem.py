"""The incident postmortem (diag.analyses.postmortem), its renderings (diag.report) and ``diag report``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from diag.analyses.compare import compare
from diag.analyses.postmortem import build_postmortem
from diag.report import to_html, to_json, to_markdown
from diag.store import Store
from tests.conftest import SAMPLES, ingest_into, run_cli

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
    summary = ingest_into(store, paths)
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
    assert pm.run_id is None and pm.episode == 1  # no run: the latest incident episode, named
    assert pm.scope.startswith("latest incident episode #1 (") and name in pm.scope
    assert pm.root_cause and pm.root_cause["source"] == "log" and pm.root_cause["category"] == category
    lines = pm.root_cause["statement"]["evidence"]["log_lines"]
    hit = [ln for ln in lines if key in ln["raw"]]
    assert hit and hit[0]["file"].endswith(name) and hit[0]["line_no"] >= 1
    assert pm.what_happened and "First error" in pm.what_happened[0].text
    assert pm.actions and all(a.evidence.get("from") for a in pm.actions)
    md, page = to_markdown(pm), to_html(pm)
    # fenced, verbatim, under the file's shortest unambiguous tail (here its name: one file in the store)
    assert (
        f"\n  {name}:{hit[0]['line_no']}: " in md
        and key in md
        and "/work/" not in md.split("## Environment")[0]
    )
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


def _app(db: Path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    monkeypatch.setenv("DIAG_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=60)
    at.run()
    at.switch_page("app_pages/09_postmortem.py").run()
    assert not at.exception, at.exception
    return at


def _release_app_store(db: Path) -> None:
    """The app keeps its DuckDB file open (st.cache_resource); close it so that the CLI can open the file."""
    import streamlit as st

    from app import data

    data._store(str(db))[0].close()
    st.cache_resource.clear()


def test_postmortem_page(pair, monkeypatch):
    store, ascend, cuda = pair
    db = store.path
    store.close()
    at = _app(db, monkeypatch)
    at.selectbox(key="pm_baseline").select(cuda).run()
    at.text_input(key="pm_note_title").input("Decode is slow on Ascend").run()
    assert not at.exception, at.exception
    heads = [h.value for h in at.header] + [h.value for h in at.subheader]
    assert "Decode is slow on Ascend" in heads and "Baseline comparison: top op classes losing time" in heads
    # one rank of the TP=2 job beside a CUDA run: no job the evidence groups, so no job postmortem is offered
    at.radio(key="pm_scope").set_value("A job (every rank)").run()
    assert not at.exception and [i.value for i in at.info][0].startswith("No multi-rank job")


def test_notes_are_saved_with_the_run_and_the_job(pair, monkeypatch):
    store, ascend, cuda = pair
    ingest_into(
        store, [TP2]
    )  # rank 1 too: the page offers only jobs the evidence groups (a one-run job is not)
    (job_id,) = [
        r[0] for r in store.cursor().execute("SELECT DISTINCT job_id FROM runs WHERE rank = 1").fetchall()
    ]
    db = store.path
    store.close()
    at = _app(db, monkeypatch)
    assert at.selectbox(key="pm_run").value == ascend
    at.text_input(key="pm_note_title").input("Decode <b>slow</b> on Ascend").run()
    at.text_input(key="pm_note_owner").input("sre-oncall").run()
    at.text_area(key="pm_note_summary").input("AI_CPU ArgMax on every step.").run()
    at.text_area(key="pm_note_follow_ups").input("- move ArgMax to AI Core\n- [ticket](http://x)").run()
    assert not at.exception, at.exception
    # a fresh session (a reload, another user) opens the page with the saved notes
    again = _app(db, monkeypatch)
    assert again.text_input(key="pm_note_title").value == "Decode <b>slow</b> on Ascend"
    assert again.text_input(key="pm_note_owner").value == "sre-oncall"
    assert again.header[0].value == r"Decode \<b\>slow\</b\> on Ascend"  # as text, not HTML
    assert r"Owner: sre\-oncall" in [c.value for c in again.caption]
    # the job scope has notes of its own
    again.radio(key="pm_scope").set_value("A job (every rank)").run()
    assert not again.exception, again.exception
    assert again.text_input(key="pm_note_title").value == ""
    again.text_input(key="pm_note_title").input("TP=2 decode job").run()
    _release_app_store(db)
    # the CLI reports what the app saved, in all three formats
    for fmt in ("json", "md", "html"):
        proc = run_cli("report", "--run", str(ascend), "--format", fmt, "--db", str(db))
        assert proc.returncode == 0, proc.stderr
        if fmt == "json":
            notes = json.loads(proc.stdout)["notes"]
            assert notes["title"] == "Decode <b>slow</b> on Ascend" and notes["owner"] == "sre-oncall"
            assert notes["follow_ups"].startswith("- move ArgMax") and notes["updated_at"]
        elif fmt == "md":
            assert (
                r"AI\_CPU ArgMax on every step\." in proc.stdout and r"\[ticket\]\(http://x\)" in proc.stdout
            )
        else:
            assert (
                "<h1>Decode &lt;b&gt;slow&lt;/b&gt; on Ascend</h1>" in proc.stdout
                and "sre-oncall" in proc.stdout
            )
    job = json.loads(run_cli("report", "--job", str(job_id), "--format", "json", "--db", str(db)).stdout)
    assert job["notes"]["title"] == "TP=2 decode job" and "owner" not in job["notes"]
    # clearing a field clears it in the store
    again = _app(db, monkeypatch)
    again.radio(key="pm_scope").set_value("A job (every rank)").run()
    assert again.text_input(key="pm_note_title").value == "TP=2 decode job"
    again.text_input(key="pm_note_title").input("").run()
    _release_app_store(db)
    job = json.loads(run_cli("report", "--job", str(job_id), "--format", "json", "--db", str(db)).stdout)
    assert job["notes"] == {}


# -- a whole job: a TP=2 incident built from the generated sample ---------------------------------------------
TP2 = SAMPLES / "generated" / "llm_decode_tp2"
H8 = 8 * 3600 * 10**9  # the plogs are written in UTC+08:00, the trace in UTC
RANK1_PLOG = (
    "[INFO] RUNTIME(3003034,python3):2025-01-15-17:33:20.990.001 [runtime.cc:100] 3003034 Init: device 1 ready\n"
    "[ERROR] RUNTIME(3003034,python3):2025-01-15-17:33:21.000.100 [device_error_proc.cc:1409] 3003034 "
    "ProcessStarsCoreErrorInfo: The error from device(chipId:1, dieId:0), serial number is 7, there is an aicpu "
    "error exception, core id is 3, error code = 0\n"
    "[ERROR] RUNTIME(3003034,python3):2025-01-15-17:33:21.000.260 [api_error.cc:1020] 3003034 "
    "rtStreamSynchronizeWithTimeout: wait for compute device to finish failed, runtime result = 507018\n"
)
RANK0_PLOG = (
    "[ERROR] HCCL(1716292,python3):2025-01-15-17:35:21.003.044 [task_exception_handler.cc:908] [1716292]"
    "[TaskExecStage][Timeout][Host]Task run failed, base information is streamID:[2], taskID[21], "
    "tag[AllReduce_group_name_1], AlgType(level 0-1-2):[fullmesh-ring-NHR].\n"
)
# inside rank 1's step 12 (17:33:20.986788060 to .991855710 on the log clock)
RANK1_STEP12_OOM = (  # two fatal records with their own time (a line without one is not placed in a step)
    "[ERROR] RUNTIME(3003034,python3):2025-01-15-17:33:20.989.000 [npu_allocator.cc:210] 3003034 Malloc: "
    "allocate device memory failed, size=23068672\n"
    "[ERROR] RUNTIME(3003034,python3):2025-01-15-17:33:20.989.050 [npu_allocator.cc:230] 3003034 Malloc: "
    "Memory_Allocation_Failure(EL0004): Failed to allocate memory.\n"
    "RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB (NPU 1; 60.97 GiB total capacity)\n"
)


def _incident_job(tmp_path: Path, rank1_extra: str = "") -> Path:
    """Rank 1 dies of an AI CPU exception in step 14: its trace is cut there (a killed profiler) and its
    step_trace_time.csv stops at step 13; rank 0 finishes step 14 and logs an HCCL timeout 120 s later.
    Rank 1 also runs another CANN version."""
    if not TP2.is_dir():
        pytest.skip("sample_traces/generated is not bundled")
    job = tmp_path / "tp2_incident"
    shutil.copytree(TP2, job, ignore=shutil.ignore_patterns("ground_truth.json"))
    r0, r1 = sorted(job.glob("rank0_*")) + sorted(job.glob("rank1_*"))
    out = r1 / "ASCEND_PROFILER_OUTPUT"
    trace = (out / "trace_view.json").read_bytes()
    cut = trace.index(b'"aclnnArgMax_ArgMaxV2AiCpu_ArgMaxV2"', trace.index(b'"ProfilerStep#13"')) - 200
    (out / "trace_view.json").write_bytes(trace[:cut])
    rows = (out / "step_trace_time.csv").read_text().splitlines(keepends=True)
    (out / "step_trace_time.csv").write_text("".join(r for r in rows if not r.startswith("14,")))
    info = r1 / "profiler_info_1.json"
    info.write_text(info.read_text().replace('"cann_version": "8.0.RC3"', '"cann_version": "8.0.RC2"'))
    for run, pid, text in ((r0, 1716292, RANK0_PLOG), (r1, 3003034, rank1_extra + RANK1_PLOG)):
        (run / "log" / "debug" / "plog").mkdir(parents=True)
        (run / "log" / "debug" / "plog" / f"plog-{pid}_20250115173320983.log").write_text(text)
    return job


def _job_store(tmp_path: Path, job: Path) -> Store:
    store = _ingest(tmp_path / "job.duckdb", job)
    ids = store.cursor().execute("SELECT DISTINCT job_id FROM runs").fetchall()
    assert ids == [(1,)]
    return store


def test_job_postmortem_of_a_multi_rank_incident(tmp_path):
    store = _job_store(tmp_path, _incident_job(tmp_path))
    pm = build_postmortem(store, job_id=1)
    assert pm.job_id == 1 and pm.run_id is None and "2 run(s), rank(s) 0, 1" in pm.scope
    assert pm.clock["log_offset_ns"] == H8 and "UTC+08:00" in pm.clock["basis"]
    # root cause over both ranks' logs: rank 1's device exception, not rank 0's later HCCL timeout
    rc = pm.root_cause
    assert rc["source"] == "log" and rc["category"] == "device_exception"
    line = rc["statement"]["evidence"]["log_lines"][0]
    assert "/rank1_" in line["file"] and line["line_no"] == 2 and "aicpu error exception" in line["raw"]
    # the incident timeline: rank 1's capture is cut, its first error, the cascade on rank 0, the end
    texts = [s.text for s in pm.what_happened]
    assert texts[0].startswith("2025-01-15 09:33:20.983578 — Capture of job tp2_incident: 2 rank(s)")
    assert "17:33:21.000087 — rank 1's capture ends inside step 14" in texts[1]
    assert "17:33:21.000100 — First error on rank 1: Device exception" in texts[2]
    assert "17:35:21.003044 — Cascade on rank 0, 120.003 s after the first error: HCCL" in texts[3]
    assert (
        texts[4].startswith("2025-01-15 17:35:21.003044 — End") and "2 of 2 rank(s) logged errors" in texts[4]
    )
    # failed steps: exactly rank 1's step 14, missing (rank 0 has it) and interrupted by the error
    assert [(f["rank"], f["step"], f["reasons"]) for f in pm.failed_steps] == [
        (1, 14, ["missing", "interrupted"])
    ]
    f = pm.failed_steps[0]
    assert (f["start_ns"], f["end_ns"]) == (
        1736933600994950940,
        1736933601000086584,
    )  # step 13's end → capture end
    assert (
        f["evidence"]["present_on_ranks"] == [0]
        and f["evidence"]["fatal_ns_trace_clock"] == 1736933601000100000
    )
    assert "ends 5.136 ms into step 14, 0.013 ms before" in f["detail"]
    assert pm.impact[0].text == "1 failed step(s) — rank 1: step(s) 14"
    assert pm.impact[0].evidence["figures"]["failed_per_rank"] == {"rank 0": 0, "rank 1": 1}
    assert pm.impact[0].evidence["figures"]["profiled_steps_per_rank"] == {"rank 0": 4, "rank 1": 3}
    assert pm.impact[1].evidence["log_lines"][0]["line_no"] == 2  # the failed step's own evidence
    # per-rank step time over the steps both completed (11-13): ProfilerStep windows
    step_time = next(s for s in pm.impact if s.text.startswith("Step time per rank"))
    assert step_time.text == (
        "Step time per rank over the 3 step(s) every rank completed (steps 11–13): slowest rank 0 3.766 ms, "
        "fastest rank 1 3.753 ms (+0.013 ms, 0.34%)"
    )
    assert step_time.evidence["figures"]["mean_step_ns_per_rank"] == {"rank 0": 3765920, "rank 1": 3753093}
    rows = {r["rank"]: r for r in pm.ranks}
    assert (rows[0]["steps"], rows[0]["step_mean_ns"], rows[0]["step_max_ns"], rows[0]["slowest_step"]) == (
        4, 4110115, 5142700, 14)  # fmt: skip
    assert (rows[1]["steps"], rows[1]["failed_steps"], rows[1]["first_fatal"]["line_no"]) == (3, [14], 2)
    assert rows[0]["first_fatal"]["category"] == "hccl_timeout"
    # device time lost, summed over the ranks: the AI_CPU fallback on both
    lost = next(s for s in pm.impact if s.text.startswith("Device time lost — cpu_fallback"))
    per_rank = lost.evidence["figures"]["per_rank_ns"]
    assert set(per_rank) == {"rank 0", "rank 1"} and lost.evidence["figures"]["total_ns"] == sum(
        per_rank.values()
    )
    # environment: the mismatched CANN version is flagged, the shared torch_npu version reported once
    assert pm.environment["torch_npu_version"] == "2.5.1" and "cann_version" not in pm.environment
    diff = {d["key"]: d["values"] for d in pm.environment_diff}
    assert diff == {"cann_version": {"rank 0": "8.0.RC3", "rank 1": "8.0.RC2"}}
    assert any(s.text.startswith("Ranks differ in cann_version") for s in pm.contributing)
    md, page = to_markdown(pm), to_html(pm)
    assert r"⚠ **ranks differ** in cann\_version: rank 0: 8\.0\.RC3; rank 1: 8\.0\.RC2" in md
    assert "| 1 | 2 | 3 \\(profiler\\_step\\) | 3\\.753 | 5\\.068 \\(step 12\\) | 14 |" in md
    assert "<td>14</td>" in page and "ranks differ</b> in cann_version" in page
    assert json.loads(to_json(pm))["failed_steps"][0]["step"] == 14
    store.close()


def test_run_postmortem_counts_the_runs_failed_steps(tmp_path):
    store = _job_store(tmp_path, _incident_job(tmp_path, RANK1_STEP12_OOM))
    rank1 = build_postmortem(store, 2)
    got = {f["step"]: f["reasons"] for f in rank1.failed_steps}
    assert got == {12: ["error"], 14: ["missing", "interrupted"]}
    step12 = next(f for f in rank1.failed_steps if f["step"] == 12)
    assert (
        step12["evidence"]["fatal_records"] == 2
    )  # the two timed records; the RuntimeError line has no time
    first = step12["evidence"]["log_lines"][0]
    assert first["category"] == "oom" and first["line_no"] == 1 and first["ts_ns"] == 1736933600989000000 + H8
    assert (step12["start_ns"], step12["end_ns"]) == (1736933600986788060, 1736933600991855710)
    assert rank1.impact[0].text == "2 failed step(s) — rank 1: step(s) 12, 14"
    rank0 = build_postmortem(store, 1)
    assert rank0.failed_steps == [] and rank0.impact[0].text == "0 failed step(s) in 4 profiled step(s)"
    store.close()


@pytest.mark.corpus
def test_job_postmortem_of_the_level2_corpus_job(corpus, tmp_path):
    """msinsight's 4-rank level2 sample: ranks 1 and 3 have only step_trace_time.csv, no logs."""
    level2 = corpus / "ascend" / "msinsight" / "test" / "st" / "level2"
    store = _ingest(tmp_path / "l2.duckdb", level2)
    pm = build_postmortem(store, job_id=1)
    assert [(r["rank"], r["step_source"], r["steps"], r["step_mean_ns"]) for r in pm.ranks] == [
        (0, "step_trace", 1, 810022250),
        (1, "step_trace", 1, 809431750),
        (2, "step_trace", 1, 809803250),
        (3, "step_trace", 1, 810150250),
    ]
    assert pm.failed_steps == [] and pm.impact[0].text == "0 failed step(s) in 4 profiled step(s)"
    assert pm.impact[1].text == (
        "Step time per rank over the 1 step(s) every rank completed (step 13): slowest rank 3 810.150 ms, "
        "fastest rank 1 809.432 ms (+0.719 ms, 0.09%)"
    )
    assert pm.clock["log_offset_ns"] is None and pm.environment_diff == []
    assert pm.environment["cann_version"] == "8.3.RC1" and pm.environment["ranks"] == 4
    # no logs: the root cause is the largest device finding over the ranks with device data (0 and 2)
    assert pm.root_cause["source"] == "device" and pm.root_cause["category"] == "communication"
    comm = next(s for s in pm.impact if s.text.startswith("Device time lost — communication"))
    assert comm.evidence["figures"]["per_rank_ns"] == {"rank 0": 420174260, "rank 2": 277649660}
    store.close()


def test_cli_report_job(tmp_path):
    store = _job_store(tmp_path, _incident_job(tmp_path))
    db = store.path
    store.close()
    proc = run_cli("report", "--job", "1", "--format", "json", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["job_id"] == 1 and out["run_id"] is None and out["clock"]["log_offset_ns"] == H8
    assert [r["rank"] for r in out["ranks"]] == [0, 1] and out["ranks"][1]["failed_steps"] == [14]
    assert (
        out["environment_diff"][0]["key"] == "cann_version"
        and out["root_cause"]["category"] == "device_exception"
    )
    proc = run_cli("report", "--job", "7", "--format", "md", "--db", str(db))
    assert proc.returncode != 0 and "no run in job 7" in proc.stderr + proc.stdout
    proc = run_cli("report", "--job", "1", "--run", "1", "--db", str(db))
    assert proc.returncode != 0
    # the README documents every key of the JSON report, and of a rank row and a failed step
    from tests.conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    doc = readme[readme.index("`diag report [--run ID | --job ID") :]
    doc = doc[: doc.index("\n## ")]
    keys = set(out) | set(out["ranks"][0]) | set(out["failed_steps"][0]) | set(out["clock"])
    assert not {k for k in keys if f'"{k}"' not in doc}, (
        "keys of diag report --format json missing from README"
    )


@pytest.mark.browser
def test_job_report_html_renders_offline_in_chromium(tmp_path):
    """The HTML opens in headless Chromium with the network off; the screenshot lands in tmp_path."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed")
    store = _job_store(tmp_path, _incident_job(tmp_path))
    page = tmp_path / "job.html"
    page.write_text(to_html(build_postmortem(store, job_id=1)), encoding="utf-8")
    store.close()
    shot = tmp_path / "job.png"
    import subprocess

    proc = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9",
         "--proxy-bypass-list=<-loopback>", "--window-size=1200,2400", f"--screenshot={shot}", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert shot.is_file() and shot.stat().st_size > 20_000  # a rendered page, not a blank one


def test_report_evidence_is_tables_not_json(pair):
    """Both downloads show evidence as tables in ms from the run's start; the JSON keeps the raw dicts."""
    store, ascend, cuda = pair
    pm = build_postmortem(store, ascend)
    md, page, js = to_markdown(pm), to_html(pm), json.loads(to_json(pm))
    assert "```json" not in md and not re.search(r"\b1[67]\d{17}\b", md)  # no epoch ns
    row = r"| ArgMaxV2 | 4 | 0\.986 | aclnnArgMax\_ArgMaxV2AiCpu\_ArgMaxV2 | FLOAT;INT64 \-\> INT64 | 16,152064; | aclnnArgMax |"
    block = md.split(row)[0].rsplit("<details><summary>evidence</summary>", 1)[1]
    assert (
        "</details>" not in block and "| op | calls | total (ms) |" in block
    )  # the table, inside its details
    assert r"  Time range: 0\.713 → 16\.492 ms from the run's start \(15\.778 ms\)" in md
    assert md.count("<details>") == md.count("</details>") and page.count("<details>") == page.count(
        "</details>"
    )
    assert "<details><summary>evidence</summary><p><b>ops</b></p><table><tr><th>op</th><th>calls</th>" in page
    assert "<td>ArgMaxV2</td><td>4</td><td>0.986</td>" in page and '"total_ns"' not in page
    cpu = next(s for s in js["impact"] if "AI_CPU" in s["text"])
    assert cpu["evidence"]["ops"]["ops"][0]["total_ns"] == 986331  # --json: the dict, unchanged
