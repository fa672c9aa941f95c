"""Serving results as they arrive in issue reports and tailed logs: blocks cut short (stored partial, every
figure present kept), blocks without their header (read by their rows, look-alikes left alone), verdicts on
the figures present, and ``diag ingest`` naming the files it skipped."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import pytest

from diag.analyses import serving
from diag.store import Store
from parsers import detect_path
from tests.conftest import FIXTURES, cli_json, ingest_into, run_cli

FIX = FIXTURES / "serving"
TRAPS = FIXTURES / "traps"
WILD = sorted(FIX.glob("wild_*"))
HELD = [p for p in WILD if int(hashlib.sha256(p.name.encode()).hexdigest()[0], 16) < 8]


def _ingest(db: Path, *paths: Path) -> list:
    with Store(db) as store:
        return ingest_into(store, paths).files


def _rows(db: Path) -> list[dict]:
    with duckdb.connect(str(db), read_only=True) as con:
        return serving.serving_runs(con)


def _judged(db: Path) -> list[dict]:
    with duckdb.connect(str(db), read_only=True) as con:
        return serving.accept(con)


def _check(row: dict, figure: str) -> dict:
    return next(c for c in row["checks"] if c["figure"] == figure)


# -- 1. a block cut short is stored partial ----------------------------------------------------------------------
def test_a_block_cut_inside_a_row_keeps_every_figure_before_the_cut(tmp_path):
    (outcome,) = _ingest(tmp_path / "p.duckdb", TRAPS / "serving_block_cut_short" / "bench_serve_cut.txt")
    assert (outcome.status, outcome.rows) == ("partial", {"serving_runs": 1})
    assert outcome.message == (
        'partial: block of line 2 cut after "P99 TTFT (ms)" (line 16); '
        "missing: TPOT mean/median/p99, ITL mean/median/p99"
    )
    (row,) = _rows(tmp_path / "p.duckdb")
    got = (row["successful_requests"], row["failed_requests"], row["duration_s"], row["total_input_tokens"])
    assert got == (1000, 0, 23.73, 79807)  # "0  <<<<<<< New line": the author's remark is not the value
    assert (row["ttft_mean_ms"], row["ttft_p99_ms"], row["peak_output_throughput_tps"]) == (
        9408.2,
        18164.16,
        14046.0,
    )
    assert (row["tpot_mean_ms"], row["tpot_p99_ms"], row["itl_p99_ms"]) == (None, None, None)
    assert row["partial"] == outcome.message.removeprefix("partial: ")
    with duckdb.connect(str(tmp_path / "p.duckdb"), read_only=True) as con:
        assert con.execute("SELECT status, message FROM files").fetchall() == [("partial", outcome.message)]


def test_the_synthetic_truncated_block_is_partial_not_failed(tmp_path):
    (outcome,) = _ingest(tmp_path / "t.duckdb", FIX / "bad_truncated.txt")
    assert outcome.status == "partial"
    assert outcome.message.startswith(
        'partial: block of line 1 cut after "Total token throughput (tok/s)" (line 12)'
    )
    (row,) = _rows(tmp_path / "t.duckdb")
    assert (row["successful_requests"], row["max_concurrency"], row["total_throughput_tps"]) == (
        63,
        8,
        1953.94,
    )
    assert row["ttft_p99_ms"] is None


@pytest.mark.parametrize(
    ("name", "cut_after", "figures"),
    [
        ("wild_vllm_p90_p95_pr7062.txt", "Median TPOT (ms)", {"tpot_median_ms": 223.08, "tpot_p99_ms": None}),
        ("wild_ascend_qwen2.5-omni-7b_conc20_issue11750.txt", "P99 TTFT (ms)", {"ttft_p99_ms": 7402.06}),
        (
            "wild_vllm_l20_qwen3-8b_low_success_issue24005.txt",
            "Benchmark duration (s)",
            {"successful_requests": 1},
        ),
    ],
)
def test_real_pastes_cut_at_different_places(tmp_path, name, cut_after, figures):
    (outcome,) = _ingest(tmp_path / "w.duckdb", FIX / name)
    assert outcome.status == "partial" and f'cut after "{cut_after}"' in outcome.message
    (row,) = _rows(tmp_path / "w.duckdb")
    assert {k: row[k] for k in figures} == figures


def test_a_missing_figure_is_na_with_a_detail_and_the_rest_is_judged(tmp_path):
    _ingest(tmp_path / "v.duckdb", FIX / "wild_ascend_qwen2.5-omni-7b_conc20_issue11750.txt")
    (row,) = _judged(tmp_path / "v.duckdb")
    tpot = _check(row, "tpot")
    assert (tpot["verdict"], tpot["value"]) == ("n/a", None)
    assert tpot["detail"] == "not in this block: it was cut short (see partial)"
    ttft = _check(row, "ttft")  # 3500-token inputs are chat by the thresholds file: 7402.06 ms > 1000 ms
    assert (ttft["verdict"], ttft["value"], ttft["threshold"]) == ("fail", 7402.06, 1000)
    assert _check(row, "failed_requests")["verdict"] == "pass" and row["verdict"] == "fail"


# -- 2. a block without its header is read by its rows -------------------------------------------------------
def test_a_block_starting_at_successful_requests_is_read(tmp_path):
    path = FIX / "wild_ascend_950pr_qwen3.8-27b_64k_headerless_recipes819.txt"
    assert detect_path(path).name == "serving_bench"
    (outcome,) = _ingest(tmp_path / "h.duckdb", path)
    assert outcome.status == "partial"
    assert outcome.message.startswith(
        'partial: block of line 5 (no header: read by its rows) cut after "P99 ITL (ms)" (line 27)'
    )
    (row,) = _rows(tmp_path / "h.duckdb")
    assert (row["line_no"], row["successful_requests"], row["total_input_tokens"]) == (5, 10, 640523)
    assert (row["request_rate_rps"], row["ttft_p99_ms"], row["tpot_mean_ms"], row["itl_p99_ms"]) == (
        10.0,
        204191.02,
        66.21,
        4508.9,
    )


def test_two_headerless_tails_in_one_paste(tmp_path):
    (outcome,) = _ingest(tmp_path / "t.duckdb", FIX / "wild_tt_kimi_headerless_tail_issue4681.txt")
    assert (outcome.status, outcome.rows) == ("partial", {"serving_runs": 2})
    first, second = _rows(tmp_path / "t.duckdb")
    assert (first["line_no"], first["tpot_mean_ms"], first["itl_p99_ms"]) == (3, 16.8, 14.53)
    assert (second["line_no"], second["tpot_p99_ms"], second["itl_median_ms"], second["itl_p99_ms"]) == (
        17,
        6.29,
        0.02,
        None,
    )
    assert first["successful_requests"] is None and "missing: Successful requests" in first["partial"]


def test_a_killed_benchmark_log_is_not_taken_for_a_result(tmp_path):
    path = TRAPS / "serving_lookalike_preamble" / "bench_killed.log"
    parser = detect_path(path)
    assert parser is None or parser.name != "serving_bench"
    _ingest(tmp_path / "n.duckdb", path)
    assert _rows(tmp_path / "n.duckdb") == []


def test_rows_that_continue_after_a_bad_line_are_still_garbled(tmp_path):
    (outcome,) = _ingest(tmp_path / "g.duckdb", FIX / "bad_no_colon.txt")
    assert outcome.status == "failed" and "line 16: 'P99 TTFT (ms)    1104.52' is not a" in outcome.message


# -- 3. long-context TTFT verdicts on partial blocks ----------------------------------------------------------
def test_long_context_run_fails_ttft_from_a_headerless_cut_block(tmp_path):
    _ingest(tmp_path / "l.duckdb", FIX / "wild_ascend_950pr_qwen3.8-27b_64k_headerless_recipes819.txt")
    (row,) = _judged(tmp_path / "l.duckdb")
    ttft = _check(row, "ttft")
    assert (ttft["verdict"], ttft["value"], ttft["threshold"]) == ("fail", 204191.02, 2000)
    assert ttft["detail"] == "long context: mean input 64052 tokens" and row["verdict"] == "fail"


def test_ttft_of_a_tail_without_input_length_is_judged_on_both_limits(tmp_path):
    path = TRAPS / "serving_block_without_header" / "tail_64k_ttft.txt"
    (outcome,) = _ingest(tmp_path / "b.duckdb", path)
    assert outcome.status == "partial"
    (row,) = _judged(tmp_path / "b.duckdb")
    assert row["input_tokens_mean"] is None
    ttft = _check(row, "ttft")
    assert (ttft["verdict"], ttft["value"], ttft["threshold"]) == ("fail", 204191.02, 2000)
    assert ttft["detail"] == "input length not in the result: over both limits"


def test_ttft_between_the_limits_without_input_length_is_na(tmp_path):
    text = (TRAPS / "serving_block_without_header" / "tail_64k_ttft.txt").read_text()
    path = tmp_path / "tail.txt"
    path.write_text(text.replace("204191.02", "1500.00  "))
    _ingest(tmp_path / "m.duckdb", path)
    (row,) = _judged(tmp_path / "m.duckdb")
    ttft = _check(row, "ttft")
    assert (ttft["verdict"], ttft["value"]) == ("n/a", 1500.0)


def test_configured_input_length_decides_when_the_totals_are_cut(tmp_path):
    text = (FIX / "wild_vllm_l20_qwen3-8b_low_success_issue24005.txt").read_text()
    path = tmp_path / "cut.txt"  # the real preamble with the Namespace line vLLM prints before it
    path.write_text("Namespace(random_input_len=16384, num_prompts=500)\n" + text.replace(
        "Total input tokens:", "Mean TTFT (ms):      1500.00\nP99 TTFT (ms):       1800.00\nTotal input tokens:"
    ))  # fmt: skip
    _ingest(tmp_path / "c.duckdb", path)
    (row,) = _judged(tmp_path / "c.duckdb")
    ttft = _check(row, "ttft")
    assert (ttft["verdict"], ttft["threshold"]) == ("pass", 2000)
    assert ttft["detail"] == "long context: configured input 16384 tokens"


# -- held-aside half -----------------------------------------------------------------------------------------
def test_held_aside_read_rate(tmp_path):
    assert [p.name for p in HELD] == [
        "wild_ascend_910b4_qwen3-8b_rps10_issue3112.txt",
        "wild_sglang_multimodal_pr9812.txt",
        "wild_sglang_ttft_unstable_issue8285.txt",
        "wild_vllm_gemma3-27b_pr33743.txt",
        "wild_vllm_llama3.1-8b_sharegpt_pr18566.txt",
    ]
    outcomes = _ingest(tmp_path / "held.duckdb", *HELD)
    assert [o.status for o in outcomes] == ["partial", "partial", "partial", "ok", "ok"]  # base: 2 of 5 read
    rows = {Path(r["file"]).name: r for r in _rows(tmp_path / "held.duckdb")}
    assert rows["wild_ascend_910b4_qwen3-8b_rps10_issue3112.txt"]["duration_s"] == 8206.37
    assert rows["wild_sglang_ttft_unstable_issue8285.txt"]["tool"] == "sglang"
    assert rows["wild_sglang_ttft_unstable_issue8285.txt"]["itl_median_ms"] == 22.82


# -- 4. diag ingest names the skipped files ------------------------------------------------------------------
def _folder_with_skips(tmp_path: Path, n: int) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(n):
        (folder / f"notes_{i:02d}.txt").write_text(f"deployment notes, day {i}\n")
    (folder / "bench.txt").write_bytes((FIX / "wild_vllm_p90_p95_pr7062.txt").read_bytes())
    return folder


def test_ingest_lists_skipped_files_with_their_reason_capped(tmp_path):
    folder = _folder_with_skips(tmp_path, 12)
    done = run_cli("ingest", str(folder), "--db", str(tmp_path / "s.duckdb"))
    assert done.returncode == 0
    out = done.stdout
    assert "12 skipped" in out and "skipped 12 file(s): not a format diag reads" in out
    listed = [line.strip() for line in out.splitlines() if line.strip().startswith(str(folder))]
    assert listed == [str(folder / f"notes_{i:02d}.txt") for i in range(10)]
    assert "… and 2 more" in out


def test_ingest_json_adds_the_skipped_files_and_keeps_its_keys(tmp_path):
    folder = _folder_with_skips(tmp_path, 3)
    code, out = cli_json("ingest", str(folder), "--db", str(tmp_path / "j.duckdb"), "--json")
    assert code == 0 and set(out) == {"db", "files", "summary"}
    summary = out["summary"]
    assert set(summary) >= {
        "files",
        "ok",
        "partial",
        "failed",
        "unchanged",
        "skipped",
        "runs",
        "rows",
        "span",
    }
    assert (summary["skipped"], summary["partial"]) == (3, 1)
    assert summary["skipped_files"] == [
        {
            "reason": "not a format diag reads",
            "count": 3,
            "paths": [str(folder / f"notes_{i:02d}.txt") for i in range(3)],
        }
    ]


def test_log_lines_after_a_cut_block_are_not_rows_of_it(tmp_path):
    text = (
        (FIX / "wild_ascend_qwen2.5-omni-7b_conc20_issue11750.txt")
        .read_text()
        .replace("Mean TPOT (ms):\n", "")
    )
    path = tmp_path / "console.log"  # the server's own log lines follow the cut block in one console capture
    path.write_text(
        text + "INFO 09-02 10:21:07 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
        "Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%\n"
        "INFO 09-02 10:21:17 [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s\n"
    )
    (outcome,) = _ingest(tmp_path / "c.duckdb", path)
    assert outcome.status == "partial" and 'cut after "P99 TTFT (ms)" (line 30)' in outcome.message
    (row,) = _rows(tmp_path / "c.duckdb")
    assert not [k for k in row["fields"] if k.startswith("INFO")] and len(row["fields"]) == 14


# -- JSON and AISBench results cut short: the members / rows before the cut are kept -----------------------
def test_a_save_result_json_cut_inside_its_arrays_keeps_every_figure_before_the_cut(tmp_path):
    # vLLM writes the totals first, then the per-request arrays, then the latency stats: a copy cut in the arrays
    (outcome,) = _ingest(tmp_path / "j.duckdb", FIX / "partial_cut_save_result.json")
    assert (outcome.status, outcome.rows) == ("partial", {"serving_runs": 1})
    assert outcome.message == (
        'partial: result 1 cut after "output_lens" (line 30); '
        "missing: TTFT mean/median/p99, TPOT mean/median/p99, ITL mean/median/p99"
    )
    (row,) = _rows(tmp_path / "j.duckdb")
    got = (
        row["successful_requests"],
        row["total_input_tokens"],
        row["output_throughput_tps"],
        row["ttft_mean_ms"],
    )
    assert got == (98, 100352, 802.816, None)
    assert row["failed_requests"] is None  # the errors array was cut: not counted as 0


def test_a_jsonl_whose_last_line_is_cut_keeps_the_whole_lines(tmp_path):
    whole = (FIX / "ok_sglang_output_cuda.jsonl").read_text().splitlines()
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join([*whole, whole[-1][: len(whole[-1]) // 2]]) + "\n")
    (outcome,) = _ingest(tmp_path / "l.duckdb", path)
    assert outcome.status == "partial" and outcome.rows == {"serving_runs": len(whole) + 1}
    assert outcome.message.startswith(f"partial: result {len(whole) + 1} cut after ")


def test_a_broken_line_inside_a_jsonl_is_garbled_not_cut(tmp_path):
    whole = (FIX / "ok_sglang_output_cuda.jsonl").read_text().splitlines()
    path = tmp_path / "garbled.jsonl"
    path.write_text("\n".join([whole[0][:40], *whole]) + "\n")
    (outcome,) = _ingest(tmp_path / "g.duckdb", path)
    assert outcome.status == "failed" and outcome.message.startswith(f"{path}: line 1: not valid JSON")


def test_a_json_cut_before_its_request_count_is_refused(tmp_path):
    path = tmp_path / "early.json"
    path.write_text(
        '{"date": "20250101-000000", "backend": "vllm", "total_input_tokens": 1024, "duration": 12.5, "completed": 9'
    )
    (outcome,) = _ingest(tmp_path / "e.duckdb", path)
    assert outcome.status == "failed" and outcome.message.startswith(f"{path}: line 1: not valid JSON")


def test_an_aisbench_table_cut_short_keeps_the_rows_read(tmp_path):
    (outcome,) = _ingest(tmp_path / "a.duckdb", FIX / "partial_aisbench_cut.txt")
    assert (outcome.status, outcome.rows) == ("partial", {"serving_runs": 1})
    assert outcome.message.startswith(
        "partial: block of line 1: AISBench table of line 2 not closed (file ends at line 9); "
        "missing: Successful requests, Benchmark duration (s)"
    )
    (row,) = _rows(tmp_path / "a.duckdb")
    assert (row["ttft_mean_ms"], row["ttft_p99_ms"], row["tpot_p99_ms"], row["e2el_mean_ms"]) == (
        512.7, 1190.4, 25.7, 12034.5
    )  # fmt: skip
    assert row["successful_requests"] is None


def test_an_aisbench_table_interrupted_by_a_log_line_is_cut_there(tmp_path):
    lines = (FIX / "partial_aisbench_cut.txt").read_text().splitlines()
    path = tmp_path / "ais.log"
    path.write_text(
        "\n".join([*lines[:6], "[INFO] 2025-01-01 00:00:00 benchmark finished", *lines[6:]]) + "\n"
    )
    (outcome,) = _ingest(tmp_path / "i.duckdb", path)
    assert outcome.status == "partial"
    assert "AISBench table of line 2 cut at line 7" in outcome.message
    (row,) = _rows(tmp_path / "i.duckdb")
    assert row["e2el_mean_ms"] == 12034.5 and row["tpot_mean_ms"] is None
