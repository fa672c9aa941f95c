"""Evidence as people read it on the Findings, Postmortem and Logs pages (AppTest on the sample database), and
the Postmortem page's height in a real browser: tables and log lines, never JSON, `<details>` or `None`."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.browser_app import BROWSER_ARGS, CHROMIUM, require_browser, serve_app
from tests.conftest import FIXTURES, SAMPLES, cli_json, open_page

MAX_POSTMORTEM_PX = 6000


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("pages") / "samples.duckdb"
    code, _ = cli_json("ingest", str(SAMPLES), "--db", str(db))
    assert code == 0
    return db


def _run_id(at, key: str, prefix: str) -> int:  # noqa: ANN001
    """The run whose name starts with ``prefix``, from the picker's labels ("<run_id> · <name> · <platform>")."""
    labels = at.selectbox(key=key).options
    return int(next(o for o in labels if o.split(" · ")[1].startswith(prefix)).split(" · ")[0])


def _shown(at) -> list[str]:  # noqa: ANN001
    """Every text a person reads on the page, table cells included."""
    texts = [e.value for kind in ("title", "header", "subheader", "markdown", "caption", "code", "text")
             for e in getattr(at, kind)]  # fmt: skip
    for t in [*at.table, *at.dataframe]:
        df = t.value
        index = [df.index.name, *df.index] if df.index.name is not None else []  # st.table's first column
        texts += [*map(str, index), *map(str, df.columns), *map(str, df.to_numpy().ravel())]
    return [str(t) for t in texts]


def _assert_readable(at) -> None:  # noqa: ANN001
    shown = _shown(at)
    assert not at.get("json"), "evidence drawn as JSON"
    assert not [t for t in at.dataframe if t.value.isna().any().any()], "a null cell (drawn as None)"
    assert not [t for t in shown if "<details>" in t or "</details>" in t]
    assert not [t for t in shown if re.search(r"\bNone\b", t)], [t for t in shown if "None" in t][:3]
    assert not [t for t in shown if re.search(r"\b1[67]\d{17}\b", t)], "epoch nanoseconds on the page"


def _table(at, first_column: str, row: str):  # noqa: ANN001, ANN202
    return next(t.value for t in at.table if t.value.index.name == first_column and row in t.value.index)


def test_findings_page_evidence_is_tables(sample_db, monkeypatch):
    at = open_page(monkeypatch, sample_db, "app_pages/06_findings.py")
    at.selectbox(key="findings_run").select(_run_id(at, "findings_run", "rank0_")).run()
    assert not at.exception, at.exception
    _assert_readable(at)
    ops = _table(at, "op", "ArgMaxV2")
    assert ops.loc["ArgMaxV2", "calls"] == "4" and ops.loc["ArgMaxV2", "total (ms)"] == "0.986"
    assert ops.loc["IndexPut", "input dtypes"] == "DOUBLE;INT64;DOUBLE -> DOUBLE"
    gaps = _table(at, "start (ms from the run's start)", "13.429")
    assert list(gaps.loc["13.429"])[:2] == ["15.341", "1.912"]
    captions = [c.value for c in at.caption]
    assert "Time range: 0.713 → 16.492 ms from the run's start (15.778 ms)" in captions
    assert len([b for b in at.button if b.label == "Open in the timeline"]) >= 5


def test_postmortem_page_is_drawn_natively(sample_db, monkeypatch):
    at = open_page(monkeypatch, sample_db, "app_pages/09_postmortem.py")
    at.selectbox(key="pm_run").select(_run_id(at, "pm_run", "rank0_")).run()
    assert not at.exception, at.exception
    _assert_readable(at)
    heads = [h.value for h in at.subheader]
    assert heads[:4] == ["What happened", "Impact", "Contributing factors", "Suggested actions"]
    assert "Device time by bucket" in heads and "Environment" in heads
    ops = _table(at, "op", "ArgMaxV2")
    assert ops.loc["ArgMaxV2", "total (ms)"] == "0.986"
    figures = _table(at, "figure", "device time lost")
    assert figures.loc["device time lost", "value"] in {
        "8.242 ms",
        "1.660 ms",
        "1.133 ms",
        "0.089 ms",
        "0.073 ms",
    }
    assert "Time range: 13.429 → 15.341 ms from the run's start (1.912 ms)" in [c.value for c in at.caption]
    assert [b.label for b in at.get("download_button")] == ["Markdown", "HTML", "JSON"]


