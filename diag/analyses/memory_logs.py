"""What logs say about memory: each out-of-memory event's figures and what they point to, the start-up KV-cache
budget of vLLM / vLLM-Ascend, and the memory settings a log prints (HCCL_BUFFSIZE, npuMemSize, *_ALLOC_CONF).

The figures are read at ingest (``rules/log_figures.toml`` → ``log_records.figures``, bytes); which records are
OOM events and of what kind, and which lines state a setting, is ``rules/memory_logs.toml``; the OOM verdict's
thresholds are ``thresholds.toml`` ``[oom_advice]`` (the rules: ``memory_verdicts``, which ``log_explain.oom_advice``
words as advice — one rule).

A log of no profile (``run_id`` NULL) is chosen by ``log_file`` (its path as ingested, or a tail of it); a log
attached to a run by ``run_id``; neither: every log of the store.
"""

from __future__ import annotations

import json
from typing import Any

from diag.analyses.memory_verdicts import (  # re-exported: the verdict rules live there, pure functions
    OomFigures,
    fragmentation_likely,
    kv_verdict,
    memory_rules,
    oom_verdict,
    outside_large,
    size,
)
from diag.store import Store

__all__ = [
    "OomFigures", "fragmentation_likely", "file_ids", "kv_cache", "kv_verdict", "memory_log_lines", "memory_rules",
    "oom_events", "oom_verdict", "outside_large", "size",
]  # fmt: skip

OOM_KEYS = (
    "requested_bytes", "capacity_bytes", "allocated_bytes", "reserved_bytes", "free_bytes", "active_bytes",
    "process_in_use_bytes",
)  # fmt: skip
KV_KEYS = (
    "weights_bytes", "non_torch_bytes", "activation_peak_bytes", "kv_cache_bytes", "gpu_memory_utilization",
    "budget_bytes", "capacity_bytes", "num_blocks", "kv_cache_tokens", "max_model_len",
)  # fmt: skip
# figures that make a start-up memory profile (a gpu_memory_utilization or max_model_len setting alone does not)
KV_CORE = (
    "kv_cache_bytes", "num_blocks", "kv_cache_tokens", "max_concurrency", "kv_cache_needed_bytes", "weights_bytes",
    "non_torch_bytes", "activation_peak_bytes", "budget_bytes", "non_kv_cache_bytes",
)  # fmt: skip


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
    tail = log_file.replace("\\", "/").removeprefix("./")
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
    """(file, line, ts_ns, figures, no_room) of every record that states a start-up memory figure (not an OOM
    message's: its capacity is the device's, not the profile's) or says there is no room for the cache."""
    where, params = _scope(store, run_id, log_file)
    keys = (*KV_KEYS, *KV_CORE)
    has_key = " OR ".join(f"json_exists(l.figures, '$.{k}')" for k in dict.fromkeys(keys))
    no_room = memory_rules()["kv_cache"]["no_room_pattern"]
    return (
        store.cursor()
        .execute(
            f"""SELECT f.source, l.line_no, l.ts_ns, CAST(l.figures AS VARCHAR), regexp_matches(l.raw, ?)
                FROM log_records l JOIN files f USING (file_id)
                WHERE (l.figures IS NOT NULL AND ({has_key}) AND NOT json_exists(l.figures, '$.requested_bytes')
                       OR regexp_matches(l.raw, ?)){where}
                ORDER BY l.file_id, l.record_no""",
            [no_room, no_room, *params],
        )
        .fetchall()
    )


def _profiles(rows: list[tuple[Any, ...]]) -> dict[str, dict[str, Any]]:
    """Per file that states a profile: each figure's last value, the profile's first line and last time, and
    whether vLLM said there is no room for the cache."""
    per: dict[str, dict[str, Any]] = {}
    for source, line, ts, text, no_room in rows:
        figures = _figures(text)
        p = per.setdefault(source, {"figures": {}, "line": None, "ts_ns": None, "no_room": False})
        p["figures"] |= figures
        if no_room or any(k in figures for k in KV_CORE):
            p["line"] = p["line"] if p["line"] is not None else line
            p["ts_ns"] = ts if ts is not None else p["ts_ns"]
            p["no_room"] = p["no_room"] or bool(no_room)
    return {s: p for s, p in per.items() if p["line"] is not None}


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
    out |= {"file": source, "line": p["line"]}
    return out


# -- memory settings a log states ------------------------------------------------------------------------------
def memory_log_lines(
    store: Store, run_id: int | None = None, log_file: str | None = None
) -> list[dict[str, Any]]:
    """Each memory setting / fact a log prints (rules/memory_logs.toml ``[[setting]]``): HCCL_BUFFSIZE, MindIE
    npuMemSize, PYTORCH_NPU_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF, memory-pool init failures — ``setting`` (its
    name), ``value`` (as written), ``bytes`` (a size setting's bytes, else None), where it is."""
    where, params = _scope(store, run_id, log_file)
    specs = {s["id"]: s for s in memory_rules()["setting"]}
    any_setting = "|".join(f"(?:{s['pattern']})" for s in specs.values())
    each = " UNION ALL ".join(
        "SELECT ?, run_id, source, line_no, ts_ns, file_id, record_no, regexp_extract(raw, ?, 1) FROM c "
        "WHERE regexp_matches(raw, ?)"
        for _ in specs
    )
    rows = (
        store.cursor()
        .execute(
            f"""WITH c AS (SELECT l.run_id, f.source, l.line_no, l.ts_ns, l.file_id, l.record_no, l.raw
                           FROM log_records l JOIN files f USING (file_id)
                           WHERE regexp_matches(l.raw, ?){where})
                SELECT * FROM ({each}) ORDER BY 5 NULLS LAST, 6, 7, 1""",
            [
                any_setting,
                *params,
                *(x for s in specs.values() for x in (s["id"], s["pattern"], s["pattern"])),
            ],
        )
        .fetchall()
    )
    out = []
    for kind, run, source, line, ts, _, _, value in rows:
        unit = int(specs[kind].get("unit", 0))
        number = int(value) * unit if unit and value.isdigit() else None
        out.append({"kind": kind, "setting": specs[kind]["name"], "value": value, "bytes": number,
                    "file": source, "line": line, "ts_ns": ts, "run_id": run})  # fmt: skip
    return out
