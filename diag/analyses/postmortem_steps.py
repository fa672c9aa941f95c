"""Steps per rank for a postmortem: step times, failed steps and the clock that puts log times on the trace.

**Failed step.** A step (ProfilerStep number) of one rank failed when the data shows that it did not complete:

- ``missing``: the rank has step data (``steps`` or ``step_trace`` rows), another rank of the same job has this
  step, and this rank has no row of it in either table (the rank stopped, or its capture lost the step). Only
  within a multi-rank job that the evidence grouped (``diag.grouping``: known, distinct ranks, overlapping
  captures): a step number of an unrelated capture says nothing about this one;
- ``incomplete``: the rank has the step in one of ``steps`` (ProfilerStep on the host) / ``step_trace``
  (the exporter's step_trace_time.csv) but not in the other, while that other table has rows for the rank's
  other steps (the exporter never closed the step);
- ``error``: a fatal (severity ``high``) log record of the rank falls inside the step's ProfilerStep window,
  once log times are on the trace clock (below);
- ``interrupted``: the rank's capture ends after its last complete step, and the rank's first fatal log record
  after that step comes no later than ``INTERRUPT_GAP_NS`` after the capture's end: the step after the last
  complete one was cut short by the error (its number is last + 1; start = the last step's end, end = the
  capture's end).

Deliberately *not* failed: a step far longer than the median. In LLM inference a prefill step is often 10-50×
a decode step, so duration alone does not tell a failure; such steps (≥ ``OUTLIER_FACTOR`` × the job's median)
are listed as ``outliers`` with their figures, never counted as failed. A rank without any step data gets no
claim at all. A rank hung in a collective whose timeout is logged minutes later (not within
``INTERRUPT_GAP_NS`` of its capture end) is not counted either: the data does not say which step it was in.

**Clock.** CANN logs carry local time without a zone, traces epoch ns (UTC). The offset is inferred as the
one whole quarter-hour (UTC-14:00 … +14:00) that puts the job's first fatal log record inside the job's
capture span (from its first event to ``CLOCK_GRACE_NS`` after its last). When no offset or more than one
fits, log times are not compared with trace times and the time-based reasons (``error``, ``interrupted``) are
not used; ``clock.basis`` says why.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from diag.grouping import is_multi_rank, job_grouping
from diag.i18n import t
from diag.store import Store

QUARTER_HOUR_NS = 15 * 60 * 1_000_000_000
MAX_ZONE_QUARTERS = 56  # ±14:00
CLOCK_GRACE_NS = 10 * 60 * 1_000_000_000  # a fatal record up to 10 min after the last captured event
INTERRUPT_GAP_NS = 1_000_000_000  # capture end → first fatal record, for an interrupted step
OUTLIER_FACTOR = 3.0  # × the job's median step time: listed as an outlier, not failed
MAX_RAW = 400  # characters of a log line kept as evidence


@dataclass
class RankSteps:
    run_id: int
    rank: int | None
    device: int | None
    name: str
    platform: str
    source: str | None  # profiler_step | step_trace | None (no step data)
    durations: dict[int, int] = field(default_factory=dict)  # step -> ns
    windows: dict[int, tuple[int, int]] = field(default_factory=dict)  # ProfilerStep start/end (trace clock)
    trace_steps: set[int] = field(default_factory=set)  # steps in step_trace
    capture_start_ns: int | None = None
    capture_end_ns: int | None = None
    first_fatal: dict[str, Any] | None = None  # ts_ns (log clock), file, line_no, raw, category, code


@dataclass
class FailedStep:
    run_id: int
    rank: int | None
    step: int
    reasons: list[str]
    start_ns: int | None  # trace clock; None when the rank has no window for it
    end_ns: int | None
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StepReport:
    ranks: list[RankSteps]
    failed: list[FailedStep]
    outliers: list[dict[str, Any]]
    clock: dict[str, Any]  # log_offset_ns (log clock − trace clock) or None, basis
    common_steps: list[int]  # steps every rank with step data has
    median_ns: int | None  # the job's median step time (all ranks, all steps)


def _fetch(store: Store, sql: str, run_ids: list[int]) -> list[tuple]:
    return store.cursor().execute(sql, [run_ids]).fetchall()


def _load(store: Store, runs: list[dict[str, Any]]) -> list[RankSteps]:
    ids = [r["run_id"] for r in runs]
    out = {
        r["run_id"]: RankSteps(
            r["run_id"],
            r.get("rank"),
            r.get("device"),
            r.get("name") or "",
            r.get("platform") or "",
            None,
            capture_start_ns=r.get("start_ns"),
            capture_end_ns=r.get("end_ns"),
        )  # fmt: skip
        for r in runs
    }
    for run_id, step, lo, hi in _fetch(
        store,
        "SELECT run_id, step, min(start_ns), max(end_ns) FROM steps "
        "WHERE list_contains(?, run_id) AND step IS NOT NULL GROUP BY ALL",
        ids,
    ):
        out[run_id].windows[int(step)] = (int(lo), int(hi))
        out[run_id].durations[int(step)] = int(hi) - int(lo)
    for run_id, step, stage in _fetch(
        store,
        "SELECT run_id, step, max(stage_ns) FROM step_trace "
        "WHERE list_contains(?, run_id) AND step IS NOT NULL GROUP BY ALL",
        ids,
    ):
        rs = out[run_id]
        rs.trace_steps.add(int(step))
        if int(step) not in rs.windows and stage is not None:
            rs.durations[int(step)] = int(stage)
    for rs in out.values():
        rs.source = "profiler_step" if rs.windows else ("step_trace" if rs.trace_steps else None)
    for run_id, ts, source, line_no, raw, category, code in _fetch(
        store,
        """SELECT l.run_id, l.ts_ns, f.source, l.line_no, l.raw, l.category, l.code
           FROM log_records l JOIN files f USING (file_id)
           WHERE list_contains(?, l.run_id) AND l.severity = 'high' AND l.ts_ns IS NOT NULL
           QUALIFY row_number() OVER (PARTITION BY l.run_id ORDER BY l.ts_ns, l.file_id, l.record_no) = 1""",
        ids,
    ):
        out[run_id].first_fatal = {
            "ts_ns": int(ts), "file": source, "line_no": line_no, "raw": (raw or "")[:MAX_RAW],
            "category": category, "code": code,
        }  # fmt: skip
    return [out[i] for i in ids]


def log_clock_offset(first_fatal_ns: int | None, start_ns: int | None, end_ns: int | None) -> dict[str, Any]:
    """The offset (log clock − trace clock) that places the first fatal record inside the capture."""
    if first_fatal_ns is None:
        return {"log_offset_ns": None, "basis": "no fatal log record with a time"}
    if start_ns is None or end_ns is None:
        return {"log_offset_ns": None, "basis": "no trace events to align the logs with"}
    fits = [
        k * QUARTER_HOUR_NS
        for k in range(-MAX_ZONE_QUARTERS, MAX_ZONE_QUARTERS + 1)
        if start_ns <= first_fatal_ns - k * QUARTER_HOUR_NS <= end_ns + CLOCK_GRACE_NS
    ]
    if len(fits) == 1:
        off = fits[0]
        sign = "+" if off >= 0 else "-"
        hours, minutes = divmod(abs(off) // 60_000_000_000, 60)
        return {
            "log_offset_ns": off,
            "basis": t("pm.steps.zone_one", zone=f"UTC{sign}{hours:02d}:{minutes:02d}"),
        }
    if not fits:
        return {
            "log_offset_ns": None,
            "basis": t("pm.steps.zone_none"),
        }
    return {"log_offset_ns": None, "basis": t("pm.steps.zone_many", n=len(fits))}


def _errors_in_steps(store: Store, ids: list[int], offset: int) -> dict[tuple[int, int], dict[str, Any]]:
    """(run, step) → the first fatal record inside that step's ProfilerStep window, and how many."""
    rows = (
        store.cursor()
        .execute(
            """SELECT s.run_id, s.step, count(*),
                  arg_min(struct_pack(ts_ns := l.ts_ns, file := f.source, line_no := l.line_no, raw := l.raw,
                                      category := l.category, code := l.code), l.ts_ns)
           FROM steps s JOIN log_records l ON l.run_id = s.run_id
                AND l.ts_ns - ? >= s.start_ns AND l.ts_ns - ? < s.end_ns
           JOIN files f ON f.file_id = l.file_id
           WHERE list_contains(?, s.run_id) AND l.severity = 'high' GROUP BY ALL""",
            [offset, offset, ids],
        )
        .fetchall()
    )
    out = {}
    for run_id, step, n, first in rows:
        first = dict(first)
        first["raw"] = (first["raw"] or "")[:MAX_RAW]
        out[(int(run_id), int(step))] = {"records": int(n), "first": first}
    return out


