"""Comparison traps (issue #15): one vocabulary on both platforms, one count per thing.

Each test feeds a real-shaped input that misled the comparison and asserts the right figures: rule order
(BroadcastTo is not communication), symmetric buckets (CUDA elementwise work is vector), the biggest loss over
every bucket, an ``nsys stats`` kernel summary as a baseline, warnings in every report, headlines both ways, and
duplicate kernel rows counted once and reported.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import duckdb
import pytest

from diag.analyses.compare import class_totals, compare
from diag.analyses.counts import kernel_counts
from diag.analyses.findings import device_findings
from diag.analyses.op_classes import classify, first_rule, rules, sql_case
from diag.analyses.postmortem import build_postmortem
from diag.analyses.stall_breakdown import BUCKETS, breakdown, bucket_of, bucket_rules
from diag.report import md_escape, to_html, to_json, to_markdown
from diag.store import Store
from tests.conftest import FIXTURES, SAMPLES, cli_json, ingest_into, run_cli

TRAPS = FIXTURES / "traps"
GENERATED = SAMPLES / "generated"
RANK0 = "rank0_1716292_20250115093320983_ascend_pt"


def _ingest(tmp_path: Path, *paths: Path) -> Store:
    store = Store(tmp_path / "t.duckdb")
    assert ingest_into(store, paths).ok
    return store


# -- 1. rule order: the most specific rule first ----------------------------------------------------------------


def _platform(rule_platform: str) -> str:
    return "ascend" if rule_platform == "ascend" else "cuda"


@pytest.mark.parametrize("rule", rules(), ids=lambda r: f"{r.priority}-{r.op_class}-{r.platform}")
def test_each_rule_is_the_first_to_match_its_own_example(rule):
    """No broader rule shadows a narrower one: each rule's example is classified by that very rule."""
    got = first_rule(rule.example, platform=_platform(rule.platform))
    assert got is not None and got.priority == rule.priority, (rule.priority, got)


COLLISIONS = [
    # BroadcastTo (an AI Vector op) against HCCL / NCCL broadcast
    ("BroadcastTo", "BroadcastTo", "ascend", "layout_cast"),
    ("aclnnBroadcastTo_BroadcastToAiCore_BroadcastTo", None, "ascend", "layout_cast"),
    ("hcom_broadcast__868_0_1", None, "ascend", "communication"),
    ("HcomBroadcast", "HcomBroadcast", "ascend", "communication"),
    ("ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)", None, "cuda", "communication"),
    # Cast against Scatter; an aclnn name without a Type column still names its op type last
    ("Cast", "Cast", "ascend", "layout_cast"),
    ("aclnnCast_CastAiCore_Cast", None, "ascend", "layout_cast"),
    ("ScatterElements", "ScatterElements", "ascend", "embedding"),
    ("aclnnScatter_ScatterAiCore_Scatter", None, "ascend", "embedding"),
    # Transpose against TransData against TransposeBatchMatMul
    ("TransposeD", "TransposeD", "ascend", "layout_cast"),
    ("trans_TransData_0", "TransData", "ascend", "layout_cast"),
    ("TransposeBatchMatMul", "TransposeBatchMatMul", "ascend", "gemm"),
    ("UpsampleNearest2d", "UpsampleNearest2d", "ascend", "layout_cast"),  # not 'sample' (sampling)
    ("TopKTopPSample", "TopKTopPSample", "ascend", "sampling"),
    # elementwise_kernel wraps copies, activations, index ops and plain arithmetic
    ("void at::native::elementwise_kernel<(int)128, (int)2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]>>(int, T3)", None, "cuda", "layout_cast"),
    ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char *, (unsigned long)3>>(int, T2, T3)", None, "cuda", "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::<unnamed>::silu_kernel(at::TensorIteratorBase &)::[lambda() (instance 1)]>(int, T2, T3)", None, "cuda", "activation"),
    ("void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_put_kernel_impl<at::native::OpaqueType<2> >>>(long)", None, "cuda", "embedding"),
    # reduce_kernel: argmax is sampling, mean is a reduction; a fused persistent reduction with a cast is a reduction
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4>)", None, "cuda", "sampling"),
    ("void at::native::reduce_kernel<(int)128, (int)4, at::native::ReduceOp<c10::BFloat16, at::native::MeanOps<c10::BFloat16, float, float, c10::BFloat16>, unsigned int, c10::BFloat16, (int)4, (int)8>>(T3)", None, "cuda", "reduce"),
    ("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0", None, "cuda", "reduce"),
    ("triton_red_fused__softmax_0", None, "cuda", "softmax"),
    # cutlass / xmma: gemm unless it is an attention kernel templated on cutlass types
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>(T1::Params)", None, "cuda", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel", None, "cuda", "gemm"),
    ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, false, false>(flash::Flash_fwd_params)", None, "cuda", "attention_prefill"),
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, false>(flash::Flash_fwd_params)", None, "cuda", "attention_decode"),
    # Inductor's triton_ kernels: the prefix says pointwise / reduction / template
    ("triton_poi_fused__to_copy_0", None, "cuda", "layout_cast"),
    ("triton_poi_fused_cat_clone_0", None, "cuda", "layout_cast"),
    ("triton_poi_fused_cat_add_0", None, "cuda", "elementwise"),
    ("triton_poi_fused_add_cos_sin_0", None, "cuda", "elementwise"),
    ("triton_poi_fused_mul_silu_0", None, "cuda", "activation"),
    ("triton_tem_fused_addmm_0", None, "cuda", "gemm"),
    ("void at::native::<unnamed>::upsample_bilinear2d_out_frame<float, float>(int, T2, T2, bool, T1 *, T1 *)", None, "cuda", "layout_cast"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "op_type", "platform", "expected"), COLLISIONS, ids=lambda v: str(v)[:40])
