"""Close a simulated step on one rank: Overlap Analysis slices, kernel_details rows (sorted, with Wait Time),
the step_trace_time row and the step's ground-truth record, all from the same integer-ns intervals."""

from __future__ import annotations

from dataclasses import dataclass

from sample_traces import _events as ev
from sample_traces._accounting import CLASSES, OVERLAP_THREADS, step_figures
from sample_traces._rank import Rank, StepLog

STEP_TRACE_HEADER = (
    "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
    "Communication(Not Overlapped and Exclude Receive),Preparing"
)


@dataclass
class StepOutput:
    trace: list[str] | None  # events of the step, overlap slices included
    kernel_rows: str | None
    step_trace_row: str
    record: dict


def finish_step(rank: Rank, st: StepLog, first: bool, last: bool) -> StepOutput:
    busy = [(s, e) for s, e, _ in st.compute] + st.comm
    lo = min(s for s, _ in busy) if first else st.start
    hi = max(e for _, e in busy) if last else st.end
    fig = step_figures(lo, hi, st.compute, st.comm, st.other)
    trace = rank.out
    if trace is not None:
        pid = rank.overlap_pid
        trace.extend(ev.plain_x(OVERLAP_THREADS[k], pid, k, s, ev.us_float(e - s)) for s, e, k in fig.slices)
        rank.out = []
    for _, _, k in fig.slices:
        rank.n[f"overlap:{OVERLAP_THREADS[k]}"] += 1
    rank.n["X_overlap"] += len(fig.slices)
    totals = rank.sums
    for key, value in (
        ("u:window", fig.stage),
        ("u:computing", fig.computing),
        ("u:communication", fig.communication),
        ("u:comm_not_overlapped", fig.comm_not_overlapped),
        ("u:free", fig.free),
        ("u:ai_cpu_exposed", fig.ai_cpu_exposed),
        *((f"p:{c}", v) for c, v in fig.partition.items()),
    ):
        totals[key] += value
    preparing = (st.first_task or st.start) - st.start
    us = ev.us_float
    row = (
        f"{st.number},{us(fig.computing)},{us(fig.comm_not_overlapped)},{us(fig.overlapped)},"
        f"{us(fig.communication)},{us(fig.free)},{us(fig.stage)},0,{us(fig.comm_not_overlapped)},{us(preparing)}\r\n"
    )
    record = {
        "step": st.number,
        "start_ns": st.start,
        "end_ns": st.end,
        "window_start_ns": lo,
        "window_end_ns": hi,
        "computing_ns": fig.computing,
        "communication_ns": fig.communication,
        "comm_not_overlapped_ns": fig.comm_not_overlapped,
        "overlapped_ns": fig.overlapped,
        "free_ns": fig.free,
        "stage_ns": fig.stage,
        "preparing_ns": preparing,
        "buckets_ns": {c: fig.partition[c] for c in (*CLASSES, "idle")},
        "ai_cpu_exposed_ns": fig.ai_cpu_exposed,
        "kernel_rows": st.n_rows,
        "overlap_slices": len(fig.slices),
        "stall": st.stall,
    }
    return StepOutput(trace, _kernel_rows(rank, st), row, record)


def _kernel_rows(rank: Rank, st: StepLog) -> str | None:
    """msprof's Wait Time: max(0, start - (previous row start + duration)), rows in start order."""
    if not rank.write_kernels:
        return None
    parts = []
    prev = rank.prev_row_end
    for start, dur, head, tail in sorted(st.rows):
        wait = "0" if prev is None else ev.us_float(max(0, start - prev))
        parts.append(head + wait + tail)
        prev = start + dur
    rank.prev_row_end = prev
    return "".join(parts)
