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

from tests.conftest import FIXTURES, REAL_AICPU_TRACE, SAMPLES, cli_json, open_page, query

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


@pytest.fixture(scope="module")
def payload_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    root = build_payload_inputs(tmp_path_factory.mktemp("payload_inputs"))
    db = tmp_path_factory.mktemp("payload") / "payload.duckdb"
    code, out = cli_json("ingest", str(root), "--db", str(db))
    assert code == 0, out
    return db, _ascend_run(db)


def _markdown_sources(at) -> list[str]:  # noqa: ANN001
    """Every text an AppTest page hands to Streamlit's Markdown renderer: bodies and widget labels / help."""
    kinds = ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success")
    out = [str(e.value) for k in kinds for e in getattr(at, k)]
    out += [str(m.label) for m in at.metric] + [str(e.label) for e in at.expander]
    out += [str(b.label) for b in at.button] + [str(t.label) for t in at.tabs]
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
    assert "![p](http://127.0.0.1:9/x.png)&lt;img src=x onerror=alert(1)&gt;**b**aclnnCast_CastAiCpu_Cast" in hover
