"""Device-time breakdown, CPU-fallback ops and findings, against known ground truth and the exporter's own figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diag.analyses.compare import compare
from diag.analyses.cpu_fallback import device_fallbacks
from diag.analyses.findings import device_findings
from diag.analyses.stall_breakdown import breakdown
from diag.store import Store
from tests.conftest import REAL_AICPU_TRACE, REAL_LEVEL2, SAMPLES, cli_json, ingest_into
from tests.oracle import csv_rows

GENERATED = SAMPLES / "generated" / "llm_decode_tp2"
# ground-truth class -> our bucket
GT_BUCKET = {
    "ai_cpu": "ai_cpu",
    "attention": "attention",
    "layout": "layout",
    "matmul": "cube",
    "vector": "vector",
    "other": "other",
    "communication": "comm_exposed",
    "memcpy": "memcpy_exposed",
    "idle": "idle",
}


def _ingest(tmp_path: Path, *paths: Path) -> Store:
    store = Store(tmp_path / "a.duckdb")
    summary = ingest_into(store, paths)
    assert summary.ok
    return store


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory):
    store = _ingest(tmp_path_factory.mktemp("gen"), GENERATED)
    truth = json.loads((GENERATED / "ground_truth.json").read_text())["ranks"]
    runs = {
        r: store.con.execute("SELECT run_id FROM runs WHERE name = ?", [t["run_dir"]]).fetchall()[0][0]
        for r, t in truth.items()
    }
    yield store, truth, runs
    store.close()


def test_breakdown_buckets_match_ground_truth_and_sum_to_e2e(generated):
    store, truth, runs = generated
    for rank, t in truth.items():
        bd = breakdown(store, runs[rank])
        assert len(bd.steps) == t["steps"]["count"]
        for step, gt in zip(bd.steps, t["per_step"], strict=True):
            assert step.step == gt["step"]
            assert step.e2e_ns == step.end_ns - step.start_ns  # the buckets partition the span exactly
            assert sum(step.buckets.values()) == step.e2e_ns
        total, gt = bd.total, t["device_time_ns"]
        assert total.e2e_ns == gt["window"]
        for cls, ours in GT_BUCKET.items():
            pp = 100 * abs(total.buckets[ours] - gt["buckets"][cls]) / gt["window"]
            assert pp <= 0.5, (rank, cls, total.buckets[ours], gt["buckets"][cls])
        assert total.computing_ns == pytest.approx(gt["computing"], rel=0.001)
        assert total.comm_total_ns == gt["communication"]


def test_every_injected_ai_cpu_op_is_flagged_and_nothing_else(generated):
    store, truth, runs = generated
    for rank, t in truth.items():
        ops = device_fallbacks(store, runs[rank])
        counts = {}
        for o in ops:
            assert len(o.names) == 1
            counts[o.names[0]] = o.count
        assert counts == t["ai_cpu"]["names"]
        assert {o.op_type for o in ops} == {"IndexPut", "ArgMaxV2"}
        index_put = next(o for o in ops if o.op_type == "IndexPut")
        assert "float64" in index_put.hint or "DOUBLE" in " ".join(index_put.input_dtypes)


def test_findings_rank_the_injected_problems(generated):
    store, truth, runs = generated
    findings = device_findings(store, runs["0"])
    cats = [f.category for f in findings]
    assert cats[0] == "idle"  # the injected host stalls leave the device idle half the time
    fallback = next(f for f in findings if f.category == "cpu_fallback")
    gt = truth["0"]["device_time_ns"]
    assert fallback.impact_ns == gt["task_sums"]["ai_cpu"]
    assert fallback.severity == "high"  # > 5% of device time
    impacts = [f.impact_pct for f in findings if f.category != "top_ops"]
    assert impacts == sorted(impacts, reverse=True)


def test_breakdown_agrees_with_step_trace_time_on_real_exports(tmp_path):
    store = _ingest(tmp_path, REAL_LEVEL2)
    bd = breakdown(store, 1)
    rows = bd.steps[0].ours_vs_export()
    assert [r["metric"] for r in rows] == [
        "Computing",
        "Communication(Not Overlapped)",
        "Communication",
        "Free",
        "Preparing",
    ]
    for r in rows:
        assert abs(r["diff_pct"]) < 0.01, r
    store.close()


@pytest.mark.corpus
def test_breakdown_agrees_with_every_corpus_step_trace(corpus, tmp_path):
    store = _ingest(tmp_path, corpus / "ascend")
    runs = store.con.execute(
        "SELECT DISTINCT run_id, r.source FROM step_trace JOIN runs r USING (run_id)"
    ).fetchall()
    checked = 0
    for run_id, source in runs:
        bd = breakdown(store, run_id)
        if source.endswith("test_data/test_rank_0"):
            # Documented reason: upstream kept only the first 20 rows of this kernel_details.csv (a test excerpt),
            # so its device time cannot add up to the step_trace_time.csv written from the full run.
            continue
        if not bd.steps:
            # st/level2 ranks 1 and 3: upstream ships their step_trace_time.csv but no trace nor kernel_details.
            assert source.endswith(("rank_1_ascend_pt", "rank_3_ascend_pt")), source
            continue
        for step in bd.steps:
            for r in step.ours_vs_export():
                if r["metric"] != "Communication":
                    assert abs(r["diff_pct"]) <= 1.0, (source, r)
            checked += 1
    assert checked == 9  # text level0, level1 ×2, level2; st/level2 ranks 0 and 2; db level0, level1, level2
    store.close()


@pytest.mark.corpus
def test_ai_cpu_ops_equal_kernel_details(corpus, tmp_path):
    store = _ingest(tmp_path, corpus / "ascend")
    for path in sorted((corpus / "ascend").rglob("kernel_details.csv")):
        header, rows = csv_rows(path)
        if "Accelerator Core" not in header:
            continue
        col = header.index("Accelerator Core")
        name_col = header.index("Name")
        expected = sorted(r[name_col] for r in rows if len(r) == len(header) and r[col] == "AI_CPU")
        run_id = store.con.execute(
            "SELECT run_id FROM files WHERE source = ? AND status <> 'failed'", [str(path)]
        ).fetchall()[0][0]
        found = sorted(n for o in device_fallbacks(store, run_id) for n in o.names for _ in range(1))
        assert found == sorted(set(expected)), path
    store.close()


def test_findings_cli_json(tmp_path):
    db = tmp_path / "f.duckdb"
    cli_json("ingest", str(REAL_AICPU_TRACE), "--db", str(db))
    code, payload = cli_json("findings", "--db", str(db))
    assert code == 0
    cats = {f["category"]: f for f in payload["findings"]}
    assert cats["cpu_fallback"]["evidence"]["ops"][0]["op_type"] == "Cast"
    assert cats["cpu_fallback"]["evidence"]["ops"][0]["count"] == 2
    assert set(payload["findings"][0]) >= {
        "run_id",
        "category",
        "severity",
        "title",
        "impact_pct",
        "evidence",
        "suggestion",
        "start_ns",
        "end_ns",
    }
    code, payload = cli_json("breakdown", "--db", str(db))
    total = payload["runs"][0]["total"]
    assert sum(total["buckets_ns"].values()) == total["e2e_ns"]


def test_breakdown_compares_with_overlap_analysis_when_no_step_trace(tmp_path):
    store = _ingest(tmp_path, REAL_AICPU_TRACE)
    rows = {r["metric"]: r for r in breakdown(store, 1).steps[0].ours_vs_export()}
    # mstt trace: no step_trace_time.csv, but Overlap Analysis slices (Computing 1,788,267 ns, Free 9,481,699 ns)
    assert rows["Computing"]["export_ns"] == 1788267 and abs(rows["Computing"]["diff_pct"]) < 1.0
    assert rows["Free"]["export_ns"] == 9481699 and abs(rows["Free"]["diff_pct"]) < 1.0
    store.close()


CUDA_TWIN = SAMPLES / "generated" / "llm_decode_cuda"


def test_comparison_recovers_the_injected_per_class_slowdowns(tmp_path):
    store = _ingest(tmp_path, GENERATED, CUDA_TWIN)
    truth = json.loads((CUDA_TWIN / "ground_truth.json").read_text())
    ascend = store.con.execute("SELECT run_id FROM runs WHERE name = ?", [truth["source"]]).fetchall()[0][0]
    cuda = store.con.execute("SELECT run_id FROM runs WHERE platform = 'cuda'").fetchall()[0][0]
    cmp = compare(store, ascend, cuda)
    assert cmp.warnings == [] and cmp.steps_a == cmp.steps_b == truth["steps"]
    by_class = {c.op_class: c for c in cmp.classes}
    for cls, gt in truth["classes"].items():
        row = by_class[cls]
        assert row.total_a_ns == gt["ascend_ns"] and row.total_b_ns == gt["cuda_ns"], cls
        if gt["factor"]:
            assert row.ratio == pytest.approx(gt["factor"], rel=0.01), cls
        else:  # Ascend-only work (layout/cast) has no CUDA counterpart
            assert row.count_b == 0 and row.delta_per_step_ms > 0
    # sorted by time lost; the three top losses are the classes with the largest injected excess
    expected = sorted(
        (c for c, g in truth["classes"].items() if g["factor"]),
        key=lambda c: -(truth["classes"][c]["ascend_ns"] - truth["classes"][c]["cuda_ns"]),
    )[:3]
    assert [c.op_class for c in cmp.top_losses(3)] == expected
    assert [(p["phase"], p["steps_a"], p["steps_b"]) for p in cmp.phases] == [("decode", 4, 4)]
    store.close()


def test_comparison_warns_about_incomparable_captures(tmp_path):
    store = _ingest(tmp_path, GENERATED)
    cmp = compare(store, 1, 2)  # two Ascend ranks: not a CUDA baseline
    assert any("both runs are ascend" in w for w in cmp.warnings)
    store.close()
