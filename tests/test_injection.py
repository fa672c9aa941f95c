"""Untrusted text is text on every page: op, model, folder, thread and file names and log lines that hold Markdown
or HTML are shown literally, never drawn as images, links or tags (issue #18, "Injection").

The store is built from real samples whose every name is rewritten to carry a payload; each page is rendered
with AppTest (the Markdown sources must hold no live markup), in a real browser (no request leaves 127.0.0.1,
no payload element in the DOM), and the HTML / Markdown reports are checked the same way.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.browser_app import CHROMIUM, PAGE_HEADINGS, is_local, launch, require_browser, serve_app
from tests.conftest import FIXTURES, REAL_AICPU_TRACE, SAMPLES, cli_json, open_page, query, run_cli

OP = "![p](http://127.0.0.1:9/x.png)<img src=x onerror=alert(1)>**b**"
MODEL = "[l](javascript:alert(1))"
FOLDER = "<b>x<b>![f](x.png)"  # a folder name cannot hold "/": the closing tag is left out
LOG = "<script>alert(1)</script>"
THREAD = "<a href=http://x>t</a>"
PAGES = sorted(
    p.name for p in (Path(__file__).resolve().parent.parent / "app" / "app_pages").glob("[0-9]*.py")
)
# live Markdown / HTML: an image or link opener, a tag that fetches or runs, the payload's bold; "\" before it
# makes it literal text
LIVE = re.compile(r"(?<!\\)!(?<!\\)\[|(?<!\\)\]\(|(?<!\\)<(?:img|a |script|b>)|(?<!\\)\*\*b", re.IGNORECASE)
# the payloads' tags as Plotly would draw them (its own <b>…</b> / <br> around a hover value are the page's)
PLOTLY_LIVE = ("<a href", "<img", "<script", "<b>x")


def _payload_trace(src: Path, dest: Path) -> None:
    """The real AI_CPU trace with every device op name and every thread name carrying a payload."""
    events = json.loads(src.read_text())
    for e in events:
        if e.get("ph") == "X" and e.get("args", {}).get("Task Type"):
            e["name"] = OP + e["name"]
        elif e.get("ph") == "X" and e.get("cat") == "cpu_op":
            e["name"] = e["name"] + THREAD
        elif e.get("ph") == "M" and e["name"] == "thread_name":
            e["args"]["name"] = THREAD + e["args"]["name"]
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(events))


def _payload_logs(src: Path, dest: Path) -> None:
    """The incident plog with a payload at the start of every record's text (root causes and evidence hold it)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    lines = src.read_text().splitlines()
    # after the "[LEVEL] MODULE(pid,proc):time [file:line]tid " head, so that titles quoting the text hold it too
    head = re.compile(r"^(\[\w+\] \S+ \[[^\]]*\]\d+ )")
    dest.write_text("\n".join(head.sub(lambda m: f"{m[1]}{LOG}{OP} ", line) for line in lines) + "\n")


