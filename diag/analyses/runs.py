"""The runs in a store, with their spans and per-table counts (``diag runs``, the Runs page)."""

from __future__ import annotations

from typing import Any

from diag.store import Store

RUN_FIELDS = (
    "run_id",
    "job_id",
    "job",
    "name",
    "platform",
    "rank",
    "device",
    "source",
    "start_ns",
    "end_ns",
    "duration_ns",
    "profiler_level",
    "aic_metrics",
    "export_type",
    "torch_npu_version",
    "cann_version",
    "device_name",
    "versions",
    "files",
    "failed_files",
    "host_ops",
    "device_tasks",
    "kernels",
    "ai_cpu_tasks",
    "steps",
)


def list_runs(store: Store, run_id: int | None = None) -> list[dict[str, Any]]:
    cur = store.cursor()
    where = "WHERE r.run_id = $run" if run_id is not None else ""
    rows = cur.execute(
        f"""
        WITH files AS (SELECT run_id, count(*) FILTER (WHERE status <> 'failed') AS files,
                              count(*) FILTER (WHERE status = 'failed') AS failed_files
                       FROM files GROUP BY run_id),
             host AS (SELECT run_id, count(*) AS n FROM host_ops GROUP BY run_id),
             dev AS (SELECT run_id, count(*) AS n, count(*) FILTER (WHERE task_kind = 'AI_CPU') AS ai_cpu
                     FROM device_tasks GROUP BY run_id),
             ker AS (SELECT run_id, count(*) AS n FROM kernels GROUP BY run_id),
             st AS (SELECT run_id, count(DISTINCT step) AS n FROM
                      (SELECT run_id, step FROM steps UNION ALL SELECT run_id, step FROM step_trace) GROUP BY run_id)
        SELECT r.run_id, r.job_id, j.name AS job, r.name, r.platform, r.rank, r.device, r.source,
               r.start_ns, r.end_ns, r.end_ns - r.start_ns AS duration_ns, r.profiler_level, r.aic_metrics,
               r.export_type, r.torch_npu_version, r.cann_version, r.device_name, r.versions,
               coalesce(files.files, 0), coalesce(files.failed_files, 0), coalesce(host.n, 0),
               coalesce(dev.n, 0), coalesce(ker.n, 0), coalesce(dev.ai_cpu, 0), coalesce(st.n, 0)
        FROM runs r LEFT JOIN jobs j USING (job_id) LEFT JOIN files USING (run_id) LEFT JOIN host USING (run_id)
             LEFT JOIN dev USING (run_id) LEFT JOIN ker USING (run_id) LEFT JOIN st USING (run_id)
        {where}
        ORDER BY r.run_id""",
        {"run": run_id} if run_id is not None else {},
    ).fetchall()
    return [dict(zip(RUN_FIELDS, row, strict=True)) for row in rows]
