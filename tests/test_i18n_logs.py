"""中文 / English (#24) for the log diagnosis and the error-code catalogs: every log rule (both rules files) has a
Chinese title (where it has one), explanation and fix with the same placeholders; every error-code row a Chinese
meaning; ``diag logs`` speaks Chinese with DIAG_LANG=zh, and exactly as before in English."""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter

import pytest

from diag.analyses.log_explain import explain, oom_advice
from diag.i18n import catalog, set_language
from tests.conftest import FIXTURES, ROOT, ingest_into

RULE_FILES = [ROOT / "diag" / "rules" / f for f in ("log_patterns.toml", "log_patterns_cuda.toml")]
# a {field} and the «…» segments it sits in: the zh text must fill and drop the same ones as the English
PLACEHOLDER = re.compile(r"\{(\w+)\}")
GIB = 1024**3


def _rules() -> list[dict]:
    rules: list[dict] = []
    for path in RULE_FILES:
        with open(path, "rb") as fh:
            rules += tomllib.load(fh)["rule"]
    return rules


def _categories() -> dict[str, dict]:
    with open(RULE_FILES[0], "rb") as fh:
        return tomllib.load(fh)["category"]


def _segments(text: str) -> list[frozenset[str]]:
    """The fields of each «…» segment, then those outside any, in order of appearance."""
    optional = [frozenset(PLACEHOLDER.findall(s)) for s in re.findall(r"«([^«»]*)»", text)]
    return [*optional, frozenset(PLACEHOLDER.findall(re.sub(r"«[^«»]*»", "", text)))]


def test_every_log_rule_has_chinese_texts_with_the_same_placeholders():
    zh = catalog("zh")
    rules = _rules()
    assert len(rules) >= 98  # both files read (73 + 25 when this was written)
    missing = [f"{r['id']}.{part}" for r in rules for part in ("title", "explanation", "fix")
               if r.get(part) and f"log_rule.{r['id']}.{part}" not in zh]  # fmt: skip
    assert missing == []  # a rule listed here falls back to English: add its text to diag/i18n/zh.logs.toml
    differ = [f"{r['id']}.{part}" for r in rules for part in ("title", "explanation", "fix")
              if r.get(part) and Counter(_segments(r[part])) != Counter(_segments(zh[f"log_rule.{r['id']}.{part}"]))]  # fmt: skip
    assert differ == []
    stale = {k.split(".")[1] for k in zh if k.startswith("log_rule.")} - {r["id"] for r in rules}
    assert stale == set()  # a text whose rule is gone
    assert [c for c in _categories() if f"log_category.{c}.title" not in zh] == []


def test_explain_in_chinese_fills_and_drops_the_same_fields():
    record = ["Stream Synchronize failed, ErrCode=507035, desc=[vector core exception]"]
    english = explain("device_aicore_exception", "device_exception", record, {}, "507035")
    assert english.explanation.startswith(
        "An AI Core / AI Vector kernel raised an exception on the device, code 507035."
    )
    set_language("zh")
    said = explain("device_aicore_exception", "device_exception", record, {}, "507035")
    assert said.title == "设备异常（AI Core / AI Vector / AI CPU）"
    assert said.explanation == (
        "一个 AI Core / AI Vector kernel 在 Device 上发生异常，错误码 507035。可能的原因：内存越界访问、非法指令、"
        "把 Host 上的 tensor 传给了 Device，或硬件超时——仅凭这条记录无法判断是哪一种。"
    )
    assert (
        explain("code_oom", "oom", [], {}, None).explanation == "runtime 返回了内存分配失败。"
    )  # «：{code}» dropped
    assert explain("task_timeout_reason", "task_timeout", [], {}, "507046").title == "设备任务超时：507046"


