"""Cluster findings: slow rank, imbalance, slow link, slow rank transport, the rank to open next, and the wait
of a rank captured without its peers (``single_rank_wait``, a device finding of that run).

Thresholds in rules/thresholds.toml ``[cluster]``; severity from the impact's share of the median rank's total
step time (``[severity]``, as the device findings).  Used by ``diag.analyses.cluster``.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from diag.analyses import owners
from diag.analyses.finding import Finding, thresholds
from diag.grouping import is_multi_rank, job_grouping, rank_or_run
from diag.i18n import t as tr
from diag.store import Store, q


@dataclass
class ClusterFinding:
    category: str  # slow_rank | slow_link | slow_transport | imbalance
    severity: str  # high | medium | low
    title: str
    impact_ns: int
    impact_pct: float  # of the median rank's total step time
    rank: int | None
    evidence: dict[str, Any] = field(default_factory=dict)
    suggestion: str = ""
    owner: str | None = None  # code | config | stack | vendor | hardware; None: from rules/owners.toml
    owner_reason: str = ""
    owner_steps: list[dict[str, str]] = field(default_factory=list)
    code: str = ""  # the stable kind of finding (rules/finding_codes.toml)

    def to_json(self) -> dict[str, Any]:
        return owners.attach(asdict(self), lambda: owners.for_finding(self.category, self.evidence))


@dataclass
class OpenNext:
    rank: int
    run_id: int
    why: str


def robust_outliers(values: dict[int, float], t: dict[str, Any]) -> dict[int, dict[str, float]]:
    """Per key: excess over the median (ratio) and the modified z-score; the MAD floored (see thresholds)."""
    if len(values) < 3:
        return {}
    med = statistics.median(values.values())
    mad = statistics.median(abs(v - med) for v in values.values())
    mad = max(mad, t["mad_floor_ratio"] * abs(med), 1e-9)
    return {k: {"median": med, "ratio": (v - med) / med if med else 0.0, "z": 0.6745 * (v - med) / mad}
            for k, v in values.items()}  # fmt: skip


# -- findings ------------------------------------------------------------------------------------------------


def _severity(pct: float) -> str:
    sev = thresholds()["severity"]
    return "high" if pct >= sev["high_pct"] else "medium" if pct >= sev["medium_pct"] else "low"


def _pct(ns: float, ranks: list[dict[str, Any]]) -> float:
    med = statistics.median(r["step_ns"] for r in ranks) if ranks else 0
    return 100.0 * ns / med if med else 0.0


def pp_stage(meta: dict[int, dict[str, dict]]) -> dict[int, int]:
    """rank → pipeline stage (its group_rank in its ``pp`` group), where the metadata says."""
    out = {}
    for rank, info in meta.items():
        for g in info.values():
            if isinstance(g, dict) and g.get("group_name") == "pp" and isinstance(g.get("group_rank"), int):
                out[rank] = g["group_rank"]
    return out


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.1f} ms"


def rank_findings(
    ranks: list[dict[str, Any]], t: dict[str, Any], stage: dict[int, int]
) -> list[ClusterFinding]:
    metric = "computing_ns" if ranks and all(r["computing_ns"] is not None for r in ranks) else "step_ns"
    stats = robust_outliers({r["rank"]: r[metric] / max(r["steps"], 1) for r in ranks}, t)
    for r in ranks:
        s = stats.get(r["rank"])
        r["vs_median_pct"], r["robust_z"] = (100 * s["ratio"], s["z"]) if s else (None, None)
    if not stats:
        return []
    med = next(iter(stats.values()))["median"]
    high = [r for r in ranks if stats[r["rank"]]["ratio"] > t["slow_rank_ratio"]]
    slow = [r for r in high if stats[r["rank"]]["z"] > t["outlier_z"]]
    what = tr("finding_text.cluster_what." + ("computing" if metric == "computing_ns" else "step_time"))
    out = [_slow_rank(r, ranks, metric, med, what) for r in slow]
    if not slow and high and len(high) < len(ranks):
        out.append(_imbalance(high, ranks, metric, med, what, stage))
    return out


def _peer_wait(ranks: list[dict[str, Any]], rank: int) -> float | None:
    waits = [r["wait_ns"] for r in ranks if r["rank"] != rank and r.get("wait_ns") is not None]
    return statistics.median(waits) if waits else None


def _slow_rank(r: dict, ranks: list[dict], metric: str, med: float, what: str) -> ClusterFinding:
    excess = r[metric] - med * r["steps"]
    peers = _peer_wait(ranks, r["rank"])
    waited = peers is not None and r.get("wait_ns") is not None and peers > r["wait_ns"]
    pct = 100 * (r[metric] / r["steps"] - med) / med
    key = "finding.cluster.slow_rank"
    title = tr(f"{key}.title", rank=r["rank"], what=what, pct=pct, rank_ms=_ms(r[metric] / r["steps"]),
                 median_ms=_ms(med))  # fmt: skip
    if waited:
        title += tr(f"{key}.title_peers_wait", wait=_ms(peers - r["wait_ns"]))
    return ClusterFinding(
        "slow_rank", _severity(_pct(excess, ranks)), title, round(excess), _pct(excess, ranks), r["rank"],
        {"rank": r["rank"], "run_id": r["run_id"], "metric": metric, "rank_ns": r[metric], "steps": r["steps"],
         "median_per_step_ns": med, "excess_ns": round(excess), "excess_pct": pct, "robust_z": r["robust_z"],
         "rank_wait_ns": r.get("wait_ns"), "peers_median_wait_ns": peers, "peers_wait_for_it": waited},
        tr(f"{key}.suggestion", rank=r["rank"], what=what), code="cluster.slow_rank",
    )  # fmt: skip


def _imbalance(high, ranks, metric: str, med: float, what: str, stage: dict[int, int]) -> ClusterFinding:
    top = max(high, key=lambda r: r[metric] / r["steps"])
    excess = top[metric] - med * top["steps"]
    ids = sorted(r["rank"] for r in high)
    low = [r for r in ranks if r["rank"] not in ids]
    stages = {stage.get(i) for i in ids}
    pp = stages.pop() if len(stages) == 1 and None not in stages and len(stage) == len(ranks) else None
    key = "finding.cluster.imbalance"
    where = tr(f"{key}.title_stage", stage=pp) if pp is not None else ""
    mean_high = statistics.mean(r[metric] / r["steps"] for r in high)
    mean_low = statistics.mean(r[metric] / r["steps"] for r in low)
    names = ", ".join(str(r["rank"]) for r in low)
    title = tr(f"{key}.title", What=what.capitalize(), ranks=", ".join(map(str, ids)), where=where,
                 high_ms=_ms(mean_high), low_ms=_ms(mean_low), others=names)  # fmt: skip
    waits_low = [r["wait_ns"] / r["steps"] for r in low if r.get("wait_ns") is not None]
    waits_high = [r["wait_ns"] / r["steps"] for r in high if r.get("wait_ns") is not None]
    if waits_low and waits_high and statistics.mean(waits_low) > statistics.mean(waits_high):
        title += tr(f"{key}.title_waits", others=names, low_wait=_ms(statistics.mean(waits_low)),
                      high_wait=_ms(statistics.mean(waits_high)))  # fmt: skip
    return ClusterFinding(
        "imbalance", _severity(_pct(excess, ranks)), title, round(excess), _pct(excess, ranks), top["rank"],
        {"ranks": ids, "others": [r["rank"] for r in low], "metric": metric, "median_per_step_ns": med,
         "mean_high_ns": mean_high, "mean_low_ns": mean_low, "ratio": mean_high / mean_low if mean_low else None,
         "pp_stage": pp, "wait_ns": {r["rank"]: r.get("wait_ns") for r in ranks},
         "comm_not_overlapped_ns": {r["rank"]: r["comm_not_overlapped_ns"] for r in ranks}},
        tr(f"{key}.suggestion", ranks=", ".join(map(str, ids)), top=top["rank"]), code="cluster.imbalance",
    )  # fmt: skip


def link_findings(links, transports, ranks, t) -> list[ClusterFinding]:
    out = []
    for x in (x for x in links if x["slow"]):
        excess = x["transit_ns"] - x["size_bytes"] / x["median_gbps"]
        dst = (
            x["dst_rank"]
            if x["dst_rank"] is not None
            else tr("finding_text.link_local", local=x["dst_local"])
        )
        out.append(ClusterFinding(
            "slow_link", _severity(_pct(excess, ranks)),
            tr("finding.cluster.slow_link.title", src=x["src_rank"], dst=dst, transport=x["transport"],
                 label=x["label"], bw=x["bandwidth_gbps"], ratio_pct=100 * x["ratio"], median=x["median_gbps"]),
            round(excess), _pct(excess, ranks), x["src_rank"],
            {k: x[k] for k in ("group", "label", "src_rank", "dst_rank", "transport", "size_bytes", "transit_ns",
                               "bandwidth_gbps", "median_gbps", "ratio")} | {"excess_transit_ns": round(excess)},
            tr("finding.cluster.slow_link.suggestion", transport=x["transport"], src=x["src_rank"], dst=dst),
            code="cluster.slow_link",
        ))  # fmt: skip
    explained = {(x["src_rank"], x["transport"]) for x in links if x["slow"]}
    for x in transports:
        if (x["ratio"] is None or x["ratio"] >= t["slow_link_ratio"] or x["size_bytes"] < t["min_link_bytes"]
                or (x["compared"] or 0) < 3 or (x["rank"], x["transport"]) in explained):  # fmt: skip
            continue
        excess = x["transit_ns"] - x["size_bytes"] / x["median_gbps"]
        out.append(ClusterFinding(
            "slow_transport", _severity(_pct(excess, ranks)),
            tr("finding.cluster.slow_transport.title", rank=x["rank"], transport=x["transport"],
                 bw=x["bandwidth_gbps"], ratio_pct=100 * x["ratio"], median=x["median_gbps"]),
            round(excess), _pct(excess, ranks), x["rank"], dict(x) | {"excess_transit_ns": round(excess)},
            tr("finding.cluster.slow_transport.suggestion", rank=x["rank"], transport=x["transport"]),
            code="cluster.slow_transport",
        ))  # fmt: skip
    return out


def open_next(findings: list[ClusterFinding], ranks: list[dict[str, Any]]) -> OpenNext | None:
    run_of = {r["rank"]: r["run_id"] for r in ranks}
    for f in findings:
        if f.rank in run_of:
            return OpenNext(f.rank, run_of[f.rank], f.title)
    if not ranks:
        return None
    top = max(ranks, key=lambda r: r["step_ns"] / max(r["steps"], 1))
    return OpenNext(
        top["rank"],
        top["run_id"],
        tr("finding_text.cluster_no_outlier", ms=_ms(top["mean_step_ns"])),
    )


# -- one rank captured alone ---------------------------------------------------------------------------------

_RANK_WAIT_SQL = """
WITH f AS (SELECT min(file_id) AS file_id FROM comm_ops WHERE run_id = $run)
SELECT c.group_name, count(*), sum(c.wait_ns), sum(c.transit_ns)
FROM comm_ops c JOIN f USING (file_id) WHERE c.run_id = $run GROUP BY ALL ORDER BY 3 DESC NULLS LAST
"""
# The rank's own time to weigh its wait against: the exporter's step time, else its ProfilerStep spans.
_RANK_TIME_SQL = """
SELECT coalesce(
  (SELECT sum(coalesce(computing_ns, 0) + coalesce(comm_not_overlapped_ns, 0) + coalesce(free_ns, 0))
   FROM step_trace WHERE run_id = $run AND file_id = (SELECT min(file_id) FROM step_trace WHERE run_id = $run)),
  (SELECT sum(end_ns - start_ns) FROM steps WHERE run_id = $run))
