"""The Ascend vs CUDA page and the Cluster page in Chinese and English (#24): headings, captions, labels, tabs,
metrics and table columns from ``diag/i18n/<lang>.pages.toml``; English exactly as before.

On the bundled pair (sample_traces/generated: two Ascend ranks of one job, and their CUDA twin) every page text
of the two pages is read in Chinese and checked for English sentences. Sentences that analyses write (a
grouping's description, why a rank is the one to open, the scaling section's note) are other modules' texts,
taken out by ``FOREIGN`` — each names its module."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from diag.i18n import set_language
from tests.conftest import ROOT, ingest_into, open_page
from tests.test_i18n import english_sentences

GENERATED = ROOT / "sample_traces" / "generated"
FOREIGN: list[re.Pattern[str]] = []  # analysis texts shown on these pages, not translated yet where written


@pytest.fixture(autouse=True)
def _back_to_the_environment_language():
    yield
    set_language(None)


@pytest.fixture(scope="module")
def pair_db(tmp_path_factory) -> Path:
    from diag.store import Store

    db = tmp_path_factory.mktemp("i18n_pages") / "pair.duckdb"
    with Store(db) as store:
        summary = ingest_into(store, [GENERATED / "llm_decode_tp2", GENERATED / "llm_decode_cuda"])
        assert "failed" not in {f.status for f in summary.files}  # ground_truth.json is skipped
    return db


def page_texts(at) -> list[str]:  # noqa: ANN001 - an AppTest
    """Every text the page draws itself: headings, captions, alerts, Markdown, widget / metric / tab labels."""
    kinds = ["title", "subheader", "caption", "info", "success", "warning", "markdown"]
    texts = [str(el.value) for kind in kinds for el in getattr(at, kind)]
    texts += [str(x.label) for x in [*at.metric, *at.selectbox, *at.radio, *at.button, *at.tabs]]
    return texts


def english_left(texts: list[str]) -> list[str]:
    def own(text: str) -> str:
        for pattern in FOREIGN:
            text = pattern.sub(" ", text)
        return text

    return english_sentences([own(x) for x in texts])


def _columns(at) -> list[list[str]]:  # noqa: ANN001
    return [list(df.value.columns) for df in at.dataframe]


def test_compare_page_in_chinese(pair_db, monkeypatch):
    monkeypatch.setenv("DIAG_LANG", "zh")
    at = open_page(monkeypatch, pair_db, "app_pages/08_compare.py")
    assert at.title[0].value == "昇腾 vs CUDA"
    assert [m.label for m in at.metric] == [
        "A 每迭代设备耗时", "B 每迭代设备耗时", "A / B", "多耗最多的部分", "多耗最多的算子类别"
    ]  # fmt: skip
    assert [s.label for s in at.selectbox] == ["A（被分析）", "B（基线）"]
    assert _columns(at)[:2] == [
        ["算子类别", "A 调用次数", "B 调用次数", "A ms/迭代", "B ms/迭代", "A 平均 µs", "B 平均 µs", "A 占比 %",
         "B 占比 %", "A/B", "多耗 ms/迭代"],
        ["分桶", "A ms/迭代", "B ms/迭代", "A/B", "多耗 ms/迭代"],
    ]  # fmt: skip
    assert {"E2E（设备跨度）", "AI CPU（回退）", "空闲（设备上无任务）"} <= set(at.dataframe[1].value["分桶"])
    assert at.metric[4].delta.endswith(" ms/迭代") and at.metric[4].delta.startswith("+")
    assert english_left(page_texts(at)) == []


def test_before_after_section_in_chinese(pair_db, monkeypatch):
    """Two Ascend ranks compared: the Before / after section, its columns and verdict words in Chinese."""
    monkeypatch.setenv("DIAG_LANG", "zh")
    at = open_page(monkeypatch, pair_db, "app_pages/08_compare.py")
    ascend = [i for i in at.selectbox(key="cmp_a").options if "ascend" in i]
    at.selectbox(key="cmp_a").set_value(int(ascend[0].split(" · ")[0])).run()
    at.selectbox(key="cmp_b").set_value(int(ascend[1].split(" · ")[0])).run()
    assert not at.exception and "前后对比" in [s.value for s in at.subheader]
    changes = next(df.value for df in at.dataframe if "判定" in df.value.columns)
    assert list(changes.columns)[:3] == ["算子", "算子类别", "之前 调用次数/迭代"]
    assert set(changes["判定"]) <= {"变慢", "变快", "在波动范围内", "无法判断"}
    assert english_left(page_texts(at)) == []


def test_cluster_page_in_chinese(pair_db, monkeypatch):
    monkeypatch.setenv("DIAG_LANG", "zh")
    at = open_page(monkeypatch, pair_db, "app_pages/11_cluster.py")
    assert at.title[0].value == "集群"
    assert [x.label for x in at.tabs] == ["迭代耗时", "各 Rank", "通信域", "链路"]
    assert at.radio(key="cluster_metric").options == ["迭代耗时", "计算", "通信未掩盖", "空闲"]
    assert _columns(at)[0] == [
        "Rank", "运行", "迭代数", "迭代 ms", "计算 ms", "通信未掩盖 ms", "等待 ms", "传输 ms", "相对中位数 %", "稳健 z 值"
    ]  # fmt: skip
    assert "MoE 专家负载" in [s.value for s in at.subheader]
    assert english_left(page_texts(at)) == []


def test_the_two_pages_in_english_are_unchanged(pair_db, monkeypatch):
    at = open_page(monkeypatch, pair_db, "app_pages/08_compare.py")
    assert at.title[0].value == "Ascend vs CUDA" and at.metric[3].label == "biggest loss"
    assert _columns(at)[1] == ["bucket", "A ms/step", "B ms/step", "A/B", "lost ms/step"]
    assert {"E2E (device span)", "AI CPU (fallback)"} <= set(at.dataframe[1].value["bucket"])
    at.switch_page("app_pages/11_cluster.py").run()
    assert at.title[0].value == "Cluster" and [x.label for x in at.tabs] == [
        "Step time",
        "Per rank",
        "Groups",
        "Links",
    ]
    assert _columns(at)[0][:4] == ["rank", "run", "steps", "step ms"]
    assert at.radio(key="cluster_metric").options == [
        "step time", "computing", "communication not overlapped", "free"
    ]  # fmt: skip


def test_bucket_labels_in_english_are_the_analysis_labels():
    from diag.analyses.stall_breakdown import BUCKET_LABELS
    from diag.i18n import catalog

    en, zh = catalog("en"), catalog("zh")
    assert {b: en[f"page.compare.bucket.{b}"] for b in BUCKET_LABELS} == BUCKET_LABELS
    assert all(
        re.search(r"[\u4e00-\u9fff]", zh[f"page.compare.bucket.{b}"]) or b == "attention"
        for b in BUCKET_LABELS
    )


# -- every page in a real browser, in Chinese and in English ---------------------------------------------

# what the English-sentence check reads on a page: the page's own words (headings, captions, alerts, Markdown,
# widget / metric / tab / button / expander labels); not a table's cells or a chart (data: op and file names)
OWN_TEXT = (
    '[data-testid="stMain"] :is([data-testid="stHeading"], [data-testid="stCaptionContainer"], '
    '[data-testid="stAlert"], [data-testid="stMarkdownContainer"], [data-testid="stWidgetLabel"], '
    '[data-testid="stMetricLabel"], [data-testid="stExpander"] summary, button[role="tab"], '
    '[data-testid="stButton"] button)'
)
DATA_VALUES: list[re.Pattern[str]] = [  # English in a data value, not a sentence of diag's (keep it short)
    re.compile(
        r"[\w.-]+ · [\w .-]+ · (?:ascend|cuda|rocm)\b[^·]*"
    ),  # a run's label: id · name · platform · device
    re.compile(
        r"（\d+ 条记录）[^：]*：.*"
    ),  # a log root cause's title ends with its first log line, as logged
    re.compile(
        r"\w+=[^,=]*(?:, \w+=[^,=]*)+"
    ),  # a run's settings as the framework lists them (distributed_args)
]
# English still on Chinese pages, each with where it is written and who translates it: reported (xfail), not
# failed, until it is translated; then the line goes (the lead, after merging s7-i18nfind / s7-i18nlogs).
# Anything not listed here fails the test.
_FINDINGS = "findings texts, branch s7-i18nfind"
_LOGS = "log rules / error codes, branch s7-i18nlogs"
PENDING: list[tuple[str, re.Pattern[str]]] = [
    # (who translates it, the English text's pattern): empty since #24's last texts (s7-i18nrest); a text
    # listed here is reported (xfail) rather than failed while its translation is under way elsewhere
]


# A short label of diag's own (a metric, a picker, a button, an expander) in English on a Chinese page: the
# sentence check above needs several words, so "host ops" or "kernel time" passed it. Kept: names that read the
# same in the Chinese documentation, file formats, Streamlit's own upload button, and data keys (op classes such as
# "attention_decode", run names); the glossary page lists terms as terms.
GLOSSARY_ZH = "术语表"
KEPT_LABELS = {"Rank", "Markdown", "HTML", "JSON", "CSV", "Upload", "Upload directories"}
_ICON = re.compile(r"^keyboard_arrow_\w+\s*")  # an expander's icon name, read as text
_ENGLISH_WORD = re.compile(r"\b[A-Za-z][a-z]{2,}\b")
_DATA_KEY = re.compile(r"^[a-z0-9_./-]+$")  # an identifier: op class, file or run name


def english_labels(texts: list[str]) -> list[str]:
    out = []
    for raw in texts:
        text = _ICON.sub("", raw.strip()).strip()
        if (
            not text
            or re.search(r"[\u4e00-\u9fff]", text)
            or text in KEPT_LABELS
            or _DATA_KEY.fullmatch(text)
        ):
            continue
        if any(p.fullmatch(text) for p in DATA_VALUES) or not _ENGLISH_WORD.search(text):
            continue
        out.append(text)
    return sorted(set(out))


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [x for v in value.values() for x in _strings(v)]
    if isinstance(value, list):
        return [x for v in value for x in _strings(v)]
    return []


def area_texts(db: Path) -> list[tuple[str, re.Pattern[str]]]:
    """The findings' and the logs' own English texts in ``db`` (``diag findings / logs --json``): on a page they
    are those areas' texts, whose translations are in their branches."""
    from tests.conftest import cli_json

    out = []
    for who, args in ((_FINDINGS, ("findings",)), (_LOGS, ("logs", "--all-episodes"))):
        _, payload = cli_json(*args, "--db", str(db))
        texts = {x.strip() for x in _strings(payload) if len(x.split()) >= 3 and not x.startswith("/")}
        if texts:
            alternation = "|".join(re.escape(x) for x in sorted(texts, key=len, reverse=True))
            out.append((f"{who}: diag {args[0]} --json", re.compile(alternation)))
    return out


