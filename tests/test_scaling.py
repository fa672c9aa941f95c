"""diag scaling: the long-context pair's known departure and ratios recovered, fits on exact power laws, the
departure rule, too few lengths, the CLI text and the Compare page's Scaling section."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from diag.analyses.scaling import departure, fit, scaling, thresholds
from diag.cli import main
from diag.store import Store
from sample_traces import _long_context
from tests.conftest import ingest_into, open_page, query


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The generated long-context pair ingested: (database, the Ascend side's folder with ground_truth.json)."""
    root = tmp_path_factory.mktemp("long_context")
    _long_context.write_ascend(root / "ascend")
    _long_context.write_cuda(root / "cuda")
    db = root / "pair.duckdb"
    with Store(str(db)) as store:
        assert ingest_into(store, [root / "ascend", root / "cuda"]).ok
    return db, root / "ascend"


def _diag(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """diag in-process (a subprocess costs seconds of imports on a loaded machine): exit code and stdout."""
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().out


def _runs(db: Path) -> tuple[int, int]:
    got = dict(query(db, "SELECT platform, run_id FROM runs"))
    return got["ascend"], got["cuda"]


def test_scaling_json_recovers_the_injected_departure_and_ratios(pair: tuple[Path, Path], capsys) -> None:  # noqa: ANN001
    db, ascend_dir = pair
    truth = json.loads((ascend_dir / "ground_truth.json").read_text())
    code, text = _diag(capsys, "scaling", "--db", str(db), "--json")  # the only Ascend run; the only CUDA one
    out = json.loads(text)
    assert code == 0
    a, b = _runs(db)
    assert (out["run_id"], out["baseline_run_id"], out["notes"]) == (a, b, [])
    groups = {g["group"]: g for g in out["groups"]}
    assert list(groups) == ["attention_prefill", "attention_decode", "matmul", "step_prefill", "step_decode"]
    for name, want in truth["groups"].items():
        g = groups[name]
        assert g["departure_length"] == want["departure_length"], name
        assert g["ratio_short"] == pytest.approx(want["ratio_short"], rel=0.05), name
        assert g["ratio_long"] == pytest.approx(want["ratio_long"], rel=0.05), name
    prefill = groups["attention_prefill"]
    assert [p["length"] for p in prefill["points"]] == truth["lengths"]
    # CUDA's times are the cost model's, two layers per step, read back from the Kineto trace
    assert [p["baseline_time_ns"] for p in prefill["points"]] == [
        2 * truth["cuda_ns"]["attention_prefill"][str(n)] for n in truth["lengths"]
    ]
    assert [round(p["ratio"], 3) for p in prefill["points"]] == [1.0] * 5 + [1.3] * 3
    # the matmul's tokens: 1 in the 8 decode steps, the prefill length in the others
    assert [(p["length"], p["steps"]) for p in groups["matmul"]["points"][:2]] == [(1, 8), (1024, 1)]
    assert set(prefill) >= {"group", "points", "slope", "baseline_slope", "departure_length", "ratio_short",
                            "ratio_long"}  # fmt: skip


def test_scaling_text_answers_first_then_a_table_per_group(pair: tuple[Path, Path], capsys) -> None:  # noqa: ANN001
    db, _ = pair
    a, b = _runs(db)
    code, stdout = _diag(capsys, "scaling", "--db", str(db), "--run", str(a), "--baseline", str(b))
    assert code == 0
    lines = stdout.splitlines()
    assert lines[0] == (
        "attention prefill 30% slower than CUDA from 32,768 tokens (ratio 1.00 → 1.30); "
        "whole step (prefill) 30% slower than CUDA from 32,768 tokens (ratio 1.05 → 1.30)"
    )
    assert lines[1] == f"attention prefill: run {a} vs run {b}"
    assert "length (tokens) ┃ Ascend ms ┃ CUDA ms ┃ ratio ┃ steps" in lines[3]
    row = next(line for line in lines if line.startswith("│ 32,768 "))
    assert [c.strip() for c in row.strip("│").split("│")] == ["32,768", "33.527", "25.790", "1.30×", "1"]
    assert "slope: length^1.98, 3,964.0 ns/token; baseline length^1.91, 3,046.6 ns/token" in lines
    assert "None" not in stdout


def test_scaling_without_baseline_gives_the_slope_alone(pair: tuple[Path, Path], capsys) -> None:  # noqa: ANN001
    db, _ = pair
    _, b = _runs(db)
    code, text = _diag(
        capsys, "scaling", "--db", str(db), "--run", str(b), "--json"
    )  # CUDA: no default baseline
    out = json.loads(text)
    assert code == 0 and out["baseline_run_id"] is None
    prefill = out["groups"][0]
    assert prefill["departure_length"] is None and prefill["ratio_short"] is None
    assert {p["ratio"] for p in prefill["points"]} == {None}
    assert out["answer"] == "attention prefill: time ∝ length^1.91 over 1,024–131,072 tokens"


def test_fit_recovers_an_exact_power_law_and_a_linear_cost() -> None:
    lengths = [1024 << i for i in range(6)]
    got = fit([(n, 7.0 * n**1.5) for n in lengths])
    assert got is not None and got["exponent"] == pytest.approx(1.5, abs=1e-9)
    linear = fit([(n, 2_000 + 3.25 * n, 1) for n in lengths])
    assert linear is not None and linear["ns_per_token"] == pytest.approx(3.25, abs=1e-9)
    assert fit([(1024, 5.0), (2048, 9.0), (2048, 9.5)]) is None  # 2 distinct lengths


def test_departure_needs_every_longer_point_above_and_two_of_them() -> None:
    t = thresholds()  # rise 10 %, 2 short points, 2 departed points
    lengths = [1024 << i for i in range(7)]
    assert departure(list(zip(lengths, [1.0, 1.02, 0.98, 1.25, 1.3, 1.3, 1.31], strict=True)), t) == (
        8192, 1.01, 1.3)  # fmt: skip
    # a dip back under the limit at 16k: the departure is the run of points above it that lasts to the end
    dipped = [1.0, 1.0, 1.2, 1.05, 1.3, 1.3, 1.3]
    assert departure(list(zip(lengths, dipped, strict=True)), t)[0] == 16384
    # only the longest point above: one point is too easily noise
    assert departure(list(zip(lengths, [1.0] * 6 + [1.5], strict=True)), t) == (None, 1.0, 1.25)
    assert departure([], t) == (None, None, None)


def test_fewer_than_three_lengths_says_so_and_fits_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_long_context, "LENGTHS", (1024, 2048))
    _long_context.write_ascend(tmp_path / "two")
    with Store(str(tmp_path / "two.duckdb")) as store:
        assert ingest_into(store, [tmp_path / "two"]).ok
        result = scaling(store, 1)
    prefill = result["groups"][0]
    assert prefill["slope"] is None and [p["length"] for p in prefill["points"]] == [1024, 2048]
    assert "attention prefill: 2 distinct length(s); at least 3 are needed for a slope" in result["notes"]
    assert result["answer"] == "attention prefill: 1,024–2,048 tokens only, too few lengths for a slope"


