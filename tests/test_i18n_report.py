"""中文 / English (#24) for the postmortem's statements and the serving verdict texts: every key of the report
part files in both languages with the same placeholders, the Chinese postmortem written in Chinese outside its
data values (finding titles, labels and rule texts come from other catalogs), English exactly as before."""

from __future__ import annotations

import re
import tomllib

import pytest

from diag.analyses import serving_compare
from diag.analyses.postmortem_memory import oom_statement, peak_statement
from diag.analyses.postmortem_serving import check_text
from diag.i18n import CATALOG_DIR, catalog, set_language
from tests.conftest import ingest_into
from tests.test_i18n import CJK, H100, english_sentences

FIELDS = re.compile(r"\{(\w+)")
GIB = 1 << 30


def _flat(path) -> dict[str, str]:  # noqa: ANN001
    from diag.i18n import _flatten

    with open(path, "rb") as fh:
        return _flatten(tomllib.load(fh))


def test_every_report_text_in_both_languages_with_the_same_placeholders():
    en, zh = _flat(CATALOG_DIR / "en.report.toml"), _flat(CATALOG_DIR / "zh.report.toml")
    assert len(en) >= 130 and sorted(set(en) ^ set(zh)) == []
    assert [k for k in en if sorted(FIELDS.findall(en[k])) != sorted(FIELDS.findall(zh[k]))] == []
    # a Chinese text is Chinese: no English sentence, and Chinese in every longer text, once its {fields} are out
    bare = {k: re.sub(r"\{\w+\}", "", v) for k, v in zh.items()}
    assert english_sentences(list(bare.values())) == []
    words = [k for k, v in bare.items() if len(v) > 12 and not CJK.search(v)]
    assert words == []  # a long zh text with no Chinese in it was left in English


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory):
    from diag.store import Store

    db = tmp_path_factory.mktemp("report") / "sample.duckdb"
    with Store(db) as store:
        assert [f.status for f in ingest_into(store, [H100]).files] == ["ok"]
    return db


def _statements(pm) -> list[str]:  # noqa: ANN001
    lists = (pm.what_happened, pm.impact, pm.contributing, pm.memory)
    return [pm.title, pm.summary, pm.scope, *(st.text for sts in lists for st in sts)]


def test_the_postmortem_in_chinese_outside_its_data_values(sample_db):
    from diag.analyses.findings import device_findings
    from diag.analyses.postmortem import build_postmortem
    from diag.analyses.stall_breakdown import BUCKET_LABELS, breakdown
    from diag.store import Store

    set_language("zh")
    with Store(sample_db) as store:
        pm = build_postmortem(store, 1)
        values = [f.title for f in device_findings(store, 1, breakdown(store, 1))] + list(
            BUCKET_LABELS.values()
        )
    assert (
        pm.title
        == "故障复盘：设备空闲占 38.7% 的时间（0 个 ≥ 500 µs 的空闲间隔） —— 运行 1（h100_decode_tp1.pt.trace.json，cuda）"
    )
    assert (
        pm.summary == "最可能的根因（依据：设备证据）：设备空闲占 38.7% 的时间（0 个 ≥ 500 µs 的空闲间隔）。"
    )
    assert pm.what_happened[0].text.startswith(
        "采集了 4 个迭代（profiler_step），设备耗时 8.391 ms，设备 kernel 204 个（每个迭代 51.0 个 kernel）；占比最大的部分："
    )
    assert pm.impact[0].text == "0 个失败的迭代（共采集 4 个迭代）"
    texts = _statements(pm)
    for value in sorted(values, key=len, reverse=True):  # data values (other catalogs' texts) taken out
        texts = [x.replace(value, "") for x in texts]
    assert english_sentences(texts) == []


def test_diag_report_lang_zh_md(sample_db, capsys):
    from diag.cli import main

    code = main(["report", "--db", str(sample_db), "--run", "1", "--lang", "zh", "--format", "md"])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and lines[2] == "范围：运行 1（h100\\_decode\\_tp1\\.pt\\.trace\\.json，cuda）"
    assert "- 0 个失败的迭代（共采集 4 个迭代）" in lines


def test_memory_statements_in_both_languages():
    oom = {"verdict": "out_of_memory", "requested_bytes": 2 * GIB, "free_bytes": GIB // 2,
           "capacity_bytes": 64 * GIB, "allocated_bytes": 60 * GIB, "reserved_bytes": 61 * GIB}  # fmt: skip
    peak = {"peak_reserved_bytes": 48 * GIB, "capacity_bytes": 64 * GIB, "peak_step": 3, "headroom_pct": 25.0}
    assert oom_statement(oom).text == (
        "Out of memory — the device was full: tried to allocate 2.00 GiB with 0.50 GiB free of 64.00 GiB "
        "(allocated 60.00 GiB, reserved 61.00 GiB)"
    )
    assert (
        peak_statement(peak).text == "Peak reserved 48.00 GiB of 64.00 GiB (75.0%) in step 3 — headroom 25.0%"
    )
    set_language("zh")
    assert oom_statement(oom).text == (
        "内存不足 —— 设备内存已满：尝试申请 2.00 GiB，当时空闲 0.50 GiB（设备总量 64.00 GiB）"
        "（已分配 60.00 GiB, 已预留 61.00 GiB）"
    )
    assert (
        peak_statement(peak).text
        == "内存峰值（reserved）48.00 GiB，占设备总量 64.00 GiB 的 75.0%，在迭代 3 —— 余量 25.0%"
    )


