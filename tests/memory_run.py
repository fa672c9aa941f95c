"""A small Ascend run with memory files of known figures (the real headers of torch_npu's export), for the Memory
page and the memory integration tests: the generated TP=2 sample's rank 0 (its kernels and steps) plus
memory_record.csv, npu_module_mem.csv and operator_memory.csv written here.

Known figures (MB in the files, 1 MB = 2**20 bytes): memory_record APP (the process total) peaks at 60 GiB at
sample 9; the allocator's PTA+GE peaks at 40 GiB allocated / 48 GiB reserved at sample 9, its slack (reserved −
allocated) at 18 GiB from sample 10; npu_module_mem holds HCCL 4 GiB, RUNTIME 1 GiB beside APP; aten::mm holds
8 GiB for 4 ms (samples 8 → 12). Headers: sample_traces/real/msinsight_level2_rank0_ascend_pt (torch_npu export).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import SAMPLES

RANK0 = SAMPLES / "generated" / "llm_decode_tp2" / "rank0_1716292_20250115093320983_ascend_pt"
T0_US = (
    1736933600984300  # the first sample, inside the rank's kernels (1736933600984291 … 1736933601000070 us)
)
SAMPLES_N = 16
ALLOC_MB = [20480, 22528, 24576, 26624, 28672, 30720, 32768, 34816, 36864, 40960] + [30720] * 6
RESERVED_MB = [24576, 26624, 28672, 30720, 32768, 34816, 36864, 38912, 40960] + [49152] * 7
APP_EXTRA_MB = 12288  # APP = PTA+GE reserved + 12 GiB: peak 60 GiB
MODULES_MB = {"APP": 49152, "HCCL": 4096, "RUNTIME": 1024, "SLOG": 0}
GIB = 1 << 30
PEAK_RESERVED = 60 * GIB
PEAK_ALLOCATED = 40 * GIB
SLACK_PEAK = 18 * GIB
PEAK_SAMPLE = 9
DEVICE_NAME = "Ascend910B3"  # set on the run by the tests: a text export does not name its chip


def capacity_bytes(device_name: str) -> int:
    """The capacity diag.devices gives the device (what the framework sees, else nominal)."""
    from diag.devices import match_device

    device = match_device(device_name)
    assert device is not None and device.capacity_bytes, device_name
    return int(device.capacity_bytes)


def peak_text(peak: int, cap: int) -> str:
    """'60.00 GiB of 60.97 GiB (98.4%)' and the headroom as the page and the report write them."""
    return f"{peak / GIB:.2f} GiB of {cap / GIB:.2f} GiB ({100 * peak / cap:.1f}%)"


def headroom(peak: int, cap: int) -> str:
    return f"{100 - 100 * peak / cap:.1f}%"


def ts_us(k: int) -> int:
    return T0_US + 1000 * k


def _memory_record() -> str:
    lines = [
        "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type"
    ]
    for k in range(SAMPLES_N):
        lines.append(f"APP,{ts_us(k)}.000\t,,{RESERVED_MB[k] + APP_EXTRA_MB},,,NPU:0")
        a, r = ALLOC_MB[k], RESERVED_MB[k]
        lines.append(f"PTA+GE,{ts_us(k)}.000\t,{a},{r},{a},187650,NPU:0")
    return "\n".join(lines) + "\n"


def _npu_module_mem() -> str:
    lines = ["Component,Timestamp(us),Total Reserved(MB),Device"]
    for k in range(SAMPLES_N):
        lines += [f"{name},{ts_us(k)}.000\t,{mb},NPU:0" for name, mb in MODULES_MB.items()]
    return "\n".join(lines) + "\n"


def _operator_memory() -> str:
    head = (
        "Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),"
        "Active Duration(us),Allocation Total Allocated(MB),Allocation Total Reserved(MB),"
        "Allocation Total Active(MB),Release Total Allocated(MB),Release Total Reserved(MB),"
        "Release Total Active(MB),Stream Ptr,Device Type"
    )
    rows = [("aten::mm", 8 * 1024 * 1024, 8, 12), ("aten::empty_strided", 1024 * 1024, 2, 3)]
    lines = [head]
    for name, kb, a, r in rows:
        dur = ts_us(r) - ts_us(a)
        lines.append(
            f"{name},{kb},{ts_us(a)}.000\t,{ts_us(r)}.000\t,{ts_us(r)}.000\t,{dur},{dur},"
            f"{ALLOC_MB[a]},{RESERVED_MB[a]},{ALLOC_MB[a]},{ALLOC_MB[r]},{RESERVED_MB[r]},{ALLOC_MB[r]},187650,NPU:0"
        )
    return "\n".join(lines) + "\n"


def memory_run(root: Path) -> Path:
    """Write the run folder under ``root``; returns it."""
    run = root / RANK0.name
    out = run / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    for name in ("profiler_info_0.json", "profiler_metadata.json"):
        shutil.copy(RANK0 / name, run)
    for name in ("kernel_details.csv", "step_trace_time.csv"):
        shutil.copy(RANK0 / "ASCEND_PROFILER_OUTPUT" / name, out)
    (out / "memory_record.csv").write_text(_memory_record())
    (out / "npu_module_mem.csv").write_text(_npu_module_mem())
    (out / "operator_memory.csv").write_text(_operator_memory())
    return run
