"""What an out-of-memory message's figures and a start-up memory profile point to: the verdicts of
``memory_logs`` (fragmentation | other_process | out_of_memory | unknown; negative | tiny | ok) with one sentence
each, and the predicates ``log_explain.oom_advice`` words as advice — one rule for both.  Pure functions of the
figures (bytes, as ``log_records.figures`` holds them); thresholds: ``thresholds.toml`` ``[oom_advice]`` and
``rules/memory_logs.toml`` ``[kv_cache]``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from diag.analyses.finding import thresholds
from diag.store import RULES_DIR

MEMORY_LOGS = RULES_DIR / "memory_logs.toml"
GIB = 1 << 30
MIB = 1 << 20


@lru_cache(maxsize=2)
def memory_rules(path: Path = MEMORY_LOGS) -> dict[str, Any]:
    """rules/memory_logs.toml: OOM kinds, settings, the KV-cache threshold."""
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def size(n: float | None) -> str:
    """Bytes in GiB (MiB under 1 GiB), two decimals; ``—`` for none."""
    if n is None:
        return "—"
    return f"{n / GIB:.2f} GiB" if abs(n) >= GIB else f"{n / MIB:.2f} MiB"


# -- the OOM verdict -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OomFigures:
    """An OOM message's figures in bytes (None: not stated); reserved is derived for CUDA's PyTorch ≥ 2.1
    wording (allocated + reserved-but-unallocated)."""

    requested: float | None
    capacity: float | None
    allocated: float | None
    reserved: float | None
    free: float | None

    @classmethod
    def of(cls, figures: dict[str, Any]) -> OomFigures:
        num = {
            k: float(v) for k, v in figures.items() if isinstance(v, int | float) and not isinstance(v, bool)
        }
        alloc, reserved = num.get("allocated_bytes"), num.get("reserved_bytes")
        if reserved is None and alloc is not None and "reserved_unallocated_bytes" in num:
            reserved = alloc + num["reserved_unallocated_bytes"]
        return cls(
            num.get("requested_bytes"), num.get("capacity_bytes"), alloc, reserved, num.get("free_bytes")
        )

    @property
    def held(self) -> float | None:
        """Reserved − allocated: cached by the allocator, not in use by tensors."""
        if self.allocated is None or self.reserved is None or self.reserved <= 0:
            return None
        return self.reserved - self.allocated

    @property
    def outside(self) -> float | None:
        """Capacity − reserved − free: device memory this process's allocator does not hold."""
        if self.capacity is None or self.reserved is None or self.free is None:
            return None
        return self.capacity - self.reserved - self.free


def fragmentation_likely(f: OomFigures, limits: dict[str, Any] | None = None) -> bool:
    """Reserved − allocated is at least ``fragmentation_min_share`` of reserved and could have served the request."""
    limits = limits if limits is not None else thresholds().get("oom_advice", {})
    held, share = f.held, float(limits.get("fragmentation_min_share", 0.10))
    return held is not None and held >= share * f.reserved and (f.requested is None or held >= f.requested)  # type: ignore[operator]


def outside_large(f: OomFigures, limits: dict[str, Any] | None = None) -> bool:
    """Capacity − reserved − free is at least ``outside_min_share`` of capacity."""
    limits = limits if limits is not None else thresholds().get("oom_advice", {})
    outside = f.outside
    return outside is not None and outside >= float(limits.get("outside_min_share", 0.25)) * f.capacity  # type: ignore[operator]


def oom_verdict(figures: dict[str, Any], kind: str = "other") -> tuple[str, str]:
    """(verdict, one sentence with the figures): fragmentation | other_process | out_of_memory | unknown."""
    if kind == "vllm_kv_cache":
        return _kv_event_verdict(figures)
    if kind == "vllm_startup_free":
        return _startup_free_verdict(figures)
    f = OomFigures.of(figures)
    frag, outside = fragmentation_likely(f), outside_large(f)
    if frag and (not outside or f.held >= f.outside):  # type: ignore[operator]
        return "fragmentation", (
            f"Reserved {size(f.reserved)} vs allocated {size(f.allocated)}: {size(f.held)} "
            f"({f.held / f.reserved:.1%} of reserved) is cached by the allocator but unused"  # type: ignore[operator]
            + (f", more than the {size(f.requested)} request." if f.requested is not None else ".")
        )
    if outside:
        return "other_process", (
            f"{size(f.outside)} of the {size(f.capacity)} device is neither free ({size(f.free)}) nor reserved by "
            f"this process's allocator ({size(f.reserved)}): another process, HCCL buffers or non-PyTorch "
            "allocations hold it."
        )
    if f.requested is not None and f.free is not None and f.requested <= f.free:
        return "unknown", (
            f"The {size(f.requested)} request is smaller than the {size(f.free)} free: the figures do not explain "
            "the failure (a per-process limit or another allocator may apply)."
        )
    if None not in (f.capacity, f.reserved, f.free, f.requested):
        return "out_of_memory", _full_reason(f)
    return "unknown", _unknown_reason(f)