def test_compare_page_scaling_section(pair: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    db, _ = pair
    a, _ = _runs(db)
    at = open_page(monkeypatch, db)
    at.selectbox(key="runs_select").select(a).run()
    at.switch_page("app_pages/08_compare.py").run()
    assert not at.exception, at.exception
    assert "Scaling with sequence / KV length" in [h.value for h in at.subheader]
    answer = next(m.value for m in at.markdown if "slower than CUDA" in m.value)
    assert answer.startswith("attention prefill 30% slower than CUDA from 32,768 tokens (ratio 1.00 → 1.30)")
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart") if "scaling_" in c.proto.id]
    assert [c["layout"]["title"]["text"] for c in charts] == [
        "attention prefill", "attention decode", "matmul", "whole step (prefill)", "whole step (decode)"]  # fmt: skip
    prefill = charts[0]
    assert [t["name"][:3] for t in prefill["data"]] == ["A: ", "B: "]
    assert (prefill["layout"]["xaxis"]["type"], prefill["layout"]["yaxis"]["type"]) == ("log", "log")
    assert [s["x0"] for s in prefill["layout"]["shapes"]] == [32768]  # the departure marked
    assert "shapes" not in charts[1]["layout"]  # decode: no departure, no line
    table = next(d.value for d in at.dataframe if "length (tokens)" in d.value.columns)
    assert list(table.columns) == ["length (tokens)", "A ms", "B ms", "A/B"]
    assert table["A/B"].tolist() == [1.0] * 5 + [1.3] * 3


@pytest.mark.browser
def test_compare_page_scaling_section_in_chromium(pair: tuple[Path, Path], tmp_path: Path) -> None:
    """The section as drawn: its heading, the answer, one plot per group with both curves, no error; a
    screenshot of the section (DIAG_SCREENSHOTS=folder keeps it)."""
    import os

    from tests.browser_app import launch, require_browser, serve_app

    require_browser()
    from playwright.sync_api import sync_playwright

    _, ascend_dir = pair
    db = tmp_path / "browser.duckdb"  # its own file: an AppTest of this process may hold the pair's lock
    with Store(str(db)) as store:
        assert ingest_into(store, [ascend_dir, ascend_dir.parent / "cuda"]).ok
    shots = Path(os.environ.get("DIAG_SCREENSHOTS") or tmp_path)
    with serve_app(db, tmp_path / "uploads") as app, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1200})
        page.goto(app.url)
        page.get_by_role("heading", name="Runs").first.wait_for(timeout=120_000)
        page.locator('[data-testid="stSidebarNav"]').get_by_text("Ascend vs CUDA", exact=True).first.click()
        heading = page.get_by_role("heading", name="Scaling with sequence / KV length").first
        heading.wait_for(timeout=120_000)
        page.wait_for_function(
            "() => document.querySelectorAll('.js-plotly-plot').length >= 6", timeout=60_000
        )
        page.wait_for_timeout(1500)
        heading.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "compare_scaling.png"))
        text = page.locator('[data-testid="stMain"]').first.inner_text()
        plots = page.evaluate(
            "() => [...document.querySelectorAll('.js-plotly-plot')].slice(1)"
            ".map(p => [p.data.length, (p.layout.annotations || []).map(a => a.text)])"
        )
        exceptions = page.locator('[data-testid="stException"]').count()
        page.set_viewport_size({"width": 1600, "height": 4200})  # every group's plot in one shot
        page.wait_for_timeout(1500)
        page.get_by_role(
            "heading", name="Scaling with sequence / KV length"
        ).first.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "compare_scaling_all.png"))
        browser.close()
    assert "attention prefill 30% slower than CUDA from 32,768 tokens (ratio 1.00 → 1.30)" in text
    departs = [2, ["departs at 32,768 (A/B 1.00 → 1.30)"]]
    assert plots == [departs, [2, []], [2, []], [2, ["departs at 32,768 (A/B 1.05 → 1.30)"]], [2, []]]
    assert exceptions == 0
    assert "None" not in text


