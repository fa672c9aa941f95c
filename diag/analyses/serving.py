"""Serving acceptance: each serving-benchmark run judged on TTFT, TPOT, throughput under load, failed requests
and peak device memory, against ``diag/rules/serving_thresholds.toml``; and CUDA vs Ascend side by side.

**Deployment linking.** A serving result and a profile run belong to the same deployment when the result file
lies in the run's own folder (``rank0_ascend_pt/bench.txt``: ``serving_runs.run_id``), or in the folder that
holds the run — the folder of the ``*_ascend_pt`` folders, or of a CUDA trace/export file
(``deploy/bench.txt`` beside ``deploy/rank0_ascend_pt/`` or ``deploy/h100.pt.trace.json``). The folder is
compared as resolved on disk when the ingest recorded it (``files.scope`` against ``jobs.job_key``), else as
the paths were given to ``diag ingest``.  A caller may also name the profile explicitly (``profile_run``).

Platform, hardware and device memory: as stated in the file, else from the device table
(``diag/rules/devices.toml`` through ``diag.devices``) matched against the file's path (``…/ascend_910b3_…txt``),
else from a linked profile (its platform, device name). Capacity is the device's nominal size (its datasheet GB).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import tomllib
from pathlib import Path
from typing import Any

import duckdb

from diag.analyses import memory
from diag.devices import Device, find_devices
from diag.i18n import t
from diag.store import RULES_DIR, Store, q

THRESHOLDS_PATH = RULES_DIR / "serving_thresholds.toml"
METRICS = ("ttft", "tpot", "itl", "e2el")
STATS = ("mean", "median", "p99")
GIB = 1 << 30


def thresholds_path(path: str | Path | None = None) -> Path:
    return Path(path or os.environ.get("DIAG_SERVING_THRESHOLDS") or THRESHOLDS_PATH)


def load_thresholds(path: str | Path | None = None) -> dict[str, Any]:
    with open(thresholds_path(path), "rb") as fh:
        rules = tomllib.load(fh)
    rules["_path"] = str(thresholds_path(path))
    return rules


def _cursor(con: duckdb.DuckDBPyConnection | Store) -> duckdb.DuckDBPyConnection:
    return con.cursor() if isinstance(con, Store) else con


# -- devices and platforms -----------------------------------------------------------------------------------
def _word(pattern: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![a-z0-9])(?:\d+x)?(?:{pattern})(?![a-z0-9])")


def match_devices(text: str | None, rules: dict[str, Any] | None = None) -> list[Device]:
    """Devices of the device table named in ``text`` (distinct, in the order the text names them)."""
    return find_devices(text)


def _platform_of(text: str, rules: dict[str, Any]) -> str | None:
    hits = {p["platform"] for p in rules.get("platforms", []) if _word(p["pattern"]).search(text.lower())}
    return hits.pop() if len(hits) == 1 else None


def _resolve_hardware(row: dict[str, Any], linked: list[dict[str, Any]], rules: dict[str, Any]) -> None:
    """Fill platform, hardware, hardware_from and capacity_gib (None when ambiguous or unknown)."""
    path_text = "/".join(re.split(r"[/\\!]", row["file"])[-3:])
    sources = [("file", row.get("hardware")), ("path", path_text)]
    sources += [("profile", r.get("device_name")) for r in linked]
    for origin, text in sources:
        devices = match_devices(text, rules)
        if devices:
            row["hardware"] = row.get("hardware") or " or ".join(d.name for d in devices)
            row["hardware_from"] = origin
            row["capacity_gib"] = devices[0].nominal_gib if len(devices) == 1 else None
            platforms = {d.platform for d in devices}
            row["platform"] = row.get("platform") or (platforms.pop() if len(platforms) == 1 else None)
            break
    else:
        row.setdefault("hardware_from", "file" if row.get("hardware") else None)
        row.setdefault("capacity_gib", None)
    if not row.get("platform"):
        linked_platforms = {r["platform"] for r in linked}
        row["platform"] = _platform_of(path_text, rules) or (
            linked_platforms.pop() if len(linked_platforms) == 1 else None
        )
    override = float(rules.get("memory", {}).get("capacity_gib") or 0)
    if override > 0:
        row["capacity_gib"], row["capacity_from"] = override, "thresholds"
    else:
        row["capacity_from"] = row["hardware_from"] if row["capacity_gib"] else None


# -- loading ---------------------------------------------------------------------------------------------------
def _profile_runs(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    cols = ("run_id", "source", "platform", "device_name", "job_key")
    rows = q(
        con,
        "SELECT r.run_id, r.source, r.platform, r.device_name, j.job_key "
        "FROM runs r LEFT JOIN jobs j USING (job_id) ORDER BY r.run_id",
    )
    return [dict(zip(cols, r, strict=True)) for r in rows]


def _folder(display: str | None) -> str:
    return posixpath.dirname((display or "").replace("\\", "/"))


def links(serving: dict[str, Any], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The profile runs of the same deployment as one serving run (see the module doc)."""
    scope, folder = serving.get("scope") or "", _folder(serving["file"])
    return [
        r
        for r in runs
        if r["run_id"] == serving.get("run_id")
        or (scope.startswith("path:") and scope == r["job_key"])
        or (folder and folder == _folder(r["source"]))
    ]


