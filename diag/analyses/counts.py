"""One count per thing: what a run's "device kernels", "operator types" and "kernels per step" mean, defined once.

* **device kernels** — distinct kernel executions on the device: compute kernels and collective ops, one per
  (name, start); copies, syncs and the hardware sub-tasks of a collective (Notify Wait, SDMA…) are not kernels.
* **operator types** — distinct op types among the device kernels: the kernel_details Type, else the type an
  aclnn name ends in (``aclnnCast_CastAiCore_Cast`` → ``Cast``), else the kernel name.
* **kernels per step** — device kernels ÷ the steps of the breakdown.

A device runs one task of a name at a given nanosecond, so a row that repeats another's (name, start) in
``device_tasks`` or ``kernels`` is a duplicate (a CSV written twice, an export appended to).  Every sum and count
reads ``unique_tasks_sql`` — each kernel once — and the duplicates are reported as a data-quality note (how many
rows, which file) rather than silently dropped in one place and counted twice in another.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from diag.analyses.stall_breakdown import Breakdown, breakdown
from diag.i18n import t
from diag.store import Store

NOT_KERNELS = ("SYNC", "COMM_TASK", "MEMCPY")
# scheduler entries that task_kinds.csv files under OTHER but that run no op (EVENT_RECORD place holders…)
MARKER_TASK_TYPES = ("PLACE_HOLDER_SQE", "PROFILING_ENABLE", "PROFILING_DISABLE", "STARS_COMMON")
# the op type of a task: its Type, else the last part of an aclnn name, the hcom_<op>_ prefix of a collective
# (kernel_details' Type for hcom_allReduce__271_0_1 is hcom_allReduce_), else the name
OP_TYPE_SQL = (
    "coalesce(op, CASE WHEN name LIKE 'aclnn%' THEN split_part(name, '_', -1) "
    "WHEN regexp_matches(name, '^hcom_[A-Za-z]+_') THEN regexp_extract(name, '^(hcom_[A-Za-z]+_)', 1) "
    "ELSE name END)"
)
KERNEL_FILTER = (
    f"kind NOT IN ({', '.join(repr(k) for k in NOT_KERNELS)}) "
    f"AND coalesce(task_type, '') NOT IN ({', '.join(repr(t) for t in MARKER_TASK_TYPES)})"
)
LABELS = {
    "device_kernels": "device kernels",
    "operator_types": "operator types",
    "kernels_per_step": "kernels per step",
}


# One kernels row per call (name, start) of run $run. Not picked by rowid (faster on a DuckDB table): a lake's
# kernels are a view over Parquet, which has no rowid (diag findings --lake, tests/test_ray_engine.py).
UNIQUE_KERNELS = "SELECT DISTINCT ON (name, start_ns) * FROM kernels WHERE run_id = $run"


def unique_tasks_sql() -> str:
    """The rows of the ``tasks`` view of run ``$run`` (a bound parameter), one per (name, start_ns)."""
    return "SELECT DISTINCT ON (name, start_ns) * FROM tasks WHERE run_id = $run"


@dataclass
class KernelCounts:
    run_id: int
    device_kernels: int
    operator_types: int
    steps: int
    kernels_per_step: float | None  # None without steps
    duplicates: list[dict[str, Any]] = field(default_factory=list)  # {table, file, rows}: extra rows per file

    @property
    def duplicate_rows(self) -> int:
        return sum(d["rows"] for d in self.duplicates)

    def note(self) -> str | None:
        """The data-quality note on duplicate rows, or None when there are none."""
        if not self.duplicates:
            return None
        where = t("counts.sep").join(t("counts.where", **d) for d in self.duplicates)
        return t("counts.duplicates", n=self.duplicate_rows, where=where)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "duplicate_rows": self.duplicate_rows, "note": self.note()}


def duplicate_rows(store: Store, run_id: int) -> list[dict[str, Any]]:
    """Per table and file: how many rows repeat another row's kernel (same name and start) in this run."""
    rows = (
        store.cursor()
        .execute(
            """WITH d AS (
                 SELECT 'device_tasks' AS tbl, file_id, count(*) - count(DISTINCT (name, start_ns)) AS extra
                 FROM device_tasks WHERE run_id = $run GROUP BY file_id
                 UNION ALL
                 SELECT 'kernels', file_id, count(*) - count(DISTINCT (name, start_ns))
                 FROM kernels WHERE run_id = $run GROUP BY file_id)
               SELECT d.tbl, coalesce(f.source, f.relpath, CAST(d.file_id AS VARCHAR)), d.extra
               FROM d LEFT JOIN files f USING (file_id) WHERE d.extra > 0 ORDER BY 1, 2""",
            {"run": run_id},
        )
        .fetchall()
    )
    return [{"table": t, "file": f, "rows": int(n)} for t, f, n in rows]


def kernel_counts(store: Store, run_id: int, bd: Breakdown | None = None) -> KernelCounts:
    """The run's device kernels, operator types and kernels per step, and its duplicate rows."""
    kernels, types = (
        store.cursor()
        .execute(
            f"SELECT count(*), count(DISTINCT {OP_TYPE_SQL}) FROM ({unique_tasks_sql()}) WHERE {KERNEL_FILTER}",
            {"run": run_id},
        )
        .fetchall()[0]
    )
    bd = bd or breakdown(store, run_id)
    steps = len(bd.steps) if bd.step_source != "none" else 0
    return KernelCounts(
        run_id,
        int(kernels),
        int(types),
        steps,
        kernels / steps if steps else None,
        duplicate_rows(store, run_id),
    )