def step_report(store: Store, runs: list[dict[str, Any]]) -> StepReport:
    """Step times, failed steps and outliers of ``runs`` (the ranks of one job)."""
    ranks = _load(store, runs)
    with_steps = [r for r in ranks if r.source]
    starts = [r.capture_start_ns for r in ranks if r.capture_start_ns is not None]
    ends = [r.capture_end_ns for r in ranks if r.capture_end_ns is not None]
    fatal = [r.first_fatal["ts_ns"] for r in ranks if r.first_fatal]
    clock = log_clock_offset(min(fatal, default=None), min(starts, default=None), max(ends, default=None))
    offset = clock["log_offset_ns"]
    failed: dict[tuple[int, int], FailedStep] = {}

    def add(rs: RankSteps, step: int, reason: str, detail: str, evidence: dict[str, Any],
            window: tuple[int, int] | None = None) -> None:  # fmt: skip
        win = rs.windows.get(step) or window
        fs = failed.setdefault((rs.run_id, step), FailedStep(rs.run_id, rs.rank, step, [], None, None, ""))
        if win and fs.start_ns is None:
            fs.start_ns, fs.end_ns = win
        fs.reasons.append(reason)
        fs.detail = t("pm.steps.details", a=fs.detail, b=detail) if fs.detail else detail
        fs.evidence.update(evidence)

    group = [r for r in with_steps if r.rank is not None] if one_job(store, runs) else []
    all_steps = sorted({s for r in group for s in r.durations})
    for rs in group:
        have = set(rs.durations)
        for s in all_steps:
            others = [o.rank for o in group if s in o.durations]
            if s not in have and others:
                add(rs, s, "missing", t("pm.steps.missing", step=s, others=others),
                    {"present_on_ranks": others, "rank_steps": sorted(have)})  # fmt: skip
    for rs in with_steps:
        if rs.windows and rs.trace_steps:
            for s in sorted(set(rs.windows) ^ rs.trace_steps):
                where, absent = ("ProfilerStep", "step_trace_time") if s in rs.windows else ("step_trace_time", "ProfilerStep")  # fmt: skip
                add(
                    rs,
                    s,
                    "incomplete",
                    t("pm.steps.incomplete", step=s, where=where, absent=absent),
                    {"in": where, "not_in": absent},
                )
    if offset is not None:
        ids = [r.run_id for r in ranks]
        by_run = {r.run_id: r for r in ranks}
        for (run_id, step), hit in _errors_in_steps(store, ids, offset).items():
            rec = hit["first"]
            add(by_run[run_id], step, "error", t("pm.steps.error", n=hit["records"]),
                {"fatal_records": hit["records"], "log_lines": [rec]})  # fmt: skip
        for rs in ranks:
            _interrupted(store, rs, offset, add)
    outliers, median = _outliers(with_steps)
    common = sorted(set.intersection(*(set(r.durations) for r in with_steps))) if with_steps else []
    order = sorted(failed.values(), key=lambda f: (f.rank is None, f.rank or 0, f.run_id, f.step))
    return StepReport(ranks, order, outliers, clock, common, median)


