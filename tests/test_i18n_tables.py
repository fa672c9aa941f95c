"""#24: the app's tables in Chinese — every page's column headers come from diag/rules/cli_headers.csv (the
table file the CLI uses too), so a Chinese page shows no English column name of diag's own. The browser test
reads a page's own words but not the cells and headers of its tables (a data grid draws on a canvas); this test
reads the tables' frames under AppTest on the app as its first launch fills it (sample_traces/)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from diag.commands._format import header_text
from diag.i18n import set_language
from tests.conftest import ROOT

CJK = re.compile(r"[\u4e00-\u9fff]")
WORD = re.compile(r"\b[A-Za-z][a-z]{2,}\b")  # an English word; profiler field names (aic_mac_ratio) are not
# words of diag's: names kept as the Ascend documentation writes them in Chinese too (OP State is a column of
# kernel_details.csv; Cube / Vector the AI Core's units; Rank; diag itself)
KEPT = {"State", "Cube", "Vector", "Rank", "diag"}
PAGES = sorted(p.name for p in (ROOT / "app" / "app_pages").glob("[0-9]*.py"))


def english_header(header: str) -> bool:
    return not CJK.search(header) and any(w not in KEPT for w in WORD.findall(header))


@pytest.fixture(autouse=True)
def _back_to_the_environment_language():
    yield
    set_language(None)


@pytest.fixture(scope="module")
def samples_db(tmp_path_factory) -> Path:
    from diag.commands.app import ensure_samples

    db = tmp_path_factory.mktemp("i18n_tables") / "samples.duckdb"
    assert ensure_samples(str(db)) >= 5
    return db


def test_header_text_reads_the_table_file_in_chinese_only():
    assert header_text("peak reserved (GiB)") == "peak reserved (GiB)"
    set_language("zh")
    assert header_text("peak reserved (GiB)") == "预留内存峰值（GiB）"
    assert header_text("a header no table file lists") == "a header no table file lists"


def test_every_page_table_has_its_headers_in_chinese(samples_db, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("DIAG_DB", str(samples_db))
    monkeypatch.setenv("DIAG_LANG", "zh")
    english: dict[str, set[str]] = {}
    tables = 0
    for page in PAGES:
        at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=120)
        at.run()
        at.switch_page(f"app_pages/{page}").run()
        assert not at.exception, (page, at.exception)
        for frame in at.dataframe:
            tables += 1
            english.update(
                {
                    h: english.get(h, set()) | {page}
                    for h in map(str, frame.value.columns)
                    if english_header(h)
                }
            )
    assert tables >= 15  # the first launch's data fills tables on most pages
    assert english == {}
