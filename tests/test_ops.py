"""``diag ops`` and the op table (diag.analyses.ops): totals against independent sums over the real files, exact rows
on the generated pair, the CUDA baseline's classes side by side, and a bad ``--by``."""

from __future__ import annotations

import csv
import json
import sqlite3
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from tests.conftest import CORPUS, SAMPLES, ingest_into

GENERATED = SAMPLES / "generated"
ASCEND_RANK0 = next((GENERATED / "llm_decode_tp2").glob("rank0_*_ascend_pt"))
CUDA_TRACE = GENERATED / "llm_decode_cuda"
KERNEL_DETAILS = [  # real exports (msinsight test data): a Level2 capture of 2,463 kernels and a Level1 one
    CORPUS / "ascend/msinsight/test/st/level2/rank_0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    CORPUS
    / "ascend/msinsight/test/data/pytorch/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
]
KERN_SUM = CORPUS / "cuda/llm-perf-opt/nsys_cuda_gpu_kern_sum_decode.csv"  # nsys stats, DeepSeek-OCR decode
NSYS = [
    CORPUS / "cuda/nsys-sqlite-dlprof/nsys_profile_nsys2022.1_pytorch_pyprof_nvtx.sqlite",
    CORPUS / "cuda/nsys-sqlite-memfusion/report1_nsys2023.1_tensorrt_nvtx.sqlite",
]


def _run_id(db: Path, source_part: str) -> int:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT run_id FROM runs WHERE source LIKE ?", [f"%{source_part}%"]).fetchall()
    assert len(rows) == 1, rows
    return rows[0][0]


@pytest.fixture(scope="module")
def pair_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated Ascend rank 0 and its CUDA baseline (sample_traces/generated)."""
    db = tmp_path_factory.mktemp("ops") / "pair.duckdb"
    _ingest(db, ASCEND_RANK0, CUDA_TRACE)
    return db


def _diag(*args: str) -> tuple[int, str, str]:
    """``diag ARGS`` in this process (a subprocess per call would cost seconds of imports): exit code, stdout, stderr."""
    import contextlib
    import io

    from diag.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def _ingest(db: Path, *paths: Path) -> None:
    from diag.store import Store

    with Store(str(db)) as store:
        summary = ingest_into(store, list(paths))
    assert summary.ok, [f.to_json() for f in summary.files if f.status == "failed"]


def _ops_json(db: Path, *args: str) -> dict:
    code, out, err = _diag("ops", "--db", str(db), *args, "--json")
    assert code == 0, err
    return json.loads(out)


def _csv_sums(path: Path) -> dict[str, tuple[int, int]]:
    """Type -> (calls, total ns) read with the csv module: Duration(us) as an exact decimal, × 1000, rounded."""
    sums: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            s = sums[row["Type"]]
            s[0] += 1
            s[1] += int((Decimal(row["Duration(us)"].strip()) * 1000).to_integral_value())
    return {k: (n, ns) for k, (n, ns) in sums.items()}


@pytest.mark.parametrize("path", KERNEL_DETAILS, ids=["st_level2_rank0", "level1_rank0"])
def test_ops_json_totals_equal_kernel_details_csv_sums(corpus: Path, tmp_path: Path, path: Path) -> None:
    db = tmp_path / "kd.duckdb"
    _ingest(db, path)
    out = _ops_json(db, "--by", "op")
    got = {r["name"]: (r["calls"], r["total_ns"]) for r in out["rows"]}
    assert got == _csv_sums(path)
    assert out["by"] == "op" and len(out["rows"]) == len(got)
    assert sum(r["share_pct"] for r in out["rows"]) == pytest.approx(100.0)


def _nsys_sums(path: Path) -> dict[str, tuple[int, int]]:
    """Kernel name (demangled, else short) -> (calls, total ns) straight from the export's CUPTI kernel table."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        rows = con.execute(
            """SELECT coalesce(nullif(d.value, ''), s.value), count(*), sum(k.end - k.start)
               FROM CUPTI_ACTIVITY_KIND_KERNEL k LEFT JOIN StringIds d ON d.id = k.demangledName
               LEFT JOIN StringIds s ON s.id = k.shortName GROUP BY 1"""
        ).fetchall()
    return {name: (n, ns) for name, n, ns in rows}


