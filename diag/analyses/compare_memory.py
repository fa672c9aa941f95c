"""Memory of the two sides of a comparison, with the same definitions (``diag.analyses.memory.memory_summary``):
peak allocated, peak reserved, headroom against each device's own capacity, the allocator's slack peak and the
KV-cache budget. Capacities differ between an NPU and a GPU, so headroom is compared in %, peaks in bytes.
"""

from __future__ import annotations

from typing import Any

from diag.analyses import memory
from diag.store import Store

SIDE_KEYS = ("peak_allocated_bytes", "peak_reserved_bytes", "capacity_bytes", "capacity_from", "headroom_pct",
             "slack_peak_bytes", "peak_step")  # fmt: skip
# (key, label, unit) of the rows people read: sizes in GiB, headroom in %
ROWS = (
    ("peak_allocated_bytes", "peak allocated", "GiB"),
    ("peak_reserved_bytes", "peak reserved", "GiB"),
    ("capacity_bytes", "device capacity", "GiB"),
    ("headroom_pct", "headroom", "%"),
    ("slack_peak_bytes", "slack peak (reserved − allocated)", "GiB"),
    ("kv_cache_bytes", "KV-cache budget", "GiB"),
)
GIB = 1 << 30


def memory_side(store: Store, run_id: int) -> dict[str, Any]:
    """One side's memory figures (null where the run holds none)."""
    s = memory.memory_summary(store, run_id=run_id)
    kv = s.get("kv_cache") or {}
    out = {k: s.get(k) for k in SIDE_KEYS}
    out["platform"] = s.get("platform")
    out["kv_cache_bytes"] = kv.get("kv_cache_bytes")
    out["kv_budget_bytes"] = kv.get("budget_bytes")
    out["oom"] = len(s.get("oom") or [])
    return out


def memory_block(store: Store, run_a: int, run_b: int) -> dict[str, Any]:
    """``{"a": {...}, "b": {...}}`` — the ``memory`` key of ``diag compare --json``."""
    return {"a": memory_side(store, run_a), "b": memory_side(store, run_b)}


def has_memory(block: dict[str, Any] | None) -> bool:
    return bool(block) and any(
        block[side].get(k) is not None
        for side in ("a", "b")
        for k in ("peak_reserved_bytes", "kv_cache_bytes")
    )


def _value(side: dict[str, Any], key: str, unit: str) -> float | None:
    v = side.get(key)
    if v is None:
        return None
    return round(v / GIB, 2) if unit == "GiB" else round(v, 1)


def memory_rows(block: dict[str, Any]) -> list[tuple[str, float | None, float | None]]:
    """(figure with its unit, A, B) for the figures either side has."""
    out = []
    for key, label, unit in ROWS:
        a, b = _value(block["a"], key, unit), _value(block["b"], key, unit)
        if a is not None or b is not None:
            out.append((f"{label} ({unit})", a, b))
    return out
