"""The same workload on Ascend and on CUDA, op class by op class: where does the Ascend run lose time?

Both runs are measured with the same definitions: the device-time breakdown of ``stall_breakdown`` (one
interval sweep, the same buckets) and op classes from one rules file (``rules/op_classes.csv``) applied to
Ascend op types and CUDA kernel names alike.  Figures are per step (total ÷ steps) so captures of different
lengths compare; a capture pair that is not comparable (step counts, kernels per step, shapes) is flagged.

The biggest loss is looked for over every bucket of the breakdown (idle, AI CPU, exposed communication and
copies included), since the buckets partition device time; op classes then say which compute lost it.

A side without per-kernel tasks but with an ``nsys stats`` kernel summary (``kernel_stats``, report
``cuda_gpu_kern_sum``) compares from the summary: calls and total time per kernel name, classified by the same
rules.  A summary has no steps and no timeline, so its per-step figures are its mean time per call times the
other side's calls per step (the ratio is the per-call ratio), and its buckets are unknown (None); a warning
says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from diag.analyses import op_classes
from diag.analyses.compare_memory import memory_block
from diag.analyses.counts import KernelCounts, kernel_counts, unique_tasks_sql
from diag.analyses.framework_ops import framework_op_table
from diag.analyses.kernel_summary import (
    KERNEL_SUMMARY,
    SUMMARY_REPORTS,
    TIMELINE,
    figures_source,
    summary_class_totals,
)
from diag.analyses.stall_breakdown import BUCKET_LABELS, BUCKETS, Breakdown, breakdown
from diag.i18n import t
from diag.store import Store

KERNELS_PER_STEP_TOLERANCE = 0.2  # beyond ±20% the two captures probably ran different work


@dataclass
class ClassRow:
    op_class: str
    count_a: int
    count_b: int
    total_a_ns: int
    total_b_ns: int
    per_step_a_ns: float
    per_step_b_ns: float
    mean_a_ns: float | None
    mean_b_ns: float | None
    share_a_pct: float
    share_b_pct: float
    ratio: float | None  # A / B per step (Ascend / CUDA): > 1 means slower on A
    delta_per_step_ms: float  # time A loses per step in this class (negative: A is faster)


@dataclass
class OpRow:
    op: str
    calls_a: int
    calls_b: int
    device_a_ns: int
    device_b_ns: int
    ratio: float | None
    delta_per_step_ms: float


@dataclass
class Comparison:
    run_a: dict[str, Any]
    run_b: dict[str, Any]
    steps_a: int
    steps_b: int
    overall: list[dict[str, Any]]  # per bucket: per-step ms on both sides, ratio, delta
    classes: list[ClassRow]
    ops: list[OpRow]
    phases: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)
    source_a: str = TIMELINE  # timeline (device tasks) | kernel_summary (nsys stats kernel_stats)
    source_b: str = TIMELINE
    # every bucket of ``overall`` (not e2e) that A loses time in, largest first: the biggest loss is losses[0]
    losses: list[dict[str, Any]] = field(default_factory=list)
    # device kernels, operator types, kernels per step and duplicate rows of each side (diag.analyses.counts)
    counts_a: KernelCounts | None = None
    counts_b: KernelCounts | None = None
    memory: dict[str, Any] | None = None  # {"a": {...}, "b": {...}}: diag.analyses.compare_memory
    # per framework op (aten / torch_npu / custom), its kernels on each side: diag.analyses.framework_ops
    framework_ops: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for side in ("counts_a", "counts_b"):
            counts = getattr(self, side)
            out[side] = counts.to_json() if counts else None
        return {**out, "biggest_loss": self.biggest_loss(), "notes": self.notes()}

    def notes(self) -> list[str]:
        """Data-quality notes (duplicate kernel rows found and counted once), per side."""
        sides = (("A", self.counts_a), ("B", self.counts_b))
        return [f"{side}: {c.note()}" for side, c in sides if c is not None and c.note()]

    def top_losses(self, n: int = 3) -> list[ClassRow]:
        """The op classes that lose most time per step (compute only: see ``biggest_loss`` for every bucket)."""
        return [c for c in self.classes if c.delta_per_step_ms > 0][:n]

    def biggest_loss(self) -> dict[str, Any] | None:
        """The bucket (idle, AI CPU, exposed communication, copies or a compute bucket) A loses most in."""
        return self.losses[0] if self.losses else None


def _run(store: Store, run_id: int) -> dict[str, Any]:
    cur = store.cursor()
    rows = cur.execute(
        "SELECT run_id, name, platform, device_name, source, profiler_level FROM runs WHERE run_id = ?",
        [run_id],
    ).fetchall()
    if not rows:
        raise ValueError(f"no run {run_id}")
    return dict(
        zip(("run_id", "name", "platform", "device_name", "source", "profiler_level"), rows[0], strict=True)
    )


def _platform(run: dict[str, Any]) -> str:
    return "cuda" if run["platform"] in ("cuda", "rocm") else "ascend"  # the GPU side of the op-class rules


def class_totals(store: Store, run_id: int, platform: str) -> dict[str, tuple[int, int]]:
    """op class -> (count, total ns) of a run's device tasks; distinct names are classified once.

    A run with no device tasks but an nsys stats kernel summary is read from the summary."""
    if figures_source(store, run_id) == KERNEL_SUMMARY:
        return summary_class_totals(store, run_id, platform)
    name_case = op_classes.sql_case("name", "op_type", platform)
    comm_case = op_classes.communication_class_sql("name", "op_type", platform)
    rows = (
        store.cursor()
        .execute(
            f"""WITH by_name AS (
                SELECT t.name, any_value(coalesce(t.op, t.op_type)) AS op_type, t.kind, count(*) AS n, sum(t.dur_ns) AS ns
                FROM ({unique_tasks_sql()}) t WHERE t.kind NOT IN ('SYNC', 'COMM_TASK') GROUP BY t.name, t.kind),
             classed AS (SELECT CASE WHEN kind = 'COMMUNICATION' THEN {comm_case}
                                     WHEN kind = 'MEMCPY' AND lower(name) LIKE '%memset%' THEN 'memset'
                                     WHEN kind = 'MEMCPY' THEN 'memcpy'
                                     ELSE {name_case} END AS op_class, n, ns FROM by_name)
            SELECT op_class, sum(n), sum(ns) FROM classed GROUP BY op_class""",
            {"run": run_id},
        )
        .fetchall()
    )
    return {c: (int(n), int(ns)) for c, n, ns in rows}


def _n_steps(bd: Breakdown) -> int:
    return max(1, len([s for s in bd.steps if s.e2e_ns > 0]))


def _summary_warning(side: str, run: dict[str, Any]) -> str:
    return t("compare.warn.summary", side=side, run=run["run_id"], reports=", ".join(SUMMARY_REPORTS))


def _warnings(
    a: dict, b: dict, bd_a: Breakdown, bd_b: Breakdown, ka: KernelCounts, kb: KernelCounts
) -> list[str]:
    out = []
    if a["platform"] == b["platform"]:
        out.append(t("compare.warn.same_platform", platform=a["platform"]))
    out += _vendor_warnings(a, b)
    summaries = [(side, r) for side, r in (("A", a), ("B", b)) if r["figures_source"] == KERNEL_SUMMARY]
    out += [_summary_warning(side, r) for side, r in summaries]
    if not summaries:
        out += _step_warnings(bd_a, bd_b, ka, kb)
    return out


VENDORS = {"ascend": "Huawei Ascend", "cuda": "NVIDIA CUDA", "rocm": "AMD ROCm"}


def _vendor_warnings(a: dict, b: dict) -> list[str]:
    """A ROCm run is a GPU run, but not the CUDA baseline the comparison is built for: say so, never silently."""
    if a["platform"] == b["platform"] or "rocm" not in (a["platform"], b["platform"]):
        return []
    side, run = ("B", b) if b["platform"] == "rocm" else ("A", a)
    vendor_a, vendor_b = VENDORS.get(a["platform"], a["platform"]), VENDORS.get(b["platform"], b["platform"])
    return [t("compare.warn.vendor", a=vendor_a, b=vendor_b, side=side, run=run["run_id"])]


def _phase_warnings(ca: dict, cb: dict) -> list[str]:
    return [
        t("compare.warn.phase", cls=cls)
        for cls in ("attention_prefill", "attention_decode")
        if (cls in ca) != (cls in cb)
    ]


def _step_warnings(
    bd_a: Breakdown, bd_b: Breakdown, counts_a: KernelCounts, counts_b: KernelCounts
) -> list[str]:
    out = []
    if len(bd_a.steps) != len(bd_b.steps):
        out.append(t("compare.warn.step_counts", a=len(bd_a.steps), b=len(bd_b.steps)))
    if bd_a.step_source != bd_b.step_source:
        out.append(t("compare.warn.step_source", a=bd_a.step_source, b=bd_b.step_source))
    ka, kb = counts_a.kernels_per_step, counts_b.kernels_per_step  # the one definition (diag.analyses.counts)
    if ka and kb and abs(ka - kb) / max(ka, kb) > KERNELS_PER_STEP_TOLERANCE:
        out.append(t("compare.warn.kernels_per_step", a=f"{ka:,.0f}", b=f"{kb:,.0f}"))
    return out


def _class_rows(ca: dict, cb: dict, sa: int, sb: int, summary_a: bool, summary_b: bool) -> list[ClassRow]:
    """One row per op class; a summary side's per-step figure is its mean per call × the other's calls per step."""
    total_a = sum(ns for _, ns in ca.values()) or 1
    total_b = sum(ns for _, ns in cb.values()) or 1
    rows = []
    for cls in sorted(set(ca) | set(cb)):
        (na, ta), (nb, tb) = ca.get(cls, (0, 0)), cb.get(cls, (0, 0))
        ma, mb = (ta / na if na else None), (tb / nb if nb else None)
        pa, pb = ta / sa, tb / sb
        if summary_b and not summary_a:
            pb = (mb or 0.0) * na / sa
        if summary_a and not summary_b:
            pa = (ma or 0.0) * nb / sb
        per_call = summary_a or summary_b  # a summary's per-step figure is derived: compare per call
        ratio = (ma / mb if ma and mb else None) if per_call else (pa / pb if pb else None)
        share_a, share_b = 100 * ta / total_a, 100 * tb / total_b
        rows.append(ClassRow(cls, na, nb, ta, tb, pa, pb, ma, mb, share_a, share_b, ratio, (pa - pb) / 1e6))
    rows.sort(key=lambda c: -c.delta_per_step_ms)
    return rows


def _per_step_ms(bd: Breakdown, bucket: str, steps: int, summary: bool) -> float | None:
    if summary:
        return None  # a kernel summary has no timeline: no buckets
    if not bd.total:
        return 0.0
    return (bd.total.e2e_ns if bucket == "e2e" else bd.total.buckets[bucket]) / steps / 1e6


def _overall(
    bd_a: Breakdown, bd_b: Breakdown, sa: int, sb: int, summary_a: bool, summary_b: bool
) -> list[dict]:
    overall = []
    for bucket in (*BUCKETS, "e2e"):
        va = _per_step_ms(bd_a, bucket, sa, summary_a)
        vb = _per_step_ms(bd_b, bucket, sb, summary_b)
        both = va is not None and vb is not None
        overall.append(
            {
                "bucket": bucket,
                "per_step_a_ms": va,
                "per_step_b_ms": vb,
                "ratio": (va / vb) if both and vb else None,
                "delta_per_step_ms": (va - vb) if both else None,
            }
        )
    return overall


def bucket_losses(overall: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every bucket A loses time in (idle, AI CPU, exposed communication and copies too), largest first."""
    lost = [
        {**o, "label": BUCKET_LABELS[o["bucket"]]}
        for o in overall
        if o["bucket"] != "e2e" and (o["delta_per_step_ms"] or 0) > 0
    ]
    return sorted(lost, key=lambda o: -o["delta_per_step_ms"])


