"""Serving figures side by side: a run (typically Ascend) against a baseline (typically CUDA), per figure both
values, A/B and the gap, the headline in both directions, and warnings where the two workloads differ."""

from __future__ import annotations

from typing import Any

import duckdb

from diag.analyses.serving import METRICS, STATS, _similar, load_thresholds, serving_runs
from diag.i18n import t
from diag.store import Store

# (column, unit, better) of the side-by-side comparison
COMPARED: tuple[tuple[str, str, str], ...] = (
    ("output_throughput_tps", "tok/s", "higher"),
    ("total_throughput_tps", "tok/s", "higher"),
    ("request_throughput_rps", "req/s", "higher"),
    ("peak_output_throughput_tps", "tok/s", "higher"),
    *((f"{m}_{s}_ms", "ms", "lower") for m in METRICS for s in STATS),
)


def _workload_warnings(a: dict[str, Any], b: dict[str, Any], tol: float) -> list[str]:
    warnings = []
    for key in ("model", "dataset"):
        what, unstated = t(f"serving.what.{key}"), t("serving.not_stated")
        if a[key] is None and b[key] is None:
            warnings.append(t("serving.neither_states", what=what))
        elif a[key] != b[key]:
            warnings.append(t("serving.differs", what=what, a=a[key] or unstated, b=b[key] or unstated))
    for key, what in (("input_tokens_mean", "input"), ("output_tokens_mean", "output")):
        if not _similar(a[key], b[key], tol):
            fa, fb = (f"{x:.0f}" if x is not None else "?" for x in (a[key], b[key]))
            warnings.append(t(f"serving.tokens_differ_{what}", a=fa, b=fb))
    for key in ("max_concurrency", "request_rate_rps"):
        if a[key] != b[key]:
            unlimited = t("serving.unlimited")
            va, vb = (x if x is not None else unlimited for x in (a[key], b[key]))
            warnings.append(t("serving.differs", what=t(f"serving.what.{key}"), a=va, b=vb))
    if a["platform"] and a["platform"] == b["platform"]:
        warnings.append(t("serving.same_platform", platform=a["platform"]))
    elif not (a["platform"] and b["platform"]):
        warnings.append(t("serving.platform_unknown"))
    return warnings


HEADLINE = {
    "output_throughput_tps": "output throughput",
    "ttft_mean_ms": "TTFT mean",
    "ttft_p99_ms": "TTFT p99",
    "tpot_mean_ms": "TPOT mean",
    "tpot_p99_ms": "TPOT p99",
}
SIDE_KEYS = (
    *("serving_id", "label", "file", "platform", "hardware", "model", "dataset", "tool", "max_concurrency"),
    *("request_rate_rps", "input_tokens_mean", "output_tokens_mean", "successful_requests", "linked_runs"),
)


def _figure(a: dict[str, Any], b: dict[str, Any], col: str, unit: str, better: str, gap: float) -> dict:
    va, vb = a.get(col), b.get(col)
    ratio = va / vb if va is not None and vb else None
    gap_pct = None if ratio is None else 100 * (ratio - 1)
    worse = gap_pct is not None and (gap_pct < -gap if better == "higher" else gap_pct > gap)
    return {"figure": col, "unit": unit, "better": better, "a": va, "b": vb, "ratio": ratio, "gap_pct": gap_pct,
            "worse": worse}  # fmt: skip


def _better(f: dict[str, Any], gap: float) -> bool:
    """A beats B on this figure by more than the gap (the mirror of ``worse``)."""
    if f["gap_pct"] is None:
        return False
    return f["gap_pct"] > gap if f["better"] == "higher" else f["gap_pct"] < -gap


def headline(figures: list[dict[str, Any]], gap: float) -> list[str]:
    """The headline figures in both directions: where A is worse, where A is better, or that they are level."""
    shown = [f for f in figures if f["figure"] in HEADLINE and f["gap_pct"] is not None]
    name = {f["figure"]: t(f"serving.headline.{f['figure']}") for f in shown}
    worse = [
        t("serving.reaches", pct=f"{100 * f['ratio']:.0f}")
        if f["better"] == "higher"
        else t("serving.worse", figure=name[f["figure"]], gap=f"{f['gap_pct']:+.0f}")
        for f in shown
        if f["worse"]
    ]
    better = [f"{name[f['figure']]} {f['gap_pct']:+.0f}%".replace("-", "−") for f in shown if _better(f, gap)]
    if not shown:
        return []
    listed, within = t("serving.list_sep").join(better), f"{gap:g}"
    if not better:
        return worse or [t("serving.level", gap=within)]
    if worse:
        return [*worse, t("serving.better_on", figures=listed)]
    if len(better) == len(shown):
        return [t("serving.better_on_all", figures=listed)]
    return [t("serving.better_on_some", n=len(better), of=len(shown), figures=listed, gap=within)]


def compare_serving(
    con: duckdb.DuckDBPyConnection | Store,
    serving_a: int,
    serving_b: int,
    rules: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A against B (B the baseline, typically CUDA): per figure both values, A/B and the gap; warnings."""
    rules = rules or load_thresholds()
    by_id = {r["serving_id"]: r for r in serving_runs(con, rules)}
    missing = [i for i in (serving_a, serving_b) if i not in by_id]
    if missing:
        raise KeyError(f"no serving run {missing[0]}")
    a, b = by_id[serving_a], by_id[serving_b]
    cfg = rules.get("compare", {})
    figures = [_figure(a, b, *spec, cfg.get("gap_pct", 5.0)) for spec in COMPARED]
    return {
        "a": {k: a[k] for k in SIDE_KEYS},
        "b": {k: b[k] for k in SIDE_KEYS},
        "figures": figures,
        "headline": headline(figures, cfg.get("gap_pct", 5.0)),
        "warnings": _workload_warnings(a, b, cfg.get("workload_tolerance_pct", 10.0)),
    }


def serving_comparison_for_runs(
    con: duckdb.DuckDBPyConnection | Store, run_a: int, run_b: int, rules: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Serving figures beside a profile comparison: the first serving run linked to each profile run, or None."""
    rules = rules or load_thresholds()
    rows = serving_runs(con, rules)
    side_a = [r for r in rows if run_a in r["linked_runs"]]
    side_b = [r for r in rows if run_b in r["linked_runs"]]
    if not side_a or not side_b:
        return None
    return compare_serving(con, side_a[0]["serving_id"], side_b[0]["serving_id"], rules)
