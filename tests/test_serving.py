"""Serving-benchmark results: every corpus block and fixture variant to the figure, acceptance verdicts from the
thresholds file, deployment links to profiles, CUDA vs Ascend, ``diag accept`` and the page."""

from __future__ import annotations

import json
import re
import shutil
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from diag.analyses import serving, serving_compare
from diag.store import Store
from parsers import detect_path
from tests.conftest import CORPUS, FIXTURES, ROOT, SAMPLES, cli_json, ingest_into, run_cli

FIX = FIXTURES / "serving"
SERVING = CORPUS / "serving"
REAL_RUN = SAMPLES / "real" / "msinsight_level2_rank0_ascend_pt"
FIGURES = (
    *("successful_requests", "failed_requests", "max_concurrency", "request_rate_rps", "duration_s"),
    *("total_input_tokens", "total_output_tokens", "request_throughput_rps", "output_throughput_tps"),
    *("total_throughput_tps", "peak_output_throughput_tps"),
    *(f"{metric}_{stat}_ms" for metric in ("ttft", "tpot", "itl") for stat in ("mean", "median", "p99")),
)


def _ingest(db: Path, *paths: Path) -> list:
    with Store(db) as store:
        return ingest_into(store, paths).files


def _rows(db: Path) -> dict[str, list[dict]]:
    with duckdb.connect(str(db), read_only=True) as con:
        out: dict[str, list[dict]] = {}
        for r in serving.serving_runs(con):
            out.setdefault(Path(r["file"]).name, []).append(r)
        return out


def _figures(row: dict) -> tuple:
    return tuple(row[k] for k in FIGURES)


# -- the corpus: every block, every figure -----------------------------------------------------------------------
CORPUS_EXPECTED = {
    # successful, failed, max conc, rate, duration, in tok, out tok, req/s, out tok/s, total tok/s, peak out,
    # TTFT mean/median/p99, TPOT mean/median/p99, ITL mean/median/p99
    "ascend_910b3_qwen2.5-omni-7b_vllm-bench-serve_conc20.txt": (
        80, 0, 20, None, 163.16, 280000, 120000, 0.49, 735.46, 2451.54, 921.0,
        1914.71, 952.65, 7422.44, 25.88, 25.69, 28.07, 25.88, 22.70, 182.71,
    ),
    "ascend_npu_qwen3-8b_sharegpt_vllm-bench-serve.txt": (
        10, 0, None, None, 19.92, 1374, 2663, 0.50, 133.67, 202.64, 312.0,
        127.10, 136.29, 137.83, 25.85, 25.78, 26.64, 25.78, 25.74, 28.85,
    ),
    "ascend_npu_qwen3-vl-8b_random_rps1_vllm-bench-serve.txt": (
        200, 0, None, 1.0, 203.81, 40000, 25600, 0.98, 125.61, 321.86, 321.0,
        98.20, 96.56, 147.82, 29.29, 29.24, 30.52, 29.29, 28.76, 43.24,
    ),
    "nvidia_8xh200-or-h20_qwen3-coder-480b-fp8_vllm-bench-serve.txt": (
        100, None, None, None, 776.49, 204169, 102400, 0.13, 131.88, 394.81, None,
        7639.31, 6935.71, 13766.68, 68.43, 67.23, 72.14, 68.43, 66.34, 69.38,
    ),
    "nvidia_a100-80gb_qwen2-7b_benchmark-serving_n10.txt": (
        10, None, None, None, 14.30, 10239, 10240, 0.70, 715.92, 1431.76, None,
        488.52, 511.95, 723.97, 13.47, 13.45, 13.79, 13.48, 13.09, 19.63,
    ),
    "ascend_a3_hunyuan-a13b_aisbench_perf.txt": (
        8, 0, 16, None, 41.1612934, 11660, 3980, 0.1944, 96.6928, 379.9686, None,
        238.6, 254.0, 276.3, 60.1, 60.4, 61.3, 59.7, 51.7, 146.2,
    ),
}  # fmt: skip


