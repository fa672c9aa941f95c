"""MoE expert parallelism: expert load per layer and phase, the hot experts, and what the hot rank costs its peers.

Inputs: ``expert_load`` (expert hotspot files, parsers/moe_hotspot.py) of the runs in scope, and — for a job the
grouping made of several ranks (diag.grouping) — each rank's device ops (``device_tasks``, classed by
rules/op_classes.csv: ``moe_gemm`` is GroupedMatmul / fused-MoE GEMM) and collectives (``comm_ops``).

* **per layer and phase**: experts, max and mean tokens per expert, max / mean, Gini and CV (population stddev /
  mean) of the load; hot experts: tokens ≥ ``[moe] hot_ratio`` × the layer's mean.
* **per rank** (job only): tokens of the experts it holds; GroupedMatmul time per step against the EP group's
  median; its all-to-all *wait* per step: Σ ``comm_ops.wait_ns`` of its all-to-all ops (communication.json),
  else its all-to-all / dispatch-combine kernel time per step beyond the fastest rank's.
* **GroupedMatmul tokens** (job only): msprof-analyze's ``ep_load_balance`` recipe (``Ascend/mstt``
  ``profiler/msprof_analyze/cluster_analyse/recipes/ep_load_balance``, ``prof_exports/ep_load_balance_ecport.py``)
  reads every ``GroupedMatmul``'s input shapes (COMPUTE_TASK_INFO.inputShapes of the profiler db) and takes, per
  op, the sum of the first dimension of all but the last two non-empty tensors (the token rows of x); per rank
  the sum over its ops.  Read here from ``kernels.input_shapes`` (kernel_details.csv / the db), per step.
* **finding** (job only, category ``moe``, owner ``config`` in the evidence): the hottest expert, the rank that
  holds it, the wait of the other ranks, and the time to gain if balanced: the hot rank's GroupedMatmul per step
  − the group's median.  Without a multi-rank job (one run, or runs merely sharing a folder) the load figures
  stand alone and no cross-rank claim is made.

Times are int ns per step; all sums run in DuckDB.
"""

from __future__ import annotations

import statistics
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from diag.analyses.finding import Finding, thresholds
from diag.analyses.op_classes import sql_case_by_platform
from diag.grouping import is_multi_rank, job_grouping
from diag.i18n import current_language
from diag.i18n import t as tr
from diag.store import Store, q

ADVICE = Path(__file__).resolve().parent.parent / "rules" / "moe_advice.toml"
_ALLTOALL = "regexp_matches(lower(op_name), 'all_?to_?all')"
# ep_load_balance's token count of one GroupedMatmul: Σ first dims of all but the last two non-empty tensors
_PARTS = "list_filter(string_split(input_shapes, ';'), lambda x: trim(x) <> '')"
_GMM_TOKENS = (
    f"CASE WHEN len({_PARTS}) > 1 THEN list_sum(list_transform(list_slice({_PARTS}, 1, len({_PARTS}) - 2), "
    "lambda x: TRY_CAST(split_part(trim(x), ',', 1) AS BIGINT))) END"
)


@dataclass
class MoeView:
    job_id: int | None
    run_id: int | None
    multi_rank: bool
    layers: list[dict[str, Any]] = field(default_factory=list)
    ranks: list[dict[str, Any]] = field(default_factory=list)
    rank_tokens: list[dict[str, Any]] = field(default_factory=list)  # per phase and rank
    findings: list[Finding] = field(default_factory=list)
    wait_source: str | None = None  # comm_ops | kernel_excess | None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["findings"] = [f.to_json() for f in self.findings]
        return out


def moe_view(store: Store, job_id: int | None = None, run_id: int | None = None) -> MoeView:
    """The MoE figures of a job (``job_id``) or of one run (``run_id``)."""
    cur = store.cursor()
    if run_id is not None:
        runs = [r[0] for r in q(cur, "SELECT run_id FROM runs WHERE run_id = ?", [run_id])]
        if not runs:
            raise LookupError(f"no run {run_id}")
        view = MoeView(None, run_id, False)
    else:
        runs = [r[0] for r in q(cur, "SELECT run_id FROM runs WHERE job_id = ? ORDER BY run_id", [job_id])]
        if not runs:
            raise LookupError(f"no job {job_id}")
        view = MoeView(job_id, None, is_multi_rank(job_grouping(cur, job_id)))
    t = thresholds()["moe"]
    view.layers = _layers(cur, runs, t)
    view.rank_tokens = _rank_tokens(cur, runs)
    if view.multi_rank:
        view.ranks, view.wait_source = _ranks(cur, runs, view.rank_tokens)
    view.findings = _findings(cur, view, t)
    return view


def _load_cte(runs: list[int]) -> str:
    ids = ", ".join(str(int(r)) for r in runs)
    return f"""e AS (SELECT phase, layer, expert, min(rank) AS rank, sum(tokens) AS tokens FROM expert_load
                    WHERE run_id IN ({ids}) GROUP BY ALL)"""