def compare(store: Store, run_a: int, run_b: int) -> Comparison:
    """Run A (usually Ascend) against run B (usually the CUDA baseline)."""
    a, b = _run(store, run_a), _run(store, run_b)
    a["figures_source"], b["figures_source"] = figures_source(store, run_a), figures_source(store, run_b)
    summary_a, summary_b = a["figures_source"] == KERNEL_SUMMARY, b["figures_source"] == KERNEL_SUMMARY
    bd_a, bd_b = breakdown(store, run_a), breakdown(store, run_b)
    sa, sb = _n_steps(bd_a), _n_steps(bd_b)
    ca, cb = class_totals(store, run_a, _platform(a)), class_totals(store, run_b, _platform(b))
    overall = _overall(bd_a, bd_b, sa, sb, summary_a, summary_b)
    counts_a, counts_b = kernel_counts(store, run_a, bd_a), kernel_counts(store, run_b, bd_b)
    return Comparison(
        run_a=a,
        run_b=b,
        steps_a=0 if summary_a else sa,
        steps_b=0 if summary_b else sb,
        overall=overall,
        classes=_class_rows(ca, cb, sa, sb, summary_a, summary_b),
        ops=framework_ops(store, run_a, run_b, sa, sb),
        phases=phases(store, run_a, run_b, bd_a, bd_b),
        warnings=_warnings(a, b, bd_a, bd_b, counts_a, counts_b) + _phase_warnings(ca, cb),
        source_a=a["figures_source"],
        source_b=b["figures_source"],
        losses=bucket_losses(overall),
        counts_a=counts_a,
        counts_b=counts_b,
        memory=memory_block(store, run_a, run_b),
        framework_ops=framework_op_table(store, run_a, run_b, 0 if summary_a else sa, 0 if summary_b else sb),
    )


