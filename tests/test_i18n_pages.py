"""The Ascend vs CUDA page and the Cluster page in Chinese and English (#24): headings, captions, labels, tabs,
metrics and table columns from ``diag/i18n/<lang>.pages.toml``; English exactly as before.

On the bundled pair (sample_traces/generated: two Ascend ranks of one job, and their CUDA twin) every page text
of the two pages is read in Chinese and checked for English sentences. Sentences that analyses write (a
grouping's description, why a rank is the one to open, the scaling section's note) are other modules' texts,
taken out by ``FOREIGN`` — each names its module."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from diag.i18n import set_language
from tests.conftest import ROOT, ingest_into, open_page
from tests.test_i18n import english_sentences

GENERATED = ROOT / "sample_traces" / "generated"
FOREIGN = [  # analysis texts shown on these pages, translated (or not yet) where they are written
    re.compile(r"grouping: .*"),  # diag.grouping.describe_grouping
    re.compile(r"No outlier; .*"),  # diag.analyses.cluster: why open this rank next
    re.compile(r"no scaling curve: .*"),  # app/scaling_widgets.py (#20)
    re.compile(r"both runs are \w+: the comparison is meant .*"),  # diag.analyses.compare: warnings
    re.compile(r"no op changed beyond the step-to-step spread"),  # diag.analyses.before_after: the answer
    re.compile(r"no recorded version or setting differs.*"),  # diag.analyses.before_after_env
]


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