def serving_runs(
    con: duckdb.DuckDBPyConnection | Store,
    rules: dict[str, Any] | None = None,
    profile_run: int | None = None,
) -> list[dict[str, Any]]:
    """Every serving run with its file, workload means, resolved hardware and linked profile runs."""
    cur, rules = _cursor(con), rules or load_thresholds()
    cur.execute(
        "SELECT s.*, f.source AS file, f.scope FROM serving_runs s JOIN files f USING (file_id) "
        "ORDER BY s.serving_id"
    )
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    runs = _profile_runs(cur)
    for row in rows:
        for key in ("latency_ms", "fields"):
            row[key] = json.loads(row[key]) if isinstance(row[key], str) else row[key]
        done = row["successful_requests"] or 0
        row["input_tokens_mean"] = (
            row["total_input_tokens"] / done if done and row["total_input_tokens"] else None
        )
        row["output_tokens_mean"] = (
            row["total_output_tokens"] / done if done and row["total_output_tokens"] else None
        )
        row["load"] = (
            row["max_concurrency"] if row["max_concurrency"] is not None else row["request_rate_rps"]
        )
        row["label"] = f"{posixpath.basename(row['file'].replace(chr(92), '/'))}#{row['block_no']}"
        linked = [r for r in runs if r["run_id"] == profile_run] if profile_run else links(row, runs)
        row["linked_runs"] = [r["run_id"] for r in linked]
        _resolve_hardware(row, linked, rules)
        row.pop("scope", None)
    return rows


def peak_memory(con: duckdb.DuckDBPyConnection | Store, run_ids: list[int]) -> dict[str, Any] | None:
    """Peak reserved device memory of profile runs, from ``diag.analyses.memory``: the process total's series
    (rules/memory_components.toml — memory_record APP, else nsys CUDA, else the allocator's PTA+GE / PTA /
    Kineto PyTorch), never a sum of components; with the capacity of the profile's device (the device table)."""
    best: dict[str, Any] | None = None
    for run_id in run_ids:
        s = memory.memory_summary(_cursor(con), run_id=run_id)
        if s["peak_reserved_bytes"] is not None and (
            best is None or s["peak_reserved_bytes"] > best["peak_bytes"]
        ):
            best = {
                "run_id": int(run_id),
                "component": (s["reserved_series"] or "").split(":")[-1] or None,
                "peak_bytes": int(s["peak_reserved_bytes"]),
                "_capacity": (s["capacity_bytes"], s["capacity_from"]),
            }
    return best


