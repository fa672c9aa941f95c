"""The Timeline page under AppTest: platform-aware lanes and tiles, hovers in ms, and its widget state after
"Show on the timeline" from another page."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.conftest import REAL_AICPU_TRACE, SAMPLES, cli_json, open_page

CUDA_TRACE = SAMPLES / "generated" / "llm_decode_cuda" / "h100_decode_tp1.pt.trace.json"
TIMELINE = "app_pages/03_timeline.py"


@pytest.fixture(scope="module")
def tl_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("tl") / "tl.duckdb"
    code, _ = cli_json("ingest", str(CUDA_TRACE), str(REAL_AICPU_TRACE), "--db", str(db))
    assert code == 0
    return db


def _run_id(at, name: str) -> int:  # noqa: ANN001
    options = at.selectbox(key="tl_run").options
    return int(next(o for o in options if name in o).split(" · ")[0])


def _figure(at) -> dict:  # noqa: ANN001
    return json.loads(at.get("plotly_chart")[0].proto.spec)


def _timeline_on(monkeypatch, db: Path, name: str):  # noqa: ANN001, ANN202
    at = open_page(monkeypatch, db, TIMELINE)
    at.selectbox(key="tl_run").select(_run_id(at, name)).run()
    assert not at.exception, at.exception
    return at


def test_cuda_run_has_gpu_lanes_no_npu_and_no_ai_cpu_tile(monkeypatch, tl_db):
    at = _timeline_on(monkeypatch, tl_db, "h100_decode")
    fig = _figure(at)
    lanes = fig["layout"]["yaxis"]["categoryarray"]
    assert lanes == ["python · tid 4242", "GPU · Stream 7"]
    labels = [m.label for m in at.metric]
    assert "AI_CPU tasks in window" not in labels
    page_text = " ".join([c.value for c in at.caption] + labels + lanes)
    assert "NPU" not in page_text and "AI_CPU" not in page_text


def test_hovers_give_start_and_duration_in_ms(monkeypatch, tl_db):
    at = _timeline_on(monkeypatch, tl_db, "h100_decode")
    fig = _figure(at)
    kernels = next(t for t in fig["data"] if t["name"] == "CUDA_KERNEL")
    assert " ns" not in kernels["hovertemplate"] and "%{customdata[2]}" in kernels["hovertemplate"]
    times = {row[2] for row in kernels["customdata"]}
    assert all(t.startswith("start ") and " ms · dur " in t and t.endswith(" ms") for t in times)


def test_ascend_ai_cpu_tile_and_marker_hover_with_times(monkeypatch, tl_db):
    at = _timeline_on(monkeypatch, tl_db, "mstt_timeline_advice")
    assert {m.label: m.value for m in at.metric}["AI_CPU tasks in window"] == "2"
    fig = _figure(at)
    assert "NPU · Stream 3" in fig["layout"]["yaxis"]["categoryarray"]
    marker = next(t for t in fig["data"] if t["name"] == "AI_CPU (CPU fallback)")
    assert sorted(row[1] for row in marker["customdata"]) == [
        "start 13.527 ms · dur 0.188 ms",
        "start 13.730 ms · dur 0.139 ms",
    ]
    legend = fig["layout"]["legend"]
    assert (legend["orientation"], legend["yref"], legend["yanchor"]) == ("h", "container", "bottom")


def test_empty_lanes_are_not_drawn(monkeypatch, tl_db):
    at = _timeline_on(monkeypatch, tl_db, "mstt_timeline_advice")
    # 13.52–13.53 ms: only the AI_CPU task on the device and a few host rows run then
    at.slider[0].set_value((13.528, 13.529)).run()
    assert not at.exception, at.exception
    lanes = _figure(at)["layout"]["yaxis"]["categoryarray"]
    whole = 13  # the run's lanes (device, Overlap, host)
    assert 0 < len(lanes) < whole and "NPU · Stream 3" in lanes
    drawn = {y for t in _figure(at)["data"] for y in t.get("y", [])}
    assert set(lanes) == drawn


def _open_ai_cpu_op_from_fallback(monkeypatch, db: Path, caplog):  # noqa: ANN001, ANN202
    """Fallback page → "Show on the timeline", with Streamlit's Session State check live (AppTest has no runtime,
    so the check would return early)."""
    from streamlit.elements.lib import policies

    monkeypatch.setattr(policies.runtime, "exists", lambda: True)
    monkeypatch.setattr(policies, "_shown_default_value_warning", False)
    monkeypatch.setattr(
        policies._LOGGER, "propagate", True
    )  # Streamlit's loggers do not reach caplog otherwise
    at = open_page(monkeypatch, db, TIMELINE)
    at.selectbox(key="tl_run").select(_run_id(at, "mstt_timeline_advice")).run()
    at.switch_page("app_pages/05_fallback.py").run()
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        at.button(key="fb_tl_0").click().run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Timeline"
    return at


def test_show_on_timeline_sets_a_custom_window_without_state_warning(monkeypatch, tl_db, caplog):
    at = _open_ai_cpu_op_from_fallback(monkeypatch, tl_db, caplog)
    assert not [r.getMessage() for r in caplog.records if "Session State API" in r.getMessage()]
    picker = at.selectbox(key="tl_step")
    assert picker.value == "custom window" and "Choose an option" not in str(picker.proto)


def test_show_on_timeline_for_one_op_holds_only_that_op(monkeypatch, tl_db, caplog):
    at = _open_ai_cpu_op_from_fallback(monkeypatch, tl_db, caplog)
    fig = _figure(at)
    marker = next(t for t in fig["data"] if t["name"] == "AI_CPU (CPU fallback)")
    assert [row[0] for row in marker["customdata"]] == ["aclnnReduceSum_CastAiCpu_Cast"]
    device = [t for t in fig["data"] if t.get("type") == "bar" and "NPU · Stream 3" in t["y"]]
    names = {
        row[0]
        for t in device
        for row, y in zip(t["customdata"], t["y"], strict=True)
        if y == "NPU · Stream 3"
    }
    assert names == {"aclnnReduceSum_CastAiCpu_Cast"}
    assert {m.label: m.value for m in at.metric}["AI_CPU tasks in window"] == "1"
    assert any(
        c.value.startswith("Opened on the first call of **aclnnReduceSum_CastAiCpu_Cast**")
        for c in at.caption
    )


def test_page_offers_the_run_as_a_chrome_trace(monkeypatch, tl_db):
    from app import data

    at = _timeline_on(monkeypatch, tl_db, "mstt_timeline_advice")
    buttons = at.get("download_button")
    assert [b.proto.label for b in buttons] == ["Download as a Chrome / Perfetto trace (.json)"]
    trace = json.loads(data.chrome_trace_bytes(_run_id(at, "mstt_timeline_advice")))
    assert sum(1 for e in trace["traceEvents"] if e.get("cat") == "ai_cpu") == 2


def test_a_window_of_another_run_is_not_applied(monkeypatch, tl_db, caplog):
    at = _open_ai_cpu_op_from_fallback(monkeypatch, tl_db, caplog)
    at.session_state["run_id"] = _run_id(at, "h100_decode")  # another page selects the CUDA run
    at.switch_page(TIMELINE).run()
    assert not at.exception, at.exception
    assert at.selectbox(key="tl_step").value == "whole run"
    assert at.caption[0].value.startswith("208 events in this window, drawn one by one.")


def test_dense_window_hovers_give_the_bin_in_ms(monkeypatch, tl_db):
    from app import data

    monkeypatch.setattr(data, "TIMELINE_MAX_MARKS", 300)
    at = _timeline_on(monkeypatch, tl_db, "mstt_timeline_advice")
    heatmap = next(t for t in _figure(at)["data"] if t["type"] == "heatmap")
    assert "t=" not in heatmap["hovertemplate"] and "%{customdata[3]}" in heatmap["hovertemplate"]
    first = heatmap["customdata"][0][3]
    assert first.startswith("bin from ") and " ms · dur " in first and first.endswith(" ms"), first
    marker = next(t for t in _figure(at)["data"] if t["name"] == "AI_CPU (CPU fallback)")
    assert all(row[1].startswith("bin from ") for row in marker["customdata"])


def test_focus_window_padding_stops_before_a_neighbouring_op(tl_db):
    from app import data
    from diag.analyses import timeline

    store = data._store(str(tl_db))[0]  # the app's own store: DuckDB allows one configuration of a file
    cur = store.cursor()
    run = cur.execute("SELECT run_id FROM runs WHERE platform = 'cuda'").fetchall()[0][0]
    gemm, start, end = cur.execute(
        """SELECT name, start_ns, start_ns + dur_ns FROM device_tasks WHERE run_id = ? AND name LIKE 'sm90_xmma%'
           ORDER BY dur_ns DESC LIMIT 1""",
        [run],
    ).fetchall()[0]
    prev_end, next_start = cur.execute(
        """SELECT max(start_ns + dur_ns) FILTER (WHERE start_ns + dur_ns <= $s),
                  min(start_ns) FILTER (WHERE start_ns >= $e) FROM device_tasks WHERE run_id = $r""",
        {"s": start, "e": end, "r": run},
    ).fetchall()[0]
    # 5% padding (15,924 ns) would reach the kernels 2 µs before and after
    assert (end - start, start - prev_end, next_start - end) == (318_495, 2_000, 2_000)
    lo, hi, op = timeline.focus_window(store, run, start, end, (gemm,))
    assert (op, lo, hi) == (gemm, prev_end, next_start)
    tl = timeline.build_timeline(store, run, lo, hi)
    lanes, names = tl.events.column("lane").to_pylist(), tl.events.column("name").to_pylist()
    assert {n for lane, n in zip(lanes, names, strict=True) if lane == "GPU · Stream 7"} == {gemm}
