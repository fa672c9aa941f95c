"""A long-context pair with a known scaling difference: prefill at growing sequence lengths, then decode at growing
KV lengths, written as an Ascend ``kernel_details.csv`` and as the CUDA (Kineto) trace of the same steps.

    python sample_traces/generate.py OUT_DIR --long-context        (the Ascend side)
    python sample_traces/generate_cuda.py --long-context OUT_DIR   (the CUDA side)

One step per length.  A prefill step at L tokens runs, per layer, the QKV projection (tokens = L), the attention
prefill over L and the output projection; a decode step (one token, batch 1) at KV length S runs the projections
with M = 1 and the attention decode over S.  CUDA times are simple cost models (attention prefill quadratic in L,
decode linear in S, projections linear in tokens); the Ascend time of each op is the CUDA time × a factor that is
known and written into ``ground_truth.json``: attention prefill × 1.0 below ``DEPARTURE`` tokens and × 1.3 from
there on, attention decode × 1.1 and the projections × 1.15 at every length (no departure).

The shapes are written the way the exports write them, so the rules of ``diag/rules/op_shape_axes.csv`` read the
lengths:
* Ascend kernel_details.csv "Input Shapes" (';' between tensors, ',' between dims, quoted): PromptFlashAttention
  query/key/value BSH ``1,L,3584;1,L,512;1,L,512``, IncreFlashAttention query ``1,1,3584`` and key/value
  ``1,S,512``, MatMulV2 ``M,3584;3584,4608`` (CANN aclnnPromptFlashAttention / aclnnIncreFlashAttention /
  aclnnMatmul; Ascend/op-plugin docs/context/torch_npu-npu_prompt_flash_attention.md,
  torch_npu-npu_incre_flash_attention.md);
* Kineto ``cpu_op`` events with ``args["Input Dims"]`` (a list per input, ``[]`` for a non-tensor), as
  torch.profiler(record_shapes=True) writes them: ``aten::_flash_attention_forward`` query (B,S,N,D)
  ``[1, L, 28, 128]``, key/value ``[1, S, 4, 128]``; ``aten::linear`` input ``[1, M, 3584]``, weight
  ``[4608, 3584]``; each kernel launched from a ``cudaLaunchKernel`` runtime event inside its op, linked by
  ``correlation`` (pytorch/kineto libkineto/src/output_json.cpp).
"""

from __future__ import annotations

import json
from pathlib import Path

LENGTHS = tuple(1024 << i for i in range(8))  # 1k … 128k tokens
DEPARTURE = 32_768  # attention prefill is × PREFILL_LONG on Ascend from this length on
PREFILL_SHORT, PREFILL_LONG = 1.0, 1.3
DECODE_FACTOR, GEMM_FACTOR = 1.1, 1.15
LAYERS = 2
FIRST_STEP = 1
BASE_US = 1_736_933_600_000_000  # 2025-01-15 09:33:20 UTC, as kernel_details writes absolute µs
ASCEND_FOLDER = "rank0_1_20250115093320983_ascend_pt"
CUDA_FILE = "h100_long_context.pt.trace.json"
HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
    "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats,Context ID"
)
# group → (Ascend name, Ascend type, core, CUDA kernel, CUDA aten op)
OPS = {
    "gemm": ("aclnnMatmul_MatMulV2_MatMulV2", "MatMulV2", "AI_CORE",
             "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel",
             "aten::linear"),
    "attention_prefill": ("aclnnPromptFlashAttention_PromptFlashAttention_PromptFlashAttention",
                          "PromptFlashAttention", "MIX_AIC",
                          "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t>, true, false, false, false, true, true, false>(flash::Flash_fwd_params)",
                          "aten::_flash_attention_forward"),
    "attention_decode": ("aclnnIncreFlashAttention_IncreFlashAttention_IncreFlashAttention",
                         "IncreFlashAttention", "MIX_AIC",
                         "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, false, false, false, false, true, false, true, false>(flash::Flash_fwd_params)",
                         "aten::_flash_attention_forward"),
}  # fmt: skip


def cuda_ns(group: str, length: int) -> int:
    """The CUDA time of one op at this length (tokens for a projection / prefill, KV length for decode)."""
    if group == "attention_prefill":
        return round(10_000 + 0.012 * length * length)  # quadratic in L: 0.2 ms at 4k, 206 ms at 128k
    if group == "attention_decode":
        return round(5_000 + 1.5 * length)
    return round(4_000 + 4.0 * length)


def factor(group: str, length: int) -> float:
    """Ascend time ÷ CUDA time of one op of ``group`` at ``length`` (the injected truth)."""
    if group == "attention_prefill":
        return PREFILL_LONG if length >= DEPARTURE else PREFILL_SHORT
    return DECODE_FACTOR if group == "attention_decode" else GEMM_FACTOR


def plan() -> list[tuple[int, str, list[tuple[str, int, int]]]]:
    """(step, kind, [(group, length, tokens)…]) per step: prefill at each length, then decode at each KV length."""
    steps = []
    for i, n in enumerate(LENGTHS):
        ops = [("gemm", n, n), ("attention_prefill", n, n), ("gemm", n, n)] * LAYERS
        steps.append((FIRST_STEP + i, "prefill", ops))
    for i, s in enumerate(LENGTHS):
        ops = [("gemm", 1, 1), ("attention_decode", s, 1), ("gemm", 1, 1)] * LAYERS
        steps.append((FIRST_STEP + len(LENGTHS) + i, "decode", ops))
    return steps