def _op_device_time(store: Store, run_id: int) -> dict[str, tuple[int, int]]:
    """aten op -> (calls, device ns of the kernels it launched), through the flows host op → device task."""
    rows = (
        store.cursor()
        .execute(
            """WITH launched AS (
               SELECT l.src_tid, l.src_ts_ns, d.dur_ns FROM links l
               JOIN device_tasks d ON d.run_id = l.run_id AND d.start_ns = l.dst_ts_ns
               WHERE l.run_id = $run AND l.flow_cat IN ('async_npu', 'ac2g', 'async_cpu_to_gpu', 'async_gpu')),
             owner AS (
               SELECT arg_max(h.name, h.start_ns) AS op, any_value(x.dur_ns) AS dur_ns
               FROM launched x JOIN host_ops h ON h.run_id = $run AND h.tid = x.src_tid
                    AND x.src_ts_ns BETWEEN h.start_ns AND h.start_ns + h.dur_ns
               WHERE h.category IN ('cpu_op', 'Operator') AND h.name LIKE 'aten::%'
               GROUP BY x.src_tid, x.src_ts_ns)
           SELECT op, count(*), sum(dur_ns) FROM owner GROUP BY op""",
            {"run": run_id},
        )
        .fetchall()
    )
    return {op: (int(n), int(ns)) for op, n, ns in rows}


