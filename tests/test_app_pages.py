"""Every page of the app under Streamlit's AppTest, on a database of the real sample traces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import FIXTURES, REAL_AICPU_TRACE, REAL_LEVEL2, ROOT, cli_json

MAIN = str(ROOT / "app" / "main.py")


@pytest.fixture
def app_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "app.duckdb"
    code, _ = cli_json("ingest", str(REAL_LEVEL2), str(REAL_AICPU_TRACE), "--db", str(db))
    assert code == 0
    monkeypatch.setenv("DIAG_DB", str(db))
    monkeypatch.setenv("DIAG_UPLOAD_DIR", str(tmp_path / "uploads"))
    return db


def query(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    """Through the app's own store: DuckDB allows one configuration of a file per process."""
    from app import data

    return data._store(str(db))[0].cursor().execute(sql, params or []).fetchall()


def _app() -> AppTest:
    at = AppTest.from_file(MAIN, default_timeout=60)
    at.run()
    assert not at.exception, at.exception
    return at


def test_runs_page_lists_runs_and_ai_cpu(app_db):
    at = _app()
    assert at.title[0].value == "Runs"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["runs"] == "2"
    assert metrics["AI_CPU tasks (CPU fallback)"] == "2"
    df = at.dataframe[0].value
    assert sorted(df["name"]) == ["msinsight_level2_rank0_ascend_pt", "mstt_timeline_advice"]
    assert int(df.loc[df["name"] == "mstt_timeline_advice", "AI_CPU tasks"].iloc[0]) == 2


def test_runs_page_deletes_a_run(app_db):
    at = _app()
    run_ids = [r[0] for r in query(app_db, "SELECT run_id FROM runs ORDER BY run_id")]
    at.selectbox(key="runs_select").select(run_ids[1]).run()
    at.checkbox(key="delete_sure").check().run()
    at.button(key="delete_run").click().run()
    assert not at.exception
    assert [r[0] for r in query(app_db, "SELECT run_id FROM runs")] == [run_ids[0]]
    assert query(app_db, "SELECT count(*) FROM device_tasks WHERE run_id = ?", [run_ids[1]]) == [(0,)]


def test_timeline_page_shows_ai_cpu_tasks(app_db):
    at = _app()
    aicpu_run = query(app_db, "SELECT run_id FROM runs WHERE name = 'mstt_timeline_advice'")[0][0]
    at.switch_page("app_pages/03_timeline.py").run()
    at.selectbox(key="tl_run").select(aicpu_run).run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["AI_CPU tasks in window"] == "2"
    assert "events in this window, drawn one by one" in at.caption[0].value


def test_timeline_page_aggregates_a_dense_window(app_db, monkeypatch):
    from app import data

    monkeypatch.setattr(data, "TIMELINE_MAX_MARKS", 300)
    at = _app()
    at.switch_page("app_pages/03_timeline.py").run()
    level2 = query(app_db, "SELECT run_id FROM runs WHERE name LIKE 'msinsight%'")[0][0]
    at.selectbox(key="tl_run").select(level2).run()
    assert not at.exception, at.exception
    caption = at.caption[0].value
    assert caption.startswith("4,811 events in this window: too many to draw"), caption
    chart = at.get("plotly_chart")[0].proto.spec
    assert '"type":"heatmap"' in chart.replace(" ", "")


def test_upload_page_refuses_bad_file_with_message(app_db):
    at = _app()
    at.switch_page("app_pages/02_upload.py").run()
    bad = FIXTURES / "ascend_kernel_details" / "bad_gbk.csv"
    at.file_uploader(key="upload_files").upload(bad.name, bad.read_bytes(), "text/csv").run()
    at.button(key="ingest").click().run()
    assert not at.exception, at.exception
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "bad_gbk.csv" in errors[0] and "GB18030" in errors[0]


