"""The host side of the generated CUDA twin (``generate_cuda.py --host-ops``): for every kernel, the framework op
that launched it, its ``cudaLaunchKernel`` and the ``ac2g`` flow, as ``torch.profiler`` with ``record_shapes=True``
writes them.

Kineto's format (PyTorch profiler traces, e.g. corpus cuda/hta traces and torch/profiler output):

* ``cpu_op`` X event — the framework op, ``args`` with ``"Input Dims"`` (one list of dims per input, ``[]`` for a
  scalar) and ``"Input type"`` (c10 type names), ``"External id"``;
* ``cuda_runtime`` X event ``cudaLaunchKernel`` inside it, ``args.correlation`` = the kernel's
  ``args.correlation``;
* a flow pair ``ph: s`` (at the runtime call) / ``ph: f`` (at the kernel) of ``cat: ac2g`` with ``id`` = that
  correlation.

The framework op of each Ascend kernel is the op the generator's catalog launches it from
(``sample_traces/_catalog.py``: ``aten::mm``, ``npu::npu_rms_norm``…); the torch_npu custom ops become the vLLM CUDA
ops of the same layer (``CUDA_OPS``), the aten and c10d ops keep their names. Input Dims are the Ascend kernel's
input shapes: the generator's matmul kernels take the aten op's inputs as they are (x [M,K], weight [K,N], bias).
"""

from __future__ import annotations

from decimal import Decimal

from sample_traces._catalog import CommSpec, KernelSpec, catalog

# torch_npu / ATB op → the CUDA op vLLM calls for the same layer (vllm csrc/torch_bindings.cpp registers rms_norm,
# fused_add_rms_norm, rotary_embedding, silu_and_mul in _C and reshape_and_cache_flash in _C_cache_ops;
# vllm-flash-attn registers fwd_kvcache in _vllm_fa2_C).
CUDA_OPS = {
    "npu::npu_rms_norm": "_C::rms_norm",
    "npu::npu_add_rms_norm": "_C::fused_add_rms_norm",
    "npu::npu_rotary_position_embedding": "_C::rotary_embedding",
    "npu::npu_swiglu": "_C::silu_and_mul",
    "atb::_npu_reshape_and_cache": "_C_cache_ops::reshape_and_cache_flash",
    "npu::npu_incre_flash_attention": "_vllm_fa2_C::fwd_kvcache",
}
C10_TYPES = {"DT_BF16": "c10::BFloat16", "FLOAT16": "c10::Half", "FLOAT": "float", "INT64": "long int",
             "INT32": "int", "DOUBLE": "double", "BOOL": "bool"}  # fmt: skip
# Host timing before each kernel start (µs): every window ends before the kernel and is shorter than the 2 µs
# the twin keeps between kernels, so the host ops of two kernels never overlap.
OP_BEFORE, OP_DUR, LAUNCH_BEFORE, LAUNCH_DUR = Decimal("1.8"), Decimal("1.2"), Decimal("1.6"), Decimal("0.8")


def framework_ops() -> dict[str, str]:
    """Ascend kernel name (or hcom Type) → the CUDA framework op that launches its twin."""
    out: dict[str, str] = {}
    for spec in catalog(16, 2).values():
        if isinstance(spec, KernelSpec):
            out[spec.name] = CUDA_OPS.get(spec.aten, spec.aten)
        elif isinstance(spec, CommSpec):
            out[spec.op_type] = spec.aten
    return out


def _dims(shapes: str) -> list[list[int]]:
    """Kineto's Input Dims of a kernel_details shape cell ("16,3584;3584,4608"; "N/A" for a collective: none)."""
    cell = shapes.strip('"')
    if not any(ch.isdigit() for ch in cell):
        return []
    return [[int(d) for d in t.split(",") if d.strip().isdigit()] for t in cell.split(";")]


def host_events(
    row: dict[str, str], op: str, ts: Decimal, corr: int, pid: int, device: int, stream: int
) -> list:
    """The framework op, runtime launch and ac2g flow of the kernel of ``row`` starting at ``ts`` (µs)."""
    launch = ts - LAUNCH_BEFORE
    args = {
        "External id": corr,
        "Input Dims": _dims(row["Input Shapes"]),
        "Input type": [C10_TYPES.get(t, t.lower()) for t in row["Input Data Types"].split(";")],
    }
    return [
        {"ph": "X", "cat": "cpu_op", "name": op, "pid": pid, "tid": pid, "ts": float(ts - OP_BEFORE),
         "dur": float(OP_DUR), "args": args},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": pid, "ts": float(launch),
         "dur": float(LAUNCH_DUR), "args": {"External id": corr, "cbid": 211, "correlation": corr}},
        {"ph": "s", "id": corr, "pid": pid, "tid": pid, "ts": float(launch), "cat": "ac2g", "name": "ac2g"},
        {"ph": "f", "id": corr, "pid": device, "tid": stream, "ts": float(ts), "cat": "ac2g", "name": "ac2g",
         "bp": "e"},
    ]  # fmt: skip
