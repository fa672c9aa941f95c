"""CUDA kernels get FLOPs and MFU from the aten op that launched them (diag.analyses.op_util_cuda): the generated
Kineto twin with ``--host-ops`` (record_shapes' Input Dims on each aten::mm / aten::addmm, correlation ids and ac2g
flows to its GEMM kernel), checked against 2·M·N·K ÷ duration ÷ the H100's bf16 peak computed from the trace."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from diag.analyses.op_util import op_utilization
from diag.devices import DEVICES_PATH
from diag.store import Store
from sample_traces.generate_cuda import CUDA_KERNELS
from sample_traces.generate_cuda import generate as cuda_twin
from tests.conftest import ingest_into
from tests.test_ops import GENERATED, _diag


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cudaflops")
    cuda_twin(GENERATED / "llm_decode_tp2", root / "cuda", host_ops=True)
    trace = root / "cuda" / "h100_decode_tp1.pt.trace.json"
    db = root / "twin.duckdb"
    with Store(str(db)) as store:
        assert ingest_into(store, [trace]).ok
    return db, trace


def _matmul_oracle(trace: Path) -> tuple[int, int, int]:
    """(calls, Σ 2·M·N·K, Σ kernel ns) over the trace's aten::mm (x [M,K], w [K,N]) and aten::addmm (bias, x, w)
    cpu_ops, each with the kernel its runtime call's correlation id names — plain JSON, no diag."""
    events = json.loads(trace.read_text())["traceEvents"]
    kernels = {e["args"]["correlation"]: e for e in events if e.get("cat") == "kernel"}
    runtime = [e for e in events if e.get("cat") == "cuda_runtime"]
    calls = flops = ns = 0
    for op in (e for e in events if e.get("cat") == "cpu_op" and e["name"] in ("aten::mm", "aten::addmm")):
        x, w = op["args"]["Input Dims"][-2:]
        (m, k), n = x, w[1]
        rt = next(r for r in runtime if op["ts"] <= r["ts"] <= op["ts"] + op["dur"])
        calls += 1
        flops += 2 * m * n * k
        ns += round(kernels[rt["args"]["correlation"]]["dur"] * 1000)
    return calls, flops, ns


def _h100_bf16() -> float:
    with open(DEVICES_PATH, "rb") as fh:
        return next(d["tflops_bf16"] for d in tomllib.load(fh)["device"] if d["key"] == "nvidia-h100-sxm")


def test_cuda_gemm_mfu_is_2mnk_over_duration_over_peak(twin: tuple[Path, Path]) -> None:
    db, trace = twin
    calls, flops, ns = _matmul_oracle(trace)
    with Store(str(db), read_only=True) as store:
        rows = {r["name"]: r for r in op_utilization(store, 1, "kernel")}
    gemm = rows[CUDA_KERNELS["gemm"]]
    assert (
        (gemm["cost_class"], gemm["calls"], gemm["costed_calls"])
        == ("matmul", 68, 68)
        == ("matmul", calls, calls)
    )
    assert gemm["flops"] == flops == 94_539_612_160
    assert gemm["achieved_tflops"] == pytest.approx(flops / ns / 1e3, rel=1e-12)
    assert gemm["mfu_pct"] == pytest.approx(100 * flops / ns / 1e3 / _h100_bf16(), rel=1e-12)
    assert (round(gemm["mfu_pct"], 2), gemm["m_min"], gemm["m_max"], gemm["bound"]) == (
        2.83,
        16,
        16,
        "memory",
    )
    assert (
        gemm["peak_from"] == "NVIDIA H100 80GB HBM3 (SXM) (nvidia-h100-sxm), bf16 989.5 TFLOPS, HBM 3350 GB/s"
    )
    norm = rows[CUDA_KERNELS["norm"]]  # no [[cuda_shapes]] row for the vLLM custom op: calls and time only
    assert (norm["calls"], norm["costed_calls"], norm["flops"], norm["mfu_pct"]) == (36, 0, None, None)


def test_ops_util_on_a_cuda_run(twin: tuple[Path, Path]) -> None:
    db, _ = twin
    code, out, _ = _diag("ops", "--db", str(db), "--util", "--by", "kernel", "--json")
    assert code == 0
    first = json.loads(out)["rows"][0]
    assert (first["name"], first["cost_class"], round(first["mfu_pct"], 2)) == (
        CUDA_KERNELS["gemm"],
        "matmul",
        2.83,
    )


def test_a_trace_without_host_ops_gets_no_figures(tmp_path: Path) -> None:
    """The committed twin (no host ops, no Input Dims): calls and time, never a guessed FLOP count."""
    with Store(str(tmp_path / "bare.duckdb")) as store:
        assert ingest_into(store, [GENERATED / "llm_decode_cuda" / "h100_decode_tp1.pt.trace.json"]).ok
        rows = op_utilization(store, 1, "kernel")
    assert rows and all(r["costed_calls"] == 0 and r["flops"] is None for r in rows)
