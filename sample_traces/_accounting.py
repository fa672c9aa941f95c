"""Exact interval arithmetic (int ns) for the Overlap Analysis slices and the ground-truth buckets.

Definitions follow msprof's overlap analysis: Computing = union of compute-task intervals, Communication =
union of collective-op intervals, Communication(Not Overlapped) = Communication minus Computing, Free = the
rest of the window, where the window runs from the first to the last compute/communication task.  The
generator splits Free at ProfilerStep boundaries, so that every slice lies inside one step.
"""

from __future__ import annotations

from dataclasses import dataclass

Interval = tuple[int, int]
# Partition classes in priority order: an instant covered by several tasks belongs to the first listed.
# The same order as diag's device-time breakdown (diag/analyses/stall_breakdown.py), computed independently
# here: compute classes first (AI CPU, attention, layout/cast, matmul, vector, other), then communication,
# then copies; the rest is idle.
CLASSES = ("ai_cpu", "attention", "layout", "matmul", "vector", "other", "communication", "memcpy")
_PRIORITY = {c: i for i, c in enumerate(CLASSES)}
OVERLAP_THREADS = ("Computing", "Communication", "Communication(Not Overlapped)", "Free")


def merge(intervals: list[Interval]) -> list[Interval]:
    """Union of intervals as sorted, disjoint, non-touching intervals."""
    out: list[Interval] = []
    for s, e in sorted(intervals):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def subtract(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """``a`` minus ``b``; both merged."""
    out: list[Interval] = []
    j = 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            bs, be = b[k]
            if bs > cur:
                out.append((cur, bs))
            cur = max(cur, be)
            if cur >= e:
                break
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def gaps(lo: int, hi: int, busy: list[Interval]) -> list[Interval]:
    return subtract([(lo, hi)], busy) if hi > lo else []


def length(intervals: list[Interval]) -> int:
    return sum(e - s for s, e in intervals)


def partition(lo: int, hi: int, tasks: list[tuple[int, int, str]]) -> dict[str, int]:
    """Each ns of [lo, hi) to the highest-priority class running then, or to 'idle'."""
    edges: list[tuple[int, int, int]] = []
    for s, e, cls in tasks:
        s, e = max(s, lo), min(e, hi)
        if e > s:
            p = _PRIORITY[cls]
            edges.append((s, 1, p))
            edges.append((e, -1, p))
    edges.sort()
    counts = [0] * len(CLASSES)
    totals = [0] * (len(CLASSES) + 1)
    prev = lo
    for t, delta, p in edges:
        if t > prev:
            active = next((i for i, c in enumerate(counts) if c), len(CLASSES))
            totals[active] += t - prev
            prev = t
        counts[p] += delta
    totals[len(CLASSES)] += hi - prev
    return {**dict(zip(CLASSES, totals, strict=False)), "idle": totals[-1]}


@dataclass
class StepFigures:
    lo: int
    hi: int
    slices: list[tuple[int, int, int]]  # (start, end, overlap thread index), sorted by start
    computing: int
    communication: int
    comm_not_overlapped: int
    free: int
    partition: dict[str, int]
    ai_cpu_exposed: int

    @property
    def overlapped(self) -> int:
        return self.communication - self.comm_not_overlapped

    @property
    def stage(self) -> int:
        return self.hi - self.lo


def step_figures(
    lo: int,
    hi: int,
    compute: list[tuple[int, int, str]],
    comm: list[Interval],
    other: list[tuple[int, int, str]],
) -> StepFigures:
    computing = merge([(s, e) for s, e, _ in compute])
    communication = merge(comm)
    cno = subtract(communication, computing)
    free = gaps(lo, hi, merge(computing + communication))
    slices = sorted(
        [(s, e, 0) for s, e in computing]
        + [(s, e, 1) for s, e in communication]
        + [(s, e, 2) for s, e in cno]
        + [(s, e, 3) for s, e in free]
    )
    ai_cpu = merge([(s, e) for s, e, b in compute if b == "ai_cpu"])
    covered = merge([(s, e) for s, e, b in compute if b != "ai_cpu"] + communication)
    tasks = compute + [(s, e, "communication") for s, e in comm] + other
    return StepFigures(
        lo,
        hi,
        slices,
        length(computing),
        length(communication),
        length(cno),
        length(free),
        partition(lo, hi, tasks),
        length(subtract(ai_cpu, covered)),
    )
