"""The kernel / op table of one run: ``nsys stats cuda_gpu_kern_sum`` and msprof ``op_statistic`` for both platforms.

One row per operator type (``by='op'``), kernel name (``'kernel'``) or op class (``'class'``): calls, total, mean,
min and max time, share of the run's kernel time, core type, distinct input shapes, dtypes, OP State and op class.

Where the figures come from, first that the run has:

* ``kernels`` — kernel_details.csv / op_summary (Ascend): every op with its Type, Accelerator Core, shapes, dtypes
  and OP State; the table's totals are that file's sums (each kernel once: a repeated (name, start) row is a
  duplicate, as in ``diag.analyses.counts``);
* ``tasks`` — device tasks of a trace (CUDA nsys / Kineto kernels, or an Ascend trace without kernel_details):
  the device kernels of ``diag.analyses.counts`` (no copies, syncs or collective sub-tasks); a CUDA kernel's core
  type is ``GPU``;
* ``kernel_stats`` — an nsys stats kernel summary (calls, total, min, max per kernel name; no shapes).

``share_pct`` is of the run's summed kernel time (every row of the table, overlapping streams counted in full),
the denominator of nsys stats' ``Time (%)`` and op_statistic's ``Ratio(%)``: the rows sum to 100.

With a baseline run (the CUDA run of the same workload), each row carries its op class's figures on the baseline:
``baseline_calls``, ``baseline_total_ns`` and ``ratio`` — the class's time per step on this run ÷ on the baseline
(per call when either side is a kernel summary, which has no steps), as the Compare page defines it.
"""

from __future__ import annotations

from typing import Any

from diag.analyses import op_classes
from diag.analyses.counts import KERNEL_FILTER, OP_TYPE_SQL, UNIQUE_KERNELS, unique_tasks_sql
from diag.analyses.kernel_summary import SUMMARY_REPORTS
from diag.analyses.stall_breakdown import breakdown
from diag.sql_text import FigureTable, OpClassPlatform, OpsBy
from diag.store import Store

BY = ("op", "kernel", "class")
KERNELS, TASKS, KERNEL_STATS, NONE = "kernels", "tasks", "kernel_stats", "none"
GPU = "GPU"  # the core type of a CUDA / ROCm kernel
COLUMNS = (
    "name", "calls", "total_ns", "mean_ns", "min_ns", "max_ns", "share_pct", "core_type", "shapes", "dtypes",
    "op_state", "max_shapes_per_step", "op_class",
)  # fmt: skip
BASELINE_COLUMNS = ("baseline_calls", "baseline_total_ns", "baseline_mean_ns", "ratio")

__all__ = ["BY", "COLUMNS", "figures_table", "op_table", "platform_of", "rows_sql"]


def platform_of(store: Store, run_id: int) -> str:
    """'cuda' (the GPU side of the op-class rules: CUDA and ROCm) or 'ascend'; ValueError for an unknown run."""
    rows = store.cursor().execute("SELECT platform FROM runs WHERE run_id = ?", [run_id]).fetchall()
    if not rows:
        raise ValueError(f"no run {run_id}")
    return "cuda" if rows[0][0] in ("cuda", "rocm") else "ascend"


def figures_table(store: Store, run_id: int) -> str:
    """Which table the run's op figures come from: kernels, tasks, kernel_stats or none (see the module doc)."""
    cur = store.cursor()
    for table, sql in (
        (KERNELS, "SELECT count(*) FROM kernels WHERE run_id = ?"),
        (TASKS, "SELECT count(*) FROM device_tasks WHERE run_id = ?"),
        (KERNEL_STATS, f"SELECT count(*) FROM kernel_stats WHERE run_id = ? AND report IN {_reports()}"),
    ):
        if cur.execute(sql, [run_id]).fetchall()[0][0]:
            return table
    return NONE


def _reports() -> str:
    return "(" + ", ".join(f"'{r}'" for r in SUMMARY_REPORTS) + ")"