def test_upload_page_ingests_a_file(app_db, tmp_path):
    at = _app()
    at.switch_page("app_pages/02_upload.py").run()
    ok = FIXTURES / "ascend_kernel_details" / "ok_crlf_tab_na.csv"
    at.file_uploader(key="upload_files").upload(ok.name, ok.read_bytes(), "text/csv").run()
    at.button(key="ingest").click().run()
    assert not at.exception, at.exception
    assert at.success and "Stored 1 file(s)" in at.success[0].value
    assert query(app_db, "SELECT count(*) FROM kernels WHERE name = 'aclnnCast_CastAiCpu_Cast'") == [(1,)]
    uploads = list((tmp_path / "uploads").rglob("*.csv"))
    assert len(uploads) == 1 and os.path.commonpath([uploads[0], tmp_path / "uploads"]) == str(
        tmp_path / "uploads"
    )


def _run_id(db: Path, name_like: str) -> int:
    return query(db, "SELECT run_id FROM runs WHERE name LIKE ?", [name_like])[0][0]


def test_stalls_page_agrees_with_the_export(app_db):
    at = _app()
    at.switch_page("app_pages/04_stalls.py").run()
    at.selectbox(key="stalls_run").select(_run_id(app_db, "msinsight%")).run()
    assert not at.exception, at.exception
    tables = [d.value for d in at.dataframe]
    cmp = next(t for t in tables if "agrees (≤1%)" in t.columns)
    assert list(cmp["metric"]) == [
        "Computing",
        "Communication(Not Overlapped)",
        "Communication",
        "Free",
        "Preparing",
    ]
    assert set(cmp["agrees (≤1%)"]) == {"yes"}
    assert not at.warning


def test_fallback_page_lists_the_ai_cpu_ops(app_db):
    at = _app()
    at.switch_page("app_pages/05_fallback.py").run()
    at.selectbox(key="fallback_run").select(_run_id(app_db, "mstt%")).run()
    assert not at.exception, at.exception
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["AI_CPU tasks"] == "2"
    assert any("**Cast** — 2 task(s)" in m.value for m in at.markdown)
    at.button(key="fb_tl_0").click().run()
    assert not at.exception, at.exception
    # the window is the op's first call only, not the span of both Cast tasks (#17)
    assert {m.label: m.value for m in at.metric}["AI_CPU tasks in window"] == "1"


def test_findings_page_ranks_findings(app_db):
    at = _app()
    at.switch_page("app_pages/06_findings.py").run()
    at.selectbox(key="findings_run").select(_run_id(app_db, "msinsight%")).run()
    assert not at.exception, at.exception
    titles = [m.value for m in at.markdown if "impact" in m.value]
    assert titles and "Communication not overlapped by compute" in titles[0]


def test_compare_page_shows_the_class_table(tmp_path, monkeypatch):
    from tests.conftest import SAMPLES

    db = tmp_path / "cmp.duckdb"
    code, _ = cli_json("ingest", str(SAMPLES / "generated"), "--db", str(db))
    assert code == 0
    monkeypatch.setenv("DIAG_DB", str(db))
    at = _app()
    ascend = query(db, "SELECT run_id FROM runs WHERE platform = 'ascend' ORDER BY run_id LIMIT 1")[0][0]
    at.selectbox(key="runs_select").select(ascend).run()  # Compare's A is the selected run
    at.switch_page("app_pages/08_compare.py").run()
    assert not at.exception, at.exception
    table = next(d.value for d in at.dataframe if "op class" in d.value.columns)
    ratios = dict(zip(table["op class"], table["A/B"], strict=True))
    # the column has gaps (a class only one side runs), so it is drawn as text with "—" in them
    assert ratios["gemm"] == "1.15" and ratios["communication"] == "1.60", ratios
    metrics = {m.label: m.value for m in at.metric}
    # the biggest loss is looked for over every bucket: idle dominates (the injected host stalls)
    assert metrics["biggest loss"] == "Idle (nothing on device)"
    assert metrics["biggest op-class loss"] == "sampling"


