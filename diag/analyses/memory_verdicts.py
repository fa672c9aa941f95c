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
from diag.i18n import t
from diag.store import RULES_DIR

MEMORY_LOGS = RULES_DIR / "memory_logs.toml"
# the figures an OOM message may state, as the unknown verdict names them (catalog keys, one per figure)
_FIGURE_NAMES = {"requested": "memv.name.requested", "capacity": "memv.name.capacity",
                 "reserved": "memv.name.reserved", "free": "memv.name.free"}  # fmt: skip
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
        tail = (
            t("memv.fragmentation_more", requested=size(f.requested))
            if f.requested is not None
            else t("memv.fragmentation_end")
        )
        share = f"{f.held / f.reserved:.1%}"  # type: ignore[operator]
        return "fragmentation", t(
            "memv.fragmentation", reserved=size(f.reserved), allocated=size(f.allocated), held=size(f.held),
            share=share, tail=tail,
        )  # fmt: skip
    if outside:
        return "other_process", t(
            "memv.other_process", outside=size(f.outside), capacity=size(f.capacity), free=size(f.free),
            reserved=size(f.reserved),
        )  # fmt: skip
    if f.requested is not None and f.free is not None and f.requested <= f.free:
        return "unknown", t("memv.request_fits", requested=size(f.requested), free=size(f.free))
    if None not in (f.capacity, f.reserved, f.free, f.requested):
        return "out_of_memory", _full_reason(f)
    return "unknown", _unknown_reason(f)


def _full_reason(f: OomFigures) -> str:
    allocated = t("memv.full_head_allocated", allocated=size(f.allocated)) if f.allocated is not None else ""
    head = t("memv.full_head", reserved=size(f.reserved), capacity=size(f.capacity), allocated=allocated,
             free=size(f.free))  # fmt: skip
    held = f.held
    if held is not None and held >= f.requested:  # type: ignore[operator]
        share = f"{held / f.reserved:.1%}"  # type: ignore[operator]
        return t(
            "memv.full_small_cache", head=head, held=size(held), share=share, requested=size(f.requested)
        )
    cached = t("memv.full_cached", held=size(held)) if held is not None else ""
    return t("memv.full_larger", head=head, requested=size(f.requested), cached=cached)


def _unknown_reason(f: OomFigures) -> str:
    names = {"requested": f.requested, "capacity": f.capacity, "reserved": f.reserved, "free": f.free}
    missing = [k for k, v in names.items() if v is None]
    sep = t("memv.list_sep")
    said = [f"{t(_FIGURE_NAMES[k])} {size(v)}" for k, v in names.items() if v is not None]
    head = t("memv.unknown_said", said=sep.join(said)) if said else t("memv.unknown_none")
    return t("memv.unknown", head=head, missing=sep.join(t(_FIGURE_NAMES[k]) for k in missing))


def _kv_event_verdict(figures: dict[str, Any]) -> tuple[str, str]:
    kv, needed = figures.get("kv_cache_bytes"), figures.get("kv_cache_needed_bytes")
    if kv is not None and needed is not None:
        return "out_of_memory", t(
            "memv.kv_smaller_than_request", kv=size(kv), max_len=figures.get("max_model_len", "—"),
            needed=size(needed),
        )  # fmt: skip
    if kv is not None:
        return "out_of_memory", t("memv.kv_budget_taken", kv=size(kv))
    return "out_of_memory", t("memv.kv_no_room")


def _startup_free_verdict(figures: dict[str, Any]) -> tuple[str, str]:
    free, cap, budget = figures.get("free_bytes"), figures.get("capacity_bytes"), figures.get("budget_bytes")
    if free is None or cap is None:
        return "other_process", t("memv.startup_less")
    asked = (
        t("memv.startup_asked_budget", budget=size(budget)) if budget is not None else t("memv.startup_asked")
    )
    return "other_process", t("memv.startup_only", free=size(free), capacity=size(cap), asked=asked)


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
        weights = fig.get("weights_bytes")
        budget = fig.get("budget_bytes")
        return "negative", t(
            "memv.kv_negative", kv=size(kv),
            weights=t("memv.kv_negative_weights", weights=size(weights)) if weights is not None else "",
            budget=t("memv.kv_negative_budget", budget=size(budget)) if budget is not None else t("memv.kv_negative_end"),
        )  # fmt: skip
    if no_room or blocks == 0:
        return "negative", t("memv.kv_no_room")
    if needed is not None and kv is not None and needed > kv:
        return "tiny", t("memv.kv_one_request", max_len=max_len or "—", needed=size(needed), kv=size(kv))
    if conc is not None and conc < min_requests:
        return "tiny", t("memv.kv_concurrency", conc=f"{conc:.2f}", max_len=max_len or "—")
    if tokens is not None and max_len and tokens < min_requests * max_len:
        return "tiny", t("memv.kv_tokens", tokens=f"{tokens:,}", max_len=f"{max_len:,}")
    if kv is None and tokens is None and conc is None:
        return None, t("memv.kv_none")
    said = [
        size(kv) if kv is not None else "",
        t("memv.kv_tokens_said", tokens=f"{tokens:,}") if tokens else "",
    ]
    said += [
        t("memv.kv_conc_said", conc=f"{conc:.2f}", max_len=f"{max_len:,}")
        if conc is not None and max_len
        else ""
    ]
    checked = "" if max_len else t("memv.kv_unchecked")
    return "ok", t("memv.kv_ok", said=t("memv.list_sep").join(s for s in said if s), checked=checked)