def rows_sql(table: str, platform: str) -> str:
    """One row per kernel of run ``$run``: name, op, core, kind, n (calls), dur_ns (total), lo / hi (min / max
    ns), input_shapes, input_dtypes, op_state, step — whatever table the figures come from."""
    gpu = platform == "cuda"
    if table == KERNELS:
        core = f"'{GPU}'" if gpu else "coalesce(accelerator_core, task_kind)"
        return f"""SELECT name, op_type AS op, {core} AS core, task_kind AS kind, 1 AS n, dur_ns,
                          dur_ns AS lo, dur_ns AS hi, input_shapes, input_dtypes, op_state, step
                   FROM ({UNIQUE_KERNELS})"""
    if table == TASKS:
        core = f"'{GPU}'" if gpu else "coalesce(accelerator_core, kind)"
        return f"""SELECT name, op, {core} AS core, kind, 1 AS n, dur_ns, dur_ns AS lo, dur_ns AS hi,
                          input_shapes, input_dtypes, op_state, step
                   FROM ({unique_tasks_sql()}) WHERE {KERNEL_FILTER}"""
    if table == KERNEL_STATS:
        return f"""SELECT name, NULL AS op, '{GPU}' AS core, 'CUDA_KERNEL' AS kind, count AS n, total_ns AS dur_ns,
                          min_ns AS lo, max_ns AS hi, NULL AS input_shapes, NULL AS input_dtypes,
                          NULL AS op_state, NULL::BIGINT AS step
                   FROM kernel_stats WHERE run_id = $run AND report IN {_reports()}"""
    return """SELECT NULL AS name, NULL AS op, NULL AS core, NULL AS kind, 0 AS n, 0 AS dur_ns, 0 AS lo, 0 AS hi,
                     NULL AS input_shapes, NULL AS input_dtypes, NULL AS op_state, NULL::BIGINT AS step
              WHERE false"""


def _class_case(platform: str) -> str:
    """The op class of a (name, op, kind), as ``diag.analyses.compare.class_totals`` gives it."""
    return f"""CASE WHEN kind = 'COMMUNICATION' THEN {op_classes.communication_class_sql("name", "op", platform)}
                    WHEN kind = 'MEMCPY' AND lower(name) LIKE '%memset%' THEN 'memset'
                    WHEN kind = 'MEMCPY' THEN 'memcpy'
                    ELSE {op_classes.sql_case("name", "op", platform)} END"""


def _key(by: str) -> str:
    return {"op": OP_TYPE_SQL, "kernel": "name", "class": "op_class"}[by]


def _table_sql(table: FigureTable, platform: OpClassPlatform, by: OpsBy) -> str:
    return f"""
        WITH r AS ({rows_sql(table, platform)}),
             names AS (SELECT DISTINCT name, op, kind FROM r),
             classed AS (SELECT name, op, kind, {_class_case(platform)} AS op_class FROM names),
             k AS (SELECT r.*, c.op_class FROM r JOIN classed c
                   ON c.name = r.name AND c.op IS NOT DISTINCT FROM r.op AND c.kind IS NOT DISTINCT FROM r.kind),
             g AS (SELECT {_key(by)} AS key, * FROM k),
             per_step AS (SELECT key, max(n) AS most FROM (
                            SELECT key, step, count(DISTINCT input_shapes) AS n FROM g
                            WHERE step IS NOT NULL GROUP BY key, step) GROUP BY key)
        SELECT g.key, sum(n)::BIGINT, sum(dur_ns)::BIGINT, min(lo), max(hi),
               string_agg(DISTINCT core, '/' ORDER BY core),
               count(DISTINCT input_shapes),
               list_sort(list_distinct(flatten(list(string_split(input_dtypes, ';'))
                                               FILTER (WHERE input_dtypes IS NOT NULL)))),
               string_agg(DISTINCT op_state, '/' ORDER BY op_state),
               any_value(per_step.most),
               mode(op_class)
        FROM g LEFT JOIN per_step USING (key)
        GROUP BY g.key ORDER BY 3 DESC, 1"""


