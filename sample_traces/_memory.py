"""Memory files of one generated rank (``--files … memory``): memory_record.csv, operator_memory.csv and
npu_module_mem.csv as torch_npu 2.5.1 writes them with profile_memory=True, with a known peak and a known
fragmentation pattern, and their ground truth.

Headers are the real ones (corpus: ascend/msinsight/test/data/pytorch/text/level0/rank0_ascend_pt/
ASCEND_PROFILER_OUTPUT/{memory_record,operator_memory}.csv and ascend/msinsight/test/st/level2/rank_0_ascend_pt/
ASCEND_PROFILER_OUTPUT/npu_module_mem.csv); timestamps are µs with 3 decimals and the trailing tab torch_npu
writes; sizes are whole MB / KB so that every figure converts to bytes exactly.

The pattern (MB): weights etc. hold ``BASE`` from the start in ``RESERVED0`` reserved.  Every step allocates an
activation (aten::empty_strided, 2048) at 10% of the step and a matmul output (aten::mm, 4096) at 30%, freed at
80% and 60%; the first step grows the reservation to 36864.  The peak step (the third, or the last when fewer)
also allocates aten::cat (10240) at 45%, freed at 55%: the allocator cannot place it in its cached blocks and
reserves 21504 more (fragmentation), so reserved stays at 58368 with at most 46384 allocated: 11984 MB (20.5%)
of the peak reservation is never in use at once.  APP (the whole process) = PTA reserved + the CANN modules
HCCL 1024, RUNTIME 512, SLOG 16, sampled at each step's start and middle; its peak, 59920 MB, is at the middle
of the peak step, while aten::cat is live.
"""

from __future__ import annotations

from pathlib import Path

MEMORY_RECORD_HEADER = (
    "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,Device Type"
)
OPERATOR_MEMORY_HEADER = (
    "Name,Size(KB),Allocation Time(us),Release Time(us),Active Release Time(us),Duration(us),Active Duration(us),"
    "Allocation Total Allocated(MB),Allocation Total Reserved(MB),Allocation Total Active(MB),"
    "Release Total Allocated(MB),Release Total Reserved(MB),Release Total Active(MB),Stream Ptr,Device Type"
)
NPU_MODULE_MEM_HEADER = "Device_id,Component,Timestamp(us),Total Reserved(MB),Device"
BASE, RESERVED0, RESERVED1 = 30000, 30720, 36864
FRAGMENT_GROWTH = 21504
MODULES = {"HCCL": 1024, "RUNTIME": 512, "SLOG": 16}
STREAM = "2"
MB = 1 << 20
# (name, MB, allocated at, released at: fractions of the step); the peak step adds PEAK_OP
STEP_OPS = (("aten::empty_strided", 2048, 0.10, 0.80), ("aten::mm", 4096, 0.30, 0.60))
PEAK_OP = ("aten::cat", 10240, 0.45, 0.55)


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}\t"


def _mb(x: int) -> str:
    return f"{x}.0"


def _at(start: int, end: int, frac: float) -> int:
    return start + (end - start) * round(frac * 100) // 100


def _events(steps: list[tuple[int, int, int]], peak_index: int) -> list[tuple[int, str, int, int]]:
    """(ts_ns, op name, ±MB, step) for every allocation (+) and free (−), in time order."""
    out = []
    for i, (step, start, end) in enumerate(steps):
        ops = STEP_OPS + ((PEAK_OP,) if i == peak_index else ())
        for name, size, a, r in ops:
            out += [(_at(start, end, a), name, size, step), (_at(start, end, r), name, -size, step)]
    return sorted(out)