def test_known_collisions_go_to_the_most_specific_class(name, op_type, platform, expected):
    assert classify(name, op_type, platform) == expected
    got = duckdb.execute(f"SELECT {sql_case('$1', '$2', platform)}", [name, op_type]).fetchall()
    assert got == [(expected,)]


def test_pooling_with_argmax_is_not_sampling():
    assert (
        classify(
            "aclnnMaxPool2dWithMask_MaxPoolWithArgmaxV1_MaxPoolWithArgmaxV1", "MaxPoolWithArgmaxV1", "ascend"
        )
        == "other"
    )
    assert classify("ArgMaxWithValue", "ArgMaxWithValue", "ascend") == "sampling"


def test_trap_broadcastto_is_layout_not_communication(tmp_path):
    store = _ingest(tmp_path, TRAPS / "broadcastto_not_comm")
    (run_id,) = [r for (r,) in store.con.execute("SELECT run_id FROM runs").fetchall()]
    totals = class_totals(store, run_id, "ascend")
    assert totals["communication"] == (4, 99_973_276)  # the four hcom_allReduce_ rows, nothing else
    assert totals["layout_cast"] == (5, 25_400)  # Cast ×3, Transpose, BroadcastTo (1.94 µs)
    bd = breakdown(store, run_id)
    assert bd.total.buckets["layout"] == 25_400
    assert bd.total.comm_total_ns == 99_973_276
    store.close()


# -- 2. symmetric buckets: one meaning on both platforms --------------------------------------------------------


@pytest.mark.parametrize("rule", bucket_rules(), ids=lambda r: f"{r.priority}-{r.bucket}")
def test_each_bucket_rule_decides_its_own_example(rule):
    platform = "cuda" if rule.example_kind.startswith("CUDA") else "ascend"
    op_class = classify(rule.example_name, platform=platform)
    first = next(r for r in bucket_rules() if r.matches(rule.example_kind, op_class))
    assert first.priority == rule.priority, (rule, op_class)
    assert bucket_of(rule.example_kind, op_class) == rule.bucket


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory):
    """The bundled Ascend rank 0 and its CUDA twin (sample_traces/generated)."""
    store = _ingest(
        tmp_path_factory.mktemp("pair"), GENERATED / "llm_decode_tp2", GENERATED / "llm_decode_cuda"
    )
    truth = json.loads((GENERATED / "llm_decode_cuda" / "ground_truth.json").read_text())
    ascend = store.con.execute("SELECT run_id FROM runs WHERE name = ?", [truth["source"]]).fetchall()[0][0]
    cuda = store.con.execute("SELECT run_id FROM runs WHERE platform = 'cuda'").fetchall()[0][0]
    yield store, ascend, cuda
    store.close()


def test_cuda_elementwise_work_is_vector_and_index_copies_are_layout(pair):
    store, ascend, cuda = pair
    b = breakdown(store, cuda).total.buckets
    # rms_norm 172,365 + rotary 48,630 + act_and_mul 64,052 + argmax reduce_kernel 164,389 ns
    assert b["vector"] == 449_436
    assert b["layout"] == 139_447  # index_elementwise_kernel<index_put…>
    assert b["other"] == 0 and b["cube"] == 3_375_674 and b["attention"] == 377_378
    cmp = compare(store, ascend, cuda)
    overall = {o["bucket"]: o for o in cmp.overall}
    assert list(overall) == [*BUCKETS, "e2e"]  # one vocabulary, both sides
    assert overall["vector"]["per_step_b_ms"] == pytest.approx(449_436 / 4 / 1e6)
    assert overall["layout"]["per_step_b_ms"] == pytest.approx(139_447 / 4 / 1e6)
    assert overall["other"]["per_step_b_ms"] == 0