@pytest.mark.parametrize("path", NSYS, ids=["dlprof_pytorch", "memfusion_tensorrt"])
def test_ops_json_totals_equal_nsys_kernel_table_sums(corpus: Path, tmp_path: Path, path: Path) -> None:
    db = tmp_path / "nsys.duckdb"
    _ingest(db, path)
    out = _ops_json(db, "--by", "kernel")
    got = {r["name"]: (r["calls"], r["total_ns"]) for r in out["rows"]}
    assert got == _nsys_sums(path)
    assert {r["core_type"] for r in out["rows"]} == {"GPU"}


def test_ops_json_of_an_nsys_stats_kernel_summary_equals_its_rows(corpus: Path, tmp_path: Path) -> None:
    db = tmp_path / "kern_sum.duckdb"
    _ingest(db, KERN_SUM)
    got = {r["name"]: r for r in _ops_json(db, "--by", "kernel")["rows"]}
    with open(KERN_SUM, encoding="utf-8", newline="") as fh:
        want = list(csv.DictReader(fh))
    assert len(got) == len(want) == 46
    for row in want:
        r = got[row["Name"]]
        assert (r["calls"], r["total_ns"]) == (int(row["Instances"]), int(row["Total Time (ns)"]))
        assert (r["min_ns"], r["max_ns"]) == (int(row["Min (ns)"]), int(row["Max (ns)"]))
        assert round(r["share_pct"], 1) == pytest.approx(float(row["Time (%)"]), abs=0.1)
        assert (r["core_type"], r["shapes"]) == ("GPU", None)