def write_memory(output: Path, steps: list[tuple[int, int, int]], device_id: int) -> dict:
    """Write the three files under ``output`` for ``steps`` [(step, start_ns, end_ns)]; return the ground truth."""
    peak_index = min(2, len(steps) - 1)
    device = f"NPU:{device_id}"
    allocated, reserved = BASE, RESERVED0
    records = [f"{c},{_us(steps[0][1])},{_mb(BASE)},{_mb(RESERVED0)},{_mb(BASE)},{STREAM},{device}" for c in ("PTA", "PTA+GE")]  # fmt: skip
    live: dict[str, tuple[int, int, int]] = {}  # name → (alloc ns, allocated MB, reserved MB) at allocation
    op_rows, max_used_at_peak, reserved_series = [], 0, [(steps[0][1], RESERVED0)]
    slack_best = (RESERVED0 - BASE, steps[0][1])
    for ts, name, delta, _step in _events(steps, peak_index):
        allocated += delta
        if delta > 0:
            if name == PEAK_OP[0]:  # no cached block takes it: a new segment, larger than the request
                reserved += FRAGMENT_GROWTH
            elif allocated > reserved:
                reserved = RESERVED1
            assert allocated <= reserved
            live[name] = (ts, allocated, reserved)
        else:
            a_ts, a_alloc, a_res = live.pop(name)
            dur = ts - a_ts
            op_rows.append(
                (a_ts, f"{name},{-delta * 1024},{_us(a_ts)},{_us(ts)},{_us(ts)},{_us(dur)},{_us(dur)},"
                       f"{_mb(a_alloc)},{_mb(a_res)},{_mb(a_alloc)},{_mb(allocated)},{_mb(reserved)},"
                       f"{_mb(allocated)},{STREAM},{device}")
            )  # fmt: skip
        reserved_series.append((ts, reserved))
        if reserved == RESERVED1 + FRAGMENT_GROWTH:
            max_used_at_peak = max(max_used_at_peak, allocated)
        if reserved - allocated > slack_best[0]:
            slack_best = (reserved - allocated, ts)
        for c in ("PTA", "PTA+GE"):
            records.append(
                f"{c},{_us(ts)},{_mb(allocated)},{_mb(reserved)},{_mb(allocated)},{STREAM},{device}"
            )
    app_rows, module_rows, app_peak = _samples(steps, reserved_series, device_id)
    records += app_rows
    _write(output / "memory_record.csv", MEMORY_RECORD_HEADER, records)
    _write(output / "operator_memory.csv", OPERATOR_MEMORY_HEADER, [r for _, r in sorted(op_rows)])
    _write(output / "npu_module_mem.csv", NPU_MODULE_MEM_HEADER, module_rows)
    peak_reserved = RESERVED1 + FRAGMENT_GROWTH
    return {
        "peak_step": steps[peak_index][0],
        "peak_reserved_bytes": app_peak[1] * MB,
        "peak_ts_ns": app_peak[0],
        "peak_op": PEAK_OP[0],
        "peak_allocated_bytes": (BASE + sum(s for _, s, _, _ in STEP_OPS) + PEAK_OP[1]) * MB,
        "allocator_reserved_bytes": peak_reserved * MB,
        "slack_at_peak_bytes": (peak_reserved - max_used_at_peak) * MB,
        "slack_peak_bytes": slack_best[0] * MB,
        "slack_peak_ts_ns": slack_best[1],
        "non_app_bytes": sum(MODULES.values()) * MB,
        "modules_peak_bytes": {m: v * MB for m, v in MODULES.items()},
        "op_memory_rows": len(op_rows),
        "memory_record_rows": len(records),
        "allocs": len(op_rows),
    }


def _samples(
    steps: list[tuple[int, int, int]], reserved_series: list[tuple[int, int]], device_id: int
) -> tuple[list[str], list[str], tuple[int, int]]:
    """APP (memory_record) and per-module (npu_module_mem) samples at each step's start and middle."""
    device = f"NPU:{device_id}"
    app, modules, peak = [], [], (0, -1)
    for _, start, end in steps:
        for ts in (start, (start + end) // 2 // 1000 * 1000):
            framework = max((r for t, r in reserved_series if t <= ts), default=RESERVED0)
            total = framework + sum(MODULES.values())
            app.append(f"APP,{_us(ts)},,{_mb(total)},,,{device}")
            if total > peak[1]:
                peak = (ts, total)
            modules.append(f"{device_id},APP,{_us(ts)},{_mb(framework)},{device}")
            modules += [f"{device_id},{m},{_us(ts)},{_mb(v)},{device}" for m, v in MODULES.items()]
    return app, modules, peak


def _write(path: Path, header: str, rows: list[str]) -> None:
    path.write_text("\r\n".join([header, *rows]) + "\r\n", encoding="utf-8", newline="")