def one_job(store: Store, runs: list[dict[str, Any]]) -> bool:
    """Whether ``runs`` are ranks of one job that the evidence grouped (never runs that merely share a folder)."""
    jobs = {r.get("job_id") for r in runs}
    if len(runs) < 2 or len(jobs) != 1:
        return False
    return is_multi_rank(job_grouping(store.cursor(), jobs.pop()))


def _interrupted(store: Store, rs: RankSteps, offset: int, add: Any) -> None:  # noqa: ANN401
    if not rs.first_fatal or rs.capture_end_ns is None or not rs.windows:
        return
    last = max(rs.windows)
    last_end = rs.windows[last][1]
    end = rs.capture_end_ns
    rows = (
        store.cursor()
        .execute(
            """SELECT l.ts_ns, f.source, l.line_no, l.raw, l.category, l.code
           FROM log_records l JOIN files f USING (file_id)
           WHERE l.run_id = ? AND l.severity = 'high' AND l.ts_ns - ? >= ?
           ORDER BY l.ts_ns, l.file_id, l.record_no LIMIT 1""",
            [rs.run_id, offset, last_end],
        )
        .fetchall()
    )
    if not rows:
        return
    ts, source, line_no, raw, category, code = rows[0]
    err = int(ts) - offset
    if end > last_end and end <= err <= end + INTERRUPT_GAP_NS:
        record = {"ts_ns": int(ts), "file": source, "line_no": line_no, "raw": (raw or "")[:MAX_RAW],
                  "category": category, "code": code}  # fmt: skip
        add(
            rs,
            last + 1,
            "interrupted",
            t("pm.steps.interrupted", into=f"{(end - last_end) / 1e6:.3f}", step=last + 1,
              before=f"{(err - end) / 1e6:.3f}"),
            {"capture_end_ns": end, "last_complete_step": last, "fatal_ns_trace_clock": err,
             "log_lines": [record]},
            (last_end, end),
        )  # fmt: skip