def test_logs_page_records_and_root_cause_evidence(tmp_path, monkeypatch):
    db = tmp_path / "logs.duckdb"
    fx = FIXTURES / "cann_log"
    code, _ = cli_json("ingest", str(fx / "two_ranks"), str(fx / "ok_console_vllm.log"), "--db", str(db))
    assert code == 0
    at = open_page(monkeypatch, db, "app_pages/07_logs.py")
    _assert_readable(at)
    records = at.dataframe[0].value
    assert list(records.columns) == [
        "time",
        "level",
        "code",
        "category",
        "message",
        "file",
        "line",
        "module",
        "rank",
    ]
    assert not records.isna().any().any() and (records["code"] == "—").any()
    # the root causes' evidence: file:line under its shortest unambiguous tail, then the raw text
    where = [c.value for c in at.caption if re.match(r"`[^`]+:\d+`", c.value)]
    assert (
        where[0]
        == "`plog-100_20250625104000000.log:2` · 2025-06-25 10:45:00.100200 · rank 0 · EZ9999 · pid 100"
    )
    assert at.code[0].value.startswith("[ERROR] RUNTIME(100,python3):2025-06-25-10:45:00.100.200 ")
    assert where[-1].endswith(
        "· ERR00100 · VllmWorker rank=1 pid=5001; wraps EI0002"
    )  # the wrapper says what
    # the raw lines of the first record: under its file's name, the whole path only in the tooltip
    (raw,) = [c for c in at.caption if "lines around line" in c.value]
    assert raw.value == "plog-100_20250625104000000.log — lines around line 2 (the record is marked ▶)", (
        raw.value
    )
    assert raw.help.endswith("plog-100_20250625104000000.log") and raw.help.startswith(str(fx))


# -- the browser: the Postmortem page's height on every sample run -----------------------------------------


@pytest.fixture
def served_samples(sample_db, tmp_path):
    require_browser()
    db = tmp_path / "served.duckdb"
    shutil.copy(sample_db, db)
    with serve_app(db, tmp_path / "uploads", timeout=60) as app:
        yield app.url


@pytest.mark.browser
def test_postmortem_page_height_in_a_browser(served_samples, tmp_path):
    from playwright.sync_api import sync_playwright

    shots = Path(os.environ.get("DIAG_SCREENSHOTS", tmp_path / "shots"))
    shots.mkdir(parents=True, exist_ok=True)
    heights = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(served_samples + "/postmortem")
        page.get_by_role("heading", name="Postmortem", exact=True).wait_for(timeout=60_000)
        page.get_by_role("heading", name="What happened").wait_for(timeout=60_000)
        names = []
        page.get_by_role("combobox").first.click()
        names = [o.inner_text() for o in page.get_by_role("option").all()]
        page.keyboard.press("Escape")
        for name in names:
            page.get_by_role("combobox").first.click()
            page.get_by_role("option", name=name, exact=True).click()
            page.get_by_role("heading", name="What happened").wait_for(timeout=60_000)
            page.wait_for_timeout(2500)
            main = page.locator('[data-testid="stMain"]')
            heights[name] = main.evaluate("m => m.scrollHeight")
            text = main.inner_text()
            assert "<details>" not in text and "</details>" not in text, name
            assert not re.search(r"\bNone\b", text) and "Traceback" not in text, name
            page.set_viewport_size({"width": 1400, "height": min(heights[name] + 50, 16_000)})
            page.wait_for_timeout(500)
            page.screenshot(path=str(shots / f"postmortem_{name.split(' · ')[0]}.png"), full_page=True)
            page.set_viewport_size({"width": 1400, "height": 1000})
        browser.close()
    print("postmortem page heights (px):", heights)
    assert len(heights) == 5, heights
    assert max(heights.values()) < MAX_POSTMORTEM_PX, heights


def test_open_in_timeline_from_the_evidence(sample_db, monkeypatch):
    at = open_page(monkeypatch, sample_db, "app_pages/06_findings.py")
    run_id = _run_id(at, "findings_run", "rank0_")
    at.selectbox(key="findings_run").select(run_id).run()
    at.button(key="finding_0_tl").click().run()  # the idle finding: its longest gap, 13.429 → 15.341 ms
    assert not at.exception, at.exception
    # the Timeline page sets its own widgets (tl_run) from these when it opens (data.open_in_timeline)
    assert at.session_state["run_id"] == run_id and at.session_state["tl_window_run"] == run_id
    lo, hi = at.session_state["tl_window"]
    # the gap itself, padded no further than the ops on either side of it
    assert lo <= 1736933600997007284 < 1736933600998919454 <= hi and hi - lo < 2 * 1_912_170
