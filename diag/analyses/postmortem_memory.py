"""The memory story of a postmortem: an OOM's verdict and figures, the peak against the device's capacity, the
allocator's slack, the KV-cache budget, and the knob each memory finding names — from
``diag.analyses.memory.memory_summary`` only, so the report states what ``diag memory`` shows and nothing more.

An incident with an OOM record leads its report with this section (``diag.report.sections``); without one the
section follows the impact, and a scope with no memory figure has none.
"""

from __future__ import annotations

from typing import Any

from diag.analyses import memory, memory_logs
from diag.analyses.postmortem_model import Statement
from diag.grouping import rank_or_run
from diag.i18n import t
from diag.store import Store

GIB = 1 << 30
OOM_FIGURES = ("requested_bytes", "capacity_bytes", "allocated_bytes", "reserved_bytes", "free_bytes",
               "active_bytes", "process_in_use_bytes")  # fmt: skip


# an OOM verdict (diag.analyses.memory_logs.oom_verdict) as a person reads it: pm.memory.verdict.<verdict>
VERDICTS = ("fragmentation", "out_of_memory", "other_process", "unknown")


def verdict_text(verdict: str | None) -> str:
    return t(f"pm.memory.verdict.{verdict if verdict in VERDICTS else 'unknown'}")


def _gib(value: float | None) -> str:
    return "—" if value is None else f"{value / GIB:,.2f} GiB"


def oom_statement(e: dict[str, Any]) -> Statement:
    """One OOM record: the request against what was free of what, the verdict and why, the line it was logged at."""
    text = t("pm.memory.oom", verdict=verdict_text(e.get("verdict")))
    if e.get("requested_bytes") is not None:  # vLLM's negative KV budget, a pool that failed: no request
        text += t("pm.memory.tried", size=_gib(e["requested_bytes"]))
    if e.get("free_bytes") is not None:
        text += t("pm.memory.free", size=_gib(e["free_bytes"]))
    if e.get("capacity_bytes") is not None:
        text += t("pm.memory.of", size=_gib(e["capacity_bytes"]))
    held = [
        t(f"pm.memory.{k}", size=_gib(e[f"{k}_bytes"])) for k in ("allocated", "reserved")
        if e.get(f"{k}_bytes") is not None
    ]  # fmt: skip
    if held:
        text += t("pm.memory.held", held=", ".join(held))
    if e.get("verdict_reason"):
        text += t("pm.memory.because", reason=e["verdict_reason"])
    figures = {k: e.get(k) for k in OOM_FIGURES if e.get(k) is not None} | {"verdict": e.get("verdict")}
    if e.get("file"):  # the log line itself is on the Logs page; here where it is
        figures |= {"file": e["file"], "line": e.get("line")}
    evidence: dict[str, Any] = {"figures": figures}
    if e.get("ts_ns") is not None:
        evidence["time_range_ns"] = [e["ts_ns"], e["ts_ns"]]
    return Statement(text, evidence)


def peak_statement(s: dict[str, Any]) -> Statement | None:
    peak, cap = s.get("peak_reserved_bytes"), s.get("capacity_bytes")
    if peak is None:
        return None
    text = t("pm.memory.peak", size=_gib(peak))
    text += (
        t("pm.memory.peak_of", size=_gib(cap), pct=f"{100 * peak / cap:.1f}")
        if cap
        else t("pm.memory.no_capacity")
    )
    if s.get("peak_step") is not None:
        text += t("pm.memory.in_step", step=s["peak_step"])
    if s.get("peak_op"):
        text += t("pm.memory.during", op=s["peak_op"])
    if s.get("headroom_pct") is not None:
        text += t("pm.memory.headroom", pct=f"{s['headroom_pct']:.1f}")
    if s.get("slack_peak_bytes"):
        text += t("pm.memory.slack", size=_gib(s["slack_peak_bytes"]))
    keys = ("peak_allocated_bytes", "peak_reserved_bytes", "capacity_bytes", "capacity_from", "headroom_pct",
            "slack_peak_bytes", "peak_step", "peak_ts_ns")  # fmt: skip
    figures = {k: s.get(k) for k in keys if s.get(k) is not None}
    ts = s.get("peak_ts_ns")
    return Statement(text, {"figures": figures, **({"time_range_ns": [ts, ts]} if ts is not None else {})})