def _outliers(group: list[RankSteps]) -> tuple[list[dict[str, Any]], int | None]:
    durs = [d for r in group for d in r.durations.values() if d]
    if not durs:
        return [], None
    median = int(statistics.median(durs))
    out = [
        {"run_id": r.run_id, "rank": r.rank, "step": s, "dur_ns": d, "x_median": round(d / median, 2)}
        for r in group
        for s, d in sorted(r.durations.items())
        if median and d >= OUTLIER_FACTOR * median
    ]
    return out, median


def rank_table(rep: StepReport) -> list[dict[str, Any]]:
    """One row per rank: its step figures over all its steps and over the steps every rank completed."""
    failed: dict[int, list[int]] = {}
    for f in rep.failed:
        failed.setdefault(f.run_id, []).append(f.step)
    rows = []
    for r in rep.ranks:
        durs = list(r.durations.values())
        common = [r.durations[s] for s in rep.common_steps if s in r.durations]
        slowest = max(r.durations, key=lambda s: r.durations[s]) if r.durations else None
        rows.append(
            {
                "run_id": r.run_id, "rank": r.rank, "device": r.device, "name": r.name, "platform": r.platform,
                "step_source": r.source, "steps": len(durs),
                "step_mean_ns": int(statistics.fmean(durs)) if durs else None,
                "step_median_ns": int(statistics.median(durs)) if durs else None,
                "step_max_ns": max(durs) if durs else None, "slowest_step": slowest,
                "common_steps_mean_ns": int(statistics.fmean(common)) if common else None,
                "failed_steps": sorted(failed.get(r.run_id, [])),
                "capture_start_ns": r.capture_start_ns, "capture_end_ns": r.capture_end_ns,
                "first_fatal": r.first_fatal,
            }
        )  # fmt: skip
    return rows
