"""Every page of ``diag app`` in a real browser, on the database the README's main job makes: ``diag app`` on an
empty database, which first ingests ``sample_traces/`` (``diag.commands.app.ensure_samples``).

Each page is opened from the sidebar, waited for until its script has finished running, described in
``NN_page.json`` (its height and problems; in ``$DIAG_SCREENSHOTS``, default the test's tmp folder) and, when
``$DIAG_SCREENSHOTS`` names a folder, saved there as full-page screenshots (``NN_page.png``, and
``NN_page_opened.png`` with every expander opened), and fails on what a person should never see there, with every
expander opened and every tab shown in turn (``problems``):

* a traceback or an exception box (``st.exception``), or the word ``Error`` / ``…Error`` in the page's text;
* a literal ``<details>`` or ``</details>`` (Markdown that was meant for HTML);
* a table cell reading ``None``;
* a Postmortem page taller than ``POSTMORTEM_MAX_PX``.

**How table cells are read.** ``st.dataframe`` draws its cells on a canvas (glide-data-grid), so the text is not
in the DOM as drawn; but the grid keeps an accessibility table beside the canvas: ``<td role="gridcell"
id="glide-cell-<col>-<row>">`` with the cell's text, and ``<th role="columnheader" aria-colindex="n">``. A
missing value (None / NaN / NaT) is drawn as a grey "None" on the canvas and is an *empty* ``gridcell`` there; a
string "None" is a ``gridcell`` reading ``None``; both count as a None cell. That table holds only the cells in
view, so each grid's scroller (``.dvn-scroller``) is stepped through its whole width and height and the cells are
read at every position. ``st.table`` is a plain HTML table (``[data-testid="stTable"] td``), read directly.

Uses Debian's chromium (no browser download); skipped when it or playwright is absent.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.browser_app import BROWSER_ARGS, CHROMIUM, PAGE_HEADINGS, require_browser, serve_app

pytestmark = pytest.mark.browser
POSTMORTEM_MAX_PX = 6000
SHOT_MAX_PX = 16000
PAGES = dict(PAGE_HEADINGS)
ERROR_TEXT = re.compile(r"Traceback \(most recent call last\)|\b[A-Z]\w*Error\b|\bError\b")
DETAILS_TAG = re.compile(r"</?details>")

# Every cell of every st.dataframe on the page, as {"grid", "column", "row", "text"}: each grid's scroller is
# stepped through its whole area and the accessibility table's cells in view are read at each step.
READ_GRIDS = """async () => {
  const pause = () => new Promise(r => setTimeout(r, 120));
  const out = [];
  const grids = [...document.querySelectorAll('[data-testid="stDataFrame"]')];
  for (let g = 0; g < grids.length; g++) {
    const grid = grids[g];
    const scroller = grid.querySelector('.dvn-scroller');
    const seen = new Map(), heads = new Map();
    const read = () => {
      grid.querySelectorAll('th[role="columnheader"]').forEach(th =>
        heads.set(th.getAttribute('aria-colindex'), th.innerText.trim()));
      grid.querySelectorAll('td[role="gridcell"]').forEach(td => {
        const m = /glide-cell-(\\d+)-(\\d+)/.exec(td.id || '');
        if (m) seen.set(td.id, {col: +m[1], row: +m[2], text: td.innerText.trim()});
      });
    };
    if (!scroller || !scroller.clientHeight || !scroller.clientWidth) { read(); } else {  // hidden: as is
      const stepY = Math.max(scroller.clientHeight - 40, 40), stepX = Math.max(scroller.clientWidth - 40, 40);
      for (let y = 0; ; y += stepY) {
        for (let x = 0; ; x += stepX) {
          scroller.scrollTo(x, y); await pause(); read();
          if (x + scroller.clientWidth >= scroller.scrollWidth) break;
        }
        if (y + scroller.clientHeight >= scroller.scrollHeight) break;
      }
      scroller.scrollTo(0, 0);
    }
    for (const c of seen.values())
      out.push({grid: g, column: heads.get(String(c.col + 1)) || String(c.col), row: c.row, text: c.text});
  }
  return out;
}"""

PAGE_HEIGHT = """() => Math.max(document.documentElement.scrollHeight, document.body.scrollHeight,
  ...[...document.querySelectorAll('[data-testid="stMain"], [data-testid="stAppViewContainer"], section.main')]
     .map(e => e.scrollHeight))"""


OPEN_EXPANDERS = """() => {
  const closed = [...document.querySelectorAll('[data-testid="stExpander"] details:not([open]) > summary')];
  closed.forEach(s => s.click());
  return closed.length;
}"""


def none_cells(cells: list[dict[str, Any]]) -> list[str]:
    """The cells that show None: empty in the accessibility table (a missing value) or reading "None"."""
    return [
        f"grid {c['grid'] + 1} column {c['column']!r} row {c['row'] + 1}"
        for c in cells
        if c["text"] in ("", "None")
    ]


def problems(text: str, cells: list[dict[str, Any]], table_cells: list[str], exceptions: int) -> list[str]:
    """What a person must not see on a page, one line each (empty: the page is clean)."""
    found = []
    if exceptions:
        found.append(f"{exceptions} exception box(es) (st.exception)")
    errors = sorted({m.group(0) for m in ERROR_TEXT.finditer(text)})
    if errors:
        found.append(f"error text: {', '.join(errors)}")
    tags = sorted({m.group(0) for m in DETAILS_TAG.finditer(text)})
    if tags:
        found.append(f"literal {' and '.join(tags)} in the page")
    nones = none_cells(cells) + [
        f"st.table cell {i + 1}" for i, t in enumerate(table_cells) if t in ("", "None")
    ]
    if nones:
        found.append(
            f"{len(nones)} table cell(s) reading None: {'; '.join(nones[:8])}{' …' if len(nones) > 8 else ''}"
        )
    return found


def test_problems_names_each_check() -> None:
    cells = [
        {"grid": 0, "column": "rank", "row": 2, "text": ""},
        {"grid": 0, "column": "run", "row": 2, "text": "3"},
    ]
    assert problems("ok", [], [], 0) == []
    assert problems("KeyError: 'x'\n<details><summary>evidence</summary>", cells, ["None"], 1) == [
        "1 exception box(es) (st.exception)",
        "error text: KeyError",
        "literal <details> in the page",
        "2 table cell(s) reading None: grid 1 column 'rank' row 3; st.table cell 1",
    ]


@pytest.fixture(scope="module")
def app_url(tmp_path_factory: pytest.TempPathFactory):
    require_browser()
    tmp = tmp_path_factory.mktemp("browser_pages")
    # empty: `diag app` fills it from sample_traces/, as on a first launch (the samples are ingested first)
    with serve_app(tmp / "first_launch.duckdb", tmp / "uploads", samples=True, timeout=180) as app:
        yield app.url


@pytest.fixture(scope="module")
def browser(app_url: str):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("DIAG_SCREENSHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# Full-page PNGs (up to 1,600 x 16,000 px, two per page) are for a person to look at: taken when DIAG_SCREENSHOTS
# names a folder; without it (CI) the checks run on the same grown viewport and no image is encoded.
TAKE_SHOTS = bool(os.environ.get("DIAG_SCREENSHOTS"))


def _shot(page, path: Path) -> None:  # noqa: ANN001 — a playwright Page
    if TAKE_SHOTS:
        page.screenshot(path=str(path), full_page=True)


def _finished(page) -> None:  # noqa: ANN001 — the page's script has run to its end and stayed there
    for _ in range(2):
        page.wait_for_function(
            "() => document.querySelector('[data-testid=\"stApp\"]')?.dataset.testScriptState === 'notRunning'",
            timeout=120_000,
        )
        page.wait_for_timeout(
            1500
        )  # charts draw after the script ends; a rerun may follow a widget's default


def _read(page) -> tuple[str, list[dict[str, Any]], list[str], int]:  # noqa: ANN001
    """The page's text, its grids' cells, its st.table cells and its exception boxes, as shown now."""
    text = page.locator('[data-testid="stMain"]').first.inner_text()
    cells = page.evaluate(READ_GRIDS)
    table_cells = page.locator('[data-testid="stTable"] td').all_inner_texts()
    return text, cells, table_cells, page.locator('[data-testid="stException"]').count()


@pytest.mark.parametrize("link", list(PAGES))
def test_page_shows_no_error_no_raw_markup_no_none_cell(
    app_url: str, browser, shots: Path, link: str
) -> None:  # noqa: ANN001
    page = browser.new_page(viewport={"width": 1600, "height": 1200})
    try:
        page.goto(app_url)
        page.get_by_role("heading", name="Runs").first.wait_for(timeout=120_000)
        _finished(page)
        if link != "Runs":
            page.locator('[data-testid="stSidebarNav"]').get_by_text(link, exact=True).first.click()
            page.get_by_role("heading", name=PAGES[link]).first.wait_for(timeout=60_000)
            _finished(page)
        slug = re.sub(r"\W+", "_", link.lower())
        name = f"{list(PAGES).index(link) + 1:02d}_{slug}"
        # Streamlit scrolls inside its main container, so a full-page shot of a 1,200 px viewport stops at the
        # fold: the viewport is grown to the content first (capped: a 20,000 px Postmortem is shot in part)
        height = int(page.evaluate(PAGE_HEIGHT))
        page.set_viewport_size({"width": 1600, "height": min(height + 40, SHOT_MAX_PX)})
        page.wait_for_timeout(1000)
        _shot(page, shots / f"{name}.png")
        # what a person sees after opening every expander (evidence, call stacks) is checked too
        if page.evaluate(OPEN_EXPANDERS):
            page.wait_for_timeout(1500)
            opened = int(page.evaluate(PAGE_HEIGHT))
            page.set_viewport_size({"width": 1600, "height": min(opened + 40, SHOT_MAX_PX)})
            page.wait_for_timeout(1000)
            _shot(page, shots / f"{name}_opened.png")
        text, cells, table_cells, exceptions = _read(page)
        tabs = page.locator('[data-testid="stMain"] [role="tab"]')
        for i in range(1, tabs.count()):  # a tab's content is drawn only while it is selected
            tabs.nth(i).click()
            page.wait_for_timeout(1500)
            more = _read(page)
            text, cells = text + "\n" + more[0], cells + more[1]
            table_cells, exceptions = table_cells + more[2], exceptions + more[3]
    finally:
        page.close()
    found = problems(text, cells, table_cells, exceptions)
    if link == "Postmortem" and height > POSTMORTEM_MAX_PX:
        found.append(f"page is {height:,} px tall (at most {POSTMORTEM_MAX_PX:,})")
    (shots / f"{name}.json").write_text(
        json.dumps({"page": link, "height_px": height, "grid_cells": len(cells), "problems": found}, indent=1)
    )
    assert not found, f"{link}: " + " | ".join(found)