def _rows(store: Store, run_id: int, by: str) -> list[dict[str, Any]]:
    table, platform = figures_table(store, run_id), platform_of(store, run_id)
    got = store.cursor().execute(_table_sql(table, platform, by), {"run": run_id}).fetchall()
    whole = sum(r[2] for r in got) or 0
    out = []
    for key, calls, total, lo, hi, core, shapes, dtypes, state, most, cls in got:
        out.append(
            {
                "name": key,
                "calls": int(calls),
                "total_ns": int(total),
                "mean_ns": total / calls if calls else None,
                "min_ns": None if lo is None else int(lo),
                "max_ns": None if hi is None else int(hi),
                "share_pct": 100.0 * total / whole if whole else None,
                "core_type": core,
                "shapes": int(shapes) if shapes else None,  # None: no shapes stored (0 would read "none")
                "dtypes": ", ".join(d for d in dtypes if d) if dtypes else None,
                "op_state": state,
                "max_shapes_per_step": None if most is None or not shapes else int(most),
                "op_class": cls,
            }
        )
    return out


def _steps(store: Store, run_id: int) -> int | None:
    """Steps of the run's device-time breakdown (as the Compare page counts them); None for a kernel summary."""
    if figures_table(store, run_id) in (KERNEL_STATS, NONE):
        return None
    return max(1, len([s for s in breakdown(store, run_id).steps if s.e2e_ns > 0]))


def _with_baseline(
    store: Store, rows: list[dict[str, Any]], run_id: int, baseline_run_id: int, by: str
) -> list[dict[str, Any]]:
    ours = {r["name"]: r for r in (rows if by == "class" else _rows(store, run_id, "class"))}
    theirs = {r["name"]: r for r in _rows(store, baseline_run_id, "class")}
    steps_a, steps_b = _steps(store, run_id), _steps(store, baseline_run_id)
    per_call = steps_a is None or steps_b is None
    for r in rows:
        a, b = ours.get(r["op_class"] or r["name"]), theirs.get(r["op_class"] or r["name"])
        r["baseline_calls"] = b["calls"] if b else None
        r["baseline_total_ns"] = b["total_ns"] if b else None
        r["baseline_mean_ns"] = b["mean_ns"] if b else None
        ratio = None
        if a and b and b["total_ns"]:
            if per_call:
                ratio = a["mean_ns"] / b["mean_ns"] if b["mean_ns"] else None
            else:
                ratio = (a["total_ns"] / steps_a) / (b["total_ns"] / steps_b)
        r["ratio"] = ratio
    if by == "class":  # a class only the baseline has is a row too: time this run does not spend there
        rows += [_baseline_only(b) for name, b in theirs.items() if name not in ours]
    return rows


def _baseline_only(b: dict[str, Any]) -> dict[str, Any]:
    empty = dict.fromkeys(COLUMNS)
    return {**empty, "name": b["name"], "calls": 0, "total_ns": 0, "share_pct": 0.0, "op_class": b["name"],
            "baseline_calls": b["calls"], "baseline_total_ns": b["total_ns"], "baseline_mean_ns": b["mean_ns"],
            "ratio": None}  # fmt: skip


def op_table(
    store: Store, run_id: int, by: str = "op", baseline_run_id: int | None = None
) -> list[dict[str, Any]]:
    """The run's kernels grouped ``by`` op type, kernel name or op class, largest total first (module doc)."""
    if by not in BY:
        raise ValueError(f"by must be one of {', '.join(BY)}, not {by!r}")
    rows = _rows(store, run_id, by)
    if baseline_run_id is not None:
        platform_of(store, baseline_run_id)  # an unknown baseline is an error, not an empty column
        rows = _with_baseline(store, rows, run_id, baseline_run_id, by)
    return rows
