"""Serving figures beside the profiles: a postmortem of a run shows its deployment's serving verdicts, and with
a CUDA baseline the serving comparison (the #10 "link to profiles" point)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import SAMPLES, cli_json, run_cli

VLLM_BLOCK = """============ Serving Benchmark Result ============
Successful requests:                     {n}
Failed requests:                         0
Maximum request concurrency:             16
Benchmark duration (s):                  100.00
Total input tokens:                      {tin}
Total generated tokens:                  {tout}
Request throughput (req/s):              {rps:.2f}
Output token throughput (tok/s):         {otps:.2f}
Total token throughput (tok/s):          {ttps:.2f}
---------------Time to First Token----------------
Mean TTFT (ms):                          {ttft_mean:.2f}
Median TTFT (ms):                        {ttft_mean:.2f}
P99 TTFT (ms):                           {ttft_p99:.2f}
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          {tpot:.2f}
Median TPOT (ms):                        {tpot:.2f}
P99 TPOT (ms):                           {tpot:.2f}
---------------Inter-token Latency----------------
Mean ITL (ms):                           {tpot:.2f}
Median ITL (ms):                         {tpot:.2f}
P99 ITL (ms):                            {tpot:.2f}
==================================================
"""


def _block(otps: float, ttft_p99: float, tpot: float) -> str:
    n, tin, tout = 160, 160 * 1024, 160 * 512
    return VLLM_BLOCK.format(
        n=n, tin=tin, tout=tout, rps=n / 100, otps=otps, ttps=otps + tin / 100, ttft_mean=ttft_p99 * 0.6,
        ttft_p99=ttft_p99, tpot=tpot,
    )  # fmt: skip


@pytest.fixture(scope="module")
def deployments(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, int]:
    """An Ascend TP=2 deployment and its CUDA twin, each with the serving result of the same workload."""
    root = tmp_path_factory.mktemp("deploy")
    ascend = root / "ascend_910b_tp2"
    shutil.copytree(SAMPLES / "generated" / "llm_decode_tp2", ascend)
    (ascend / "vllm_bench_serve_910b.txt").write_text(_block(otps=850.0, ttft_p99=1300.0, tpot=31.0))
    cuda = root / "cuda_h100"
    cuda.mkdir()
    shutil.copy(SAMPLES / "generated" / "llm_decode_cuda" / "h100_decode_tp1.pt.trace.json", cuda)
    (cuda / "vllm_bench_serve_h100.txt").write_text(_block(otps=1000.0, ttft_p99=1000.0, tpot=24.0))
    db = root / "d.duckdb"
    run_cli("ingest", str(ascend), str(cuda), "--db", str(db), check=True)
    _, runs = cli_json("runs", "--db", str(db))
    by_name = {r["name"]: r["run_id"] for r in runs["runs"]}
    rank0 = next(v for k, v in by_name.items() if k.startswith("rank0_"))
    return db, rank0, by_name["h100_decode_tp1.pt.trace.json"]


def test_run_postmortem_shows_its_serving_verdicts(deployments):
    db, rank0, _ = deployments
    pm = json.loads(
        run_cli("report", "--db", str(db), "--run", str(rank0), "--format", "json", check=True).stdout
    )
    assert len(pm["serving"]) == 1
    s = pm["serving"][0]
    assert (s["ttft_p99_ms"], s["output_throughput_tps"], s["verdict"]) == (1300.0, 850.0, "fail")
    ttft = next(c for c in s["checks"] if c["figure"] == "ttft")
    assert (ttft["threshold"], ttft["margin_pct"]) == (1000, -30.0)
    said = [st["text"] for st in pm["impact"] if st["text"].startswith("Serving run")]
    assert said == [
        "Serving run vllm_bench_serve_910b.txt#1 fails acceptance: ttft p99 1,300.00 ms (limit 1,000.00 ms, "
        "margin -30%)"
    ]
    assert pm["serving_comparison"] is None  # no baseline asked for


def test_report_with_cuda_baseline_sets_serving_side_by_side(deployments, tmp_path):
    db, rank0, cuda = deployments
    out = tmp_path / "pm.json"
    run_cli("report", "--db", str(db), "--run", str(rank0), "--baseline", str(cuda), "--format", "json",
            "-o", str(out), check=True)  # fmt: skip
    pm = json.loads(out.read_text())
    cmp = pm["serving_comparison"]
    assert (
        cmp["a"]["label"] == "vllm_bench_serve_910b.txt#1"
        and cmp["b"]["label"] == "vllm_bench_serve_h100.txt#1"
    )
    figures = {f["figure"]: f for f in cmp["figures"]}
    assert figures["output_throughput_tps"]["ratio"] == pytest.approx(0.85)
    assert figures["ttft_p99_ms"]["gap_pct"] == pytest.approx(30.0)
    texts = [st["text"] for st in pm["impact"]]
    assert "Serving against the baseline's: A reaches 85% of B's output throughput" in texts
    assert "Serving against the baseline's: TTFT p99: A +30% against B" in texts
    md = run_cli(
        "report", "--db", str(db), "--run", str(rank0), "--baseline", str(cuda), "--format", "md"
    ).stdout
    assert "## Serving against the baseline deployment" in md
    assert "| output\\_throughput\\_tps \\(tok/s\\) | 850\\.00 | 1,000\\.00 | 0\\.85 | \\-15\\.0% ⚠ |" in md
    html = run_cli(
        "report", "--db", str(db), "--run", str(rank0), "--baseline", str(cuda), "--format", "html"
    ).stdout
    assert "<h2>Serving figures (same deployment)</h2>" in html and "<td>1,300.00</td>" in html


def test_job_postmortem_collects_serving_of_the_whole_job(deployments):
    db, _, _ = deployments
    _, runs = cli_json("runs", "--db", str(db))
    job = next(r["job_id"] for r in runs["runs"] if r["name"].startswith("rank1_"))
    pm = json.loads(
        run_cli("report", "--db", str(db), "--job", str(job), "--format", "json", check=True).stdout
    )
    assert [s["label"] for s in pm["serving"]] == ["vllm_bench_serve_910b.txt#1"]


def test_compare_page_shows_serving_side_by_side(deployments, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from tests.conftest import ROOT

    db, rank0, cuda = deployments
    monkeypatch.setenv("DIAG_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=60)
    at.run()
    at.switch_page("app_pages/08_compare.py").run()
    assert not at.exception, at.exception
    assert (at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value) == (rank0, cuda)
    assert "Serving figures of the two deployments" in [s.value for s in at.subheader]
    assert "A reaches 85% of B's output throughput" in [e.value for e in at.error]
    table = next(d.value for d in at.dataframe if "figure" in d.value.columns and "A/B" in d.value.columns)
    row = table[table["figure"] == "ttft_p99_ms"].iloc[0]
    assert (row["A"], row["B"], row["gap %"], row["worse"]) == (1300.0, 1000.0, 30.0, "yes")