def kv_statement(kv: dict[str, Any]) -> Statement:
    verdict = kv.get("verdict") or t("pm.memory.kv_unknown")
    text = t("pm.memory.kv", size=_gib(kv.get("kv_cache_bytes")), verdict=verdict)
    if kv.get("verdict_reason"):
        text += t("pm.memory.because", reason=kv["verdict_reason"])
    keys = ("weights_bytes", "non_torch_bytes", "activation_peak_bytes", "kv_cache_bytes", "budget_bytes",
            "capacity_bytes", "gpu_memory_utilization", "num_blocks")  # fmt: skip
    return Statement(text, {"figures": {k: kv.get(k) for k in keys if kv.get(k) is not None}})


def _knobs(s: dict[str, Any]) -> list[Statement]:
    out, seen = [], set()
    for f in s.get("findings") or []:
        text = f.get("suggestion")
        if text and text not in seen:
            seen.add(text)
            owner = (f.get("evidence") or {}).get("owner")
            knob = t("pm.memory.knob", text=text) + (t("pm.memory.knob_owner", owner=owner) if owner else "")
            out.append(Statement(knob, {"from": t("pm.from_finding", title=f.get("title"))}))
    return out


def memory_statements(summary: dict[str, Any]) -> list[Statement]:
    """The memory section: OOM records first, then the peak, the KV budget, the knobs."""
    out = [oom_statement(e) for e in summary.get("oom") or []]
    peak = peak_statement(summary)
    out += [peak] if peak else []
    out += [kv_statement(summary["kv_cache"])] if summary.get("kv_cache") else []
    return out + (_knobs(summary) if out else [])


def _log_only(store: Store, log_files: list[str] | None) -> dict[str, Any]:
    """With no run: the OOMs, KV budget and findings of each log file of no run (``log_files``: only these)."""
    files = sorted(
        {e["file"] for e in memory_logs.oom_events(store) if e["run_id"] is None and e.get("file")}
    )
    out: dict[str, Any] = {"oom": [], "kv_cache": None, "findings": []}
    for file in files:
        if log_files is not None and file not in log_files:
            continue
        s = memory.memory_summary(store, log_file=file)
        if s["run_id"] is not None:
            continue  # the file is a run's log (another scope)
        out["oom"] += s["oom"]
        out["kv_cache"] = out["kv_cache"] or s["kv_cache"]
        out["findings"] += s["findings"]
    return out


def memory_story(
    store: Store, run_id: int | None, log_files: list[str] | None = None
) -> tuple[list[Statement], bool]:
    """(the memory section's statements, whether it holds an OOM). With no run: the logs of no run, or only
    ``log_files`` (the episode the postmortem covers)."""
    summary = (
        memory.memory_summary(store, run_id=run_id) if run_id is not None else _log_only(store, log_files)
    )
    return memory_statements(summary), bool(summary.get("oom"))


def job_memory_story(store: Store, runs: list[dict[str, Any]]) -> tuple[list[Statement], bool]:
    """Every rank's memory story, each statement naming its rank; a knob said for several ranks is said once."""
    out: list[Statement] = []
    oom, knobs = False, set()
    for run in runs:
        statements, has_oom = memory_story(store, run["run_id"])
        oom |= has_oom
        for st in statements:
            if st.text.startswith(t("pm.memory.knob", text="")):
                if st.text not in knobs:
                    knobs.add(st.text)
                    out.append(st)
                continue
            out.append(
                Statement(
                    t("pm.who", who=rank_or_run(run.get("rank"), run["run_id"]), text=st.text), st.evidence
                )
            )
    return out, oom