# --- dynamic shapes and compilation (diag.analyses.shape_churn) ---


def test_buckets_cover_a_known_set_of_lengths() -> None:
    from diag.analyses.shape_churn import bucket_text, buckets, next_bucket

    assert [next_bucket(n) for n in (1, 2, 3, 1000, 1024, 1025)] == [1, 2, 4, 1024, 1024, 2048]
    lengths = [1000, 1024, 1500, 3000, 5000, 9000, 16000, 1000]  # one per step
    b = buckets(lengths)
    assert b["buckets"] == [1024, 2048, 4096, 8192, 16384] and b["distinct_lengths"] == 7
    padding = (24 + 0 + 548 + 1096 + 3192 + 7384 + 384 + 24) / sum(lengths)
    assert b["padding_pct"] == pytest.approx(100 * padding)
    assert bucket_text(b) == (
        "pad tokens to the next of 5 bucket(s): 1,024, 2,048, 4,096, 8,192, 16,384 would cover the 7 observed "
        "length(s) (+34% tokens)"  # 12,652 extra over 37,524
    )
    wide = buckets([1 << i for i in range(12)])  # 12 buckets > max_buckets 8: said as a span
    assert bucket_text(wide) == "the 12 observed lengths span 1–2,048: 12 power-of-two buckets (+0% tokens)"