def build_payload_inputs(root: Path) -> Path:
    """A folder of inputs whose every untrusted string holds a payload: trace, plog, serving results."""
    run = root / f"rank0_{FOLDER}_ascend_pt"
    _payload_trace(REAL_AICPU_TRACE, run / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    incident = next((SAMPLES / "incident").iterdir())
    shutil.copy(incident / "profiler_info_0.json", run / "profiler_info_0.json")
    plog = next((incident / "log" / "debug" / "plog").glob("plog-*.log"))
    _payload_logs(plog, run / "log" / "debug" / "plog" / plog.name)
    serving = root / f"serving_{FOLDER}"
    serving.mkdir()
    for txt in sorted((SAMPLES / "serving").glob("*.txt")):
        text = txt.read_text().replace("Qwen/Qwen2.5-7B-Instruct", MODEL + LOG, 1)
        (serving / txt.name).write_text(text)
    result = json.loads((FIXTURES / "serving" / "ok_vllm_save_result.json").read_text())
    result.update(model_id=MODEL + OP, tokenizer_id=MODEL, hardware=OP)
    (serving / "vllm_save_result.json").write_text(json.dumps(result))
    shutil.copytree(SAMPLES / "generated" / "llm_decode_cuda", root / f"cuda_{FOLDER}")
    return root


def _payload_store(root: Path, db: Path) -> tuple[Path, int]:
    build_payload_inputs(root)
    for part in (next(root.glob("rank0_*")), root):  # the Ascend run first: run 1, what every page opens on
        code, out = cli_json("ingest", str(part), "--db", str(db))
        assert code == 0, out
    return db, _ascend_run(db)


@pytest.fixture(scope="module")
def payload_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    return _payload_store(
        tmp_path_factory.mktemp("payload_inputs"), tmp_path_factory.mktemp("payload") / "p.duckdb"
    )


def _markdown_sources(at) -> list[str]:  # noqa: ANN001
    """Every text an AppTest page hands to Streamlit's Markdown renderer: bodies, labels, metric values, tables."""
    kinds = ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success")
    out = [str(e.value) for k in kinds for e in getattr(at, k)]
    out += [f"{m.label} {m.value}" for m in at.metric] + [str(e.label) for e in at.expander]
    out += [str(b.label) for b in at.button] + [str(t.label) for t in at.tabs]
    for t in at.table:  # st.table draws its cells (and its index) as Markdown too
        df = t.value
        out += [str(v) for v in df.index] + [str(v) for col in df.columns for v in df[col]]
    return out


@pytest.mark.parametrize("page", PAGES)
def test_no_page_draws_a_payload_as_markup(payload_db, monkeypatch, page):
    db, run_id = payload_db
    at = open_page(monkeypatch, db)
    at.session_state["run_id"] = run_id  # the Ascend run: AI_CPU ops, logs, threads
    at.switch_page(f"app_pages/{page}").run()
    assert not at.exception, at.exception
    live = [s for s in _markdown_sources(at) if LIVE.search(s)]
    assert live == [], live


def _ascend_run(db: Path) -> int:
    (run_id,) = query(db, "SELECT run_id FROM runs WHERE name LIKE 'rank0%'")[0]
    return run_id


def _strings(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return []


@pytest.mark.parametrize("page", ["03_timeline.py", "08_compare.py"])
def test_no_chart_draws_a_payload_as_markup(payload_db, monkeypatch, page):
    db, run_id = payload_db
    at = open_page(monkeypatch, db)
    at.session_state["run_id"] = run_id
    at.switch_page(f"app_pages/{page}").run()
    assert not at.exception, at.exception
    texts = [s for chart in at.get("plotly_chart") for s in _strings(json.loads(chart.proto.spec))]
    assert texts, "no chart drawn"
    live = [s for s in texts if any(tag in s.lower() for tag in PLOTLY_LIVE)]
    assert live == [], live[:5]


def test_timeline_shows_thread_and_op_names_literally(payload_db, monkeypatch):
    """The lanes and hover values hold the payload as entities: Plotly draws "<a href=…>" as those characters."""
    db, run_id = payload_db
    at = open_page(monkeypatch, db)
    at.session_state["run_id"] = run_id
    at.switch_page("app_pages/03_timeline.py").run()
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    lanes = fig["layout"]["yaxis"]["categoryarray"]
    assert "NPU · &lt;a href=http://x&gt;t&lt;/a&gt;Stream 3" in lanes, lanes
    hover = {row[0] for t in fig["data"] if t.get("customdata") for row in t["customdata"]}
    assert (
        "![p](http://127.0.0.1:9/x.png)&lt;img src=x onerror=alert(1)&gt;**b**aclnnCast_CastAiCpu_Cast"
        in hover
    )


PAYLOAD_URL_PARTS = ("x.png", "javascript:", "http://x", "127.0.0.1:9", "onerror")
OPEN_PAGE_HEADINGS = PAGE_HEADINGS
SCRIPT_DONE = (
    "() => document.querySelector('[data-testid=\"stApp\"]')?.dataset.testScriptState === 'notRunning'"
)
TIMELINE_LANE_DRAWN = (
    "() => [...document.querySelectorAll('.ytick')].some(t => t.textContent.includes('Stream 3'))"
)
# every element that could fetch, link or run, with the attribute that would carry the payload
DOM_PROBE = """() => [...document.querySelectorAll('img, a, script, iframe, image, source, link, object, embed')]
    .map(e => [e.tagName, e.getAttribute('src') || e.getAttribute('href') || e.getAttribute('xlink:href') || '',
               e.getAttribute('onerror') || ''])"""


@pytest.fixture
def served_payload(payload_db, tmp_path):
    require_browser()
    # a copy: the AppTests of this module hold the payload database open for writing in this process
    db = tmp_path / "served.duckdb"
    shutil.copy(payload_db[0], db)
    with serve_app(db, tmp_path / "uploads") as app:
        yield app.url, CHROMIUM


def _from_payload(value: str) -> bool:
    return any(part in value.lower() for part in PAYLOAD_URL_PARTS)


@pytest.mark.browser
def test_no_page_fetches_links_or_runs_a_payload_in_a_browser(served_payload):

    from playwright.sync_api import sync_playwright

    url, chromium = served_payload
    outside: list[str] = []
    found: dict[str, list] = {}
    dialogs: list[str] = []
    with sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1200})
        page.on("request", lambda r: None if is_local(r.url) else outside.append(r.url))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url)
        page.get_by_role("heading", name="Runs").wait_for(timeout=60_000)
        for link, heading in OPEN_PAGE_HEADINGS:
            # Streamlit disables its sidebar links while a page's script runs: on a loaded machine the previous
            # page may still be running after the 30 s click timeout (CI's clean-clone run met it)
            page.wait_for_function(SCRIPT_DONE, timeout=120_000)
            page.get_by_role("link", name=link, exact=True).click(timeout=60_000)
            page.get_by_role("heading", name=heading, exact=True).wait_for(timeout=60_000)
            page.wait_for_load_state("networkidle")
            if link == "Timeline":
                # Plotly draws its axes after the script ends: on a loaded machine seconds later (CI met an empty
                # axis after a fixed 1.5 s wait); the probe below must see the drawn chart
                page.wait_for_function(TIMELINE_LANE_DRAWN, timeout=60_000)
            page.wait_for_timeout(1500)
            for expander in page.locator("summary").all()[:12]:  # open expanders: evidence, log lines
                expander.click()
            page.wait_for_timeout(500)
            bad = [e for e in page.evaluate(DOM_PROBE) if _from_payload(e[1]) or e[2]]
            if bad:
                found[link] = bad
            if link == "Fallback ops":
                shown = page.inner_text("body")
                assert "![p](http://127.0.0.1:9/x.png)<img src=x onerror=alert(1)>**b**" in shown
            if link == "Timeline":
                ticks = " ".join(
                    page.evaluate("() => [...document.querySelectorAll('.ytick')].map(t => t.textContent)")
                )
                assert "<a href=http://x>t</a>Stream 3" in ticks, ticks
        browser.close()
    assert outside == [] and found == {} and dialogs == [], (outside, found, dialogs)


