"""What logs say about memory: each out-of-memory event's figures and what they point to, the start-up KV-cache
budget of vLLM / vLLM-Ascend, and the memory settings a log prints (HCCL_BUFFSIZE, npuMemSize, *_ALLOC_CONF).

The figures are read at ingest (``rules/log_figures.toml`` → ``log_records.figures``, bytes); which records are
OOM events and of what kind, and which lines state a setting, is ``rules/memory_logs.toml``; the OOM verdict's
thresholds are ``thresholds.toml`` ``[oom_advice]`` — one rule, which ``log_explain.oom_advice`` words as advice.

A log of no profile (``run_id`` NULL) is chosen by ``log_file`` (its path as ingested, or a tail of it); a log
attached to a run by ``run_id``; neither: every log of the store.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from diag.analyses.findings import thresholds
from diag.store import RULES_DIR, Store

MEMORY_LOGS = RULES_DIR / "memory_logs.toml"
GIB = 1 << 30
MIB = 1 << 20
OOM_KEYS = (
    "requested_bytes", "capacity_bytes", "allocated_bytes", "reserved_bytes", "free_bytes", "active_bytes",
    "process_in_use_bytes",
)  # fmt: skip
KV_KEYS = (
    "weights_bytes", "non_torch_bytes", "activation_peak_bytes", "kv_cache_bytes", "gpu_memory_utilization",
    "budget_bytes", "capacity_bytes", "num_blocks", "kv_cache_tokens", "max_model_len",
)  # fmt: skip
# figures that make a start-up memory profile (without one of them there is no KV-cache budget to speak of)
KV_CORE = ("kv_cache_bytes", "num_blocks", "kv_cache_tokens", "max_concurrency", "kv_cache_needed_bytes")


@lru_cache(maxsize=2)
def memory_rules(path: Path = MEMORY_LOGS) -> dict[str, Any]:
    with open(path, "rb") as fh:
        return tomllib.load(fh)


def size(n: float | None) -> str:
    """Bytes in GiB (MiB under 1 GiB), two decimals; ``—`` for none."""
    if n is None:
        return "—"
    return f"{n / GIB:.2f} GiB" if abs(n) >= GIB else f"{n / MIB:.2f} MiB"


# -- which records -------------------------------------------------------------------------------------------
def _scope(store: Store, run_id: int | None, log_file: str | None) -> tuple[str, list[Any]]:
    """SQL condition on ``l`` (log_records) / ``f`` (files) and its parameters: one run's logs, one log file
    (path as ingested or a tail of it: ``logs/plog.log``), both, or everything."""
    where, params = "", []
    if run_id is not None:
        where += " AND l.run_id = ?"
        params.append(int(run_id))
    if log_file:
        ids = file_ids(store, log_file)
        where += f" AND l.file_id IN ({', '.join('?' * len(ids))})"
        params.extend(ids)
    return where, params


def file_ids(store: Store, log_file: str) -> list[int]:
    """The ids of the log files whose path is ``log_file`` or ends with ``/log_file``; ValueError when none, or
    when a tail names several files of different paths (say more of the path)."""
    tail = log_file.replace("\\", "/").lstrip("./") if not log_file.startswith("/") else log_file
    rows = (
        store.cursor()
        .execute(
            """SELECT DISTINCT f.file_id, f.source FROM files f
               WHERE f.file_id IN (SELECT DISTINCT file_id FROM log_records)
                 AND (replace(f.source, '\\', '/') = ? OR ends_with(replace(f.source, '\\', '/'), '/' || ?)
                      OR ends_with(replace(f.source, '\\', '/'), '!' || ?))
               ORDER BY f.file_id""",
            [tail, tail, tail],
        )
        .fetchall()
    )
    if not rows:
        raise ValueError(f"no log file {log_file!r} in the store")
    if len({s for _, s in rows}) > 1:
        raise ValueError(f"{log_file!r} names {len({s for _, s in rows})} log files; give more of its path")
    return [int(i) for i, _ in rows]


def _kind_case(kinds: list[dict[str, Any]]) -> tuple[str, list[str]]:
    whens = " ".join("WHEN regexp_matches(l.raw, ?) THEN '" + k["id"] + "'" for k in kinds)
    return f"CASE {whens} ELSE 'other' END", [k["pattern"] for k in kinds]


def _oom_rows(store: Store, run_id: int | None, log_file: str | None) -> list[dict[str, Any]]:
    kinds = memory_rules()["oom_kind"]
    case, case_params = _kind_case(kinds)
    where, params = _scope(store, run_id, log_file)
    any_kind = "|".join(f"(?:{k['pattern']})" for k in kinds)
    cols = ("run_id", "file_id", "file", "record_no", "line", "ts_ns", "device_id", "rule_id", "raw", "figures",
            "kind")  # fmt: skip
    rows = (
        store.cursor()
        .execute(
            f"""SELECT l.run_id, l.file_id, f.source, l.record_no, l.line_no, l.ts_ns, l.device_id, l.rule_id,
                       l.raw, CAST(l.figures AS VARCHAR), {case}
                FROM log_records l JOIN files f USING (file_id)
                WHERE (l.category = 'oom' OR regexp_matches(l.raw, ?)){where}
                ORDER BY l.ts_ns NULLS LAST, l.file_id, l.record_no""",
            [*case_params, any_kind, *params],
        )
        .fetchall()
    )
    return [dict(zip(cols, r, strict=True)) for r in rows]


def _figures(text: str | None) -> dict[str, Any]:
    value = json.loads(text) if text else {}
    return value if isinstance(value, dict) else {}


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
    return "other_process", (
        f"Only {size(free)} of {size(cap)} was free at start-up, less than the {size(budget)} "
        "gpu_memory_utilization asks: another process (or an earlier engine) holds the device."
    )


def _platform(kind: str, rule_id: str | None) -> str | None:
    spec = next((k for k in memory_rules()["oom_kind"] if k["id"] == kind), None)
    if spec and spec.get("platform"):
        return spec["platform"]
    from diag.analyses.log_diagnosis import log_rules

    return log_rules()["rule"].get(rule_id or "", {}).get("platform")


def oom_events(store: Store, run_id: int | None = None, log_file: str | None = None) -> list[dict[str, Any]]:
    """One dict per out-of-memory record, in time order: its figures (bytes, None where the message does not
    say), ``verdict`` and ``verdict_reason``, ``kind`` (rules/memory_logs.toml), where it is."""
    out = []
    for row in _oom_rows(store, run_id, log_file):
        figures = _figures(row["figures"])
        verdict, reason = oom_verdict(figures, row["kind"])
        event: dict[str, Any] = {k: figures.get(k) for k in OOM_KEYS}
        if event["reserved_bytes"] is None:
            derived = OomFigures.of(figures).reserved
            event["reserved_bytes"] = int(derived) if derived is not None else None
        device = figures.get("device", row["device_id"])
        event |= {
            "verdict": verdict, "verdict_reason": reason, "platform": _platform(row["kind"], row["rule_id"]),
            "device": device, "file": row["file"], "line": row["line"], "ts_ns": row["ts_ns"],
            "run_id": row["run_id"], "kind": row["kind"],
        }  # fmt: skip
        out.append(event)
    return out


# -- the KV-cache budget ---------------------------------------------------------------------------------------
def _kv_rows(store: Store, run_id: int | None, log_file: str | None) -> list[tuple[Any, ...]]:
    """(file, line, ts_ns, figures, no_room) of every record that states a start-up memory figure or says there is
    no room for the cache, by file then position."""
    where, params = _scope(store, run_id, log_file)
    keys = (*KV_KEYS, *KV_CORE)
    has_key = " OR ".join(f"json_exists(l.figures, '$.{k}')" for k in dict.fromkeys(keys))
    no_room = memory_rules()["kv_cache"]["no_room_pattern"]
    return (
        store.cursor()
        .execute(
            f"""SELECT f.source, l.line_no, l.ts_ns, CAST(l.figures AS VARCHAR), regexp_matches(l.raw, ?)
                FROM log_records l JOIN files f USING (file_id)
                WHERE (l.figures IS NOT NULL AND ({has_key}) OR regexp_matches(l.raw, ?)){where}
                ORDER BY l.file_id, l.record_no""",
            [no_room, no_room, *params],
        )
        .fetchall()
    )


def _profiles(rows: list[tuple[Any, ...]]) -> dict[str, dict[str, Any]]:
    """Per file: each figure's last value, where the profile's last line is, and whether vLLM said no room."""
    per: dict[str, dict[str, Any]] = {}
    for source, line, ts, text, no_room in rows:
        p = per.setdefault(source, {"figures": {}, "line": line, "ts_ns": ts, "no_room": False})
        p["figures"] |= _figures(text)
        p["no_room"] = p["no_room"] or bool(no_room)
        if any(k in p["figures"] for k in KV_CORE) or no_room:
            p["line"], p["ts_ns"] = p.get("core_line") or line, ts
            p.setdefault("core_line", line)
    return {s: p for s, p in per.items() if p["no_room"] or any(k in p["figures"] for k in KV_CORE)}


def kv_cache(store: Store, run_id: int | None = None, log_file: str | None = None) -> dict[str, Any] | None:
    """The start-up memory profile of vLLM / vLLM-Ascend (weights, non-torch, activation peak, the KV-cache budget,
    its blocks / tokens) with a verdict (negative | tiny | ok; None when the log gives nothing to judge), from the
    latest log that states one; None when no log does."""
    profiles = _profiles(_kv_rows(store, run_id, log_file))
    if not profiles:
        return None
    source, p = max(profiles.items(), key=lambda sp: (sp[1]["ts_ns"] is not None, sp[1]["ts_ns"] or 0))
    fig = p["figures"]
    out: dict[str, Any] = {k: fig.get(k) for k in KV_KEYS}
    if out["budget_bytes"] is None and out["capacity_bytes"] is not None and out["gpu_memory_utilization"]:
        out["budget_bytes"] = round(out["capacity_bytes"] * out["gpu_memory_utilization"])
    if out["kv_cache_tokens"] is None and fig.get("max_concurrency") is not None and out["max_model_len"]:
        out["kv_cache_tokens"] = int(fig["max_concurrency"] * out["max_model_len"])
    out["max_concurrency"] = fig.get("max_concurrency")
    out["verdict"], out["verdict_reason"] = kv_verdict(fig, p["no_room"])
    out |= {"file": source, "line": p.get("core_line", p["line"])}
    return out


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
    said = [f"{size(kv)} of KV cache" if kv is not None else "", f"{tokens:,} tokens" if tokens else ""]
    said += [f"{conc:.2f}× max_model_len {max_len:,}" if conc is not None and max_len else ""]
    return "ok", "The KV cache holds " + ", ".join(s for s in said if s) + "."


# -- memory settings a log states ------------------------------------------------------------------------------
def memory_log_lines(
    store: Store, run_id: int | None = None, log_file: str | None = None
) -> list[dict[str, Any]]:
    """Each memory setting / fact a log prints (rules/memory_logs.toml ``[[setting]]``): HCCL_BUFFSIZE, MindIE
    npuMemSize, PYTORCH_NPU_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF, memory-pool init failures — ``setting`` (its
    name), ``value`` (as written), ``bytes`` (a size setting's bytes, else None), where it is."""
    where, params = _scope(store, run_id, log_file)
    out: list[dict[str, Any]] = []
    cur = store.cursor()
    for spec in memory_rules()["setting"]:
        rows = cur.execute(
            f"""SELECT l.run_id, f.source, l.line_no, l.ts_ns, regexp_extract(l.raw, ?, 1)
                FROM log_records l JOIN files f USING (file_id)
                WHERE regexp_matches(l.raw, ?){where} ORDER BY l.ts_ns NULLS LAST, l.file_id, l.record_no""",
            [spec["pattern"], spec["pattern"], *params],
        ).fetchall()
        for run, source, line, ts, value in rows:
            unit = int(spec.get("unit", 0))
            number = int(value) * unit if unit and value.lstrip("-").isdigit() and int(value) >= 0 else None
            out.append({"kind": spec["id"], "setting": spec["name"], "value": value, "bytes": number,
                        "file": source, "line": line, "ts_ns": ts, "run_id": run})  # fmt: skip
    return sorted(out, key=lambda r: (r["ts_ns"] is None, r["ts_ns"] or 0, r["file"], r["line"] or 0))