def _full_reason(f: OomFigures) -> str:
    head = (
        f"{size(f.reserved)} of {size(f.capacity)} reserved"
        + (f" ({size(f.allocated)} allocated)" if f.allocated is not None else "")
        + f", {size(f.free)} free"
    )
    held = f.held
    if held is not None and held >= f.requested:  # type: ignore[operator]
        return (
            f"{head}: the device is full; the {size(held)} cached but unused ({held / f.reserved:.1%} of "  # type: ignore[operator]
            f"reserved) is too small a share to call fragmentation for the {size(f.requested)} request."
        )
    cached = f" plus the {size(held)} cached unused" if held is not None else ""
    return f"{head}: the {size(f.requested)} request is larger than the free memory{cached}."


def _unknown_reason(f: OomFigures) -> str:
    names = {"requested": f.requested, "capacity": f.capacity, "reserved": f.reserved, "free": f.free}
    missing = [k for k, v in names.items() if v is None]
    said = [f"{k} {size(v)}" for k, v in names.items() if v is not None]
    head = f"The message states {', '.join(said)}" if said else "The message states no memory figure"
    return f"{head}; {', '.join(missing)} not stated, so what holds the memory is not known."


def _kv_event_verdict(figures: dict[str, Any]) -> tuple[str, str]:
    kv, needed = figures.get("kv_cache_bytes"), figures.get("kv_cache_needed_bytes")
    if kv is not None and needed is not None:
        return "out_of_memory", (
            f"vLLM's KV-cache budget ({size(kv)}) is smaller than one request of max_model_len "
            f"{figures.get('max_model_len', '—')} needs ({size(needed)})."
        )
    if kv is not None:
        return "out_of_memory", (
            f"vLLM's KV-cache budget is {size(kv)}: the weights and activation peak take all the memory "
            "gpu_memory_utilization allows."
        )
    return "out_of_memory", "vLLM found no memory left for the KV-cache blocks under gpu_memory_utilization."


def _startup_free_verdict(figures: dict[str, Any]) -> tuple[str, str]:
    free, cap, budget = figures.get("free_bytes"), figures.get("capacity_bytes"), figures.get("budget_bytes")
    if free is None or cap is None:
        return "other_process", "Less device memory was free at start-up than gpu_memory_utilization asks."
    asked = f"the {size(budget)} " if budget is not None else "what "
    return "other_process", (
        f"Only {size(free)} of {size(cap)} was free at start-up, less than {asked}gpu_memory_utilization asks: "
        "another process (or an earlier engine) holds the device."
    )


def kv_verdict(fig: dict[str, Any], no_room: bool = False) -> tuple[str | None, str]:
    """negative | tiny | ok (None: nothing to judge) and one sentence with the figures."""
    kv, tokens, conc = fig.get("kv_cache_bytes"), fig.get("kv_cache_tokens"), fig.get("max_concurrency")
    max_len, needed, blocks = (
        fig.get("max_model_len"),
        fig.get("kv_cache_needed_bytes"),
        fig.get("num_blocks"),
    )
    min_requests = float(memory_rules()["kv_cache"]["min_requests"])
    if kv is not None and kv < 0:
        return "negative", (
            f"The KV-cache budget is {size(kv)}: the weights"
            + (f" ({size(fig['weights_bytes'])})" if fig.get("weights_bytes") is not None else "")
            + " and activations already exceed what gpu_memory_utilization allows"
            + (f" ({size(fig['budget_bytes'])})." if fig.get("budget_bytes") is not None else ".")
        )
    if no_room or blocks == 0:
        return "negative", "vLLM found no memory left for the KV-cache blocks under gpu_memory_utilization."
    if needed is not None and kv is not None and needed > kv:
        return "tiny", (
            f"One request of max_model_len {max_len or '—'} needs {size(needed)} of KV cache; {size(kv)} is "
            "available."
        )
    if conc is not None and conc < min_requests:
        return "tiny", f"The KV cache holds {conc:.2f}× one request of {max_len or '—'} tokens."
    if tokens is not None and max_len and tokens < min_requests * max_len:
        return "tiny", f"The KV cache holds {tokens:,} tokens, less than one request of {max_len:,} tokens."
    if kv is None and tokens is None and conc is None:
        return None, "The log states no KV-cache size to judge."
    said = [size(kv) if kv is not None else "", f"{tokens:,} tokens" if tokens else ""]
    said += [f"{conc:.2f}× max_model_len {max_len:,}" if conc is not None and max_len else ""]
    checked = (
        "" if max_len else "; the log states no max_model_len, so whether one request fits is not checked"
    )
    return "ok", "The KV cache holds " + ", ".join(s for s in said if s) + checked + "."