def test_cuda_data_movement_advice_is_not_torch_npu_advice(pair):
    store, ascend, cuda = pair
    moving = {
        r: next(f for f in device_findings(store, r) if f.category == "data_movement") for r in (ascend, cuda)
    }
    assert moving[cuda].impact_ns == 139_447 and "torch_npu" not in moving[cuda].suggestion
    assert "allow_internal_format" in moving[ascend].suggestion


# -- 3. the biggest loss over every bucket ---------------------------------------------------------------------


def test_biggest_loss_is_looked_for_over_every_bucket(pair):
    store, ascend, cuda = pair
    cmp = compare(store, ascend, cuda)
    # the injected host stalls leave the Ascend device idle: 8,241,945 vs 3,246,171 ns over 4 steps
    assert cmp.biggest_loss()["bucket"] == "idle"
    assert cmp.biggest_loss()["delta_per_step_ms"] == pytest.approx((8_241_945 - 3_246_171) / 4 / 1e6)
    assert [b["bucket"] for b in cmp.losses] == [
        "idle",
        "ai_cpu",
        "cube",
        "comm_exposed",
        "attention",
        "memcpy_exposed",
    ]
    assert cmp.to_json()["biggest_loss"]["label"] == "Idle (nothing on device)"
    assert cmp.top_losses(1)[0].op_class == "sampling"  # the op-class view is still there


# -- 4. an nsys stats kernel summary as the baseline -----------------------------------------------------------


def test_trap_nsys_kernel_summary_is_a_usable_baseline(tmp_path):
    store = _ingest(tmp_path, GENERATED / "llm_decode_tp2" / RANK0, TRAPS / "nsys_kern_sum_baseline")
    ascend = store.con.execute("SELECT run_id FROM runs WHERE platform = 'ascend'").fetchall()[0][0]
    summary = store.con.execute("SELECT run_id FROM runs WHERE platform = 'cuda'").fetchall()[0][0]
    cmp = compare(store, ascend, summary)
    assert (cmp.source_a, cmp.source_b, cmp.steps_a, cmp.steps_b) == ("timeline", "kernel_summary", 4, 0)
    assert any(w.startswith(f"B (run {summary}) is an nsys stats kernel summary") for w in cmp.warnings)
    by_class = {c.op_class: c for c in cmp.classes}
    truth = json.loads((GENERATED / "llm_decode_cuda" / "ground_truth.json").read_text())["classes"]
    for cls, gt in truth.items():
        row = by_class[cls]
        assert (row.count_b, row.total_b_ns) == (gt["count"], gt["cuda_ns"]), cls
        if gt["factor"]:  # same calls on both sides: the per-call ratio is the injected factor
            assert row.ratio == pytest.approx(gt["factor"], rel=0.01), cls
            assert row.per_step_b_ns == pytest.approx(gt["cuda_ns"] / 4), cls
    overall = {o["bucket"]: o for o in cmp.overall}
    assert overall["e2e"]["per_step_b_ms"] is None and overall["idle"]["per_step_b_ms"] is None
    assert cmp.biggest_loss() is None  # no buckets on a summary: no bucket loss is claimed
    store.close()


# -- 5. "not comparable" warnings in every report and in diag compare --json ------------------------------------


def test_compare_warnings_reach_every_report_and_the_cli_json(tmp_path):
    store = _ingest(tmp_path, GENERATED / "llm_decode_tp2" / RANK0, TRAPS / "nsys_kern_sum_baseline")
    ascend = store.con.execute("SELECT run_id FROM runs WHERE platform = 'ascend'").fetchall()[0][0]
    summary = store.con.execute("SELECT run_id FROM runs WHERE platform = 'cuda'").fetchall()[0][0]
    warnings = compare(store, ascend, summary).warnings
    assert warnings
    pm = build_postmortem(store, ascend, summary)
    assert pm.comparison["warnings"] == warnings and pm.comparison["source_b"] == "kernel_summary"
    md, page, js = to_markdown(pm), to_html(pm), json.loads(to_json(pm))
    assert js["comparison"]["warnings"] == warnings
    for w in warnings:
        assert f"- ⚠ not comparable: {md_escape(w)}" in md
        assert f"⚠ not comparable: {html.escape(w)}" in page
    assert md_escape("vs n/a (a kernel summary) on the baseline") in md
    db = store.path
    store.close()
    code, out = cli_json("compare", str(ascend), str(summary), "--db", str(db))
    assert code == 0 and out["warnings"] == warnings
    assert (out["source_b"], out["steps_b"], out["biggest_loss"]) == ("kernel_summary", 0, None)


