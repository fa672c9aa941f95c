"""The serving figures of the deployment a postmortem is about: TTFT / TPOT / throughput verdicts beside the
device-time story, and the serving comparison beside the profile comparison with a CUDA baseline.

A serving result belongs to a profile run's deployment when ``diag.analyses.serving`` links them (same folder);
nothing is attached otherwise — a postmortem never borrows figures from another deployment.
"""

from __future__ import annotations

from typing import Any

from diag.analyses import serving, serving_compare
from diag.i18n import t
from diag.store import Store

# What a postmortem keeps of each judged serving run (the full row, with every printed field, is in `diag accept`).
KEPT = (
    "serving_id", "label", "tool", "platform", "hardware", "model", "dataset", "max_concurrency",
    "request_rate_rps", "successful_requests", "failed_requests", "ttft_mean_ms", "ttft_p99_ms",
    "tpot_mean_ms", "tpot_p99_ms", "output_throughput_tps", "verdict", "checks", "file",
)  # fmt: skip


def _fmt(value: Any, unit: str) -> str:
    if value is None:
        return t("pm.serving.na")
    return f"{value:,.2f} {unit}".rstrip()


def check_text(c: dict[str, Any]) -> str:
    stat = f" {c['statistic']}" if c.get("statistic") else ""
    limit = (
        t("pm.serving.limit", value=_fmt(c["threshold"], c["unit"]))
        if c.get("threshold") is not None
        else t("pm.serving.no_limit")
    )
    margin = (
        t("pm.serving.margin", margin=f"{c['margin_pct']:+.0f}%") if c.get("margin_pct") is not None else ""
    )
    return t("pm.serving.check", figure=c["figure"], stat=stat, value=_fmt(c.get("value"), c["unit"]), limit=limit,
             margin=margin)  # fmt: skip


def serving_story(
    store: Store, run_ids: list[int], baseline_run_id: int | None
) -> tuple[list[dict[str, Any]], dict[str, Any] | None, list[tuple[str, dict[str, Any]]]]:
    """(judged serving runs, serving comparison with the baseline's or None, impact statements as (text, evidence))."""
    judged = [{k: r.get(k) for k in KEPT} for r in serving.serving_for_runs(store, run_ids)]
    statements: list[tuple[str, dict[str, Any]]] = []
    for r in judged:
        failed = [c for c in r["checks"] or [] if c["verdict"] == "fail"]
        if failed:
            text = t("pm.serving.fails", label=r["label"], checks="; ".join(check_text(c) for c in failed))
            statements.append((text, {"figures": {"serving_id": r["serving_id"], "failed_checks": failed}}))
    comparison = None
    if baseline_run_id is not None:
        for run_id in run_ids:
            comparison = serving_compare.serving_comparison_for_runs(store, run_id, baseline_run_id)
            if comparison:
                break
    if comparison:
        for line in comparison["headline"]:
            statements.append(
                (
                    t("pm.serving.vs_baseline", line=line),
                    {"figures": {"a": comparison["a"], "b": comparison["b"]}},
                )
            )
    return judged, comparison, statements
