"""`diag app` works offline: while every page loads in a real browser, no request leaves 127.0.0.1.

(The favicon used to be a ":material/…:" icon, which the Streamlit frontend fetches from fonts.gstatic.com.)
Uses Debian's chromium; skipped when it or playwright is absent.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser_app import PAGE_HEADINGS, is_local, launch, require_browser, serve_app

pytestmark = pytest.mark.browser


@pytest.fixture
def served_samples(tmp_path: Path):
    """`diag app` on a fresh database, which it fills from sample_traces/ (the first launch)."""
    require_browser()
    with serve_app(tmp_path / "first.duckdb", tmp_path / "uploads", samples=True) as app:
        yield app.url


def test_no_request_leaves_the_machine_while_every_page_loads(served_samples, tmp_path):
    from playwright.sync_api import sync_playwright

    shots = Path(os.environ.get("DIAG_SCREENSHOTS", tmp_path / "shots"))
    shots.mkdir(parents=True, exist_ok=True)
    outside: list[str] = []
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1200})
        page.on("request", lambda req: None if is_local(req.url) else outside.append(req.url))
        page.goto(served_samples)
        page.get_by_role("heading", name="Runs").wait_for(timeout=60_000)
        for i, (link, heading) in enumerate(PAGE_HEADINGS):
            page.get_by_role("link", name=link, exact=True).click()
            page.get_by_role("heading", name=heading, exact=True).wait_for(timeout=60_000)
            page.wait_for_load_state("networkidle")
            page.wait_for_timeout(1000)
            page.screenshot(path=str(shots / f"offline_{i:02d}_{link.replace(' ', '_')}.png"))
        favicon = page.eval_on_selector("link[rel='shortcut icon']", "el => el.href")
        browser.close()
    assert outside == []
    assert is_local(favicon), favicon