@pytest.fixture(scope="module")
def corpus_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not SERVING.is_dir():
        pytest.skip("../shared/corpus/serving is not present (a user's clone has none)")
    db = tmp_path_factory.mktemp("corpus") / "serving.duckdb"
    outcomes = _ingest(db, SERVING)
    assert {o.status for o in outcomes if o.source.endswith(".txt")} == {"ok"}
    return db


def test_every_corpus_block_to_the_figure(corpus_db):
    rows = _rows(corpus_db)
    assert sorted(rows) == sorted(CORPUS_EXPECTED)
    for name, expected in CORPUS_EXPECTED.items():
        assert len(rows[name]) == 1, name
        assert _figures(rows[name][0]) == expected, name


def test_corpus_details(corpus_db):
    rows = {k: v[0] for k, v in _rows(corpus_db).items()}
    conc20 = rows["ascend_910b3_qwen2.5-omni-7b_vllm-bench-serve_conc20.txt"]
    assert (conc20["tool"], conc20["format"], conc20["peak_concurrent_requests"]) == ("vllm", "text", 25.0)
    assert (conc20["platform"], conc20["hardware"], conc20["capacity_gib"]) == ("ascend", "Ascend 910B3", 64)
    ais = rows["ascend_a3_hunyuan-a13b_aisbench_perf.txt"]
    assert (ais["tool"], ais["backend"], ais["dataset"], ais["num_prompts"]) == (
        "aisbench",
        "vllm-api-stream-chat",
        "demo_gsm8k",
        8,
    )
    assert ais["mean_concurrency"] == 5.8273 and ais["input_throughput_tps"] == 283.2758
    assert ais["latency_ms"]["e2el"] == {
        "mean": 29982.6, "min": 16472.9, "max": 41147.2, "median": 30919.1, "p75": 33514.9, "p90": 39413.8,
        "p99": 40973.9,
    }  # fmt: skip
    assert ais["fields"]["Prefill Token Throughput"] == "6108.0184 token/s"
    assert ais["hardware"] == "Atlas A3 (910C die)"
    h200 = rows["nvidia_8xh200-or-h20_qwen3-coder-480b-fp8_vllm-bench-serve.txt"]
    # the block does not say which of the two: both named, capacity left unknown
    assert (h200["platform"], h200["hardware"], h200["capacity_gib"]) == (
        "cuda",
        "NVIDIA H200 or NVIDIA H20",
        None,
    )
    # the old capitalisation is read into the same column
    assert rows["ascend_npu_qwen3-8b_sharegpt_vllm-bench-serve.txt"]["fields"][
        "Total Token throughput (tok/s)"
    ] == ("202.64")


def test_the_aisbench_file_is_not_taken_for_a_log():
    if not SERVING.is_dir():
        pytest.skip("../shared/corpus/serving is not present")
    assert detect_path(SERVING / "ascend_a3_hunyuan-a13b_aisbench_perf.txt").name == "serving_bench"