def test_a_kernel_summary_baseline_compares_per_call(corpus: Path, tmp_path: Path) -> None:
    """A summary has no steps: the class ratio is mean per call ÷ mean per call, as the Compare page has it."""
    from diag.analyses.op_classes import classify

    db = tmp_path / "pair_summary.duckdb"
    _ingest(db, ASCEND_RANK0, KERN_SUM)
    ascend, summary = _run_id(db, "rank0_"), _run_id(db, "kern_sum_decode")
    calls, total = 0, 0
    with open(KERN_SUM, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if classify(row["Name"], None, "cuda") == "gemm":
                calls, total = calls + int(row["Instances"]), total + int(row["Total Time (ns)"])
    rows = {
        r["name"]: r
        for r in _ops_json(db, "--run", str(ascend), "--by", "class", "--baseline", str(summary))["rows"]
    }
    assert (rows["gemm"]["baseline_calls"], rows["gemm"]["baseline_total_ns"]) == (calls, total)
    assert rows["gemm"]["ratio"] == pytest.approx((3_882_026 / 68) / (total / calls), rel=1e-12)


def test_generated_run_exact_rows(pair_db: Path) -> None:
    run = _run_id(pair_db, "rank0_")
    rows = _ops_json(pair_db, "--run", str(run), "--top", "3")["rows"]
    assert [(r["name"], r["calls"], r["total_ns"], r["core_type"], r["op_class"]) for r in rows] == [
        ("MatMulV2", 68, 3_882_026, "AI_CORE", "gemm"),
        ("hcom_allReduce_", 36, 1_006_473, "HCCL", "communication"),
        ("ArgMaxV2", 4, 986_331, "AI_CPU", "sampling"),
    ]
    top = rows[0]
    assert (top["min_ns"], top["max_ns"], top["shapes"], top["dtypes"], top["op_state"]) == (
        8_251, 366_269, 5, "DT_BF16", "dynamic",
    )  # fmt: skip
    assert top["max_shapes_per_step"] == 5 and round(top["share_pct"], 2) == 50.19
    truth = json.loads((GENERATED / "llm_decode_tp2" / "ground_truth.json").read_text())
    every = _ops_json(pair_db, "--run", str(run))["rows"]
    rank0 = truth["ranks"]["0"]
    assert sum(r["total_ns"] for r in every) == rank0["kernel_details"]["dur_ns_sum"]
    assert sum(r["calls"] for r in every) == rank0["kernel_details"]["rows"]
    cores = defaultdict(int)
    for r in every:
        cores[r["core_type"]] += r["calls"]
    assert dict(cores) == rank0["kernel_details"]["rows_by_accelerator_core"]


def test_by_class_with_cuda_baseline_recovers_the_injected_factors(pair_db: Path) -> None:
    ascend, cuda = _run_id(pair_db, "rank0_"), _run_id(pair_db, "h100_decode")
    truth = json.loads((CUDA_TRACE / "ground_truth.json").read_text())["classes"]
    out = _ops_json(pair_db, "--run", str(ascend), "--by", "class", "--baseline", str(cuda))
    assert out["baseline_run_id"] == cuda
    rows = {r["name"]: r for r in out["rows"]}
    for cls, t in truth.items():
        assert rows[cls]["total_ns"] == t["ascend_ns"], cls
        if t["factor"] is None:  # an Ascend-only class (TransData, Cast): no CUDA figures
            assert rows[cls]["baseline_total_ns"] is None and rows[cls]["ratio"] is None
            continue
        assert rows[cls]["baseline_total_ns"] == t["cuda_ns"], cls
        assert rows[cls]["ratio"] == pytest.approx(t["factor"], rel=1e-4), cls
    # an op row carries its class's baseline figures
    matmul = _ops_json(pair_db, "--run", str(ascend), "--baseline", str(cuda), "--top", "1")["rows"][0]
    assert (matmul["name"], matmul["baseline_total_ns"]) == ("MatMulV2", truth["gemm"]["cuda_ns"])


def test_table_text_has_units_and_dashes(pair_db: Path) -> None:
    ascend, cuda = _run_id(pair_db, "rank0_"), _run_id(pair_db, "h100_decode")
    code, stdout, stderr = _diag(
        "ops", "--db", str(pair_db), "--run", str(ascend), "--baseline", str(cuda), "--top", "2"
    )
    assert code == 0, stderr
    lines = stdout.splitlines()
    assert "total ms" in lines[2] and "mean µs" in lines[2] and "A/B per step" in lines[2]
    matmul = next(line for line in lines if "MatMulV2" in line)
    assert [c.strip() for c in matmul.strip("│ ").split("│")] == [
        "MatMulV2", "gemm", "AI_CORE", "68", "3.882", "57.1", "8.3", "366.3", "50.2%", "5", "DT_BF16", "68",
        "3.376", "1.15×",
    ]  # fmt: skip
    allreduce = next(line for line in lines if "hcom_allReduce_" in line)
    assert "│ —      │ —" in allreduce  # no shapes, no dtypes: a dash, never None
    assert "None" not in stdout
    assert "more row(s): --top 0 shows every row" in stdout


def test_bad_by_is_a_one_line_usage_error(pair_db: Path) -> None:
    code, stdout, stderr = _diag("ops", "--db", str(pair_db), "--by", "layer")
    assert code == 2
    first, *rest = stderr.splitlines()
    assert first.startswith("diag: error: Invalid value for '--by'") and "'layer'" in first
    assert rest == ["Try 'diag ops --help' for help."] and stdout == ""


def test_several_runs_without_run_names_the_choices(pair_db: Path) -> None:
    code, _, stderr = _diag("ops", "--db", str(pair_db))
    assert code == 2
    assert stderr.startswith("diag: error: 2 runs with kernels: pass --run (one of ")