def test_two_ranks_of_one_platform_warn_in_the_report(tmp_path):
    store = _ingest(tmp_path, GENERATED / "llm_decode_tp2")
    r0, r1 = (r for (r,) in store.con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall())
    md = to_markdown(build_postmortem(store, r0, r1))
    assert "- ⚠ not comparable: both runs are ascend: the comparison is meant for an Ascend run" in md
    store.close()


# -- 6. serving headlines in both directions -------------------------------------------------------------------


def _serving_block(out_tps: str, ttft_ms: str) -> str:
    """A vllm ``benchmark_serving.py`` result block (the shape of ../shared/corpus/serving/*vllm-bench-serve.txt)."""
    rows = [
        ("Successful requests:", "100"), ("Maximum request concurrency:", "32"), ("Benchmark duration (s):", "100.00"),
        ("Total input tokens:", "3276800"), ("Total generated tokens:", "102400"), ("Request throughput (req/s):", "1.00"),
        ("Output token throughput (tok/s):", out_tps), ("Total token throughput (tok/s):", "33792.00"),
        ("Mean TTFT (ms):", ttft_ms), ("Median TTFT (ms):", ttft_ms), ("P99 TTFT (ms):", ttft_ms),
    ]  # fmt: skip
    body = "\n".join(f"{label:<40} {value}" for label, value in rows)
    return f"{'{:=^50}'.format(' Serving Benchmark Result ')}\n{body}\n{'=' * 50}\n"


@pytest.mark.parametrize(
    ("ascend", "cuda", "expected"),
    [
        (("1150.00", "1760.00"), ("1000.00", "2000.00"),
         ["A is better on every figure: output throughput +15%, TTFT mean −12%, TTFT p99 −12%"]),
        (("1150.00", "2000.00"), ("1000.00", "2000.00"),
         ["A is better on 1 of 3 figures: output throughput +15%; the rest within ±5%"]),
        (("850.00", "1760.00"), ("1000.00", "2000.00"),
         ["A reaches 85% of B's output throughput", "A is better on: TTFT mean −12%, TTFT p99 −12%"]),
        (("1010.00", "2000.00"), ("1000.00", "2000.00"), ["A and B are within ±5% on every headline figure"]),
    ],
)  # fmt: skip
def test_serving_headline_is_given_both_ways(tmp_path, ascend, cuda, expected):
    (tmp_path / "ascend_910b3_32k.txt").write_text(_serving_block(*ascend))
    (tmp_path / "nvidia_a800_32k.txt").write_text(_serving_block(*cuda))
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        assert ingest_into(store, [tmp_path]).ok
    code, out = cli_json("accept", "--db", str(db), "--compare", "1", "2")
    assert code == 0 and out["comparison"]["headline"] == expected
    assert set(out["comparison"]) == {"a", "b", "figures", "headline", "warnings"}  # no key added or renamed


# -- 7. one count per thing; duplicate kernel rows counted once and reported -----------------------------------


@pytest.fixture
def duplicated(tmp_path):
    store = _ingest(tmp_path, TRAPS / "duplicate_kernel_rows")
    (run_id,) = [r for (r,) in store.con.execute("SELECT run_id FROM runs").fetchall()]
    yield store, run_id
    store.close()


def test_trap_duplicate_kernel_rows_are_counted_once_and_reported(duplicated):
    store, run_id = duplicated
    counts = kernel_counts(store, run_id)
    # 14 rows, 4 of them a second copy of rows 3-6: 10 kernels of 4 op types in one step
    assert (counts.device_kernels, counts.operator_types, counts.steps, counts.kernels_per_step) == (
        10,
        4,
        1,
        10.0,
    )
    assert [(d["table"], Path(d["file"]).name, d["rows"]) for d in counts.duplicates] == [
        ("device_tasks", "kernel_details.csv", 4),
        ("kernels", "kernel_details.csv", 4),
    ]
    assert counts.note().startswith(
        "8 duplicate kernel row(s) (same name and start as another row): 4 in device_tasks"
    )
    findings = device_findings(store, run_id)
    top = next(f for f in findings if f.category == "top_ops").evidence["ops"]
    by_op = {o["op"]: (o["count"], o["total_ns"]) for o in top}
    assert by_op["Conv2D"] == (1, 311_646)  # not 2 calls, 623,292 ns
    assert by_op["TransData"] == (7, 163_442)
    note = next(f for f in findings if f.category == "data_quality")
    assert note.evidence["duplicates"] == counts.duplicates and note.impact_ns == 0
    # the breakdown, compare's classes and top_ops now agree on the time of TransData + MaxPool…
    totals = class_totals(store, run_id, "ascend")
    assert totals["layout_cast"] == (7, 163_442) and totals["gemm"] == (1, 311_646)
    assert breakdown(store, run_id).total.buckets["cube"] == 311_646


