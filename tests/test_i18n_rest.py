"""#24's last English in zh mode: page labels (upload, timeline, postmortem, tables), the analyses' sentences
(grouping, compare warnings, before/after answers and owner steps), the glossary's CUDA counterparts, the CLI
tables' headers (diag/rules/cli_headers.csv) and the HTML report's bar chart labels; English as before."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from diag.i18n import catalog, set_language
from tests.conftest import ROOT, ingest_into, open_page

CUDA_SIDE = ROOT / "sample_traces" / "generated" / "llm_decode_cuda"
GROUPED = {
    "multi_rank": True,
    "guess": False,
    "basis": [
        "rank ids from profiler_info (2 of 2 runs)",
        "capture windows overlap 100% (least overlapping pair)",
        "same platform ascend, world size 2, cann version 8.0.RC3",
        "a line of a form diag does not know",
    ],
}


@pytest.fixture(autouse=True)
def _back_to_the_environment_language():
    yield
    set_language(None)


@pytest.fixture(scope="module")
def cuda_db(tmp_path_factory) -> Path:
    from diag.store import Store

    db = tmp_path_factory.mktemp("i18n_rest") / "cuda.duckdb"
    with Store(db) as store:
        ingest_into(store, [CUDA_SIDE])
    return db


def test_rest_catalogs_have_the_same_keys_in_both_languages():
    import tomllib

    from diag.i18n import CATALOG_DIR, _flatten

    keys = {}
    for lang in ("en", "zh"):
        with open(CATALOG_DIR / f"{lang}.rest.toml", "rb") as fh:
            keys[lang] = set(_flatten(tomllib.load(fh)))
    assert keys["en"] == keys["zh"] and len(keys["en"]) >= 80
    zh = catalog("zh")
    words = re.compile(r"(?<![{\w])[A-Za-z]{2,}\b(?![}\w])")  # English words, not {placeholders}
    english = [k for k in keys["zh"] if len(words.findall(catalog("en")[k])) >= 2]
    assert [k for k in english if not re.search(r"[\u4e00-\u9fff]", zh[k])] == []


def test_grouping_sentence_in_chinese_and_unchanged_in_english():
    from diag.grouping import describe_grouping

    english = describe_grouping(GROUPED)
    assert english == (
        "grouping: rank ids from profiler_info (2 of 2 runs); capture windows overlap 100% (least overlapping "
        "pair); same platform ascend, world size 2, cann version 8.0.RC3; a line of a form diag does not know"
    )
    set_language("zh")
    assert describe_grouping(GROUPED) == (
        "分组：Rank 编号来自 profiler_info（2 个运行中的 2 个）；采集时间窗口重叠 100%（重叠最少的一对）；"
        "同一平台 ascend，Rank 总数 2，CANN 版本 8.0.RC3；a line of a form diag does not know"
    )
    assert describe_grouping(
        {"multi_rank": False, "why_alone": "no absolute capture time to match peers on"}
    ) == ("分组：单个运行，不是多 Rank 作业（没有绝对采集时间，无法与其他运行匹配）—— 无集群发现")


# Every reason diag.grouping writes for a run left alone (its _alone / _clash / why_apart forms), as stored.
WHY_ALONE = {
    "no peer: the overlapping captures different world size (4 vs 2)":
        "没有可配对的运行：重叠的采集 Rank 总数不同（4 与 2）",
    "no peer: the overlapping captures both are rank 0": "没有可配对的运行：重叠的采集 两者都是 rank 0",
    "no peer: the overlapping captures capture windows overlap 40%":
        "没有可配对的运行：重叠的采集 采集时间窗口仅重叠 40%",
    "no peer: the overlapping captures rank 1 is outside world size 1":
        "没有可配对的运行：重叠的采集 rank 1 超出 Rank 总数 1",
    "no peer: the overlapping captures HCCL group 10.0.0.1%enp_60000_0 has different members":
        "没有可配对的运行：重叠的采集 HCCL 通信域 10.0.0.1%enp_60000_0 的成员不同",
    "ambiguous: runs 3 and 7 are linked through others but different platforms":
        "有歧义：运行 3 和 7 经由其他运行相连，但平台不同",
    "ambiguous: 2 overlapping ascend captures of rank 0 with compatible runs; which belong together the data "
    "cannot say": "有歧义：2 个相互重叠的 ascend 采集都是 rank 0，且都与其他运行兼容；哪些属于同一作业，数据无法判断",
}  # fmt: skip


@pytest.mark.parametrize("stored", sorted(WHY_ALONE))
def test_why_a_run_is_alone_in_chinese_and_unchanged_in_english(stored: str):
    from diag.grouping import describe_grouping

    alone = {"multi_rank": False, "why_alone": stored}
    assert (
        describe_grouping(alone) == f"grouping: one run, no multi-rank job ({stored}) — no cluster findings"
    )
    set_language("zh")
    assert describe_grouping(alone) == f"分组：单个运行，不是多 Rank 作业（{WHY_ALONE[stored]}）—— 无集群发现"


def test_every_why_apart_reason_has_a_chinese_form():
    """The reasons diag.grouping.why_apart returns, each read by a form of grouping_text (none left in English)."""
    import inspect

    from diag import grouping, grouping_text

    returned = re.findall(r'return f?"([^"]+)"', inspect.getsource(grouping.why_apart))
    assert len(returned) == 8
    forms = [p for p, _ in grouping_text._APART_FORMS]
    probe = {"{a.rank}": "0", "{y.rank}": "1", "{world}": "2", "{gid}": "g", "{100 * share:.0f}": "40",
             "{key.replace('_', ' ')}": "world size", "{a.fields[key]}": "4", "{b.fields[key]}": "2"}  # fmt: skip
    for reason in returned:
        for k, v in probe.items():
            reason = reason.replace(k, v)
        assert any(p.fullmatch(reason) for p in forms), reason


def test_compare_warning_and_before_after_answer_in_chinese():
    from diag.analyses import before_after_env as env
    from diag.analyses.before_after import answer

    changes = [
        {"key": "cann_version", "label": "CANN", "before": "8.0.RC3", "after": "8.1.RC1", "kind": "stack"}
    ]
    result = {"can_tell": True, "ops": [], "environment": {"sentence": env.sentence(changes)}}
    assert answer(result) == (
        "no op changed beyond the step-to-step spread; between these runs CANN changed 8.0.RC3 → 8.1.RC1 (stack)"
    )
    set_language("zh")
    result["environment"]["sentence"] = env.sentence(changes)
    assert (
        answer(result) == "没有算子的变化超出迭代间波动；两次运行之间：CANN 从 8.0.RC3 变为 8.1.RC1（软件栈）"
    )
    assert env.owner_of(changes)["owner_steps"][0]["step"].startswith(
        "固定为之前那次运行的版本（CANN 8.0.RC3）后重跑"
    )
    assert _same_platform_warning().startswith("两个运行都是 ascend：该对比本是昇腾运行对 CUDA 运行；")
    set_language("en")
    assert _same_platform_warning() == (
        "both runs are ascend: the comparison is meant for an Ascend run against a CUDA run; read as before (A) "
        "and after (B) they are compared op by op beyond noise (diag compare, Before / after)"
    )


def _same_platform_warning() -> str:
    from diag.analyses.compare import _vendor_warnings

    run = {"platform": "ascend", "figures_source": "timeline", "run_id": 1}
    with pytest.MonkeyPatch.context() as mp:  # no breakdowns needed: the step checks are not under test here
        mp.setattr("diag.analyses.compare._step_warnings", lambda *a: [])
        from diag.analyses.compare import _warnings

        out = _warnings(run, run, None, None, None, None)
    assert _vendor_warnings(run, run) == []
    return out[0]


def test_glossary_cuda_counterparts_in_chinese():
    from app import glossary

    terms = glossary.terms()
    assert [x.term for x in terms if x.cuda and not re.search(r"[\u4e00-\u9fff]", x.cuda_zh)] == []
    core = glossary.lookup("AI Core")
    assert core.counterpart() == "SM (streaming multiprocessor)"
    set_language("zh")
    assert core.counterpart() == "SM（流式多处理器）"
    assert core.tooltip().endswith(" CUDA 对应：SM（流式多处理器）。")


def test_glossary_page_shows_the_chinese_counterpart(tmp_path, monkeypatch):
    monkeypatch.setenv("DIAG_LANG", "zh")
    at = open_page(monkeypatch, tmp_path / "empty.duckdb", "app_pages/12_glossary.py")
    table = at.table[0].value
    row = table[table.iloc[:, 0] == "Cube"].iloc[0]
    assert row.iloc[3] == "Tensor Core（张量核心）"


def test_cli_table_headers_in_chinese(cuda_db):
    from tests.conftest import run_cli

    zh = run_cli(
        "--lang", "zh", "ops", "--db", str(cuda_db), "--run", "1", "--by", "class", check=True
    ).stdout
    assert zh.startswith("运行 1：kernel 按算子类别统计\n")
    assert re.search(r"┃ 算子类别\s*┃ 核类型 ┃ 调用次数 ┃ 总耗时 ms ┃ 平均 µs ┃", zh), zh
    assert "占比：占该运行 kernel 总耗时的比例（表中每一行；各行合计 100%）" in zh
    en = run_cli("ops", "--db", str(cuda_db), "--run", "1", "--by", "class", check=True).stdout
    assert en.startswith("run 1: kernels by class\n")
    assert re.search(r"┃ op class\s*┃ core ┃ calls ┃ total ms ┃ mean µs ┃", en), en


def test_report_chart_sizes_its_label_column_to_the_labels():
    from diag.report_chart import MAX_LABEL_PX, svg_chart

    short = svg_chart(
        [{"label": "AI CPU", "ns": 10, "pct": 50.0}, {"label": "idle", "ns": 5, "pct": 25.0}], 10
    )
    assert '<svg width="490"' in short and '<rect x="90" ' in short  # 80 px labels (the minimum) + 10
    long_zh = "通信未掩盖（HCCL 集合通信，未被计算掩盖的部分）以及其他很长很长的分桶名称"
    chart = svg_chart([{"label": long_zh, "ns": 10, "pct": 80.0}, {"label": "E2E", "ns": 1, "pct": 8.0}], 10)
    assert f'<rect x="{MAX_LABEL_PX + 10}" ' in chart
    assert f"<title>{long_zh}</title>" in chart  # the whole label as the tooltip
    shown = re.search(r'<text x="0" y="20" font-size="12">([^<]*)</text>', chart).group(1)
    assert shown == "通信未掩盖（HCCL 集合通信，未被计算掩盖的部分）以及其他很…"  # cut to fit 360 px


def test_upload_and_postmortem_pages_in_chinese(tmp_path, monkeypatch):
    monkeypatch.setenv("DIAG_LANG", "zh")
    at = open_page(monkeypatch, tmp_path / "empty.duckdb", "app_pages/02_upload.py")
    assert at.markdown[0].value.startswith("拖入 torch_npu 的 `*_ascend_pt` 目录")
    assert at.button(key="ingest").label == "导入"
    at.switch_page("app_pages/09_postmortem.py").run()
    assert at.radio(key="pm_scope").options == ["一次性能采集", "一个作业（所有 Rank）", "库中的全部日志"]


def test_report_chart_labels_and_version_reasons_in_chinese():
    from diag.analyses.counts import KernelCounts
    from diag.analyses.version_matrix import check_torch
    from diag.report_chart import svg_chart

    bars = [{"bucket": "idle", "label": "Idle (nothing on device)", "ns": 10, "pct": 52.2}]
    counts = KernelCounts(
        1, 10, 2, 2, 5.0, duplicates=[{"table": "kernels", "file": "kernel_details.csv", "rows": 3}]
    )
    assert ">Idle (nothing on device)</text>" in svg_chart(bars, 10)
    assert check_torch("2.1.0", "2.5.1", None)["torch"].reason == (
        "torch_npu 2.5.1 is built for PyTorch 2.5.1; this run has PyTorch 2.1.0"
    )
    assert counts.note() == (
        "3 duplicate kernel row(s) (same name and start as another row): 3 in kernels from kernel_details.csv. "
        "Each kernel is counted once in every figure."
    )
    set_language("zh")
    assert '<text x="0" y="20" font-size="12">空闲（设备上无任务）</text>' in svg_chart(bars, 10)
    assert check_torch("2.1.0", "2.5.1", None)["torch"].reason == (
        "torch_npu 2.5.1 是为 PyTorch 2.5.1 构建的；本次运行的 PyTorch 是 2.1.0"
    )
    assert counts.note() == (
        "3 行重复的 kernel 记录（名称和开始时间与另一行相同）：kernel_details.csv 的 kernels 中 3 行。"
        "每个 kernel 在所有数值中只计一次。"
    )


def test_scaling_answer_in_chinese():
    from diag.analyses.scaling import answer

    assert answer({"groups": [], "baseline_run_id": None}).startswith("no scaling curve: no attention")
    set_language("zh")
    assert answer({"groups": [], "baseline_run_id": None}) == (
        "没有扩展曲线：本次运行中没有长度变化的 attention 或矩阵乘 Shape"
    )


def test_stall_chart_legend_in_chinese(cuda_db, monkeypatch):
    import json

    monkeypatch.setenv("DIAG_LANG", "zh")
    at = open_page(monkeypatch, cuda_db, "app_pages/04_stalls.py")
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    names = [trace["name"] for trace in spec["data"]]
    assert "空闲（设备上无任务）" in names and "AI CPU（回退）" in names
    assert spec["layout"]["yaxis"]["title"]["text"] == "设备耗时（ms）"
    assert [m.label for m in at.metric][-3:] == ["设备 kernel 数", "算子类型数", "每迭代 kernel 数"]


def test_where_the_peaks_come_from_in_chinese():
    """The Ops page's peak line: no English sentence of diag's in it on a Chinese page (device names stay)."""
    from diag.analyses.op_util import _peak_from
    from diag.devices import device

    dev = device("ascend-910b3")
    assert _peak_from(None, "not recorded", "bf16")[2] == "device not known (not recorded)"
    set_language("zh")
    assert _peak_from(None, "未记录", "bf16")[2] == "设备未知（未记录）"
    text = _peak_from(dev, "", "bf16", "vector")[2]
    assert text.startswith(f"{dev.name} (ascend-910b3)，Vector bf16 ") and "TFLOPS，HBM " in text
