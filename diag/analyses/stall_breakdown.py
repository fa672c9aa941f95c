"""Where device time goes, per run and per step: compute (by class), communication, data movement, idle.

Interval arithmetic, never per-µs marks: every task start/end is a boundary, a running count per category
says what is active between two boundaries, and each such segment goes to one bucket by priority:

    compute (ai_cpu > attention > layout > cube > vector > other) > exposed communication > exposed memcpy > idle

so the buckets partition the device span (E2E) exactly.  A compute task's bucket comes from its op class (the
shared rules of ``op_classes``) and its kind (``rules/compute_classes.csv``), so a bucket means the same work on
Ascend and CUDA: CUDA elementwise / reduce / norm kernels are vector, copies / casts / index kernels layout.  The vocabulary follows msprof-analyze's overall
metrics: Computing = the compute buckets, Communication(Not Overlapped) = exposed communication, Free =
exposed memcpy + idle (msprof counts copies as Free; we show them apart).  Steps are the host ProfilerStep
ranges, else the kernels' Step Id.  The device span runs from the first to the last compute or
communication task, as msprof's Overlap Analysis does, and is cut at the ProfilerStep boundaries, so idle
time between steps (a host stall, a slow data loader) belongs to the step it falls in; copies outside the
span count in memcpy_total_ns, not in the buckets.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from diag.analyses import op_classes
from diag.i18n import t
from diag.store import Store

RULES = Path(__file__).resolve().parent.parent / "rules" / "compute_classes.csv"
COMPUTE_BUCKETS = ("ai_cpu", "attention", "layout", "cube", "vector", "other")
BUCKETS = (*COMPUTE_BUCKETS, "comm_exposed", "memcpy_exposed", "idle")
BUCKET_LABELS = {
    "ai_cpu": "AI CPU (fallback)",
    "attention": "Attention (flash/paged)",
    "layout": "Layout / copy (cast, transpose, cat, index, TransData)",
    "cube": "Cube / matmul (GEMM)",
    "vector": "Vector (elementwise, reduce, norm, activation, softmax)",
    "other": "Other compute (unclassified)",
    "comm_exposed": "Communication (not overlapped)",
    "memcpy_exposed": "Memcpy H2D/D2H/D2D (not overlapped)",
    "idle": "Idle (nothing on device)",
}


def bucket_label(bucket: str) -> str:
    """A bucket's label in the reader's language (English: BUCKET_LABELS; the pages and the CLI share it)."""
    return t(f"page.compare.bucket.{bucket}") if bucket in BUCKET_LABELS else bucket


NON_COMPUTE_KINDS = ("COMMUNICATION", "COMM_TASK", "MEMCPY", "SYNC")
# Category codes in the sweep, in bucket priority order; 6 = communication, 7 = memcpy.
_CAT = {b: i for i, b in enumerate(COMPUTE_BUCKETS)} | {"comm": 6, "memcpy": 7}


@dataclass(frozen=True)
class BucketRule:
    priority: int
    kinds: tuple[str, ...]  # task kinds, '*' = any compute kind
    op_classes: tuple[str, ...]  # op classes, '*' = any
    bucket: str
    example_kind: str
    example_name: str

    def matches(self, kind: str, op_class: str) -> bool:
        return ("*" in self.kinds or kind in self.kinds) and (
            "*" in self.op_classes or op_class in self.op_classes
        )


@cache
def bucket_rules() -> tuple[BucketRule, ...]:
    """The rows of rules/compute_classes.csv in priority order (the breakdown's SQL reads the same file)."""
    with open(RULES, encoding="utf-8") as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    out = [
        BucketRule(int(r["priority"]), tuple(r["kinds"].split("|")), tuple(r["op_classes"].split("|")),
                   r["bucket"], r["example_kind"], r["example_name"])
        for r in rows
    ]  # fmt: skip
    for r in out:
        unknown = set(r.op_classes) - {*op_classes.CLASSES, "*"}
        if r.bucket not in (*COMPUTE_BUCKETS, "comm") or unknown:
            raise ValueError(f"{RULES}: bad row {r}")
    return tuple(sorted(out, key=lambda r: r.priority))


def bucket_of(kind: str, op_class: str) -> str:
    """The breakdown bucket of a compute task of this kind and op class (as the breakdown's SQL decides)."""
    return next(r.bucket for r in bucket_rules() if r.matches(kind, op_class))


def run_platform(store: Store, run_id: int) -> str:
    """'cuda' or 'ascend': which side of the op-class rules a run's names are matched against (a ROCm run's
    kernels are PyTorch's GPU kernels and vendor libraries' GEMMs: the GPU side)."""
    rows = store.cursor().execute("SELECT platform FROM runs WHERE run_id = ?", [run_id]).fetchall()
    return "cuda" if rows and rows[0][0] in ("cuda", "rocm") else "ascend"


@dataclass
class StepBreakdown:
    step: int | None
    start_ns: int
    end_ns: int
    buckets: dict[str, int]  # bucket -> ns; sums to e2e_ns exactly
    comm_total_ns: int  # union of communication, overlapped or not
    memcpy_total_ns: int
    export: dict[str, int] | None = None  # the exporter's own step_trace_time figures, when present
    # host side: from the ProfilerStep's start to the step's first device task (msprof's Preparing):
    # time the device waited for the host to dispatch the step's first work
    preparing_ns: int | None = None

    @property
    def e2e_ns(self) -> int:
        """Device time of the step: the buckets partition it, so this is also their sum."""
        return sum(self.buckets.values())

    @property
    def computing_ns(self) -> int:
        return sum(self.buckets[b] for b in COMPUTE_BUCKETS)

    @property
    def free_ns(self) -> int:
        return self.buckets["memcpy_exposed"] + self.buckets["idle"]

    def ours_vs_export(self) -> list[dict]:
        """Rows of (metric, ours, theirs, diff %) in msprof-analyze's vocabulary."""
        if not self.export:
            return []
        ours = {
            "Computing": self.computing_ns,
            "Communication(Not Overlapped)": self.buckets["comm_exposed"],
            "Communication": self.comm_total_ns,
            "Free": self.free_ns,
            "Preparing": self.preparing_ns,
        }
        theirs = {
            "Computing": self.export.get("computing_ns"),
            "Communication(Not Overlapped)": self.export.get("comm_not_overlapped_ns"),
            "Communication": self.export.get("communication_ns"),
            "Free": self.export.get("free_ns"),
            "Preparing": self.export.get("preparing_ns"),
        }
        rows = []
        for metric, mine in ours.items():
            other = theirs[metric]
            if mine is None or (metric == "Preparing" and other is None):
                continue
            other = None if other is None else int(other)
            diff = None if not other else 100.0 * (mine - other) / other
            rows.append(
                {
                    "metric": metric,
                    "ours_ns": mine,
                    "export_ns": other,
                    "diff_pct": diff,
                    "mismatch": diff is not None and abs(diff) > 1.0,
                }
            )
        return rows


@dataclass
class Breakdown:
    run_id: int
    steps: list[StepBreakdown] = field(default_factory=list)
    total: StepBreakdown | None = None
    step_source: str = "none"  # profiler_step | kernel_step | none


def _step_ranges_sql() -> str:
    return """
        SELECT step, start_ns, end_ns FROM steps WHERE run_id = $run AND step IS NOT NULL
    """


def _overlap_exports(cur, run_id: int, wins: dict) -> dict:  # noqa: ANN001
    """Without step_trace_time.csv, the trace's own Overlap Analysis slices, summed per step window."""
    out: dict = {}
    for step, (lo, hi) in wins.items():
        rows = dict(
            cur.execute(
                "SELECT kind, sum(least(start_ns + dur_ns, $hi) - greatest(start_ns, $lo)) FROM overlap_slices "
                "WHERE run_id = $run AND start_ns < $hi AND start_ns + dur_ns > $lo GROUP BY kind",
                {"run": run_id, "lo": lo, "hi": hi},
            ).fetchall()
        )
        if rows:
            out[step] = {
                "computing_ns": rows.get("Computing"),
                "comm_not_overlapped_ns": rows.get("Communication(Not Overlapped)"),
                "communication_ns": rows.get("Communication"),
                "free_ns": rows.get("Free"),
                "source": "overlap_analysis",
            }
    return out


def breakdown(store: Store, run_id: int) -> Breakdown:
    cur = store.cursor()
    params = {"run": run_id, "rules": str(RULES)}
    has_steps = cur.execute("SELECT count(*) FROM steps WHERE run_id = $run", {"run": run_id}).fetchall()[0][
        0
    ]
    non_compute = ", ".join(f"'{k}'" for k in NON_COMPUTE_KINDS)
    op_class = op_classes.sql_case("k.name", "k.op", run_platform(store, run_id))
    # One category per task: its op class (the shared rules) and kind give the bucket; steps from the host
    # ranges (or the task's own step id when none).
    cur.execute(
        f"""CREATE OR REPLACE TEMP TABLE _tasks AS
        WITH rules AS (SELECT CAST(priority AS INTEGER) AS priority, string_split(kinds, '|') AS kinds,
                              string_split(op_classes, '|') AS classes, bucket
                       FROM read_csv($rules, header=true, all_varchar=true, comment='#')),
             t AS (SELECT start_ns, dur_ns, step, kind AS task_kind, coalesce(name, '') AS name, op
                   FROM tasks WHERE run_id = $run AND dur_ns > 0),
             keys AS (SELECT DISTINCT task_kind, name, op FROM t WHERE task_kind NOT IN ({non_compute})),
             classed AS (SELECT k.task_kind, k.name, k.op, {op_class} AS op_class FROM keys k),
             key_bucket AS (  -- classify each distinct op once, not each task
               SELECT c.task_kind, c.name, c.op,
                      (SELECT r.bucket FROM rules r
                       WHERE (list_contains(r.kinds, '*') OR list_contains(r.kinds, c.task_kind))
                         AND (list_contains(r.classes, '*') OR list_contains(r.classes, c.op_class))
                       ORDER BY r.priority LIMIT 1) AS bucket
               FROM classed c),
             classified AS (
               SELECT t.start_ns, t.dur_ns, t.step,
                      CASE WHEN t.task_kind IN ('COMMUNICATION', 'COMM_TASK') THEN 'comm'
                           WHEN t.task_kind = 'MEMCPY' THEN 'memcpy'
                           ELSE kb.bucket END AS bucket
               FROM t LEFT JOIN key_bucket kb ON kb.task_kind = t.task_kind AND kb.name = t.name
                    AND coalesce(kb.op, '') = coalesce(t.op, ''))
        SELECT start_ns AS s, start_ns + dur_ns AS e, step, bucket FROM classified WHERE bucket IS NOT NULL""",
        params,
    ).fetchall()
    codes = " ".join(f"WHEN '{b}' THEN {c}" for b, c in _CAT.items())
    # Eight running counts in one: each category is a 16-bit lane of a HUGEINT, so one running sum over the
    # boundaries gives every count at once (4-5x faster than eight window sums on millions of boundaries).
    lane = " ".join(
        f"WHEN (acc >> {16 * c}) & 65535 > 0 THEN '{b}'" for b, c in _CAT.items() if b in COMPUTE_BUCKETS
    )
    bucket_case = (
        f"CASE {lane} WHEN (acc >> 96) & 65535 > 0 THEN 'comm_exposed' "
        "WHEN (acc >> 112) & 65535 > 0 THEN 'memcpy_exposed' ELSE 'idle' END"
    )
    if has_steps:
        step_source = "profiler_step"
        # The device span of the captured steps (first to last compute/communication task), cut at the
        # ProfilerStep boundaries: gaps between steps count as idle of the step they fall in.
        windows = f"""WITH r AS ({_step_ranges_sql()}),
                 span AS (SELECT min(t.s) AS lo, max(t.e) AS hi FROM _tasks t
                          WHERE t.bucket <> 'memcpy' AND t.s >= (SELECT min(start_ns) FROM r)
                            AND t.s < (SELECT max(end_ns) FROM r))
            SELECT r.step, greatest(r.start_ns, span.lo) AS lo, least(r.end_ns, span.hi) AS hi
            FROM r, span WHERE r.end_ns > span.lo AND r.start_ns < span.hi"""
    else:
        any_step = cur.execute("SELECT count(*) FROM _tasks WHERE step IS NOT NULL").fetchall()[0][0]
        step_source = "kernel_step" if any_step else "none"
        windows = (
            "SELECT step, min(s) AS lo, max(e) AS hi FROM _tasks "
            "WHERE bucket <> 'memcpy' AND $run IS NOT NULL GROUP BY step"
        )
    rows = cur.execute(
        f"""WITH win AS ({windows}),
             ev AS (SELECT s AS ts, CAST(1 AS HUGEINT) << (16 * CASE bucket {codes} END) AS d FROM _tasks
                    UNION ALL SELECT e, -(CAST(1 AS HUGEINT) << (16 * CASE bucket {codes} END)) FROM _tasks
                    UNION ALL SELECT lo, 0 FROM win UNION ALL SELECT hi, 0 FROM win),
             -- no GROUP BY ts first: rows that share a ts make zero-length segments, which add nothing
             seg AS (SELECT ts, lead(ts) OVER w AS nxt, sum(d) OVER w AS acc
                     FROM ev WINDOW w AS (ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)),
             labelled AS (SELECT w.step, seg.ts, seg.nxt, {bucket_case} AS bucket,
                                 (acc >> 96) & 65535 > 0 AS comm, (acc >> 112) & 65535 > 0 AS memcpy
                          FROM seg ASOF JOIN win w ON seg.ts >= w.lo
                          WHERE seg.nxt IS NOT NULL AND seg.ts < w.hi)
        SELECT step, bucket, CAST(sum(nxt - ts) AS BIGINT), CAST(sum(nxt - ts) FILTER (WHERE comm) AS BIGINT),
               CAST(sum(nxt - ts) FILTER (WHERE memcpy) AS BIGINT)
        FROM labelled GROUP BY step, bucket""",
        {"run": run_id},
    ).fetchall()
    wins = {
        r[0]: (int(r[1]), int(r[2]))
        for r in cur.execute(windows, {"run": run_id}).fetchall()
        if r[1] is not None
    }
    exports = {
        r[0]: dict(
            zip(
                ("computing_ns", "comm_not_overlapped_ns", "communication_ns", "free_ns", "preparing_ns"),
                r[1:],
                strict=True,
            )
        )
        for r in cur.execute(
            "SELECT step, computing_ns, comm_not_overlapped_ns, communication_ns, free_ns, preparing_ns FROM step_trace "
            "WHERE run_id = $run",
            {"run": run_id},
        ).fetchall()
    }
    if not exports and wins:
        exports = _overlap_exports(cur, run_id, wins)
    preparing: dict[int | None, int] = {}
    if step_source == "profiler_step":  # to the step's first compute/communication task, as msprof counts it
        preparing = {
            step: int(first - host_start)
            for step, host_start, first in cur.execute(
                # the first such task at or after the step's start (ASOF), kept when it starts inside the step:
                # min(t.s) of the tasks inside the step without a range join of every step with every task
                """WITH t AS (SELECT s FROM _tasks WHERE bucket <> 'memcpy')
                   SELECT r.step, r.start_ns, min(t.s) FROM steps r ASOF JOIN t ON t.s >= r.start_ns
                   WHERE r.run_id = $run AND t.s < r.end_ns GROUP BY r.step, r.start_ns""",
                {"run": run_id},
            ).fetchall()
        }
    cur.execute("DROP TABLE IF EXISTS _tasks").fetchall()
    by_step: dict[int | None, StepBreakdown] = {}
    for step, (lo, hi) in wins.items():
        by_step[step] = StepBreakdown(step, lo, hi, dict.fromkeys(BUCKETS, 0), 0, 0, exports.get(step))
    for step, prep in preparing.items():
        if step in by_step:
            by_step[step].preparing_ns = prep
    for step, bucket, ns, comm_ns, memcpy_ns in rows:
        sb = by_step[step]
        sb.buckets[bucket] += int(ns or 0)
        sb.comm_total_ns += int(comm_ns or 0)
        sb.memcpy_total_ns += int(memcpy_ns or 0)
    steps = sorted(by_step.values(), key=lambda s: (s.step is None, s.step))
    result = Breakdown(run_id=run_id, steps=steps, step_source=step_source)
    if steps:
        total = StepBreakdown(
            None,
            min(s.start_ns for s in steps),
            max(s.end_ns for s in steps),
            dict.fromkeys(BUCKETS, 0),
            sum(s.comm_total_ns for s in steps),
            sum(s.memcpy_total_ns for s in steps),
        )
        for s in steps:
            for b, v in s.buckets.items():
                total.buckets[b] += v
        result.total = total
    return result