def _sorted_out(
    texts: list[str], areas: list[tuple[str, re.Pattern[str]]] = ()
) -> tuple[list[str], list[tuple[str, str]]]:
    """The English sentences among ``texts``: (not accounted for, [(owner, text)] of other areas)."""
    offenders, pending = [], []
    known = [*PENDING, *areas]
    for text in dict.fromkeys(texts):
        for pattern in DATA_VALUES:
            text = pattern.sub(" ", text)
        if not english_sentences([text]):
            continue
        owner = next((who for who, pattern in known if pattern.search(text)), None)
        rest = text
        for _, pattern in known:
            rest = pattern.sub(" ", rest)
        if english_sentences([rest]):
            offenders.append(text)
        elif owner:
            pending.append((owner, text))
    return offenders, pending


def _visit_every_page(url: str, lang: str, shots: Path | None) -> dict[str, list[str]]:
    """Open each page from the sidebar; its heading must show; returns each page's own texts."""
    from playwright.sync_api import sync_playwright

    from tests.browser_app import launch, page_headings

    found: dict[str, list[str]] = {}
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        headings = page_headings(lang)
        page.get_by_role("heading", name=headings[0][1], exact=True).first.wait_for(timeout=120_000)
        for i, (link, heading) in enumerate(headings):
            page.locator('[data-testid="stSidebarNav"]').get_by_role("link", name=link, exact=True).click()
            page.get_by_role("heading", name=heading, exact=True).first.wait_for(timeout=60_000)
            page.wait_for_timeout(800)  # the rest of the script after the title
            found[heading] = page.locator(OWN_TEXT).all_inner_texts()
            if shots is not None:
                page.screenshot(path=str(shots / f"{lang}_{i:02d}.png"), full_page=True)
        browser.close()
    return found