def _layers(cur, runs: list[int], t: dict[str, Any]) -> list[dict[str, Any]]:
    sql = f"""WITH {_load_cte(runs)},
      s AS (SELECT *, row_number() OVER w AS i, count(*) OVER p AS n, sum(tokens) OVER p AS total,
                   avg(tokens) OVER p AS mean
            FROM e WINDOW p AS (PARTITION BY phase, layer), w AS (PARTITION BY phase, layer ORDER BY tokens))
      SELECT phase, layer, count(*), max(tokens), avg(tokens),
             CASE WHEN sum(tokens) > 0 THEN 2 * sum(i * tokens) / (any_value(n) * sum(tokens))
                  - (any_value(n) + 1) / any_value(n) END,
             CASE WHEN avg(tokens) > 0 THEN stddev_pop(tokens) / avg(tokens) END,
             list({{'expert': expert, 'rank': rank, 'tokens': tokens, 'ratio': tokens / mean}}
                  ORDER BY tokens DESC, expert) FILTER (WHERE mean > 0 AND tokens >= $hot * mean)
      FROM s GROUP BY phase, layer ORDER BY phase DESC, layer"""
    out = []
    for phase, layer, n, mx, mean, gini, cv, hot in q(cur, sql, {"hot": t["hot_ratio"]}):
        out.append({
            "layer": layer, "phase": phase, "experts": n, "max_tokens": int(mx), "mean_tokens": float(mean),
            "max_over_mean": float(mx) / float(mean) if mean else None,
            "gini": float(gini) if gini is not None else None, "cv": float(cv) if cv is not None else None,
            "hot": [{**h, "tokens": int(h["tokens"]), "ratio": float(h["ratio"])} for h in (hot or [])][: t["max_hot"]],
        })  # fmt: skip
    return out


def _rank_tokens(cur, runs: list[int]) -> list[dict[str, Any]]:
    sql = f"""WITH {_load_cte(runs)}
      SELECT phase, rank, sum(tokens) FROM e WHERE rank IS NOT NULL GROUP BY ALL ORDER BY phase DESC, rank"""
    return [{"phase": p, "rank": r, "tokens": int(n)} for p, r, n in q(cur, sql)]


def _ranks(
    cur, runs: list[int], rank_tokens: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], str | None]:
    """Per rank of the job: GroupedMatmul and all-to-all per step (device_tasks, comm_ops)."""
    ids = ", ".join(str(int(r)) for r in runs)
    klass = sql_case_by_platform("d.name", "r.platform", "d.op_type")
    rows = q(cur, f"""
      WITH d AS (SELECT d.run_id, d.step, d.dur_ns, {klass} AS class FROM device_tasks d JOIN runs r USING (run_id)
                 WHERE d.run_id IN ({ids})),
           k AS (SELECT run_id, greatest(count(DISTINCT step), 1) AS steps,
                        sum(dur_ns) FILTER (WHERE class = 'moe_gemm') AS gmm,
                        sum(dur_ns) FILTER (WHERE class IN ('moe_alltoall', 'moe_dispatch_combine')) AS a2a
                 FROM d GROUP BY run_id),
           t AS (SELECT run_id, sum(tok) / greatest(count(DISTINCT step), 1) AS tokens
                 FROM (SELECT run_id, step, {_GMM_TOKENS} AS tok FROM kernels
                       WHERE run_id IN ({ids}) AND (op_type = 'GroupedMatmul' OR name ILIKE '%groupedmatmul%'))
                 GROUP BY run_id),
           c AS (SELECT run_id, sum(wait_ns) AS wait, greatest(count(DISTINCT step), 1) AS steps
                 FROM comm_ops WHERE run_id IN ({ids}) AND {_ALLTOALL} GROUP BY run_id)
      SELECT r.run_id, r.rank::INTEGER, k.gmm / k.steps, k.a2a / k.steps, c.wait / c.steps, t.tokens
      FROM runs r LEFT JOIN k USING (run_id) LEFT JOIN c USING (run_id) LEFT JOIN t USING (run_id)
      WHERE r.run_id IN ({ids}) ORDER BY r.rank, r.run_id""")  # fmt: skip
    tokens: dict[int, int] = {}
    for x in rank_tokens:
        tokens[x["rank"]] = tokens.get(x["rank"], 0) + x["tokens"]
    gmms = [g for _, _, g, *_ in rows if g is not None]
    median = statistics.median(gmms) if gmms else None
    has_comm = any(w is not None for *_, w, _ in rows)
    a2as = [a for _, _, _, a, *_ in rows if a is not None]
    fastest = min(a2as) if a2as else None
    out = []
    for run_id, rank, gmm, a2a, wait, gmm_tokens in rows:
        excess = a2a - fastest if a2a is not None and fastest is not None else None
        w = wait if has_comm else excess
        out.append({
            "rank": rank, "run_id": run_id, "tokens": tokens.get(rank),
            "grouped_matmul_ns": round(gmm) if gmm is not None else None,
            "vs_median_pct": 100.0 * (gmm - median) / median if gmm is not None and median else None,
            "alltoall_wait_ns": round(w) if w is not None else None,
            "grouped_matmul_tokens": round(gmm_tokens) if gmm_tokens is not None else None,
        })  # fmt: skip
    source = "comm_ops" if has_comm else ("kernel_excess" if a2as else None)
    return out, source