# -- acceptance --------------------------------------------------------------------------------------------------
def _check(
    figure: str, value: float | None, threshold: float | None, unit: str, **extra: Any
) -> dict[str, Any]:
    """An 'at most' limit (or 'at least' with higher=True): verdict and margin (positive = headroom)."""
    higher = extra.pop("higher", False)
    out = {"figure": figure, "value": value, "threshold": threshold, "unit": unit, **extra}
    if value is None or not threshold:
        out.update(verdict="n/a", margin=None, margin_pct=None, threshold=threshold or None)
        out.setdefault("detail", t("serving.no_figure") if value is None else t("serving.no_threshold"))
        return out
    margin = (value - threshold) if higher else (threshold - value)
    out.update(verdict="pass" if margin >= 0 else "fail", margin=margin, margin_pct=100 * margin / threshold)
    return out


def _latency_check(row: dict[str, Any], metric: str, rules: dict[str, Any], limit_ms: float | None) -> dict:
    cfg = rules.get(metric, {})
    stat = cfg.get("statistic", "p99")
    value = row.get(f"{metric}_{stat}_ms")
    if metric == "ttft" and limit_ms is None:
        return _ttft_check(row, cfg, stat, value)
    if limit_ms is None:
        limit_ms = cfg.get("max_ms")
    return _check(metric, value, limit_ms, "ms", statistic=stat)


def _ttft_check(row: dict[str, Any], cfg: dict[str, Any], stat: str, value: float | None) -> dict:
    """Chat or long-context limit by the mean input per request; from the configured input length when the
    block lacks the token totals (cut short), and judged on both limits when neither is known."""
    long_min = cfg.get("long_context_min_input_tokens", 8192)
    chat, long = cfg.get("chat_max_ms"), cfg.get("long_context_max_ms")
    mean_in, source = row["input_tokens_mean"], t("serving.mean_input")
    if mean_in is None and row.get("input_len"):
        mean_in, source = row["input_len"], t("serving.configured_input")
    if mean_in is not None:
        kind = t("serving.long_context" if mean_in >= long_min else "serving.chat")
        detail = t("serving.ttft_kind", kind=kind, source=source, tokens=f"{mean_in:.0f}")
        return _check(
            "ttft", value, long if mean_in >= long_min else chat, "ms", statistic=stat, detail=detail
        )
    if value is not None and chat and long and value > max(chat, long):
        return _check(
            "ttft", value, max(chat, long), "ms", statistic=stat, detail=t("serving.ttft_over_both")
        )
    if value is not None and chat and long and value <= min(chat, long):
        return _check(
            "ttft", value, min(chat, long), "ms", statistic=stat, detail=t("serving.ttft_within_both")
        )
    out = _check("ttft", None, chat, "ms", statistic=stat, detail=t("serving.ttft_limit_unknown"))
    out["value"] = value
    return out


def _similar(a: float | None, b: float | None, tol_pct: float) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return abs(a - b) <= tol_pct / 100 * max(abs(a), abs(b), 1e-9)


def _throughput_check(row: dict[str, Any], rows: list[dict[str, Any]], rules: dict[str, Any]) -> dict:
    cfg = rules.get("throughput", {})
    tol, drop = cfg.get("workload_tolerance_pct", 10.0), cfg.get("max_drop_pct", 10.0)
    peers = [
        r
        for r in rows
        if r["load"] is not None
        and row["load"] is not None
        and r["load"] < row["load"]
        and _folder(r["file"]) == _folder(row["file"])
        and (r["model"], r["hardware"], r["dataset"]) == (row["model"], row["hardware"], row["dataset"])
        and _similar(r["input_tokens_mean"], row["input_tokens_mean"], tol)
        and _similar(r["output_tokens_mean"], row["output_tokens_mean"], tol)
        and r["output_throughput_tps"] is not None
    ]
    if not peers:
        return _check(
            "throughput", row["output_throughput_tps"], None, "tok/s", detail=t("serving.no_lower_load")
        )
    best = max(peers, key=lambda r: r["output_throughput_tps"])
    threshold = (1 - drop / 100) * best["output_throughput_tps"]
    detail = t("serving.best_lower_load", serving_id=best["serving_id"], load=f"{best['load']:g}",
               tps=f"{best['output_throughput_tps']:g}")  # fmt: skip
    return _check("throughput", row["output_throughput_tps"], threshold, "tok/s", higher=True, detail=detail)