def test_counts_have_one_name_on_the_cli(duplicated):
    store, run_id = duplicated
    db = store.path
    store.close()
    code, out = cli_json("breakdown", "--run", str(run_id), "--db", str(db))
    assert code == 0
    counts = out["runs"][0]["counts"]
    assert (counts["device_kernels"], counts["operator_types"], counts["kernels_per_step"]) == (10, 4, 10.0)
    assert counts["duplicate_rows"] == 8 and "counted once" in counts["note"]
    proc = run_cli("breakdown", "--run", str(run_id), "--db", str(db))
    assert "10 device kernels · 4 operator types · 10.0 kernels per step" in proc.stdout
    assert "8 duplicate kernel row(s)" in proc.stdout


def test_pages_show_the_same_counts_and_the_note(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    db = tmp_path / "pages.duckdb"
    with Store(db) as store:
        assert ingest_into(store, [TRAPS / "duplicate_kernel_rows", TRAPS / "nsys_kern_sum_baseline"]).ok
        ascend = store.con.execute("SELECT run_id FROM runs WHERE platform = 'ascend'").fetchall()[0][0]
    monkeypatch.setenv("DIAG_DB", str(db))
    monkeypatch.setenv("DIAG_UPLOAD_DIR", str(tmp_path / "uploads"))
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=60)
    at.run()
    at.selectbox(key="runs_select").select(ascend).run()
    for page in (None, "app_pages/04_stalls.py"):
        if page:
            at.switch_page(page).run()
            at.selectbox(key="stalls_run").select(ascend).run()
        assert not at.exception, at.exception
        metrics = {m.label: m.value for m in at.metric}
        assert (metrics["device kernels"], metrics["operator types"], metrics["kernels per step"]) == (
            "10",
            "4",
            "10.0",
        )
        assert any("8 duplicate kernel row(s)" in i.value for i in at.info)
    at.switch_page("app_pages/08_compare.py").run()  # the kernel summary is a run to compare against
    assert not at.exception, at.exception
    assert any("nsys stats kernel summary" in w.value for w in at.warning)
    assert any("8 duplicate kernel row(s)" in i.value for i in at.info)


def test_report_names_the_counts_and_the_duplicates(duplicated):
    store, run_id = duplicated
    pm = build_postmortem(store, run_id)
    (story,) = [s for s in pm.what_happened if s.text.startswith("Profiled")]
    assert "10 device kernels (10.0 kernels per step)" in story.text
    assert "Data quality: 8 duplicate kernel row(s)" in story.text
    assert story.evidence["counts"]["duplicate_rows"] == 8
    assert md_escape("10 device kernels (10.0 kernels per step)") in to_markdown(pm)


def test_duplicated_ai_cpu_rows_are_one_fallback_call(tmp_path):
    # the same trap with its (duplicated) Relu row on the AI CPU: the fallback table counts each task once too
    from diag.analyses.cpu_fallback import device_fallbacks

    src = (TRAPS / "duplicate_kernel_rows" / "kernel_details.csv").read_text(encoding="utf-8")
    lines = src.splitlines()
    lines = [ln.replace("AI_VECTOR_CORE", "AI_CPU") if "aclnnInplaceRelu" in ln else ln for ln in lines]
    assert sum("AI_CPU" in ln for ln in lines) == 2  # the row and its copy
    (tmp_path / "dup").mkdir()
    (tmp_path / "dup" / "kernel_details.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = Store(tmp_path / "db.duckdb")
    summary = ingest_into(store, [tmp_path / "dup"])
    (run_id,) = summary.run_ids
    relu = next(f for f in device_fallbacks(store, run_id) if f.op_type == "Relu")
    assert (relu.count, relu.total_ns) == (1, 15_220)  # not 2 calls, 30,440 ns