def test_app_says_when_another_process_holds_the_database(tmp_path, monkeypatch):
    import subprocess
    import sys

    db = tmp_path / "busy.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, sys, time; c = duckdb.connect({str(db)!r}); print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setenv("DIAG_DB", str(db))
        monkeypatch.setenv("DIAG_DB_BUSY_TIMEOUT_S", "0.5")
        at = AppTest.from_file(MAIN, default_timeout=60)
        at.run()
        assert not at.exception, at.exception
        (msg,) = [e.value for e in at.error]
        assert "database busy" in msg and str(holder.pid) in msg and "\n" not in msg
    finally:
        holder.kill()
        holder.wait()


def test_file_text_shown_in_markdown_is_literal():
    from app import widgets

    shown = widgets.md("[click](http://evil.example) <script>x</script> **bold**")
    assert "[" not in shown.replace("\\[", "") and "<" not in shown.replace("\\<", "")
    assert "*" not in shown.replace("\\*", "")


def _upload(at: AppTest, paths: list[Path]) -> AppTest:
    at.switch_page("app_pages/02_upload.py").run()
    uploader = at.file_uploader(key="upload_files")
    for p in paths:
        uploader.upload(p.name, p.read_bytes(), "application/octet-stream")
    at.run()
    at.button(key="ingest").click().run()
    assert not at.exception, at.exception
    return at


def test_upload_summary_names_what_was_stored_and_selects_the_new_run(app_db, tmp_path):
    log = FIXTURES / "cann_log" / "ok_console_vllm.log"
    serving = FIXTURES / "serving" / "ok_sglang_h100.txt"
    ok = FIXTURES / "ascend_kernel_details" / "ok_crlf_tab_na.csv"
    bad = FIXTURES / "ascend_kernel_details" / "bad_gbk.csv"
    before = {r[0] for r in query(app_db, "SELECT run_id FROM runs")}
    at = _upload(_app(), [ok, log, serving, bad])
    (new_run,) = {r[0] for r in query(app_db, "SELECT run_id FROM runs")} - before
    assert at.success[0].value == (
        "Stored 3 file(s):\n"
        f"- run {new_run}: 1 profiler file, 1 log file (7 lines), 1 serving result file (1 result)\n\n"
        f"Run {new_run} is selected for the other pages."
    )
    assert at.session_state["run_id"] == new_run
    assert f"selected run: **{new_run}**" in [c.value for c in at.sidebar.caption]
    table = at.dataframe[0].value
    assert len(table) == 4 and "None" not in table.astype(str).to_numpy().ravel().tolist()
    kept = sorted(p.name for p in (tmp_path / "uploads").rglob("*") if p.is_file())
    # the refused bad_gbk.csv is gone
    assert kept == ["ok_console_vllm.log", "ok_crlf_tab_na.csv", "ok_sglang_h100.txt"]
    sources = [r[0] for r in query(app_db, "SELECT source FROM files WHERE run_id = ?", [new_run])]
    assert sorted(Path(s).name for s in sources) == kept


def test_upload_of_logs_only_says_they_are_in_no_run(app_db):
    at = _upload(_app(), [FIXTURES / "cann_log" / "ok_console_vllm.log"])
    assert at.success[0].value == "Stored 1 file(s):\n- no run: 1 log file (7 lines)"


def test_deleting_an_uploaded_run_on_the_runs_page_removes_its_upload_folder(app_db, tmp_path):
    at = _upload(_app(), [FIXTURES / "ascend_kernel_details" / "ok_crlf_tab_na.csv"])
    new_run = at.session_state["run_id"]
    assert len(list((tmp_path / "uploads").iterdir())) == 1
    at.switch_page("app_pages/01_runs.py").run()
    assert at.selectbox(key="runs_select").value == new_run  # the upload selected it
    at.checkbox(key="delete_sure").check().run()
    at.button(key="delete_run").click().run()
    assert not at.exception, at.exception
    assert query(app_db, "SELECT count(*) FROM runs WHERE run_id = ?", [new_run]) == [(0,)]
    assert list((tmp_path / "uploads").iterdir()) == []