@pytest.mark.browser
def test_every_page_in_chinese_in_a_browser(tmp_path, monkeypatch):
    """The app as the README's first run makes it (sample_traces/ ingested), served in zh: every page opens from
    the sidebar with its Chinese heading; a Chinese page shows no English sentence of its own. English sentences of
    other areas are listed (xfail) until their translations merge. (The English pages, headings and sidebar links
    are tests/test_browser_pages.py's: a second English pass here cost a server and 14 page loads of CI time.)"""
    import os

    from tests.browser_app import require_browser, serve_app
    from tests.test_i18n import has_cjk_font

    require_browser()
    shots = Path(os.environ.get("DIAG_SCREENSHOTS") or tmp_path)
    db = tmp_path / "samples.duckdb"
    monkeypatch.setenv("DIAG_LANG", "zh")
    with serve_app(db, tmp_path / "uploads", samples=True, timeout=240) as app:
        pages = _visit_every_page(app.url, "zh", shots if has_cjk_font() else None)
    (shots / "i18n_pages.json").write_text(json.dumps({"zh": pages}, ensure_ascii=False, indent=1), "utf-8")
    assert len(pages) == 14
    offenders, pending, areas = {}, {}, area_texts(db)
    for heading, texts in pages.items():
        mine, others = _sorted_out(texts, areas)
        if mine:
            offenders[heading] = mine
        if others:
            pending[heading] = others
    assert offenders == {}, "English sentences on Chinese pages:\n" + "\n".join(
        f"  {page}: {text!r}" for page, texts in offenders.items() for text in texts
    )
    labels = {page: english_labels(texts) for page, texts in pages.items() if page != GLOSSARY_ZH}
    assert {page: found for page, found in labels.items() if found} == {}, "English labels on Chinese pages"
    assert all(len(texts) >= 1 for texts in pages.values())
    if pending:
        pytest.xfail(
            "English texts of other areas on Chinese pages (translated in parallel branches):\n"
            + "\n".join(
                f"  {page}: [{who}] {text[:160]!r}" for page, items in pending.items() for who, text in items
            )
        )