def test_oom_advice_in_both_languages():
    figures = {"requested_bytes": 3 * GIB, "capacity_bytes": 64 * GIB, "allocated_bytes": 8 * GIB,
               "reserved_bytes": 10 * GIB, "free_bytes": 1 * GIB}  # fmt: skip
    english = oom_advice(figures)
    assert english[:2] == [
        "Requested 3.00 GiB with 1.00 GiB free of 64.00 GiB.",
        "Reserved 10.00 GiB vs allocated 8.00 GiB: 2.00 GiB held by the caching allocator (20.0% of reserved): "
        "most of it is in use by tensors.",
    ]
    set_language("zh")
    assert oom_advice(figures)[:2] == [
        "申请 3.00 GiB，当时空闲 1.00 GiB（设备总量 64.00 GiB）。",
        "已预留（reserved）10.00 GiB，已分配（allocated）8.00 GiB：缓存分配器持有 2.00 GiB（占 reserved 的 20.0%）："
        "其中大部分正被 tensor 使用。",
    ]


@pytest.fixture(scope="module")
def two_ranks_db(tmp_path_factory):
    """A device exception on rank 0 and its HCCL echo on rank 1 (plogs as CANN writes them)."""
    from diag.store import Store

    db = tmp_path_factory.mktemp("logs") / "db.duckdb"
    with Store(db) as store:
        assert [f.status for f in ingest_into(store, [FIXTURES / "cann_log" / "two_ranks"]).files] == [
            "ok",
            "ok",
        ]
    return db