def _ascend_shapes(group: str, length: int, tokens: int) -> str:
    if group == "attention_prefill":
        return f"1,{length},3584;1,{length},512;1,{length},512"
    if group == "attention_decode":
        return f"1,1,3584;1,{length},512;1,{length},512"
    return f"{tokens},3584;3584,4608"


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def write_ascend(out_dir: str | Path) -> Path:
    """``OUT/rank0_…_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv`` and ``OUT/ground_truth.json``."""
    out = Path(out_dir) / ASCEND_FOLDER / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True, exist_ok=True)
    lines, t_ns = [HEADER], BASE_US * 1000
    for step, _, ops in plan():
        for group, length, tokens in ops:
            name, op, core, _, _ = OPS[group]
            dur = round(cuda_ns(group, length) * factor(group, length))
            shapes = _ascend_shapes(group, length, tokens)
            lines.append(",".join([str(step), "4294967295", "1", "2", name, op, "dynamic", core, f"{_us(t_ns)}\t",
                                   _us(dur), "0", "24", "0", "NO", f'"{shapes}"', "DT_BF16", "FORMAT_ND",
                                   f'"{shapes.split(";")[0]}"', "DT_BF16", "FORMAT_ND", "N/A"]))  # fmt: skip
            t_ns += dur + 2_000
        t_ns += 200_000
    path = out / "kernel_details.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (Path(out_dir) / "ground_truth.json").write_text(json.dumps(truth(), indent=1, sort_keys=True) + "\n")
    return path


def _input_dims(group: str, length: int, tokens: int) -> list[list[int]]:
    if group == "attention_prefill":
        return [[1, length, 28, 128], [1, length, 4, 128], [1, length, 4, 128], [], [], [], []]
    if group == "attention_decode":
        return [[1, 1, 28, 128], [1, length, 4, 128], [1, length, 4, 128], [], [], [], []]
    return [[1, tokens, 3584], [4608, 3584], []]


def _x(cat: str, name: str, pid: int, tid: int, ts_ns: int, dur_ns: int, args: dict) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts_ns / 1000,
            "dur": dur_ns / 1000, "args": args}  # fmt: skip


def cuda_events() -> list[dict]:
    """Kineto events of the plan: per step a ProfilerStep#N, per op its aten op with Input Dims, the launch and
    the kernel (launch overhead 5 µs; the host keeps ahead of the device)."""
    host, dev, stream, events = 4242, 0, 7, []
    t_host, t_dev, corr = 1_000_000, 1_050_000, 0
    for step, _, ops in plan():
        step_start = t_host
        for group, length, tokens in ops:
            kernel, aten = OPS[group][3], OPS[group][4]
            dur, corr = cuda_ns(group, length), corr + 1
            t_dev = max(t_dev, t_host + 8_000)
            events.append(
                _x(
                    "cpu_op",
                    aten,
                    host,
                    host,
                    t_host,
                    12_000,
                    {"Input Dims": _input_dims(group, length, tokens), "Input type": ["c10::BFloat16"]},
                )
            )
            events.append(
                _x(
                    "cuda_runtime",
                    "cudaLaunchKernel",
                    host,
                    host,
                    t_host + 4_000,
                    5_000,
                    {"correlation": corr},
                )
            )
            events.append(_x("kernel", kernel, dev, stream, t_dev, dur,
                             {"device": dev, "stream": stream, "correlation": corr}))  # fmt: skip
            t_host += 14_000
            t_dev += dur + 2_000
        t_host = max(t_host, t_dev) + 10_000
        events.append(_x("cpu_op", f"ProfilerStep#{step}", host, host, step_start, t_host - step_start, {}))
        t_host += 200_000
        t_dev = t_host
    return events


def write_cuda(out_dir: str | Path) -> Path:
    """``OUT/h100_long_context.pt.trace.json`` and ``OUT/ground_truth.json``."""
    meta = [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        {"ph": "M", "name": "process_name", "pid": 4242, "args": {"name": "python"}},
    ]
    trace = {
        "schemaVersion": 1,
        "deviceProperties": [
            {
                "id": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "totalGlobalMem": 85045477376,
                "computeMajor": 9,
                "computeMinor": 0,
            }
        ],  # fmt: skip
        "cupti_version": 24,
        "cuda_runtime_version": 12040,
        "cuda_driver_version": 12040,
        "baseTimeNanoseconds": 1736933600000000000,
        "traceEvents": meta + cuda_events(),
    }
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / CUDA_FILE
    path.write_text(json.dumps(trace, separators=(",", ":")))
    (out / "ground_truth.json").write_text(json.dumps(truth(), indent=1, sort_keys=True) + "\n")
    return path


def truth() -> dict:
    """What ``diag scaling`` must recover: lengths, factors, the departure length and the ratios."""
    return {
        "generator": "sample_traces/_long_context.py",
        "lengths": list(LENGTHS),
        "layers": LAYERS,
        "groups": {
            "attention_prefill": {"departure_length": DEPARTURE, "ratio_short": PREFILL_SHORT,
                                  "ratio_long": PREFILL_LONG},
            "attention_decode": {"departure_length": None, "ratio_short": DECODE_FACTOR,
                                 "ratio_long": DECODE_FACTOR},
            "matmul": {"departure_length": None, "ratio_short": GEMM_FACTOR, "ratio_long": GEMM_FACTOR},
        },
        "cuda_ns": {g: {str(n): cuda_ns(g, n) for n in LENGTHS} for g in OPS},
    }  # fmt: skip