HEADLINE_FIGURES = [
    {"figure": "output_throughput_tps", "better": "higher", "ratio": 0.6, "gap_pct": -40.0, "worse": True},
    {"figure": "ttft_p99_ms", "better": "lower", "ratio": 0.5, "gap_pct": -50.0, "worse": False},
    {"figure": "tpot_mean_ms", "better": "lower", "ratio": 1.02, "gap_pct": 2.0, "worse": False},
]


def test_serving_verdict_texts_in_both_languages():
    check = {"figure": "ttft", "statistic": "p99", "value": 812.5, "threshold": 500.0, "unit": "ms",
             "margin_pct": -62.5, "verdict": "fail"}  # fmt: skip
    a = {"model": "qwen", "dataset": None, "input_tokens_mean": 100.0, "output_tokens_mean": 50.0,
         "max_concurrency": 8, "request_rate_rps": None, "platform": "ascend"}  # fmt: skip
    b = a | {"model": "llama", "max_concurrency": None, "platform": "cuda", "input_tokens_mean": 200.0}
    assert serving_compare.headline(HEADLINE_FIGURES, 5.0) == [
        "A reaches 60% of B's output throughput",
        "A is better on: TTFT p99 −50%",
    ]
    assert check_text(check) == "ttft p99 812.50 ms (limit 500.00 ms, margin -62%)"
    assert serving_compare._workload_warnings(a, b, 10.0) == [
        "model differs: qwen vs llama",
        "dataset not stated in either result: check that both ran the same dataset",
        "mean input tokens per request differ: 100 vs 200",
        "max concurrency differs: 8 vs unlimited/not stated",
    ]
    set_language("zh")
    assert serving_compare.headline(HEADLINE_FIGURES, 5.0) == [
        "A 的输出吞吐达到 B 的 60%",
        "A 更好的指标：TTFT p99 −50%",
    ]
    assert check_text(check) == "ttft p99 812.50 ms（上限 500.00 ms，余量 -62%）"
    assert serving_compare._workload_warnings(a, b, 10.0) == [
        "模型不同：qwen 对比 llama",
        "两个结果都没有说明数据集：请确认两者运行的是同一数据集",
        "每个请求的平均输入 token 数不同：100 对比 200",
        "最大并发不同：8 对比 不限 / 未说明",
    ]
    assert catalog("zh")["serving.level"].format(gap="5") == "A 与 B 在每个主要指标上的差距都在 ±5% 以内"


def test_postmortem_page_follows_the_language_switch(sample_db, monkeypatch):
    """The page's cached postmortem is per language: switching to 中文 rebuilds its statements in Chinese."""
    from tests.conftest import open_page

    at = open_page(monkeypatch, sample_db, "app_pages/09_postmortem.py")

    def shown() -> str:
        return "\n".join(str(m.value) for m in [*at.markdown, *at.caption, *at.title, *at.subheader])

    assert "Profiled 4 step(s) (profiler_step)" in shown().replace("\\", "")
    at.sidebar.radio(key="lang").set_value("zh").run()
    assert not at.exception, at.exception
    assert "采集了 4 个迭代（profiler_step）" in shown().replace("\\", "")


def test_job_postmortem_in_chinese(tmp_path):
    """The TP=2 incident of tests/test_postmortem.py (rank 1's AI CPU exception, rank 0's HCCL timeout after it),
    its timeline and impact written in Chinese; figures and names as in English."""
    from diag.analyses.postmortem import build_postmortem
    from tests.test_postmortem import _incident_job, _job_store

    store = _job_store(tmp_path, _incident_job(tmp_path))
    set_language("zh")
    pm = build_postmortem(store, job_id=1)
    store.close()
    texts = [s.text for s in pm.what_happened]
    assert pm.scope == "作业 1（tp2_incident，2 个运行，rank 0, 1）"
    assert texts[0].startswith(
        "2025-01-15 09:33:20.983578 —— 作业 tp2_incident 的采集：2 个 rank，trace 时钟（UTC）"
    )
    assert "日志时间按 UTC+08:00 解读" in texts[0]
    assert (
        "17:33:21.000087 —— rank 1 的采集在迭代 14 中途结束：该 rank 的数据中没有迭代 14，而 rank [0] 有"
        in texts[1]
    )
    assert "17:33:21.000100 —— rank 1 上的首个错误：设备异常" in texts[2]
    assert "17:35:21.003044 —— rank 0 上的连带报错，首个错误之后 120.003 s：HCCL 通信失败或超时" in texts[3]
    assert texts[4].endswith("结束：最后一条被标记的日志记录；2 个 rank 中有 2 个记录了错误")
    assert pm.impact[0].text == "1 个失败的迭代——rank 1：迭代 14"
    assert (
        "各 rank 在全部 rank 都完成的 3 个迭代（迭代 11–13）上的迭代耗时：最慢 rank 0 3.766 ms，最快 rank 1 3.753 ms"
        "（+0.013 ms，0.34%）" in [s.text for s in pm.impact]
    )
    assert any(
        s.text == "各 rank 的 cann_version 不同 —— rank 0: 8.0.RC3; rank 1: 8.0.RC2" for s in pm.contributing
    )