def test_each_compile_pattern_matches_its_example() -> None:
    import re

    from diag.analyses.shape_churn import compile_pattern, rules

    for rule in rules()["compile"]:
        assert re.search(rule["pattern"], rule["example"].lower()), rule
        assert rule["source"] and rule["what"]
    for name in ("AscendCL@aclopCompileAndExecute", "AscendCL@opCompile"):
        assert re.search(compile_pattern(), name.lower())
    for name in ("AscendCL@aclopExecute", "aten::linear", "torch/_compile.py(20): inner"):
        assert not re.search(compile_pattern(), name.lower()), name  # a wrapper that compiles nothing


def test_compile_calls_of_a_real_trace_once_each_with_their_step(tmp_path: Path) -> None:
    from decimal import Decimal

    from diag.analyses.findings import device_findings
    from diag.analyses.shape_churn import compile_events, fixes
    from tests.conftest import REAL_LEVEL2

    trace = json.loads((REAL_LEVEL2 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
    events = trace if isinstance(trace, list) else trace["traceEvents"]
    outer = [e for e in events if e.get("name") == "AscendCL@aclopCompileAndExecute" and e.get("ph") == "X"]
    want_ns = sum(round(Decimal(str(e["dur"])) * 1000) for e in outer)  # opCompile runs inside: not again
    with Store(str(tmp_path / "l2.duckdb")) as store:
        assert ingest_into(store, [REAL_LEVEL2]).ok
        got = compile_events(store, 1)
        found = [f for f in device_findings(store, 1) if f.category == "recompile"]
    assert (got["calls"], got["total_ns"]) == (19, want_ns) == (19, 14_231_860)
    assert got["per_step"] == [{"step": 50, "calls": 19, "total_ns": 14_231_860}]
    assert [f.title for f in found] == [
        "19 compile call(s) took 14.2 ms on the host (8.2% of the capture), most in step 50 (19 call(s), 14.2 ms)",
        "All 187 device kernels that report an OP State ran in dynamic-shape state (OP State = dynamic)",
    ]  # one compile finding: the timed one replaces the count-only one (which needs 20 calls anyway)
    assert found[0].evidence["fixes"] == fixes("ascend") and found[0].evidence["log_recompiles"] == 0
    assert "ACLNN_CACHE_LIMIT" in found[0].suggestion and "--max-num-seqs" in found[0].suggestion
    assert not any("ACLNN" in f["text"] for f in fixes("cuda"))


def test_generator_options_write_the_pair(tmp_path: Path) -> None:
    """generate.py --long-context and generate_cuda.py --long-context write what _long_context writes."""
    import sys

    from sample_traces import generate, generate_cuda

    assert generate.main([str(tmp_path / "a"), "--long-context"]) == 0
    csv = tmp_path / "a" / _long_context.ASCEND_FOLDER / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = csv.read_text().splitlines()
    assert len(lines) == 1 + 16 * 6  # header, 16 steps of 2 layers × 3 ops
    assert lines[1].split(",")[:6] == [
        "1",
        "4294967295",
        "1",
        "2",
        "aclnnMatmul_MatMulV2_MatMulV2",
        "MatMulV2",
    ]
    assert '"1,131072,3584;1,131072,512;1,131072,512"' in lines[8 * 6 - 4]  # 128k prefill, last layer
    argv, sys.argv = sys.argv, ["generate_cuda.py", "--long-context", str(tmp_path / "b")]
    try:
        generate_cuda.main()
    finally:
        sys.argv = argv
    trace = json.loads((tmp_path / "b" / _long_context.CUDA_FILE).read_text())
    dims = [
        e["args"]["Input Dims"]
        for e in trace["traceEvents"]
        if e.get("name") == "aten::_flash_attention_forward"
    ]
    assert dims[0][:3] == [[1, 1024, 28, 128], [1, 1024, 4, 128], [1, 1024, 4, 128]]
    assert dims[-1][:2] == [[1, 1, 28, 128], [1, 131072, 4, 128]]  # the last decode step: KV 128k


def test_several_ascend_runs_without_run_is_a_one_line_usage_error(
    pair: tuple[Path, Path],
    tmp_path: Path,
    capsys,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    db = tmp_path / "two.duckdb"
    _, ascend_dir = pair
    other = tmp_path / "other"
    monkeypatch.setattr(_long_context, "LENGTHS", (1024, 2048, 4096))
    monkeypatch.setattr(_long_context, "ASCEND_FOLDER", "rank0_7_20250115101500123_ascend_pt")  # another run
    _long_context.write_ascend(other)
    with Store(str(db)) as store:
        assert ingest_into(store, [ascend_dir, other]).ok
    capsys.readouterr()
    code = main(["scaling", "--db", str(db)])
    out = capsys.readouterr()
    assert (code, out.out) == (2, "")
    assert out.err == "diag: error: 2 non-CUDA runs with kernels: pass --run (one of 1, 2)\n"


def test_one_length_only_says_there_is_no_curve(
    tmp_path: Path,
    capsys,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    one_step = [(1, "prefill", [("gemm", 4096, 4096), ("attention_prefill", 4096, 4096)])]
    monkeypatch.setattr(_long_context, "plan", lambda: one_step)  # every shape once: no axis varies
    _long_context.write_ascend(tmp_path / "one")
    with Store(str(tmp_path / "one.duckdb")) as store:
        assert ingest_into(store, [tmp_path / "one"]).ok
    code, out = _diag(capsys, "scaling", "--db", str(tmp_path / "one.duckdb"))
    assert code == 0
    assert out == (
        "no scaling curve: no attention or matmul shapes with a varying length in this run\n"
        "no baseline: pass --baseline ID (a CUDA run of the same workload) for the ratio per length\n"
    )


def test_the_compile_finding_counts_the_logs_recompiles(tmp_path: Path) -> None:
    import shutil

    from diag.analyses.findings import device_findings
    from tests.conftest import FIXTURES, REAL_LEVEL2

    run = tmp_path / REAL_LEVEL2.name
    shutil.copytree(REAL_LEVEL2, run)
    (run / "log").mkdir()  # a vLLM worker log of Dynamo guard failures, in the profile's folder
    shutil.copy(
        FIXTURES / "logs_wild" / "w1_052_vllm_dynamo_recompiling_guard_failures.log", run / "log" / "w.log"
    )
    with Store(str(tmp_path / "l.duckdb")) as store:
        assert ingest_into(store, [run]).ok
        found = [f for f in device_findings(store, 1) if f.category == "recompile"]
    # one recompile ([0/7]) whose guard failures PyTorch writes on several lines under the same header: one
    # record since round 7 reads a TORCH_LOGS message whole (it counted 3 lines of it before)
    assert found[0].title.endswith("(19 call(s), 14.2 ms); 1 recompile record(s) in the attached logs")
    assert found[0].evidence["log_recompiles"] == 1


def test_all_dynamic_ops_with_churning_token_counts_name_the_buckets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from diag.analyses.findings import device_findings

    monkeypatch.setattr(_long_context, "LENGTHS", (1000, 1500, 3000, 5000, 9000, 17000, 33000, 65000))
    _long_context.write_ascend(tmp_path / "odd")  # every op OP State dynamic; no compile calls
    with Store(str(tmp_path / "odd.duckdb")) as store:
        assert ingest_into(store, [tmp_path / "odd"]).ok
        found = [f for f in device_findings(store, 1) if f.category == "recompile"]
    # 8 prefill steps at those lengths, 8 decode steps of 1 token; padding 61,084 tokens over 134,508
    assert [f.title for f in found] == [
        "All 96 device kernels that report an OP State ran in dynamic-shape state (OP State = dynamic); pad tokens "
        "to the next of 8 bucket(s): 1, 1,024, 2,048, 4,096, 8,192, 16,384, 32,768, 65,536 would cover the 9 "
        "observed length(s) (+45% tokens)"
    ]
    assert found[0].evidence["padding_pct"] == pytest.approx(100 * 61_084 / 134_508)
