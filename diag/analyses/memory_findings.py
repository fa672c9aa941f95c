"""Memory findings from the figures of diag/analyses/memory.py: too little headroom, allocator fragmentation, one
operator holding the peak, OOM verdicts and a negative or tiny KV-cache budget.

Thresholds: rules/thresholds.toml [memory]; advice (the knob, per platform, and who owns the fix):
rules/memory_advice.toml.  A figure that is unknown (no capacity, no allocator series) makes no finding.
"""

from __future__ import annotations

import functools
import tomllib
from typing import Any

from diag.analyses.finding import Finding, thresholds
from diag.i18n import current_language
from diag.i18n import t as tr
from diag.store import RULES_DIR

ADVICE = RULES_DIR / "memory_advice.toml"
MIB = 1024**2
# The finding code of each memory rule (rules/finding_codes.toml); the titles are finding.<code>.title
CODES = {
    "headroom": "memory.headroom_low",
    "fragmentation": "memory.fragmentation",
    "one_op": "memory.one_op",
    "slow_alloc": "memory.slow_alloc",
    "oom_fragmentation": "memory.oom_fragmentation",
    "oom_out_of_memory": "memory.oom_out_of_memory",
    "oom_other_process": "memory.oom_other_process",
    "oom_unknown": "memory.oom_unknown",
    "kv_negative": "memory.kv_negative",
    "kv_tiny": "memory.kv_tiny",
}


@functools.cache
def memory_advice() -> dict[str, Any]:
    with open(ADVICE, "rb") as fh:
        return tomllib.load(fh)


def advice_for(key: str, platform: str | None) -> tuple[str, str]:
    """(suggestion, owner) of finding ``key`` on ``platform``; no platform known → no suggestion rather than
    another platform's."""
    rule = memory_advice()[key]
    if platform not in rule:
        return "", str(rule["owner"])
    return str(rule.get(f"{platform}_{current_language()}") or rule[platform]), str(rule["owner"])


def size_text(n: float | None) -> str:
    """A size in binary units as people read memory: 512 B, 12.3 MiB, 57.6 GiB; ``—`` when unknown."""
    if n is None:
        return "—"
    for unit, scale in (("GiB", 1024**3), ("MiB", MIB), ("KiB", 1024)):
        if abs(n) >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{int(n)} B"


def findings_from_figures(run_id: int | None, fig: dict[str, Any]) -> list[Finding]:
    t = thresholds()["memory"]
    out = _headroom(run_id, fig, t) + _fragmentation(run_id, fig, t) + _one_op(run_id, fig, t)
    return out + _slow_alloc(run_id, fig, t) + _oom(run_id, fig) + _kv(run_id, fig)


def _slow_alloc(run_id: int | None, fig: dict[str, Any], t: dict[str, Any]) -> list[Finding]:
    """msprof-analyze's memory rule: a device memory API whose calls take ``slow_alloc_total_us`` or more in all."""
    slow = [c for c in fig.get("alloc_calls") or [] if c["total_ns"] >= t["slow_alloc_total_us"] * 1000]
    if not slow:
        return []
    names = ", ".join(f"{c['name']} ×{c['count']} ({c['total_ns'] / 1e6:,.1f} ms)" for c in slow)
    title = tr("finding.memory.slow_alloc.title", calls=names)
    return [_finding(run_id, "slow_alloc", fig, "medium", title, {"calls": slow})]


def _finding(
    run_id: int | None, key: str, fig: dict[str, Any], severity: str, title: str, evidence: dict[str, Any]
) -> Finding:
    suggestion, owner = advice_for(key, fig.get("platform"))
    ts = fig.get("peak_ts_ns")
    return Finding(
        run_id,  # type: ignore[arg-type]  # None for a log without a run
        "memory",
        severity,
        title,
        0.0,  # not a share of device time
        0,
        {"kind": key, "owner": owner, **evidence},
        suggestion,
        ts,
        ts,
        code=CODES[key],
    )