# -- the Chinese HTML report offline ---------------------------------------------------------------------


def _zh_report(db: Path, out: Path) -> str:
    import shutil

    from diag.cli import main

    db = Path(shutil.copy(db, out.with_suffix(".duckdb")))  # the page tests' app may hold the database open

    assert (
        main(["report", "--db", str(db), "--run", "1", "--lang", "zh", "--format", "html", "-o", str(out)])
        == 0
    )
    return out.read_text(encoding="utf-8")


def test_html_report_in_chinese_names_only_local_fonts(pair_db, tmp_path):
    html = _zh_report(pair_db, tmp_path / "r.html")
    style = re.search(r"<style>(.*?)</style>", html, re.S).group(1)
    assert '<html lang="zh-CN">' in html and "发生了什么" in html
    assert "WenQuanYi Micro Hei" in style and "Noto Sans CJK SC" in style  # CJK fonts by name, the OS's own
    assert not re.search(r"https?://|@import|@font-face|url\(", style)
    assert not re.search(r"<link\b|<script\b[^>]*\bsrc=|<img\b[^>]*\bsrc=[\"']?https?:", html)


@pytest.mark.browser
def test_html_report_in_chinese_opens_offline_in_a_browser(pair_db, tmp_path):
    """Opened from disk, the report asks for nothing outside the file; screenshot (a CJK font installed)."""
    import os

    from playwright.sync_api import sync_playwright

    from tests.browser_app import launch, require_browser
    from tests.test_i18n import has_cjk_font

    require_browser()
    report = tmp_path / "r.html"
    _zh_report(pair_db, report)
    shots = Path(os.environ.get("DIAG_SCREENSHOTS") or tmp_path)
    requests: list[str] = []
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1200, "height": 1400})
        page.on("request", lambda r: None if r.url == report.as_uri() else requests.append(r.url))
        page.goto(report.as_uri())
        heading = page.locator("h2").first.inner_text()
        if has_cjk_font():
            page.screenshot(path=str(shots / "zh_report.png"), full_page=True)
        browser.close()
    assert requests == [] and heading == "发生了什么"
