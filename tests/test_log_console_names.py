"""A file named as console output (``*.log``, ``*.out``, ``*.err``) is read as a log whatever its line format; a
``*.txt`` still needs log-ish lines (issue #16: real .log pastes whose lines carry no logger prefix diag knows were
refused as "content not recognised")."""

from __future__ import annotations

from pathlib import Path

import pytest

from parsers import cann_log
from parsers._base import Probe

WILD = Path(__file__).parent / "fixtures" / "logs_wild"

# HIP's AMD_LOG_LEVEL trace (clr rocclr/utils/debug.cpp: ":<level>:<file> :<line> : <us> us: [pid:… tid:…] …")
HIP_TRACE = ":3:hip_platform.cpp         :703 : 3169198286 us: [pid:9111  tid:0x79a41865cb80] init: Returned hipSuccess\n"
GLOG_YEAR = "I20251111 12:28:58.490254 215011 worker_server.cpp:72] Create worker server with device: 0\n"


@pytest.mark.parametrize("name", ["run.log", "job.out", "job.err", "serve.stdout"])
@pytest.mark.parametrize("text", [HIP_TRACE, GLOG_YEAR])
def test_console_named_text_is_a_log(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert cann_log.detect(Probe.of(path))


def test_txt_needs_log_lines(tmp_path: Path) -> None:
    notes = tmp_path / "requirements.txt"
    notes.write_text("numpy==1.26.4\npolars==1.9.0\n", encoding="utf-8")
    assert not cann_log.detect(Probe.of(notes))
    glog = tmp_path / "worker.txt"
    glog.write_text(GLOG_YEAR, encoding="utf-8")  # glog with the year is a log-ish line (glog >= 0.7)
    assert cann_log.detect(Probe.of(glog))


def test_json_and_binary_named_log_are_not_logs(tmp_path: Path) -> None:
    js = tmp_path / "trace.log"
    js.write_text('{"traceEvents": []}', encoding="utf-8")
    assert not cann_log.detect(Probe.of(js))
    binary = tmp_path / "core.log"
    binary.write_bytes(bytes(range(1, 32)) * 200)
    assert not cann_log.detect(Probe.of(binary))


def test_etcd_key_not_found_at_start_up_is_noise(tmp_path: Path) -> None:
    """w3_021 (xLLM issue #376, a real master start-up): read as a log now, its ERROR-level etcd lookup miss is
    normal output, not an unclassified error."""
    from diag.analyses.log_diagnosis import log_scope
    from diag.ingest import Ingestor
    from diag.store import Store

    src = WILD / "w3_021_noise_xllm_master_start_etcd_key_not_found_first_master_376.log"
    with Store(tmp_path / "d.duckdb") as store:
        ingestor = Ingestor(store)
        try:
            summary = ingestor.run(*ingestor.collect([src]), jobs=1)
        finally:
            ingestor.close()
        assert [f.status for f in summary.files] == ["ok"]
        rule = store.con.execute(
            "select rule_id from log_records where raw like '%key not found%'"
        ).fetchone()
        assert rule == ("noise_etcd_key_not_found",)
        flagged = [c for c in log_scope(store).causes if c.severity in ("high", "medium")]
        assert flagged == []


def _top_cause(tmp_path: Path, src: Path):  # type: ignore[no-untyped-def]
    from diag.analyses.log_diagnosis import log_scope
    from diag.ingest import Ingestor
    from diag.store import Store

    with Store(tmp_path / "d.duckdb") as store:
        ingestor = Ingestor(store)
        try:
            ingestor.run(*ingestor.collect([src]), jobs=1)
        finally:
            ingestor.close()
        causes = log_scope(store).causes
    return causes[0] if causes else None


def test_an_unplaced_failure_line_is_a_low_unclassified_error(tmp_path: Path) -> None:
    """w10_011 (ipex-llm #12872, a real llama.cpp SYCL paste with no logger level): no rule places its UR backend
    failure; the earliest line with failure words is reported as an unclassified error at LOW severity — shown,
    never flagged (medium / high), never a named category."""
    top = _top_cause(tmp_path, WILD / "w10_011_sycl_ur_out_of_resources_llamacpp_ipex_llm_12872.log")
    assert top is not None
    assert (top.category, top.severity) == ("unclassified_error", "low")
    assert (
        "UR backend failed. UR backend returns:40 (UR_RESULT_ERROR_OUT_OF_RESOURCES)" in top.evidence[0].raw
    )


def test_a_stop_a_rule_placed_leads_the_last_resort_line(tmp_path: Path) -> None:
    """w4_035 (CPPO #6, torchrun's failure table): the table's "<script> FAILED" line has failure words, but the
    SIGKILL stop a rule placed still leads (raised to low as an unexplained stop), not the last-resort line."""
    top = _top_cause(tmp_path, WILD / "w4_035_torchrun_rank0_sigkill_grpo_accelerate_cppo_6.log")
    assert top is not None
    assert (top.category, top.severity) == ("abort", "low")
    assert "Signal 9 (SIGKILL) received by PID 14750" in top.evidence[0].raw


def test_the_last_resort_rule_needs_a_line_without_a_level(tmp_path: Path) -> None:
    """A WARNING / INFO line saying "failed" is the logger's judgement (often benign): the last resort reads only
    unlevelled lines, so this file flags and shows nothing."""
    log = tmp_path / "serve.log"
    log.write_text(
        "INFO 05-02 10:00:01 [api_server.py:100] health check failed once, retrying\n"
        "WARNING 05-02 10:00:02 [api_server.py:101] could not reach the metrics endpoint\n",
        encoding="utf-8",
    )
    top = _top_cause(tmp_path, log)
    assert top is None or top.severity == "info"