def _logs_json(capsys, db) -> dict:  # noqa: ANN001 - `diag logs --json`, in-process (as the CLI runs it)
    from diag.cli import main

    assert main(["logs", "--db", str(db), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_diag_logs_in_chinese(two_ranks_db, monkeypatch, capsys):
    monkeypatch.setenv("DIAG_LANG", "zh")
    out = _logs_json(capsys, two_ranks_db)
    first, echo = out["root_causes"][:2]
    assert (first["category"], echo["category"]) == ("device_exception", "hccl_timeout")
    assert first["title"] == "设备异常（AI Core / AI Vector / AI CPU）"
    assert out["scope"].startswith("最近一次事故：episode #1（2025-06-25 10:45:00.100200 – 11:15:36.300000；")
    assert echo["explanation"] == (
        "一个集合通信（AllReduce_1）等待远端 rank 的 notify 直到 HCCL_EXEC_TIMEOUT：远端 rank 0（EI0002）。"
        "通常是症状：另一个 rank 更早失败或卡住了。"
    )
    assert echo["fix"].startswith("在其他 rank 上找最早的错误（它们的 plog）——那才是原因")
    monkeypatch.setenv("DIAG_LANG", "en")
    out = _logs_json(capsys, two_ranks_db)
    assert out["root_causes"][1]["explanation"] == (
        "A collective, AllReduce_1, waited until HCCL_EXEC_TIMEOUT for a notify from a remote rank: remote rank 0 "
        "(EI0002). Usually a symptom: another rank failed or hung earlier."
    )


def test_diag_logs_table_in_chinese(two_ranks_db, monkeypatch, capsys):
    """The text output's own words follow the language (scope line, severity, role, the echo note); --json keeps
    the stored words (high, cause)."""
    from diag.cli import main

    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("DIAG_LANG", "zh")
    assert main(["logs", "--db", str(two_ranks_db)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("范围：最近一次事故：episode #1") and "Scope:" not in out
    rows = [line for line in out.splitlines() if "device_exception" in line or "hccl_timeout" in line]
    assert "│ 高 " in rows[0] and "│ 根因 " in rows[0], rows
    assert any("（#1 的连带报错）" in line for line in out.splitlines()), out
    assert not re.search(r"│ (high|medium|cause|symptom|consequence) ", out), out
    monkeypatch.setenv("DIAG_LANG", "en")
    assert main(["logs", "--db", str(two_ranks_db)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Scope: latest incident episode #1") and "(echo of #1)" in out
    assert _logs_json(capsys, two_ranks_db)["root_causes"][0]["severity"] == "high"


# -- error-code meanings ------------------------------------------------------------------------------------
# every catalog file (a new one is covered without editing this test): error_codes.csv is the hand-written "cann"
CODE_CATALOGS = {
    (p.stem.removeprefix("error_codes_") if p.stem != "error_codes" else "cann"): p.name
    for p in sorted((ROOT / "diag" / "rules").glob("error_codes*.csv"))
}


def _code_rows(name: str) -> list[dict]:
    import csv

    with open(ROOT / "diag" / "rules" / CODE_CATALOGS[name], encoding="utf-8") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def test_every_error_code_row_has_a_chinese_meaning():
    zh = catalog("zh")
    rows = {name: _code_rows(name) for name in CODE_CATALOGS}
    assert sum(map(len, rows.values())) >= 465
    missing = [f"{name}:{r['code']}" for name, rs in rows.items() for r in rs
               if r["meaning"] and f"error_code.{name}.{r['code']}" not in zh]  # fmt: skip
    assert (
        missing == []
    )  # a code listed here shows its English meaning: add it to diag/i18n/zh.error_codes.toml
    keys = {f"error_code.{name}.{r['code']}" for name, rs in rows.items() for r in rs}
    assert sorted(k for k in zh if k.startswith("error_code.") and k not in keys) == []  # no stale code
    fixes = {r["typical_fix"] for rs in rows.values() for r in rs if r["typical_fix"]}
    assert len(fixes) >= 149 and sorted(f for f in fixes if f"error_fix.{f}" not in zh) == []
    assert (
        sorted(k for k in zh if k.startswith("error_fix.") and k.removeprefix("error_fix.") not in fixes)
        == []
    )


def test_describe_code_follows_the_language():
    from diag.analyses.error_codes import describe_code

    english = {
        c: describe_code(c)["meaning"] for c in ("507035", "507014", "HCCL:9", "CUDA:cudaErrorIllegalAddress")
    }
    assert english == {"507035": "Vector core exception", "507014": "aicore timeout", "HCCL:9": "timeout",
                       "CUDA:cudaErrorIllegalAddress": "an illegal memory access was encountered"}  # fmt: skip
    assert describe_code("EZ1234")["meaning"] == "error (from the code's spelling; not in diag's catalog)"
    set_language("zh")
    assert {c: describe_code(c)["meaning"] for c in english} == {
        "507035": "Vector Core 执行异常", "507014": "AI Core 执行超时", "HCCL:9": "超时",
        "CUDA:cudaErrorIllegalAddress": "遇到非法内存访问",
    }  # fmt: skip
    assert describe_code("EZ9999")["meaning"].startswith("内部错误；若伴有 'The error from device'")
    assert describe_code("507011")["typical_fix"] == "阅读其前的记录，找出失败的调用"  # shared by 159 codes
    assert (
        describe_code("EZ1234")["typical_fix"]
        == "阅读其前后的记录；在 CANN / torch_npu 错误码列表中查找该错误码"
    )
    assert describe_code("EZ1234")["meaning"] == "错误（由错误码的拼写推断；不在 diag 的错误码目录中）"
    assert describe_code("EZ9234")["meaning"] == "内部错误（由错误码的拼写推断；不在 diag 的错误码目录中）"
    set_language("en")
    assert describe_code("507035")["meaning"] == "Vector core exception"  # the cached entry was not changed


def test_logs_page_in_chinese(two_ranks_db, monkeypatch):
    from tests.conftest import open_page

    monkeypatch.setenv("DIAG_LANG", "zh")
    at = open_page(monkeypatch, two_ranks_db, "app_pages/07_logs.py")
    texts = [m.value for m in at.markdown]
    assert (
        "**修复方法:** 在其他 rank 上找最早的错误（它们的 plog）——那才是原因；只有某个 rank 确实合理地慢时才调大 HCCL_EXEC_TIMEOUT。"
        in texts
    )
    assert any("设备异常（AI Core / AI Vector / AI CPU）" in x for x in texts)
    assert any(x.startswith("**#2**") and "很可能是 **#1** 的连带报错" in x and "2 条记录 · 首次出现 2025-06-25" in x
               for x in texts), texts  # fmt: skip
    captions = [c.value for c in at.caption]
    assert any("Vector Core 执行异常" in c for c in captions), captions
