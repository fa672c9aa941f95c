"""中文 / English (#24): the catalogs, the language choice, the Chinese report, the app in Chinese.

The catalogs (diag/i18n/en.toml, zh.toml) must hold the same keys, every ``t("…")`` key the code uses must be in
them, and a Chinese page or report must show no English heading or sentence outside its data values.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from diag.analyses import owners
from diag.i18n import catalog, language_from_environment, set_language, t
from tests.conftest import ROOT, SAMPLES, ingest_into

H100 = SAMPLES / "generated" / "llm_decode_cuda" / "h100_decode_tp1.pt.trace.json"
CJK = re.compile(r"[\u4e00-\u9fff]")
# ≥ 4 ASCII words in a row: an English sentence (a heuristic; code spans, paths and file names are removed first)
ENGLISH_RUN = re.compile(r"\b[A-Za-z][a-z'’]*(?:[ ,]+[A-Za-z][a-z'’]*){3,}\b")
ZH_SECTIONS = ["发生了什么", "影响", "根因", "促成因素", "建议措施", "环境"]
EN_SECTIONS = [
    "What happened",
    "Impact",
    "Root cause",
    "Contributing factors",
    "Suggested actions",
    "Environment",
]


@pytest.fixture(autouse=True)
def _back_to_the_environment_language():
    """The language is held per thread: a test that chooses one must not leave it to the next test."""
    yield
    set_language(None)


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory) -> Path:
    """One CUDA decode trace of sample_traces/ (a postmortem with all five sections filled)."""
    from diag.store import Store

    db = tmp_path_factory.mktemp("i18n") / "sample.duckdb"
    with Store(db) as store:
        summary = ingest_into(store, [H100])
        assert [f.status for f in summary.files] == ["ok"]
    return db


# -- catalogs ---------------------------------------------------------------------------------------------


# zh-only keys: their English is the data file they translate (rules/log_patterns*.toml, rules/error_codes*.csv);
# tests/test_i18n_logs.py checks them against those files
ENGLISH_IN_DATA_FILES = ("log_rule.", "log_category.", "error_code.", "error_fix.")


def test_both_catalogs_hold_the_same_keys_and_no_empty_text():
    en, zh = catalog("en"), catalog("zh")
    zh_only = {k for k in zh if k.startswith(ENGLISH_IN_DATA_FILES)}
    assert sorted(set(en) - set(zh)) == [] and sorted(set(zh) - set(en) - zh_only) == []
    assert [k for k, v in {**en, **zh}.items() if not v.strip()] == []
    # the placeholders of a text are the same in both languages (a zh text must not drop the figure)
    fields = re.compile(r"\{(\w+)")
    assert [k for k in en if set(fields.findall(en[k])) != set(fields.findall(zh[k]))] == []


def _used_keys() -> set[str]:
    literal = re.compile(r"""\bt\(\s*["']([a-z0-9_.]+)["']""")
    keys: set[str] = set()
    for folder in ("diag", "app"):
        for path in (ROOT / folder).rglob("*.py"):
            keys |= set(literal.findall(path.read_text(encoding="utf-8")))
    return keys


def test_every_key_the_code_uses_is_in_the_catalogs():
    used = _used_keys()
    assert len(used) >= 100  # the grep found the calls (pages, report, CLI)
    assert sorted(used - set(catalog("en"))) == []
    # keys built at run time: report table columns, glossary columns
    from diag import report_tables as rt

    built = {f"report.col.{c}" for cols in (rt.COMPARISON_COLUMNS, rt.SERVING_COLUMNS, rt.SERVING_COMPARE_COLUMNS,
                                            rt.RANK_COLUMNS) for c in cols}  # fmt: skip
    built |= {f"page.glossary.col_{c}" for c in ("term", "zh", "meaning", "cuda")}
    assert sorted(built - set(catalog("en"))) == []


def test_terms_are_written_as_the_ascend_chinese_docs_write_them():
    zh = catalog("zh")
    assert {k: zh[f"term.{k}"] for k in ("op", "dispatch", "free", "uncovered_communication", "step", "npu_memory",
                                          "gpu_memory")} == {  # fmt: skip
        "op": "算子", "dispatch": "下发", "free": "空闲", "uncovered_communication": "通信未掩盖", "step": "迭代",
        "npu_memory": "内存", "gpu_memory": "显存",
    }  # fmt: skip


def test_owner_headings_and_glossary_have_chinese_texts():
    groups = owners.owner_rules()["groups"]
    assert [k for k in groups["order"] if not CJK.search(groups["zh"].get(k, ""))] == []
    set_language("zh")
    assert [h for _, h in owners.headings()][:2] == ["修改代码", "修改配置"]
    with open(ROOT / "diag" / "rules" / "glossary.toml", "rb") as fh:
        terms = tomllib.load(fh)["term"]
    assert len(terms) == 40 and [x["term"] for x in terms if not CJK.search(x.get("meaning_zh", ""))] == []


# -- the language choice ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("environ", "lang"),
    [
        ({}, "en"),
        ({"DIAG_LANG": "zh"}, "zh"),
        ({"LANG": "zh_CN.UTF-8"}, "zh"),
        ({"LC_ALL": "zh_CN.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
        ({"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}, "en"),  # POSIX: LC_ALL decides, C is English
        ({"DIAG_LANG": "en", "LANG": "zh_CN.UTF-8"}, "en"),
        (
            {"DIAG_LANG": "fr", "LANG": "zh_CN.UTF-8"},
            "zh",
        ),  # an unknown DIAG_LANG falls through to the locale
    ],
)
def test_language_from_the_environment(environ, lang):
    assert language_from_environment(environ) == lang


def test_t_fills_placeholders_and_falls_back(monkeypatch):
    monkeypatch.setenv("DIAG_LANG", "zh")
    assert t("report.more", n=3) == "… 另有 3 条（见 JSON 报告）"
    set_language("en")
    assert t("report.more", n=3) == "… 3 more (see the JSON report)"
    assert t("no.such.key") == "no.such.key"
    with pytest.raises(ValueError):
        set_language("fr")


def _cli(capsys, *args: str) -> tuple[int, str, str]:
    from diag.cli import main

    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def _headings(md: str) -> list[str]:
    return [line[3:] for line in md.splitlines() if line.startswith("## ")]


def _hint(capsys, *args: str) -> str:
    """The last line of a usage error (no database read: a cheap probe of the CLI's language)."""
    code, _, err = _cli(capsys, *args, "runs", "--jsn")
    assert code == 2
    return err.splitlines()[-1]


ZH_HINT, EN_HINT = "执行 'diag runs --help' 查看帮助。", "Try 'diag runs --help' for help."


def test_cli_language_from_env_locale_and_lang(sample_db, capsys, monkeypatch):
    for var in ("LC_ALL", "LC_MESSAGES", "DIAG_LANG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    assert _hint(capsys) == EN_HINT
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert _hint(capsys) == ZH_HINT
    assert _hint(capsys, "--lang", "en") == EN_HINT  # --lang wins over the locale
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("DIAG_LANG", "zh")
    assert _hint(capsys) == ZH_HINT
    assert _hint(capsys, "--lang", "en") == EN_HINT
    report = ("report", "--db", str(sample_db), "--run", "1")
    assert _headings(_cli(capsys, *report)[1]) == ZH_SECTIONS
    assert _headings(_cli(capsys, *report, "--lang", "en")[1]) == EN_SECTIONS  # report's own --lang wins too
    code, _, err = _cli(capsys, "--lang", "xx", "runs")
    assert code == 2 and "--lang 只能是 zh 或 en，不能是 'xx'" in err  # in $DIAG_LANG's language


# -- the report in Chinese --------------------------------------------------------------------------------


def test_report_in_chinese_md_and_html(sample_db, capsys, tmp_path):
    code, md, _ = _cli(capsys, "report", "--db", str(sample_db), "--run", "1", "--lang", "zh")
    assert code == 0 and _headings(md) == ZH_SECTIONS
    assert [line for line in md.splitlines() if line.startswith("### ")] == ["### 修改代码"]
    assert not [h for h in EN_SECTIONS if f"## {h}" in md] and "范围：" in md and "**根因类别：**" in md
    (root_line,) = [line for line in md.splitlines() if line.startswith("**根因类别：**")]
    assert re.search(r"\((高|中|低|提示), 依据", root_line), root_line  # the severity word too, not "medium"
    out = tmp_path / "r.html"
    code, _, err = _cli(capsys, "report", "--db", str(sample_db), "--run", "1", "--lang", "zh", "--format", "html",
                        "-o", str(out))  # fmt: skip
    html = out.read_text(encoding="utf-8")
    assert code == 0 and "已写入" in err and "5 个部分中 5 个有内容" in err
    assert (
        re.findall(r"<h2>([^<]*)</h2>", html) == [*ZH_SECTIONS[:5], "按类别统计的设备耗时", "环境"]
        and '<html lang="zh-CN">' in html
    )
    # offline: a CJK font stack by name, nothing fetched
    assert (
        '"Noto Sans CJK SC","Source Han Sans SC","PingFang SC","Microsoft YaHei","WenQuanYi Micro Hei"'
        in html
    )
    assert not re.search(r"@import|@font-face|url\(|https?://fonts", html)


def test_report_in_english_is_unchanged(sample_db, capsys):
    code, md, _ = _cli(capsys, "report", "--db", str(sample_db), "--run", "1", "--lang", "en")
    assert code == 0 and _headings(md) == EN_SECTIONS and "Scope: " in md and "**Root cause category:**" in md


# -- the app in Chinese -----------------------------------------------------------------------------------

TRANSLATED_PAGES = {  # page file → its title key (08_compare and 11_cluster are translated in a later session)
    "01_runs": "runs", "02_upload": "upload", "03_timeline": "timeline", "04_stalls": "stalls",
    "05_fallback": "fallback", "06_findings": "findings", "07_logs": "logs", "09_postmortem": "postmortem",
    "10_serving": "serving", "12_glossary": "glossary", "13_memory": "memory", "14_ops": "ops",
}  # fmt: skip
# captions there are the page's own words; elsewhere a caption may carry data (a finding's owner reason, an error
# code's catalog meaning, an evidence table's title), which stays in the language it was written in
CHROME_CAPTION_PAGES = {"02_upload", "03_timeline", "04_stalls", "10_serving", "12_glossary", "13_memory"}


def english_sentences(texts: list[str]) -> list[str]:
    """Texts holding ≥ 4 ASCII words in a row once code spans, paths and file names are taken out."""
    strip = re.compile(r"`[^`]*`|\S*[/\\]\S*|\S+\.(?:csv|json|toml|log|md|py)\b|\*\*")
    return [x for x in texts if ENGLISH_RUN.search(strip.sub(" ", x))]


def _chrome_texts(at, page: str) -> list[str]:  # noqa: ANN001 - an AppTest
    kinds = ["title", "subheader", "info", "success", *(["caption"] if page in CHROME_CAPTION_PAGES else [])]
    texts = [str(el.value) for kind in kinds for el in getattr(at, kind)]
    texts += [str(m.label) for m in at.metric]
    texts += [str(w.label) for w in [*at.selectbox, *at.radio, *at.checkbox, *at.text_input]]
    return texts


def test_the_app_in_chinese_from_diag_lang(sample_db, monkeypatch):
    from tests.conftest import open_page

    monkeypatch.setenv("DIAG_LANG", "zh")
    at = open_page(monkeypatch, sample_db)
    zh = catalog("zh")
    found: dict[str, list[str]] = {}
    for page, key in TRANSLATED_PAGES.items():
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, (page, at.exception)
        assert at.title[0].value == zh[f"page.{key}.title"], page
        if english := english_sentences(_chrome_texts(at, page)):
            found[page] = english
    assert found == {}
    assert zh["page.memory.title"] == "内存" and at.sidebar.radio(key="lang").value == "zh"


def test_the_sidebar_switch_changes_the_language_for_the_session(sample_db, monkeypatch):
    from tests.conftest import open_page

    monkeypatch.setenv("DIAG_LANG", "en")
    at = open_page(monkeypatch, sample_db, "app_pages/04_stalls.py")
    assert at.title[0].value == "Stalls" and at.subheader[0].value == "diag vs the profiler's own figures"
    at.sidebar.radio(key="lang").set_value("zh").run()
    assert at.title[0].value == "耗时拆解" and at.subheader[0].value == "diag 与 Profiling 工具自身数据的对比"
    at.switch_page("app_pages/12_glossary.py").run()  # remembered on the next page
    assert at.title[0].value == "术语表" and at.table[0].value.columns.tolist() == [
        "术语",
        "中文",
        "解释",
        "CUDA 对应",
    ]
    assert "迭代" in at.table[0].value.set_index("术语").loc["Step", "解释"]


def test_english_sentence_heuristic():
    assert english_sentences(
        ["No findings for this run.", "该运行没有诊断结论。", "`diag ingest PATH` 上传"]
    ) == ["No findings for this run."]
    assert english_sentences(["见 deploy/README.md 与 step_trace_time.csv", "**修复方法:** 改 dtype"]) == []


# -- a real browser: the app in Chinese, screenshot -------------------------------------------------------


def has_cjk_font() -> bool:
    fc = shutil.which("fc-list")
    return bool(fc and subprocess.run([fc, ":lang=zh"], capture_output=True, text=True).stdout.strip())


@pytest.mark.browser
def test_browser_opens_the_app_in_chinese(sample_db, monkeypatch, tmp_path):
    from playwright.sync_api import sync_playwright

    from tests.browser_app import launch, require_browser, serve_app

    require_browser()
    monkeypatch.setenv("DIAG_LANG", "zh")
    db = tmp_path / "zh.duckdb"
    shutil.copy(sample_db, db)  # the app holds its database's lock while it runs
    shots = Path(os.environ.get("DIAG_SCREENSHOTS") or tmp_path)
    zh = catalog("zh")
    with serve_app(db, tmp_path / "uploads") as app, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(app.url)
        page.get_by_role("heading", name=zh["page.runs.title"]).first.wait_for(timeout=120_000)
        nav = page.locator('[data-testid="stSidebarNav"]')
        nav.get_by_text(zh["nav.stalls"], exact=True).first.click()
        page.get_by_role("heading", name=zh["page.stalls.title"]).first.wait_for(timeout=60_000)
        page.wait_for_timeout(2500)  # the chart draws after the script ends
        nav_text = nav.inner_text()
        main_text = page.locator('[data-testid="stMain"]').first.inner_text()
        # the page's own words: headings, captions, alerts, widget and metric labels (a chart's legend and the
        # tables' cells are data: bucket and op names)
        own = page.locator(
            '[data-testid="stMain"] :is([data-testid="stHeading"], [data-testid="stCaptionContainer"], '
            '[data-testid="stAlert"], [data-testid="stWidgetLabel"], [data-testid="stMetricLabel"])'
        ).all_inner_texts()
        if has_cjk_font():  # without a CJK font the glyphs are boxes: the text is still checked
            page.screenshot(path=str(shots / "zh_stalls.png"), full_page=True)
        browser.close()
    assert [zh[f"nav.{k}"] in nav_text for k in ("runs", "stalls", "memory", "ops", "postmortem")] == [
        True
    ] * 5
    assert zh["page.stalls.versus"] in main_text and "Traceback" not in main_text
    assert len(own) >= 10 and english_sentences(own) == []


def test_one_sessions_language_does_not_stay_in_the_next_sessions_texts(sample_db, monkeypatch):
    """Texts built when a module is first imported would keep that session's language for every later one: the
    runs table's column tooltips were such a dict (in Chinese for an English session after a Chinese one)."""
    import json

    from app.glossary import help_for
    from tests.conftest import open_page

    def runs_ai_cpu_help(header: str = "AI_CPU tasks") -> str:
        at = open_page(monkeypatch, sample_db)
        return json.loads(at.dataframe[0].proto.columns)[header]["help"]

    monkeypatch.setenv("DIAG_LANG", "zh")
    in_chinese = runs_ai_cpu_help("AI_CPU 任务数")  # the header too in the language (cli_headers.csv)
    monkeypatch.setenv("DIAG_LANG", "en")
    set_language(None)
    assert CJK.search(in_chinese)
    assert runs_ai_cpu_help() == help_for("AI_CPU") and help_for("AI_CPU").startswith(
        "**AI_CPU**: Kernel that runs"
    )
