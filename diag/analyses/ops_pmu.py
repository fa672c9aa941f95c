"""PMU and L2 figures per op: what kernel_details' PMU columns and l2_cache.csv say about how an op spends its time.

The PMU ratios (``aic_mac_ratio``: share of the AI Core's cycles the cube unit computed, ``aic_mte2_ratio``: moving
data in from global memory, ``aiv_vec_ratio``, ``cube_utilization(%)``…) are averaged over an op's calls weighted
by duration, so a long call counts for its length: the figure is the share of the op's time, as a reader of the
per-call columns would compute it.  L2 hit and victim rates (l2_cache.csv, matched to the kernel on stream, task id
and name) are plain means over the calls that have one.  Only Ascend kernel_details rows carry these: a run
without them gets no rows (the page says so) rather than zeros.
"""

from __future__ import annotations

from typing import Any

from diag.analyses.counts import OP_TYPE_SQL
from diag.store import Store

# ratios of the cycles or time of an op: the metrics that read as "where the time went" (PMU names as written)
RATIO_METRIC_SQL = "(metric LIKE '%\\_ratio' ESCAPE '\\' OR metric LIKE '%utilization(\\%)' ESCAPE '\\')"
L2_COLUMNS = ("l2_hit_rate", "l2_victim_rate")


def _key(by: str) -> str:
    if by not in ("op", "kernel"):
        raise ValueError(f"PMU figures are per op or per kernel, not by {by!r}")
    return OP_TYPE_SQL if by == "op" else "name"


def pmu_metrics(store: Store, run_id: int) -> list[str]:
    """The ratio metrics the run's kernel_details carries, in the file's order."""
    rows = (
        store.cursor()
        .execute(
            f"""SELECT metric FROM (SELECT unnest(names) AS metric, generate_subscripts(names, 1) AS i
                                   FROM pmu_columns WHERE run_id = ?)
                WHERE {RATIO_METRIC_SQL} GROUP BY metric ORDER BY min(i)""",
            [run_id],
        )
        .fetchall()
    )
    return [m for (m,) in rows]


def op_pmu(store: Store, run_id: int, by: str = "op") -> list[dict[str, Any]]:
    """Per op type (or kernel), largest total time first: each PMU ratio weighted by duration, and the mean L2
    hit / victim rates."""
    key = _key(by)
    metrics = pmu_metrics(store, run_id)
    got = (
        store.cursor()
        .execute(
            f"""WITH k AS (SELECT DISTINCT ON (name, start_ns) name, op_type AS op, start_ns, dur_ns, file_id,
                                  pmu_values, stream_id, hw_task_id FROM kernels WHERE run_id = $run),
                 m AS (SELECT {key} AS key, x.metric, x.value, k.dur_ns
                       FROM k JOIN pmu_columns c USING (file_id),
                            LATERAL (SELECT unnest(c.names) AS metric, unnest(k.pmu_values) AS value) x),
                 pmu AS (SELECT key, map(list(metric), list(v)) AS figures FROM (
                           SELECT key, metric, sum(value * dur_ns) / nullif(sum(dur_ns), 0) AS v FROM m
                           WHERE value IS NOT NULL AND {RATIO_METRIC_SQL} GROUP BY key, metric)
                         GROUP BY key),
                 l2 AS (SELECT {key} AS key, avg(l.hit_rate) AS hit, avg(l.victim_rate) AS victim
                        FROM k JOIN l2_cache l ON l.run_id = $run AND l.stream_id = k.stream_id
                             AND l.hw_task_id = k.hw_task_id AND l.op_name = k.name
                        GROUP BY key),
                 busy AS (SELECT {key} AS key, sum(dur_ns) AS ns FROM k GROUP BY key)
            SELECT coalesce(pmu.key, l2.key), pmu.figures, l2.hit, l2.victim
            FROM pmu FULL JOIN l2 USING (key) JOIN busy USING (key)
            ORDER BY busy.ns DESC, 1""",
            {"run": run_id},
        )
        .fetchall()
    )
    out = []
    for name, figures, hit, victim in got:
        row: dict[str, Any] = {"name": name}
        row.update({m: (figures or {}).get(m) for m in metrics})
        row.update({"l2_hit_rate": hit, "l2_victim_rate": victim})
        out.append(row)
    return out
