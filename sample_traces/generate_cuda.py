"""The CUDA twin of a generated Ascend decode profile: the same ops, CUDA kernel names, known per-class speed-ups.

Reads rank 0's ``kernel_details.csv`` of a profile written by ``generate.py`` and writes a PyTorch-profiler
(Kineto) trace of the same decode steps as an H100 would run them: every op becomes the CUDA kernel of its
op class (``diag/rules/op_classes.csv``) with its Ascend duration divided by that class's factor below, laid
out back to back on one stream with the Ascend gaps kept.  Ascend-only work (TransData/Cast layout ops) has
no CUDA kernel.  ``ground_truth.json`` holds, per class, both totals and the injected factor, so the
comparison must recover ``Ascend / CUDA = factor``.

    python sample_traces/generate_cuda.py sample_traces/generated/llm_decode_tp2 sample_traces/generated/llm_decode_cuda

``--memory`` adds what ``torch.profiler.profile(profile_memory=True)`` records (``sample_traces/_cuda_memory.py``):
``[memory]`` instant events with a known peak allocated / reserved and the host ops that allocate, the truth
under ``memory`` in ``ground_truth.json``.  Without it the output is what it always was, byte for byte.

``--host-ops`` adds, per kernel, the framework op that launched it (with ``record_shapes``' Input Dims), its
``cudaLaunchKernel`` and the ``ac2g`` flow (``sample_traces/_cuda_host.py``): what links a kernel to its aten op,
for the op-to-op comparison and the CUDA FLOPs. ``ground_truth.json`` then holds ``framework_ops``: per op, its
calls, kernels and device ns on the CUDA side. Off by default, so the committed twin stays as it is.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from diag.analyses.op_classes import classify  # noqa: E402
from sample_traces import _long_context  # noqa: E402
from sample_traces._cuda_host import framework_ops, host_events  # noqa: E402
from sample_traces._cuda_memory import memory_events  # noqa: E402

# Ascend time / CUDA time per op class (the slowdowns the comparison must find).
FACTORS = {
    "gemm": 1.15, "attention_decode": 1.35, "norm": 1.10, "rope": 1.20, "activation": 1.05,
    "communication": 1.60, "sampling": 6.00, "kv_cache_write": 1.25, "elementwise": 1.10, "embedding": 5.00,
    "reduce": 1.0, "softmax": 1.0, "other": 2.50,
}  # fmt: skip
ASCEND_ONLY = {"layout_cast"}  # format/dtype conversions that a CUDA run does not need
# A real CUDA kernel name per class (each classifies back to its class on the CUDA side).
CUDA_KERNELS = {
    "gemm": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel",
    "attention_decode": "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, false, false, false, false, true, false, true, false>(flash::Flash_fwd_params)",
    "norm": "void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, float, int, int)",
    "rope": "void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, c10::BFloat16 const*, int, long, long, int, int, int)",
    "activation": "void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel<c10::BFloat16>, true>(c10::BFloat16*, c10::BFloat16 const*, int)",
    "communication": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    "sampling": "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4>)",
    "kv_cache_write": "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, __nv_bfloat16*, long const*, int, int, int, int, int, int, float const*, float const*)",
    "embedding": "void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_put_kernel_impl<at::native::OpaqueType<2> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_put_kernel_impl<at::native::OpaqueType<2> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1} const&)::{lambda(int)#1}>(long, at::native::gpu_index_kernel<at::native::index_put_kernel_impl<at::native::OpaqueType<2> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_put_kernel_impl<at::native::OpaqueType<2> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1} const&)::{lambda(int)#1})",
    "elementwise": "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
}  # fmt: skip
HOST_PID, DEVICE, STREAM = 4242, 0, 7
STEP_GAP_US = Decimal(200)


def _rows(rank_dir: Path) -> list[dict[str, str]]:
    path = next(rank_dir.glob("ASCEND_PROFILER_OUTPUT/kernel_details.csv"))
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def generate(ascend_dir: Path, out_dir: Path, memory: bool = False, host_ops: bool = False) -> dict:
    rank_dir = sorted(p for p in ascend_dir.iterdir() if p.name.startswith("rank0"))[0]
    rows = _rows(rank_dir)
    events: list[dict] = []
    truth: dict[str, dict[str, int]] = defaultdict(lambda: {"ascend_ns": 0, "cuda_ns": 0, "count": 0})
    t = Decimal("1000.000")  # µs since the trace's base time
    steps: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        steps[r["Step Id"]].append(r)
    corr = 0
    fw_of = framework_ops() if host_ops else {}
    fw_truth: dict[str, dict[str, int]] = defaultdict(lambda: {"calls": 0, "kernels": 0, "device_ns": 0})
    spans: list[tuple[Decimal, Decimal]] = []  # each step's host span (µs), where the memory events go
    for step, ops in sorted(steps.items(), key=lambda kv: int(kv[0])):
        step_start = t
        t += Decimal(20)
        for r in sorted(ops, key=lambda r: Decimal(r["Start Time(us)"].strip())):
            cls = classify(r["Name"], r["Type"], "ascend")
            dur_ascend_ns = int((Decimal(r["Duration(us)"]) * 1000).to_integral_value())
            truth[cls]["ascend_ns"] += dur_ascend_ns
            if cls in ASCEND_ONLY:
                continue
            factor = FACTORS.get(cls, 1.0)
            dur_ns = round(dur_ascend_ns / factor)
            name = CUDA_KERNELS.get(cls, CUDA_KERNELS["elementwise"] if cls == "other" else None)
            if name is None:
                raise SystemExit(f"no CUDA kernel for op class {cls} ({r['Name']})")
            truth[cls]["cuda_ns"] += dur_ns
            truth[cls]["count"] += 1
            gap = min(Decimal(r.get("Wait Time(us)", "2") or "2"), Decimal(50))
            t += max(gap, Decimal(2))
            corr += 1
            events.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": name,
                    "pid": DEVICE,
                    "tid": STREAM,
                    "ts": float(t),
                    "dur": dur_ns / 1000,
                    "args": {"device": DEVICE, "stream": STREAM, "correlation": corr},
                }
            )
            if host_ops:
                op = fw_of.get(r["Name"]) or fw_of[r["Type"]]
                events += host_events(r, op, t, corr, HOST_PID, DEVICE, STREAM)
                fw_truth[op]["calls"] += 1
                fw_truth[op]["kernels"] += 1
                fw_truth[op]["device_ns"] += dur_ns
            t += Decimal(dur_ns) / 1000
        t += Decimal(10)
        spans.append((step_start, t))
        events.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f"ProfilerStep#{step}",
                "pid": HOST_PID,
                "tid": HOST_PID,
                "ts": float(step_start),
                "dur": float(t - step_start),
                "args": {},
            }
        )
        t += STEP_GAP_US
    mem_truth = None
    if memory:
        mem_events, mem_truth = memory_events(spans, HOST_PID, DEVICE)
        events += mem_events
    meta = [
        {"ph": "M", "name": "process_name", "pid": DEVICE, "args": {"name": "GPU 0"}},
        {
            "ph": "M",
            "name": "thread_name",
            "pid": DEVICE,
            "tid": STREAM,
            "args": {"name": f"stream {STREAM}"},
        },
        {"ph": "M", "name": "process_name", "pid": HOST_PID, "args": {"name": "python"}},
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
        ],
        "cupti_version": 24,
        "cuda_runtime_version": 12040,
        "cuda_driver_version": 12040,
        "baseTimeNanoseconds": 1736933600000000000,
        "traceEvents": meta + events,
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "h100_decode_tp1.pt.trace.json").write_text(json.dumps(trace, separators=(",", ":")))
    gt = {
        "source": str(rank_dir.name),
        "steps": len(steps),
        "factors": FACTORS,
        "ascend_only": sorted(ASCEND_ONLY),
        "classes": {
            c: {**v, "factor": FACTORS.get(c) if c not in ASCEND_ONLY else None}
            for c, v in sorted(truth.items())
        },
    }
    if mem_truth is not None:
        gt["memory"] = mem_truth
    if host_ops:
        gt["framework_ops"] = dict(sorted(fw_truth.items()))
    (out_dir / "ground_truth.json").write_text(json.dumps(gt, indent=1, sort_keys=True))
    return gt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("ascend_dir", type=Path, nargs="?")
    ap.add_argument("out_dir", type=Path, nargs="?")
    ap.add_argument("--memory", action="store_true", help="add profile_memory=True's [memory] events")
    ap.add_argument("--host-ops", action="store_true", help="add each kernel's framework op, launch and flow")
    ap.add_argument(
        "--long-context", type=Path, metavar="OUT", help="instead: the long-context pair's CUDA side"
    )
    args = ap.parse_args()
    if args.long_context:  # sample_traces/_long_context.py (#20)
        print(f"wrote {_long_context.write_cuda(args.long_context)}")
        return
    if args.ascend_dir is None or args.out_dir is None:
        ap.error("ascend_dir and out_dir are required")
    gt = generate(args.ascend_dir, args.out_dir, memory=args.memory, host_ops=args.host_ops)
    print(f"wrote {args.out_dir} ({gt['steps']} steps, classes {', '.join(gt['classes'])})")


if __name__ == "__main__":
    main()