def advice(platform: str) -> tuple[str, str]:
    with open(ADVICE, "rb") as fh:
        entry = tomllib.load(fh)["imbalance"]
    platform = platform if platform in entry else "ascend"
    return entry.get(f"{platform}_{current_language()}") or entry[platform], entry["owner"]


def ranges(ranks: list[int]) -> str:
    """``[0, 1, 2, 4, 6, 7]`` → ``0–2, 4, 6–7``."""
    runs: list[list[int]] = []
    for r in sorted(ranks):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in runs)


def _hottest(layers: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    best = None
    for layer in layers:
        for h in layer["hot"]:
            if best is None or h["ratio"] > best[1]["ratio"]:
                best = (layer, h)
    return best


def _findings(cur, view: MoeView, t: dict[str, Any]) -> list[Finding]:
    hottest = _hottest(view.layers)
    if hottest is None:
        return []
    layer, hot = hottest
    by_rank = {r["rank"]: r for r in view.ranks}
    holder = by_rank.get(hot["rank"])
    gmms = [r["grouped_matmul_ns"] for r in view.ranks if r["grouped_matmul_ns"] is not None]
    if not view.multi_rank or holder is None or holder["grouped_matmul_ns"] is None or not gmms:
        return []  # the load figures stand alone: no cross-rank claim without a job and its ops
    if (holder["vs_median_pct"] or 0) < t["min_excess_pct"]:
        return []
    median = statistics.median(gmms)
    gain = holder["grouped_matmul_ns"] - median
    peers = [r for r in view.ranks if r["rank"] != hot["rank"] and r["alltoall_wait_ns"] is not None]
    wait = statistics.median(r["alltoall_wait_ns"] for r in peers) if peers else None
    platform = q(cur, "SELECT platform FROM runs WHERE run_id = ?", [holder["run_id"]])[0][0]
    text, owner = advice(platform)
    key = "finding.moe.expert_imbalance"
    title = tr(f"{key}.title", expert=hot["expert"], layer=layer["layer"], ratio=hot["ratio"], rank=hot["rank"],
               phase=layer["phase"] or tr("finding_text.moe_unknown_phase"))  # fmt: skip
    if wait is not None:
        title += tr(f"{key}.title_peers_wait", ranks=ranges([r["rank"] for r in peers]), wait_ms=wait / 1e6)
    span = q(cur, "SELECT end_ns - start_ns FROM runs WHERE run_id = ?", [holder["run_id"]])[0][0]
    n_steps = q(cur, "SELECT greatest(count(DISTINCT step), 1) FROM device_tasks WHERE run_id = ?",
                [holder["run_id"]])[0][0]  # fmt: skip
    impact_ns = round(gain * n_steps)  # the gain over the profiled steps
    evidence = {
        "owner": owner, "layer": layer["layer"], "phase": layer["phase"], "expert": hot["expert"],
        "rank": hot["rank"], "tokens": hot["tokens"], "ratio": hot["ratio"], "hot_run_id": holder["run_id"],
        "grouped_matmul_ns_per_step": holder["grouped_matmul_ns"], "median_grouped_matmul_ns_per_step": median,
        "gain_ns_per_step": gain, "peers_wait_ns_per_step": wait, "wait_source": view.wait_source,
    }  # fmt: skip
    pct = 100.0 * impact_ns / span if span else 0.0
    sev = "high" if pct >= 10 else "medium" if pct >= 3 else "low"
    suggestion = tr(f"{key}.suggestion", advice=text, rank=hot["rank"], gain_ms=gain / 1e6)
    return [Finding(holder["run_id"], "moe", sev, title, pct, impact_ns, evidence, suggestion,
                    code="moe.expert_imbalance")]  # fmt: skip


def load_grid(store: Store, job_id: int, phase: str | None) -> list[tuple[int, int, int]]:
    """(layer, expert, tokens) of a job's expert load in ``phase``, for a layer × expert heatmap."""
    sql = """SELECT layer, expert, sum(tokens)::BIGINT FROM expert_load
             WHERE run_id IN (SELECT run_id FROM runs WHERE job_id = $job) AND phase IS NOT DISTINCT FROM $phase
             GROUP BY ALL ORDER BY layer, expert"""
    return [tuple(r) for r in q(store.cursor(), sql, {"job": job_id, "phase": phase})]