"""


def single_rank_wait(store: Store, run_id: int, e2e_ns: int = 0) -> list[Finding]:
    """A rank captured without its peers that spent its collectives waiting: the slow party is another rank.

    Fires when the rank's wait / (wait + transit) over its collectives (communication.json) is at least
    ``[cluster] wait_ratio`` and the wait is at least ``wait_share_pct`` of the rank's own step time (else of its
    device time): a ratio alone misleads where transit times are near zero.  Only for a run that is in no
    multi-rank job (diag.grouping); with its peers captured, ``diag cluster`` compares the ranks instead.
    """
    cur = store.cursor()
    run = q(cur, "SELECT rank, job_id, metadata::VARCHAR FROM runs WHERE run_id = ?", [run_id])
    if not run or is_multi_rank(job_grouping(cur, run[0][1])):
        return []
    rank, _, metadata = run[0]
    rows = q(cur, _RANK_WAIT_SQL, {"run": run_id})
    wait = sum(int(r[2] or 0) for r in rows)
    transit = sum(int(r[3] or 0) for r in rows)
    t = thresholds()["cluster"]
    own = q(cur, _RANK_TIME_SQL, {"run": run_id})[0][0] or e2e_ns
    if not wait or not own or wait / (wait + transit) < t["wait_ratio"]:
        return []
    share = 100.0 * wait / own
    if share < t["wait_share_pct"]:
        return []
    ratio = wait / (wait + transit)
    who = rank_or_run(rank, run_id)
    groups = _groups_of(metadata, [r[0] for r in rows if r[0]])
    peers = sorted({m for g in groups for m in g["members"] if m != rank})
    key = "finding.communication.waited_for_peers"
    capture = (tr(f"{key}.title_capture_peers", peers=", ".join(map(str, peers))) if peers
               else tr(f"{key}.title_capture_others"))  # fmt: skip
    return [
        Finding(
            run_id, "communication", _severity(share),
            tr(f"{key}.title", Who=f"{who[0].upper()}{who[1:]}", ratio_pct=100 * ratio, wait=_ms(wait), share=share,
                 capture=capture), share, wait,
            {"rank": rank, "wait_ns": wait, "transit_ns": transit, "wait_ratio": ratio, "own_time_ns": int(own),
             "wait_share_pct": share, "collectives": sum(int(r[1]) for r in rows),
             "per_group": [{"group": g, "ops": int(n), "wait_ns": int(w or 0), "transit_ns": int(x or 0)}
                           for g, n, w, x in rows],
             "groups": groups, "thresholds": {"wait_ratio": t["wait_ratio"], "wait_share_pct": t["wait_share_pct"]},
             "peers_captured": False},
            tr(f"{key}.suggestion", who=who), code="communication.waited_for_peers",
        )
    ]  # fmt: skip


def _groups_of(metadata: str | None, group_ids: list[str]) -> list[dict[str, Any]]:
    """The groups the rank waited in, with their members, from its parallel_group_info where it has one."""
    try:
        info = (json.loads(metadata) or {}).get("parallel_group_info") if metadata else None
    except (ValueError, AttributeError):
        info = None
    if not isinstance(info, dict):
        return []
    named = {
        gid: g for gid, g in info.items() if isinstance(g, dict) and isinstance(g.get("global_ranks"), list)
    }
    # newer exports name the groups of communication.json by HCCL id, not by the metadata's keys: then every
    # group the metadata lists (the ranks this rank communicates with)
    picked = [gid for gid in group_ids if gid in named] or sorted(named)
    return [{"group": gid, "label": named[gid].get("group_name"), "members": sorted(named[gid]["global_ranks"])}
            for gid in picked]  # fmt: skip
