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
from diag.store import RULES_DIR

ADVICE = RULES_DIR / "memory_advice.toml"
MIB = 1024**2
OOM_TITLES = {
    "fragmentation": "OOM from fragmentation: the request fitted in memory the allocator already held",
    "out_of_memory": "OOM: the device was full",
    "other_process": "OOM: memory this process does not hold was in use (another process or buffers)",
    "unknown": "OOM whose figures do not tell the cause",
}


@functools.cache
def memory_advice() -> dict[str, Any]:
    with open(ADVICE, "rb") as fh:
        return tomllib.load(fh)


def advice_for(key: str, platform: str | None) -> tuple[str, str]:
    """(suggestion, owner) of finding ``key`` on ``platform``; no platform known → no suggestion rather than
    another platform's."""
    rule = memory_advice()[key]
    return (str(rule[platform]) if platform in rule else "", str(rule["owner"]))


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
    title = f"Slow device memory allocation / free on the host: {names}"
    return [_finding(run_id, "slow_alloc", fig, "medium", title, {"calls": slow})]


def _finding(
    run_id: int | None, key: str, fig: dict[str, Any], severity: str, title: str, evidence: dict[str, Any]
) -> Finding:
    text, owner = advice_for(key, fig.get("platform"))
    ts = fig.get("peak_ts_ns")
    return Finding(
        run_id,  # type: ignore[arg-type]  # None for a log without a run
        "memory",
        severity,
        title,
        0.0,  # not a share of device time
        0,
        {"kind": key, "owner": owner, **evidence},
        text,
        ts,
        ts,
    )


def _headroom(run_id: int | None, fig: dict[str, Any], t: dict[str, Any]) -> list[Finding]:
    pct, cap = fig.get("capacity_pct"), fig.get("capacity_bytes")
    if pct is None or pct <= t["headroom_pct"]:
        return []
    title = (
        f"Peak reserved {size_text(fig['peak_reserved_bytes'])} of {size_text(cap)} ({pct:.1f}%): headroom "
        f"{fig['headroom_pct']:.1f}%, under the {100 - t['headroom_pct']:.0f}% to keep"
    )
    evidence = {
        k: fig.get(k) for k in ("peak_reserved_bytes", "capacity_bytes", "capacity_from", "headroom_pct")
    }
    return [_finding(run_id, "headroom", fig, "high", title, evidence)]


def _fragmentation(run_id: int | None, fig: dict[str, Any], t: dict[str, Any]) -> list[Finding]:
    slack, pct = fig.get("slack_at_peak_bytes"), fig.get("slack_at_peak_pct")
    if slack is None or pct is None or pct < t["slack_pct"] or slack < t["slack_min_mib"] * MIB:
        return []
    title = (
        f"Allocator slack {size_text(slack)} ({pct:.1f}%) of the {size_text(fig.get('allocator_reserved_bytes'))} "
        f"reserved at the peak was never allocated at once: fragmentation"
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
    title = f"{top['name']} holds {size_text(top['bytes'])} ({top['share_pct']:.1f}%) of the allocations live at the peak"
    return [_finding(run_id, "one_op", fig, "medium", title, {"op": top})]


def _oom(run_id: int | None, fig: dict[str, Any]) -> list[Finding]:
    """One finding per verdict, with how many OOMs had it and the figures of the first."""
    by_verdict: dict[str, list[dict[str, Any]]] = {}
    for o in fig.get("oom") or []:
        by_verdict.setdefault(o.get("verdict") or "unknown", []).append(o)
    out = []
    for verdict, events in by_verdict.items():
        first = events[0]
        title = OOM_TITLES.get(verdict, OOM_TITLES["unknown"])
        if first.get("requested_bytes"):
            title += f" (asked for {size_text(first['requested_bytes'])}"
            title += f", {len(events)} OOMs)" if len(events) > 1 else ")"
        key = f"oom_{verdict}" if f"oom_{verdict}" in memory_advice() else "oom_unknown"
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
    said = f" ({size_text(budget)})" if budget is not None else ""
    if kv["verdict"] == "negative":
        title = f"No room for the KV cache — {reason}" if reason else f"No room for the KV cache{said}"
        return [_finding(run_id, "kv_negative", fig, "high", title, {"kv_cache": kv})]
    title = f"KV cache too small — {reason}" if reason else f"KV cache too small{said}"
    return [_finding(run_id, "kv_tiny", fig, "medium", title, {"kv_cache": kv})]