def framework_ops(store: Store, run_a: int, run_b: int, sa: int, sb: int, limit: int = 30) -> list[OpRow]:
    oa, ob = _op_device_time(store, run_a), _op_device_time(store, run_b)
    rows = []
    for op in set(oa) & set(ob):
        (na, ta), (nb, tb) = oa[op], ob[op]
        rows.append(
            OpRow(op, na, nb, ta, tb, (ta / sa) / (tb / sb) if tb else None, (ta / sa - tb / sb) / 1e6)
        )
    rows.sort(key=lambda r: (-r.delta_per_step_ms, r.op))  # by name on a tie: set order varies per process
    return rows[:limit]


def step_phases(store: Store, run_id: int, platform: str, bd: Breakdown) -> dict[int | None, str]:
    """Each step's phase, told by its attention kernels: prefill, decode, mixed (both), or unknown (neither)."""
    if not bd.steps:
        return {}
    windows = ", ".join(
        f"({'NULL' if s.step is None else s.step}, {s.start_ns}, {s.end_ns})" for s in bd.steps
    )
    cls = op_classes.sql_case("name", "op", platform)
    rows = (
        store.cursor()
        .execute(
            f"""WITH w(step, lo, hi) AS (VALUES {windows}),
             names AS (SELECT DISTINCT w.step, t.name, t.op FROM tasks t JOIN w ON t.start_ns >= w.lo AND t.start_ns < w.hi
                       WHERE t.run_id = $run AND t.kind NOT IN ('COMMUNICATION', 'COMM_TASK', 'MEMCPY', 'SYNC')),
             classed AS (SELECT step, {cls.replace("op_type", "op")} AS c FROM names)
            SELECT step, bool_or(c = 'attention_prefill'), bool_or(c = 'attention_decode') FROM classed GROUP BY step""",
            {"run": run_id},
        )
        .fetchall()
    )
    found = {
        step: ("mixed" if p and d else "prefill" if p else "decode" if d else "unknown")
        for step, p, d in rows
    }
    return {s.step: found.get(s.step, "unknown") for s in bd.steps}


def phases(store: Store, run_a: int, run_b: int, bd_a: Breakdown, bd_b: Breakdown) -> list[dict[str, Any]]:
    """Device time per step in each phase on both runs (phases told by the steps' attention kernels)."""
    pa = step_phases(store, run_a, _platform(_run(store, run_a)), bd_a)
    pb = step_phases(store, run_b, _platform(_run(store, run_b)), bd_b)
    out = []
    for phase in ("prefill", "decode", "mixed", "unknown"):
        sa = [s for s in bd_a.steps if pa.get(s.step) == phase]
        sb = [s for s in bd_b.steps if pb.get(s.step) == phase]
        if not sa and not sb:
            continue
        ma = sum(s.e2e_ns for s in sa) / len(sa) / 1e6 if sa else None
        mb = sum(s.e2e_ns for s in sb) / len(sb) / 1e6 if sb else None
        out.append(
            {
                "phase": phase,
                "steps_a": len(sa),
                "steps_b": len(sb),
                "per_step_a_ms": ma,
                "per_step_b_ms": mb,
                "ratio": (ma / mb) if ma and mb else None,
                "delta_per_step_ms": (ma - mb) if ma is not None and mb is not None else None,
            }
        )
    return out