def test_upload_page_shows_crafted_file_names_and_first_lines_literally(tmp_path, monkeypatch):
    """A refused upload's message quotes its name and its first line: both stay text in the error box."""
    at = open_page(
        monkeypatch, tmp_path / "up.duckdb", "app_pages/02_upload.py", uploads=tmp_path / "uploads"
    )
    name = "![u](http:127.0.0.1:9;u.png)[l](javascript:alert(1)).csv"  # a file name holds no "/"
    first_line = f"{LOG}{OP},{MODEL}\n1,2\n"
    at.file_uploader(key="upload_files").upload(name, first_line.encode(), "text/csv").run()
    at.button(key="ingest").click().run()
    assert not at.exception, at.exception
    shown = _markdown_sources(at)
    assert any("u.png" in s for s in shown), shown  # the name is on the page, escaped
    assert [s for s in shown if LIVE.search(s)] == []


def test_reports_escape_every_payload(tmp_path):
    """The HTML report holds no payload tag, the Markdown report no live image / link / tag."""
    (tmp_path / "in").mkdir()
    db, run_id = _payload_store(tmp_path / "in", tmp_path / "report.duckdb")  # not the one the app holds open
    outputs = {}
    for fmt in ("html", "md"):
        out = tmp_path / f"report.{fmt}"
        run_cli("report", "--db", str(db), "--run", str(run_id), "--format", fmt, "-o", str(out), check=True)
        outputs[fmt] = out.read_text()
    html_text, md_text = outputs["html"], outputs["md"]
    assert "&lt;img src=x onerror=alert(1)&gt;" in html_text  # the op name is in the report, as text
    assert "&lt;b&gt;x&lt;b&gt;" in html_text  # and the folder name
    for tag in ("<img", "<script", "<a href=http://x", "<b>x", "onerror=alert(1)>"):
        assert tag not in html_text, tag
    prose = re.sub(r"(?ms)^[ \t]*(`{3,}).*?^[ \t]*\1", "", md_text)  # fenced log excerpts are literal
    assert "x\\.png" in prose
    assert LIVE.search(prose) is None, LIVE.search(prose)


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("aclnnReduceSum_CastAiCpu_Cast", "aclnnReduceSum_CastAiCpu_Cast"),  # intraword: as it is
        ("![p](http://h/x.png)", r"\!\[p\](http\://h/x.png)"),
        ("[l](javascript:alert(1))", r"\[l\](javascript:alert(1))"),
        ("_it_ *b* `c` ~s~ $x$ a@b.c", r"\_it\_ \*b\* \`c\` \~s\~ \$x\$ a\@b.c"),
        ("<b>x</b> &amp;", r"\<b>x\</b> \&amp;"),
        (":red[x] :material/home:", r":red\[x\] :material/home:"),
        ("# h", r"\# h"),
        ("- item", r"\- item"),
        ("> quote", r"\> quote"),
        ("1. first", r"1\. first"),
        ("2) second", r"2\) second"),
        ("0.986", "0.986"),
        ("DOUBLE -> FLOAT (1 op)", "DOUBLE -> FLOAT (1 op)"),
        ("see www.evil.example", r"see www\.evil.example"),
        ("line one\n# two\n\n- three", "line one # two - three"),  # one line: nothing starts a block
    ],
)
def test_md_text_escapes_what_acts_and_nothing_else(raw, escaped):
    from app.text import md_text

    assert md_text(raw) == escaped


def test_code_spans_and_plotly_text():
    from app.text import md_code, plain, template_text

    assert md_code("plog-1.log:5") == "`plog-1.log:5`"
    assert md_code("a`b") == "``a`b``" and md_code("`x") == "`` `x ``"
    assert plain("<a href=http://x>t</a> & y") == "&lt;a href=http://x&gt;t&lt;/a&gt; &amp; y"
    assert template_text("50%{x}<b>") == "50&#37;{x}&lt;b&gt;"