# -- format variants ---------------------------------------------------------------------------------------------
FIXTURE_EXPECTED = {
    "ok_vllm_newest_crlf.txt": [(
        63, 1, 8, None, 41.27, 64512, 16128, 1.53, 390.79, 1953.94, 472.0,
        412.36, 398.10, 1104.52, 18.44, 18.21, 21.07, 18.40, 17.95, 44.18,
    )],
    "ok_vllm_old_percentiles.txt": [(
        200, None, None, 4.0, 52.08, 45210, 39877, 3.84, 765.69, 1633.78, None,
        35.12, 33.80, 71.93, 11.02, 10.87, 15.66, 10.99, 10.52, 27.35,
    )],
    "ok_vllm_log_prefix.log": [(
        16, None, None, None, 30.50, 65536, 8192, 0.52, 268.59, 2417.31, None,
        1650.20, 1588.00, 2480.75, 52.31, 51.90, 60.02, 52.20, 50.11, 98.64,
    )],
    "ok_vllm_sweep_ascend_910b3.txt": [
        (128, 0, c, None, 100.0, 262144, 65536, 1.28, t, 3276.8, None, ms, ms, ms, 30.0, 30.0, 40.0, 30.0, 30.0, 40.0)
        for c, t, ms in ((1, 120.5, 150.0), (8, 655.36, 420.0), (32, 480.0, 1900.0))
    ],
    "ok_sglang_h100.txt": [(
        300, None, None, None, 95.41, 300000, 300000, 3.14, 3144.32, 6288.64, None,
        21034.90, 20987.11, 41230.02, None, None, None, 65.50, 61.02, 130.47,
    )],
    "ok_aisbench_atlas_a3.txt": [(
        32, 0, 8, None, 48.2105005, 65536, 16384, 0.6638, 339.8406, 1699.2030, None,
        512.7, 498.3, 1190.4, 22.4, 22.3, 25.7, 22.1, 20.4, 77.5,
    )],
    "ok_vllm_save_result.json": [(
        98, 2, 16, None, 62.5, 100352, 50176, 1.568, 802.816, 2408.448, 960.0,
        210.5, 198.25, 402.75, 17.5, 17.25, 21.0, 17.4, 16.9, 35.5,
    )],
    "ok_sglang_output_cuda.jsonl": [
        (480, None, None, r, 120.0, 491520, 491520, 4.0, t, None, None, f, f - 5, f * 3, None, None, None, 20.25,
         19.5, 45.75)
        for r, t, f in ((1.0, 980.5, 95.25), (4.0, 3600.75, 180.5))
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def fixtures_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("fixtures") / "serving.duckdb"
    _ingest(db, *sorted(FIX.glob("ok_*")))
    return db


def test_every_fixture_variant_to_the_figure(fixtures_db):
    rows = _rows(fixtures_db)
    assert sorted(rows) == sorted(FIXTURE_EXPECTED)
    for name, expected in FIXTURE_EXPECTED.items():
        assert [_figures(r) for r in rows[name]] == expected, name


def test_fixture_metadata(fixtures_db):
    rows = _rows(fixtures_db)
    newest = rows["ok_vllm_newest_crlf.txt"][0]  # settings from the command line before the block
    assert (newest["model"], newest["dataset"], newest["input_len"], newest["output_len"]) == (
        "Qwen/Qwen3-8B",
        "random",
        1024,
        256,
    )
    assert newest["platform"] == "ascend"  # "Automatically detected platform npu." in the capture
    old = rows["ok_vllm_old_percentiles.txt"][0]  # settings from Namespace(...), extra percentile rows
    assert (old["model"], old["dataset"], old["num_prompts"]) == (
        "meta-llama/Llama-3.1-8B-Instruct",
        "sharegpt",
        200,
    )
    assert old["latency_ms"]["ttft"] == {
        "mean": 35.12,
        "median": 33.8,
        "p50": 33.8,
        "p90": 48.02,
        "p95": 55.61,
        "p99": 71.93,
    }
    assert (old["e2el_mean_ms"], old["e2el_median_ms"], old["e2el_p99_ms"]) == (2232.4, 1876.33, 6890.14)
    sg = rows["ok_sglang_h100.txt"][0]
    assert (sg["tool"], sg["backend"], sg["mean_concurrency"], sg["input_throughput_tps"]) == (
        "sglang", "sglang", 271.88, 3144.32,
    )  # fmt: skip
    assert (sg["e2el_mean_ms"], sg["latency_ms"]["itl"]["max"], sg["fields"]["Accept length"]) == (
        86470.22,
        2210.9,
        "2.71",
    )
    assert (sg["hardware"], sg["platform"], sg["capacity_gib"]) == ("NVIDIA H100/H800", "cuda", 80)
    js = rows["ok_vllm_save_result.json"][0]
    assert (js["model"], js["format"], js["hardware"], js["hardware_from"], js["platform"]) == (
        "Qwen/Qwen2.5-7B-Instruct", "json", "NVIDIA H100 80GB HBM3", "file", "cuda",
    )  # fmt: skip
    assert js["latency_ms"]["ttft"]["p90"] == 300.0 and js["e2el_p99_ms"] == 11800.25
    ais = rows["ok_aisbench_atlas_a3.txt"][0]
    assert ais["latency_ms"]["ttft"]["max"] == 1210.0  # "1.21 s" in the cell


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        # bad_truncated.txt, partial_cut_save_result.json, partial_aisbench_cut.txt (cut short) are stored
        # partial: tests/test_serving_partial.py
        ("bad_garbled.txt", "line 14: 'Mean TTFT (ms)' has value '41#.3@', not a number"),
        (
            "bad_no_colon.txt",
            "line 16: 'P99 TTFT (ms)    1104.52' is not a 'label: value' row (garbled block?)",
        ),
    ],
)
def test_a_cut_or_garbled_block_is_a_one_line_error(tmp_path, name, reason):
    (outcome,) = _ingest(tmp_path / "bad.duckdb", FIX / name)
    assert outcome.status == "failed" and outcome.parser == "serving_bench"
    assert outcome.message.startswith(f"{FIX / name}: {reason}") and "\n" not in outcome.message
    with duckdb.connect(str(tmp_path / "bad.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM serving_runs").fetchall() == [(0,)]


@pytest.mark.parametrize("prefix", ["    ", "# ", "> "])
def test_a_block_with_a_prefix_on_every_line(tmp_path, prefix):
    text = (FIX / "ok_vllm_newest_crlf.txt").read_text()
    start = text.index("=====")
    path = tmp_path / "doc.md"
    path.write_text("Results:\n\n" + "\n".join(prefix + line for line in text[start:].splitlines()) + "\n")
    db = tmp_path / "p.duckdb"
    assert [o.status for o in _ingest(db, path)] == ["ok"]
    assert _figures(_rows(db)["doc.md"][0]) == FIXTURE_EXPECTED["ok_vllm_newest_crlf.txt"][0]


def test_ingest_twice_stores_once_with_stable_ids(tmp_path):
    db = tmp_path / "twice.duckdb"
    _ingest(db, FIX / "ok_vllm_sweep_ascend_910b3.txt")
    assert [o.status for o in _ingest(db, FIX / "ok_vllm_sweep_ascend_910b3.txt")] == ["unchanged"]
    assert [r["serving_id"] for r in _rows(db)["ok_vllm_sweep_ascend_910b3.txt"]] == [1, 2, 3]


# -- acceptance --------------------------------------------------------------------------------------------------
def _checks(rows: list[dict], name: str, block: int = 1) -> dict[str, dict]:
    row = next(r for r in rows if Path(r["file"]).name == name and r["block_no"] == block)
    return {c["figure"]: c for c in row["checks"]} | {"_verdict": row["verdict"]}


def test_acceptance_verdicts_and_margins(fixtures_db):
    with duckdb.connect(str(fixtures_db), read_only=True) as con:
        rows = serving.accept(con)
    newest = _checks(rows, "ok_vllm_newest_crlf.txt")
    ttft = newest["ttft"]
    assert (ttft["statistic"], ttft["value"], ttft["threshold"], ttft["verdict"]) == (
        "p99",
        1104.52,
        1000,
        "fail",
    )
    assert ttft["margin"] == pytest.approx(-104.52) and ttft["margin_pct"] == pytest.approx(-10.452)
    assert newest["tpot"]["verdict"] == "n/a"  # TPOT is the user's to set
    assert (newest["failed_requests"]["value"], newest["failed_requests"]["verdict"]) == (100 / 64, "fail")
    assert newest["_verdict"] == "fail"
    prefixed = _checks(rows, "ok_vllm_log_prefix.log")["ttft"]  # 4096 input tokens per request: still chat
    assert (prefixed["threshold"], prefixed["verdict"]) == (1000, "fail")
    sweep1, sweep8, sweep32 = (_checks(rows, "ok_vllm_sweep_ascend_910b3.txt", b) for b in (1, 2, 3))
    assert sweep1["throughput"]["verdict"] == "n/a"
    assert sweep8["throughput"]["verdict"] == "pass"
    assert sweep8["throughput"]["margin"] == pytest.approx(655.36 - 0.9 * 120.5)
    assert sweep32["throughput"]["verdict"] == "fail"
    assert sweep32["throughput"]["threshold"] == pytest.approx(0.9 * 655.36)
    assert (sweep32["ttft"]["verdict"], sweep8["ttft"]["verdict"]) == ("fail", "pass")
    sg = _checks(rows, "ok_sglang_output_cuda.jsonl", 2)  # load = request rate
    assert sg["throughput"]["verdict"] == "pass" and sg["ttft"]["margin"] == pytest.approx(1000 - 541.5)
    # overrides, as `diag accept --ttft-ms/--tpot-ms`
    with duckdb.connect(str(fixtures_db), read_only=True) as con:
        rows = serving.accept(con, ttft_ms=2000, tpot_ms=20)
    newest = _checks(rows, "ok_vllm_newest_crlf.txt")
    assert (newest["ttft"]["verdict"], newest["tpot"]["verdict"]) == ("pass", "fail")
    assert newest["tpot"]["margin"] == pytest.approx(20 - 21.07)


def _edited_rules(tmp_path: Path, old: str, new: str) -> Path:
    text = serving.THRESHOLDS_PATH.read_text()
    assert old in text
    path = tmp_path / "serving_thresholds.toml"
    path.write_text(text.replace(old, new))
    return path


def test_editing_the_thresholds_file_alone_changes_the_verdicts(fixtures_db, tmp_path, monkeypatch):
    def verdicts() -> dict:
        with duckdb.connect(str(fixtures_db), read_only=True) as con:
            rows = serving.accept(con)
        return {
            (Path(r["file"]).name, r["block_no"]): {c["figure"]: c["verdict"] for c in r["checks"]}
            for r in rows
        }

    before = verdicts()
    assert before[("ok_vllm_newest_crlf.txt", 1)]["ttft"] == "fail"
    assert before[("ok_vllm_newest_crlf.txt", 1)]["tpot"] == "n/a"
    assert before[("ok_vllm_sweep_ascend_910b3.txt", 3)]["throughput"] == "fail"
    path = _edited_rules(tmp_path, "chat_max_ms = 1000", "chat_max_ms = 1200")
    path.write_text(
        path.read_text()
        .replace("max_ms = 0", "max_ms = 20")
        .replace("max_drop_pct = 10.0", "max_drop_pct = 30.0")
    )
    monkeypatch.setenv("DIAG_SERVING_THRESHOLDS", str(path))
    after = verdicts()
    assert after[("ok_vllm_newest_crlf.txt", 1)]["ttft"] == "pass"
    assert after[("ok_vllm_newest_crlf.txt", 1)]["tpot"] == "fail"
    assert after[("ok_vllm_sweep_ascend_910b3.txt", 3)]["throughput"] == "pass"
    median = _edited_rules(tmp_path, 'statistic = "p99"\nchat_max_ms', 'statistic = "median"\nchat_max_ms')
    code, out = cli_json("accept", "--db", str(fixtures_db), "--thresholds", str(median), "--serving", "1")
    ttft = next(c for c in out["serving"][0]["checks"] if c["figure"] == "ttft")
    assert (
        code == 0
        and out["thresholds"] == str(median)
        and (ttft["statistic"], ttft["value"]) == ("median", 498.3)
    )


# -- deployments: profiles beside serving results ----------------------------------------------------------------
def _deployment(root: Path, bench: Path, bench_name: str) -> Path:
    run = root / "rank0_ascend_pt"
    (run / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    shutil.copy(REAL_RUN / "profiler_info_0.json", run)
    shutil.copy(REAL_RUN / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv", run / "ASCEND_PROFILER_OUTPUT")
    shutil.copy(bench, root / bench_name)
    return root


def _app_peak_bytes() -> int:
    lines = (REAL_RUN / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv").read_text().splitlines()[1:]
    mb = max(Decimal(cells[3]) for cells in (line.split(",") for line in lines) if cells[0] == "APP")
    return int(mb * 1024 * 1024)


def test_memory_from_the_profile_of_the_same_deployment(tmp_path):
    deploy = _deployment(tmp_path / "deploy", FIX / "ok_vllm_newest_crlf.txt", "bench_910b3.txt")
    db = tmp_path / "dep.duckdb"
    _ingest(db, deploy, FIX / "ok_sglang_h100.txt")
    with duckdb.connect(str(db), read_only=True) as con:
        (run_id,) = con.execute("SELECT run_id FROM runs").fetchall()[0]
        rows = serving.accept(con)
        linked = serving.serving_for_runs(con, [run_id])
        assert serving.serving_for_runs(con, [run_id + 100]) == []
        small = serving.load_thresholds(_edited_rules(tmp_path, "capacity_gib = 0", "capacity_gib = 2"))
        tight = _checks(serving.accept(con, small), "bench_910b3.txt")["memory"]
    bench = _checks(rows, "bench_910b3.txt")["memory"]
    peak = _app_peak_bytes()
    assert bench["peak"] == {"run_id": run_id, "component": "APP", "peak_bytes": peak}
    assert bench["value"] == pytest.approx(100 * peak / (64 << 30)) and bench["verdict"] == "pass"
    assert bench["margin"] == pytest.approx(90 - 100 * peak / (64 << 30))
    assert [Path(r["file"]).name for r in linked] == ["bench_910b3.txt"] and linked[0]["linked_runs"] == [
        run_id
    ]
    assert _checks(rows, "ok_sglang_h100.txt")["memory"]["verdict"] == "n/a"  # no profile beside it
    assert tight["verdict"] == ("fail" if peak > 0.9 * (2 << 30) else "pass")
    assert tight["value"] == pytest.approx(100 * peak / (2 << 30))


def test_serving_comparison_for_two_profiled_deployments(tmp_path):
    ascend = _deployment(tmp_path / "npu", FIX / "ok_vllm_sweep_ascend_910b3.txt", "sweep.txt")
    cuda = tmp_path / "gpu"
    cuda.mkdir()
    shutil.copy(SAMPLES / "generated" / "llm_decode_cuda" / "h100_decode_tp1.pt.trace.json", cuda)
    shutil.copy(FIX / "ok_vllm_save_result.json", cuda / "h100_result.json")
    db = tmp_path / "two.duckdb"
    _ingest(db, ascend, cuda)
    with duckdb.connect(str(db), read_only=True) as con:
        runs = dict(con.execute("SELECT platform, run_id FROM runs").fetchall())
        cmp = serving_compare.serving_comparison_for_runs(con, runs["ascend"], runs["cuda"])
        assert serving_compare.serving_comparison_for_runs(con, runs["ascend"], runs["ascend"] + 100) is None
    assert (cmp["a"]["label"], cmp["b"]["label"]) == ("sweep.txt#1", "h100_result.json#1")
    assert (cmp["a"]["platform"], cmp["b"]["platform"]) == ("ascend", "cuda")
    assert cmp["b"]["linked_runs"] == [runs["cuda"]]
    out = next(f for f in cmp["figures"] if f["figure"] == "output_throughput_tps")
    assert (out["a"], out["b"], out["worse"]) == (120.5, 802.816, True)
    assert out["ratio"] == pytest.approx(120.5 / 802.816)
    assert "max concurrency differs: 1 vs 16" in cmp["warnings"]
    assert "mean input tokens per request differ: 2048 vs 1024" in cmp["warnings"]


def _block(out_tps: str, ttft_p99: str) -> str:
    rows = [
        ("Successful requests:", "100"), ("Maximum request concurrency:", "32"), ("Benchmark duration (s):", "100.00"),
        ("Total input tokens:", "3276800"), ("Total generated tokens:", "102400"), ("Request throughput (req/s):", "1.00"),
        ("Output token throughput (tok/s):", out_tps), ("Total token throughput (tok/s):", "33792.00"),
        ("Mean TTFT (ms):", ttft_p99), ("Median TTFT (ms):", ttft_p99), ("P99 TTFT (ms):", ttft_p99),
    ]  # fmt: skip
    body = "\n".join(f"{label:<40} {value}" for label, value in rows)
    return f"{'{:=^50}'.format(' Serving Benchmark Result ')}\n{body}\n{'=' * 50}\n"


def test_cuda_vs_ascend_gaps_are_obvious(tmp_path):
    """The seeds' gap: 85% of the A800's throughput and +30% latency past 32k context, same workload."""
    (tmp_path / "ascend_910b3_32k.txt").write_text(_block("850.00", "2600.00"))
    (tmp_path / "nvidia_a800_32k.txt").write_text(_block("1000.00", "2000.00"))
    db = tmp_path / "gap.duckdb"
    _ingest(db, tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        cmp = serving_compare.compare_serving(con, 1, 2)
        acc = serving.accept(con)
    assert cmp["headline"] == [
        "A reaches 85% of B's output throughput",
        "TTFT mean: A +30% against B",
        "TTFT p99: A +30% against B",
    ]
    assert cmp["warnings"] == [
        "model not stated in either result: check that both ran the same model",
        "dataset not stated in either result: check that both ran the same dataset",
    ]
    # 32768 input tokens per request: judged against the long-context limit
    ttft = {Path(r["file"]).name: next(c for c in r["checks"] if c["figure"] == "ttft") for r in acc}
    assert (ttft["ascend_910b3_32k.txt"]["threshold"], ttft["ascend_910b3_32k.txt"]["verdict"]) == (
        2000,
        "fail",
    )
    assert ttft["nvidia_a800_32k.txt"]["verdict"] == "pass"


# -- the command and the page --------------------------------------------------------------------------------------
def test_accept_command_json(fixtures_db):
    code, out = cli_json("accept", "--db", str(fixtures_db), "--compare", "1", "9")
    assert code == 0 and set(out) == {"db", "thresholds", "serving", "comparison"}
    assert len(out["serving"]) == 11
    row = out["serving"][0]
    for key in ("serving_id", "label", "file", "platform", "hardware", "hardware_from", "capacity_gib",
                "linked_runs", "load", "input_tokens_mean", "output_tokens_mean", "latency_ms", "verdict", "checks"):  # fmt: skip
        assert key in row, key
    assert set(row["checks"][0]) >= {
        "figure",
        "value",
        "threshold",
        "unit",
        "verdict",
        "margin",
        "margin_pct",
    }
    assert set(out["comparison"]) == {"a", "b", "figures", "headline", "warnings"}
    readme = (ROOT / "README.md").read_text().split("## Serving acceptance", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`([a-z_0-9]+)`|\"([a-z_0-9]+)\"", readme))
    names = {a or b for a, b in documented} | {
        f"{m}_{s}_ms" for m in ("ttft", "tpot", "itl", "e2el") for s in ("mean", "median", "p99")
    }
    keys = set(out) | set(row) | {k for c in row["checks"] for k in c} | set(out["comparison"])
    keys |= set(out["comparison"]["a"]) | set(out["comparison"]["figures"][0])
    assert keys - names == set(), "keys of diag accept --json missing from the README"
    bad = run_cli("accept", "--db", str(fixtures_db), "--serving", "99")
    assert bad.returncode != 0 and "no serving run 99" in bad.stderr and bad.stderr.count("\n") == 1
    strict = run_cli("accept", "--db", str(fixtures_db), "--strict")
    assert strict.returncode == 1 and "FAIL" in strict.stdout


def test_serving_page(fixtures_db, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("DIAG_DB", str(fixtures_db))
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=60)
    at.run()
    at.switch_page("app_pages/10_serving.py").run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Serving acceptance"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics == {"serving runs": "11", "pass": "5", "fail": "6"}
    summary = at.dataframe[0].value
    assert summary.loc[summary["result"] == "ok_vllm_newest_crlf.txt#1", "TTFT p99 ms"].iloc[0] == 1104.52
    cmp = at.dataframe[-1].value
    assert list(cmp.columns) == ["figure", "unit", "better", "A", "B", "A/B", "gap %", "worse"]
    assert at.warning  # the workloads of the default pair differ
    json.dumps([d.value.to_dict() for d in at.dataframe], default=str)  # every table renders from plain data
