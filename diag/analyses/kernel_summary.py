"""A run known only from an ``nsys stats`` kernel summary (``kernel_stats``, report ``cuda_gpu_kern_sum``).

The most common thing CUDA users export is ``nsys stats --report cuda_gpu_kern_sum``: one row per kernel name with
its calls and total time, no events.  Such a run has no device tasks, no steps and no timeline; its op classes
come from the summary's names, classified now by the current rules (not the op class stored at parse time).
"""

from __future__ import annotations

from diag.analyses import op_classes
from diag.store import Store

SUMMARY_REPORTS = ("cuda_gpu_kern_sum",)  # nsys stats reports with one row per kernel name: calls, total time
TIMELINE, KERNEL_SUMMARY = "timeline", "kernel_summary"  # where a run's figures come from

__all__ = ["KERNEL_SUMMARY", "SUMMARY_REPORTS", "TIMELINE", "comparable_runs", "figures_source",
           "summary_class_totals"]  # fmt: skip


def figures_source(store: Store, run_id: int) -> str:
    """'timeline' when the run has device tasks, 'kernel_summary' when it has only an nsys stats kernel summary."""
    cur = store.cursor()
    if cur.execute("SELECT count(*) FROM device_tasks WHERE run_id = ?", [run_id]).fetchall()[0][0]:
        return TIMELINE
    reports = ", ".join(f"'{r}'" for r in SUMMARY_REPORTS)
    n = cur.execute(
        f"SELECT count(*) FROM kernel_stats WHERE run_id = ? AND report IN ({reports})", [run_id]
    ).fetchall()[0][0]
    return KERNEL_SUMMARY if n else TIMELINE


def comparable_runs(store: Store) -> list[int]:
    """Runs that can be compared: with device tasks, or with an nsys stats kernel summary."""
    reports = ", ".join(f"'{r}'" for r in SUMMARY_REPORTS)
    rows = (
        store.cursor()
        .execute(
            f"""SELECT run_id FROM runs WHERE run_id IN (SELECT run_id FROM device_tasks)
                   OR run_id IN (SELECT run_id FROM kernel_stats WHERE report IN ({reports}))
                ORDER BY run_id"""
        )
        .fetchall()
    )
    return [r for (r,) in rows]


def summary_class_totals(store: Store, run_id: int, platform: str) -> dict[str, tuple[int, int]]:
    """op class -> (calls, total ns) from an nsys stats kernel summary, classified now by the current rules."""
    reports = ", ".join(f"'{r}'" for r in SUMMARY_REPORTS)
    name_case = op_classes.sql_case("name", None, platform)
    rows = (
        store.cursor()
        .execute(
            f"""WITH by_name AS (SELECT name, sum(count) AS n, sum(total_ns) AS ns FROM kernel_stats
                                 WHERE run_id = $run AND report IN ({reports}) GROUP BY name),
                 classed AS (SELECT {name_case} AS op_class, n, ns FROM by_name)
            SELECT op_class, sum(n), sum(ns) FROM classed GROUP BY op_class""",
            {"run": run_id},
        )
        .fetchall()
    )
    return {c: (int(n or 0), int(ns or 0)) for c, n, ns in rows}
