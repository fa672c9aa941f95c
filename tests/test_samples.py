"""The first launch: ``diag app`` on an empty database ingests ``sample_traces/`` (``ensure_samples``), and every
page then has content — a log incident with its root cause, a serving verdict and a CUDA vs Ascend comparison,
the AI_CPU ops of the run the pages open on.  Figures are those of the bundled files (see sample_traces/README.md).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, open_page, query

INCIDENT_LOG = (
    "sample_traces/incident/rank0_1716292_20250115093320983_ascend_pt/log/debug/plog/"
    "plog-1716292_20250115093304518.log"
)
ASCEND_SERVING = "ascend_910b3_qwen2.5-7b-instruct_random-1024-128_conc16.txt"
CUDA_SERVING = "nvidia_h100_qwen2.5-7b-instruct_random-1024-128_conc16.txt"


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (SAMPLES / "incident").is_dir() or not (SAMPLES / "generated").is_dir():
        pytest.skip("sample_traces/ is not bundled")
    from diag.commands.app import ensure_samples

    db = tmp_path_factory.mktemp("samples") / "first_launch.duckdb"
    assert ensure_samples(str(db)) == 5
    assert ensure_samples(str(db)) == 0  # a database with runs is left alone
    return db


def test_first_launch_runs_open_on_the_ascend_rank_with_the_incident(sample_db: Path) -> None:
    runs = query(sample_db, "SELECT run_id, platform, name FROM runs ORDER BY run_id")
    assert [r[:2] for r in runs] == [(1, "ascend"), (2, "ascend"), (3, "cuda"), (4, "ascend"), (5, "ascend")]
    assert runs[0][2] == "rank0_1716292_20250115093320983_ascend_pt"
    # the log joined rank 0 through its copy of the run's profiler_info (same run key), made no run of its own
    assert query(
        sample_db, "SELECT run_id, parser FROM files WHERE source LIKE '%/' || ?", [INCIDENT_LOG]
    ) == [(1, "cann_log")]
    assert query(
        sample_db, "SELECT count(*) FROM files WHERE run_id = 1 AND relpath = 'profiler_info_0.json'"
    ) == [(1,)]
    assert query(
        sample_db,
        "SELECT count(*), count(DISTINCT name) FROM device_tasks WHERE run_id = 1 AND task_kind = 'AI_CPU'",
    ) == [(8, 2)]


def test_the_incident_log_explains_the_runs_ai_cpu_ops(sample_db: Path) -> None:
    from diag.analyses import log_diagnosis
    from diag.analyses.log_queries import log_evidence_for_ops
    from diag.store import Store

    with Store(str(sample_db), read_only=True) as store:
        (cause, *rest) = log_diagnosis.root_causes(store, 1)
        evidence = log_evidence_for_ops(store, 1, ["ArgMaxV2", "IndexPut"], include_unassigned=False)
        lines = {op: log_diagnosis.records_by_ref(store, refs) for op, refs in evidence.items()}
    assert rest == []
    assert (cause.category, cause.severity, cause.count) == ("aicpu_fallback", "medium", 2)
    assert [c["code"] for c in cause.codes] == ["W11001"]
    assert cause.key_line.endswith(
        "Run:W11001: Op [ArgMaxV2] does not hit the high-priority operator information library, "
        "which might result in compromised performance."
    )
    assert cause.explanation.startswith("Op ArgMaxV2: GE did not find the op in the high-priority (AI Core)")
    assert {op: [(r["line_no"], r["code"]) for r in rs] for op, rs in lines.items()} == {
        "ArgMaxV2": [(5, "W11001")],
        "IndexPut": [(7, "W11001")],
    }
    assert (
        "Op [IndexPut] does not hit the high-priority operator information library"
        in lines["IndexPut"][0]["raw"]
    )


def test_the_serving_pair_has_a_verdict_and_a_comparison(sample_db: Path) -> None:
    from diag.analyses import serving, serving_compare
    from diag.store import Store

    with Store(str(sample_db), read_only=True) as store:
        judged = {Path(r["file"]).name: r for r in serving.accept(store)}
        ascend, cuda = judged[ASCEND_SERVING], judged[CUDA_SERVING]
        cmp = serving_compare.compare_serving(store, ascend["serving_id"], cuda["serving_id"])
    assert set(judged) == {ASCEND_SERVING, CUDA_SERVING}
    assert (ascend["platform"], ascend["hardware"], ascend["verdict"]) == ("ascend", "Ascend 910B3", "fail")
    assert (cuda["platform"], cuda["hardware"], cuda["verdict"]) == ("cuda", "NVIDIA H100/H800", "pass")
    ttft = {r: next(c for c in judged[r]["checks"] if c["figure"] == "ttft") for r in judged}
    assert (ttft[ASCEND_SERVING]["value"], ttft[ASCEND_SERVING]["threshold"]) == (1186.73, 1000)
    assert (ttft[CUDA_SERVING]["value"], ttft[CUDA_SERVING]["verdict"]) == (286.4, "pass")
    # the pair is matched by what the files say: same model, dataset, lengths and load, so no warning
    assert cmp["warnings"] == []
    assert cmp["a"]["model"] == cmp["b"]["model"] == "Qwen/Qwen2.5-7B-Instruct"
    assert cmp["headline"][0] == "A reaches 47% of B's output throughput"


def _texts(at) -> str:  # noqa: ANN001 — every text element of an AppTest page, one per line
    kinds = ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success")
    out = [str(e.value) for k in kinds for e in getattr(at, k)]
    out += [f"{m.label}={m.value}" for m in at.metric]
    out += [str(e.label) for e in at.expander]
    return "\n".join(out)


# what a page says when it has nothing to show (app_pages/*.py st.info): none of them on the first launch
EMPTY_PAGE = re.compile(r"No (runs?|log|serving|findings|multi-rank job)\b")

# page → (a text it must show, an exact metric "label=value" or None)
FIRST_LAUNCH = {
    "01_runs.py": ("Runs", "runs=5"),
    "02_upload.py": ("Drop a torch_npu `*_ascend_pt` folder", None),
    "03_timeline.py": ("Timeline", "AI_CPU tasks in window=8"),
    "04_stalls.py": ("Stalls", "AI CPU (fallback)=10.52%"),
    "05_fallback.py": ("log lines naming this op (1)", "AI_CPU tasks=8"),
    "06_findings.py": ("8 AI_CPU (CPU-fallback) tasks: ArgMaxV2×4, IndexPut×4", None),
    "07_logs.py": ("Operator off the AI Core fast path (AI CPU)", None),
    "08_compare.py": ("Ascend vs CUDA", "A / B=1.88×"),
    "09_postmortem.py": ("Operator off the AI Core fast path", None),
    "10_serving.py": ("A reaches 47% of B's output throughput", "fail=1"),
    "11_cluster.py": ("Open rank 1 next", None),
}


@pytest.mark.parametrize("page", sorted(FIRST_LAUNCH))
def test_every_page_has_content_on_first_launch(monkeypatch, sample_db: Path, page: str) -> None:  # noqa: ANN001
    at = open_page(monkeypatch, sample_db, f"app_pages/{page}")
    text, metric = FIRST_LAUNCH[page]
    shown = _texts(at)
    assert text.replace("\\", "") in shown.replace("\\", ""), shown[:2000]
    if metric:
        assert metric in shown.splitlines(), shown[:2000]
    empty = [e.value for e in at.info if EMPTY_PAGE.match(str(e.value))]
    assert not empty, empty


def test_logs_page_shows_the_root_cause_and_its_key_line(monkeypatch, sample_db: Path) -> None:  # noqa: ANN001
    at = open_page(monkeypatch, sample_db, "app_pages/07_logs.py")
    shown = _texts(at)
    assert (
        "**#1** :orange-badge[medium] **Operator off the AI Core fast path (AI CPU)** · cause · 2 record(s)"
        in shown
    )
    records = at.dataframe[0].value
    assert len(records) == 2 and list(records["code"]) == ["W11001", "W11001"]
    assert "Op [ArgMaxV2] does not hit the high-priority operator information library" in " ".join(
        map(str, records["message"])
    )


def test_serving_page_shows_the_verdicts(monkeypatch, sample_db: Path) -> None:  # noqa: ANN001
    at = open_page(monkeypatch, sample_db, "app_pages/10_serving.py")
    summary = at.dataframe[0].value
    verdicts = dict(zip(summary["hardware"], summary["verdict"], strict=True))
    assert verdicts == {"Ascend 910B3": "fail", "NVIDIA H100/H800": "pass"}
    assert [(m.label, m.value) for m in at.metric] == [("serving runs", "2"), ("pass", "1"), ("fail", "1")]
