"""A real browser against `diag app`: pages load, an archive upload lands as a new run. Screenshots kept.

Uses Debian's chromium (no browser download); skipped when it is absent. Screenshots go to
``$DIAG_SCREENSHOTS`` (default: the test's tmp folder).
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from tests.browser_app import BROWSER_ARGS, CHROMIUM, require_browser, serve_app
from tests.conftest import REAL_AICPU_TRACE, REAL_LEVEL2, cli_json, query

pytestmark = pytest.mark.browser


@pytest.fixture
def served(tmp_path: Path):
    require_browser()
    db = tmp_path / "e2e.duckdb"
    code, _ = cli_json("ingest", str(REAL_LEVEL2), "--db", str(db))
    assert code == 0
    with serve_app(db, tmp_path / "uploads", timeout=60) as app:
        yield app.url, db, app.stop


def test_upload_archive_in_browser_adds_a_run(served, tmp_path):
    from playwright.sync_api import sync_playwright

    url, db, stop = served
    shots = Path(os.environ.get("DIAG_SCREENSHOTS", tmp_path / "shots"))
    shots.mkdir(parents=True, exist_ok=True)
    archive = tmp_path / "mstt_timeline_advice.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(REAL_AICPU_TRACE, "mstt_timeline_advice/trace_view.json")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=BROWSER_ARGS,
        )
        page = browser.new_page(viewport={"width": 1600, "height": 2000})
        page.goto(url)
        page.get_by_role("heading", name="Runs").wait_for(timeout=60_000)
        page.get_by_text("AI_CPU tasks (CPU fallback)").wait_for(timeout=30_000)
        page.wait_for_timeout(1000)
        page.screenshot(path=str(shots / "01_runs.png"), full_page=True)

        page.goto(url + "/upload")
        page.get_by_role("heading", name="Upload").wait_for(timeout=30_000)
        page.locator("input[type=file]").first.set_input_files(str(archive))
        page.get_by_text("0.6MB").first.wait_for(timeout=30_000)
        page.get_by_role("button", name="Ingest").click()
        page.get_by_text("Stored 1 file(s)").wait_for(timeout=60_000)
        page.screenshot(path=str(shots / "02_upload.png"), full_page=True)

        page.goto(url + "/timeline")
        page.get_by_role("heading", name="Timeline").wait_for(timeout=30_000)
        page.locator(".js-plotly-plot").first.wait_for(timeout=60_000)
        page.wait_for_timeout(1500)
        page.screenshot(path=str(shots / "03_timeline.png"), full_page=True)

        page.get_by_role("combobox").first.click()
        page.get_by_role("option", name="2 · mstt_timeline_advice").click()
        page.get_by_text("AI_CPU tasks in window").wait_for(timeout=30_000)
        page.wait_for_timeout(2500)
        page.screenshot(path=str(shots / "04_timeline_ai_cpu.png"), full_page=True)
        assert page.get_by_text("2,212 events in this window").count() == 1

        # through the sidebar, so the session (and its selected run) carries over
        for link, heading, shot in [
            ("Stalls", "Stalls", "05_stalls.png"),
            ("Fallback ops", "CPU fallback ops", "06_fallback.png"),
            ("Findings", "Findings", "07_findings.png"),
        ]:
            page.get_by_role("link", name=link).click()
            page.get_by_role("heading", name=heading).wait_for(timeout=30_000)
            page.wait_for_timeout(2500)
            page.screenshot(path=str(shots / shot), full_page=True)
        browser.close()
    stop()
    names = [r[0] for r in query(db, "SELECT name FROM runs ORDER BY run_id")]
    assert names == ["msinsight_level2_rank0_ascend_pt", "mstt_timeline_advice"]
    assert query(db, "SELECT count(*) FROM device_tasks WHERE task_kind = 'AI_CPU'") == [(2,)]