def _failed_check(row: dict[str, Any], rules: dict[str, Any]) -> dict:
    failed, done = row["failed_requests"], row["successful_requests"] or 0
    limit = float(rules.get("requests", {}).get("max_failed_pct", 0.0))
    if failed is None:
        return _check("failed_requests", None, limit, "%", detail=t("serving.not_printed"))
    pct = 100 * failed / max(failed + done, 1)
    out = {"figure": "failed_requests", "value": pct, "threshold": limit, "unit": "%", "margin": limit - pct}
    out.update(
        verdict="pass" if pct <= limit else "fail",
        margin_pct=None,
        detail=t("serving.n_of", n=failed, of=failed + done),
    )
    return out


def _memory_check(con: duckdb.DuckDBPyConnection, row: dict[str, Any], rules: dict[str, Any]) -> dict:
    """Peak reserved against the capacity: the thresholds' override, else the profiled device's (the device table,
    as ``diag memory`` has it), else the hardware the serving file or its path names."""
    limit = float(rules.get("memory", {}).get("max_used_pct", 90.0))
    peak = peak_memory(con, row["linked_runs"])
    if peak is None:
        return _check("memory", None, limit, "%", detail=t("serving.no_memory_profile"))
    profile_bytes, profile_from = peak.pop("_capacity")
    if row["capacity_gib"] and (row["capacity_from"] == "thresholds" or not profile_bytes):
        capacity, origin = row["capacity_gib"] * GIB, row["capacity_from"]
    elif profile_bytes:  # the profiled device's own capacity, as diag memory judges its headroom
        capacity, origin = profile_bytes, f"profile {profile_from}"
    else:
        return _check("memory", None, limit, "%", detail=t("serving.capacity_unknown"), peak=peak)
    used = 100 * peak["peak_bytes"] / capacity
    detail = t("serving.memory_detail", gib=f"{peak['peak_bytes'] / GIB:.2f}", component=peak["component"],
               run_id=peak["run_id"], capacity=f"{capacity / GIB:g}")  # fmt: skip
    return _check("memory", used, limit, "%", detail=detail, peak=peak, capacity_bytes=int(capacity),
                  capacity_from=origin)  # fmt: skip


def _name_missing(row: dict[str, Any], checks: list[dict[str, Any]]) -> None:
    """In a block cut short, a check without its figure says so (the figure is not n/a by tool version)."""
    for c in checks:
        if c["verdict"] == "n/a" and c["value"] is None and c["figure"] != "memory":
            c["detail"] = t("serving.cut_short")


def accept(
    con: duckdb.DuckDBPyConnection | Store,
    rules: dict[str, Any] | None = None,
    serving_ids: list[int] | None = None,
    profile_run: int | None = None,
    ttft_ms: float | None = None,
    tpot_ms: float | None = None,
) -> list[dict[str, Any]]:
    """Each serving run with ``checks`` (figure, value, threshold, verdict, margin…) and an overall verdict."""
    cur, rules = _cursor(con), rules or load_thresholds()
    rows = serving_runs(cur, rules, profile_run)
    out = []
    for row in rows:
        if serving_ids and row["serving_id"] not in serving_ids:
            continue
        checks = [
            _latency_check(row, "ttft", rules, ttft_ms),
            _latency_check(row, "tpot", rules, tpot_ms),
            _throughput_check(row, rows, rules),
            _failed_check(row, rules),
            _memory_check(cur, row, rules),
        ]
        if row.get("partial"):
            _name_missing(row, checks)
        verdicts = {c["verdict"] for c in checks}
        row["verdict"] = "fail" if "fail" in verdicts else "pass" if "pass" in verdicts else "n/a"
        row["checks"] = checks
        out.append(row)
    return out


def serving_for_runs(
    con: duckdb.DuckDBPyConnection | Store, run_ids: list[int], rules: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """The judged serving runs of the same deployment as any of these profile runs (postmortem, compare)."""
    wanted = set(run_ids)
    return [r for r in accept(con, rules) if wanted & set(r["linked_runs"])]