def _headroom(run_id: int | None, fig: dict[str, Any], t: dict[str, Any]) -> list[Finding]:
    pct, cap = fig.get("capacity_pct"), fig.get("capacity_bytes")
    if pct is None or pct <= t["headroom_pct"]:
        return []
    title = tr(
        "finding.memory.headroom_low.title",
        peak=size_text(fig["peak_reserved_bytes"]),
        capacity=size_text(cap),
        pct=pct,
        headroom=fig["headroom_pct"],
        keep=100 - t["headroom_pct"],
    )
    evidence = {
        k: fig.get(k) for k in ("peak_reserved_bytes", "capacity_bytes", "capacity_from", "headroom_pct")
    }
    return [_finding(run_id, "headroom", fig, "high", title, evidence)]


def _fragmentation(run_id: int | None, fig: dict[str, Any], t: dict[str, Any]) -> list[Finding]:
    slack, pct = fig.get("slack_at_peak_bytes"), fig.get("slack_at_peak_pct")
    if slack is None or pct is None or pct < t["slack_pct"] or slack < t["slack_min_mib"] * MIB:
        return []
    title = tr(
        "finding.memory.fragmentation.title",
        slack=size_text(slack),
        pct=pct,
        reserved=size_text(fig.get("allocator_reserved_bytes")),
    )
    keys = ("slack_at_peak_bytes", "slack_at_peak_pct", "allocator_reserved_bytes", "allocator_series")
    return [_finding(run_id, "fragmentation", fig, "medium", title, {k: fig.get(k) for k in keys})]


def _one_op(run_id: int | None, fig: dict[str, Any], t: dict[str, Any]) -> list[Finding]:
    live = fig.get("peak_allocators") or []
    if not live:
        return []
    top = live[0]
    if top["share_pct"] < t["op_share_pct"] or top["bytes"] < t["op_min_mib"] * MIB:
        return []
    title = tr(
        "finding.memory.one_op.title", name=top["name"], size=size_text(top["bytes"]), pct=top["share_pct"]
    )
    return [_finding(run_id, "one_op", fig, "medium", title, {"op": top})]


def _oom(run_id: int | None, fig: dict[str, Any]) -> list[Finding]:
    """One finding per verdict, with how many OOMs had it and the figures of the first."""
    by_verdict: dict[str, list[dict[str, Any]]] = {}
    for o in fig.get("oom") or []:
        by_verdict.setdefault(o.get("verdict") or "unknown", []).append(o)
    out = []
    for verdict, events in by_verdict.items():
        first = events[0]
        key = f"oom_{verdict}" if f"oom_{verdict}" in memory_advice() else "oom_unknown"
        title = tr(f"finding.{CODES[key]}.title")
        if first.get("requested_bytes"):
            asked = "finding_text.oom_asked_many" if len(events) > 1 else "finding_text.oom_asked"
            title += tr(asked, size=size_text(first["requested_bytes"]), count=len(events))
        evidence = {"count": len(events), "first": first, "reason": first.get("verdict_reason")}
        # a log without a profile has no run platform: the OOM message's own (the rule that classified it)
        on = {**fig, "platform": fig.get("platform") or first.get("platform")}
        out.append(_finding(run_id, key, on, "high", title, evidence))
    return out


def _kv(run_id: int | None, fig: dict[str, Any]) -> list[Finding]:
    kv = fig.get("kv_cache")
    if not kv or kv.get("verdict") not in ("negative", "tiny"):
        return []
    budget, reason = kv.get("kv_cache_bytes"), kv.get("verdict_reason")
    key = "kv_negative" if kv["verdict"] == "negative" else "kv_tiny"
    said = f"finding.{CODES[key]}.title"
    if reason:
        title = tr(f"{said}_reason", reason=reason)
    else:
        title = tr(f"{said}_size", size=size_text(budget)) if budget is not None else tr(said)
    severity = "high" if key == "kv_negative" else "medium"
    return [_finding(run_id, key, fig, severity, title, {"kv_cache": kv})]
