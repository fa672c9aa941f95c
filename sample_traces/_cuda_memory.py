"""The ``[memory]`` events ``torch.profiler.profile(profile_memory=True)`` adds to a Kineto trace, with their truth.

Event format as PyTorch writes it (``torch/csrc/profiler/collection.cpp``: an allocation is named ``[memory]``;
``torch/csrc/profiler/kineto_metadata.cpp``: its args; ``pytorch/kineto libkineto/src/output_json.cpp``
``handleGenericInstantEvent``: ``"ph": "i", "cat": "cpu_instant_event", "s": "t"``)::

    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": P, "tid": T, "ts": µs,
     "args": {"Device Type": 1, "Device Id": 0, "Addr": 139…, "Bytes": -512,
              "Total Allocated": …, "Total Reserved": …}}

``Bytes`` < 0 is a free; the totals are the caching allocator's after the event.  Per step, on the host
thread: ``aten::linear`` holding ``aten::mm``, which allocates a workspace (freed in the same step), then
``aten::empty`` allocating the step's activations (freed at the step's end); one host (``Device Type`` 0)
allocation; the first step frees a block allocated before the profiling window, the last step's ``aten::cat``
allocates a block never freed.  The allocator is simulated: reserved grows in 20 MiB segments, never shrinks.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal

MIB = 1 << 20
WEIGHTS_BYTES = 2 << 30  # allocated before the window (the model's weights)
BEFORE_WINDOW = (0x7F00_0000_0000, 4 * MIB)  # a block allocated before the window, freed in step 1
SEGMENT = 20 * MIB
CUDA, CPU = 1, 0  # c10::DeviceType


class _Allocator:
    def __init__(self) -> None:
        self.allocated = WEIGHTS_BYTES + BEFORE_WINDOW[1]
        self.reserved = self.allocated + SEGMENT
        self.peak_allocated = self.peak_reserved = 0
        self.peak_allocated_us = Decimal(0)

    def event(self, pid: int, ts: Decimal, addr: int, size: int, device: int) -> dict:
        self.allocated += size
        while self.reserved < self.allocated:
            self.reserved += SEGMENT
        if self.allocated > self.peak_allocated:
            self.peak_allocated, self.peak_allocated_us = self.allocated, ts
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        args = {"Total Reserved": self.reserved, "Total Allocated": self.allocated, "Bytes": size,
                "Addr": addr, "Device Id": device, "Device Type": CUDA}  # fmt: skip
        return _instant(pid, ts, args)


def _instant(pid: int, ts: Decimal, args: dict) -> dict:
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": pid, "tid": pid,
            "ts": float(ts), "args": args}  # fmt: skip


def _op(pid: int, name: str, start: Decimal, end: Decimal) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": pid, "ts": float(start),
            "dur": float(end - start), "args": {}}  # fmt: skip


def memory_events(spans: list[tuple[Decimal, Decimal]], pid: int, device: int) -> tuple[list[dict], dict]:
    """The host ops and ``[memory]`` events for steps spanning ``spans`` (µs), and what a parser must find."""
    alloc, events = _Allocator(), []
    by_op: dict[str, int] = defaultdict(int)
    largest = ("", 0)

    def allocate(ts: Decimal, addr: int, size: int, op: str) -> None:
        nonlocal largest
        events.append(alloc.event(pid, ts, addr, size, device))
        by_op[op] += size
        largest = max(largest, (op, size), key=lambda x: x[1])

    for i, (s, end) in enumerate(spans):
        work, act = 0x7F10_0000_0000 + i * 0x100_0000, 0x7F20_0000_0000 + i * 0x1000_0000
        work_bytes, act_bytes = (8 + 8 * (i % 3)) * MIB, 32 * MIB
        if i == 0:
            events.append(alloc.event(pid, s + 1, BEFORE_WINDOW[0], -BEFORE_WINDOW[1], device))
        events.append(_instant(pid, s + 3, {"Total Reserved": 0, "Total Allocated": 256, "Bytes": 256,
                                            "Addr": 0x5600_0000_0000 + i, "Device Id": -1, "Device Type": CPU}))  # fmt: skip
        events += [_op(pid, "aten::linear", s + 2, s + 12), _op(pid, "aten::mm", s + 4, s + 10)]
        allocate(s + 5, work, work_bytes, "aten::mm")
        events.append(_op(pid, "aten::empty", s + 13, s + 15))
        allocate(s + 14, act, act_bytes, "aten::empty")
        events.append(alloc.event(pid, s + 16, work, -work_bytes, device))
        if i == len(spans) - 1:
            events.append(_op(pid, "aten::cat", s + 17, s + 19))
            allocate(s + 18, 0x7F30_0000_0000, 64 * MIB, "aten::cat")
        events.append(alloc.event(pid, end - 5, act, -act_bytes, device))
    steps = len(spans)
    truth = {
        "device": f"cuda:{device}",
        "memory_rows": 1 + 4 * steps + 1,  # CUDA events only: host (Device Type 0) ones are not stored
        "host_events": steps,
        "op_memory_rows": 2 * steps + 1 + 1,
        "paired": 2 * steps,
        "alloc_never_freed": {"name": "aten::cat", "bytes": 64 * MIB},
        "free_before_window": {"bytes": -BEFORE_WINDOW[1]},
        "peak_allocated_bytes": alloc.peak_allocated,
        "peak_allocated_ts_ns": int(alloc.peak_allocated_us * 1000),  # since the trace's base time
        "peak_reserved_bytes": alloc.peak_reserved,
        "largest_alloc": {"name": largest[0], "bytes": largest[1]},
        "bytes_by_op": dict(sorted(by_op.items())),
    }
    return events, truth
