"""An incident postmortem: what happened, its impact, the root cause and its evidence, in one object.

Built only from the existing analyses (log root causes, device findings, the breakdown, the comparison with a
CUDA baseline, the runs table): every statement carries the evidence it rests on (log lines with file:line,
ops and time ranges, figures). Nothing is stated that those analyses do not show.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from diag.analyses.compare import compare
from diag.analyses.findings import Finding, device_findings
from diag.analyses.log_diagnosis import RootCause, root_causes
from diag.analyses.runs import list_runs
from diag.analyses.stall_breakdown import BUCKET_LABELS, BUCKETS, breakdown
from diag.store import Store

MAX_EVIDENCE_LINES = 5  # log lines shown per statement
ENV_PREFIXES = ("ASCEND_", "HCCL_", "ACL", "PYTORCH_", "TASK_QUEUE", "NPU_", "CUDA_", "NCCL_", "TORCH", "HOST_CACHE",
                "INF_NAN", "COMBINED_ENABLE", "MULTI_STREAM", "OMP_")  # fmt: skip
CONTRIBUTING = (
    "cpu_fallback",
    "host_fallback",
    "recompile",
    "memory",
    "communication",
    "data_movement",
    "idle",
)


@dataclass
class Statement:
    text: str
    evidence: dict[str, Any] = field(default_factory=dict)  # log_lines, ops, time_range_ns, figures


@dataclass
class Postmortem:
    run_id: int | None
    baseline_run_id: int | None
    scope: str
    title: str
    summary: str
    what_happened: list[Statement] = field(default_factory=list)
    impact: list[Statement] = field(default_factory=list)
    root_cause: dict[str, Any] | None = None  # source, category, title, severity, statement
    contributing: list[Statement] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    actions: list[Statement] = field(default_factory=list)
    comparison: dict[str, Any] | None = None  # e2e per step both sides, ratio, top_losses
    chart: list[dict[str, Any]] = field(default_factory=list)  # device time per bucket, for the report's SVG
    notes: dict[str, str] = field(default_factory=dict)  # free text from the app: owner, follow-ups…

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _ts(ns: int | None) -> str:
    if ns is None:
        return "time unknown"
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _log_lines(rc: RootCause, n: int = MAX_EVIDENCE_LINES) -> list[dict[str, Any]]:
    return [
        {"file": e.file, "line_no": e.line_no, "ts_ns": e.ts_ns, "rank": e.rank, "code": e.code, "raw": e.raw}
        for e in rc.evidence[:n]
    ]


def _cause_statement(rc: RootCause) -> Statement:
    where = f" on rank(s) {', '.join(map(str, rc.ranks))}" if rc.ranks else ""
    codes = ", ".join(c.get("code", "") for c in rc.codes if c.get("code"))
    return Statement(
        f"{rc.title}{where}: {rc.count} log record(s) from {_ts(rc.first_ns)} to {_ts(rc.last_ns)}"
        + (f" (codes {codes})" if codes else ""),
        {
            "log_lines": _log_lines(rc),
            "time_range_ns": [rc.first_ns, rc.last_ns],
            "figures": {"records": rc.count, "ranks": rc.ranks, "files": rc.files, "rule_ids": rc.rule_ids},
        },
    )


def _finding_statement(f: Finding) -> Statement:
    return Statement(
        f.title,
        {
            "figures": {
                "impact_pct": round(f.impact_pct, 3),
                "impact_ns": f.impact_ns,
                "severity": f.severity,
            },
            "ops": f.evidence,
            "time_range_ns": [f.start_ns, f.end_ns],
        },
    )


def _environment(store: Store, run_id: int | None) -> dict[str, Any]:
    if run_id is None:
        return {}
    rows = list_runs(store, run_id)
    if not rows:
        return {}
    r = rows[0]
    env: dict[str, Any] = {
        k: r.get(k)
        for k in (
            "platform",
            "device_name",
            "device",
            "rank",
            "cann_version",
            "torch_npu_version",
            "profiler_level",
            "aic_metrics",
            "export_type",
            "source",
        )  # fmt: skip
        if r.get(k) not in (None, "")
    }
    versions = r.get("versions")
    if isinstance(versions, str):
        try:
            versions = json.loads(versions)
        except ValueError:
            versions = None
    if versions:
        env["versions"] = versions
    meta_rows = store.cursor().execute("SELECT metadata FROM runs WHERE run_id = ?", [run_id]).fetchall()
    meta = meta_rows[0][0] if meta_rows else None
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except ValueError:
            meta = None
    if isinstance(meta, dict):
        variables = meta.get("ENV_VARIABLES") or {}
        env["env_variables"] = {
            k: v
            for k, v in sorted(variables.items())
            if v not in (None, "") and k.upper().startswith(ENV_PREFIXES)
        }
        if meta.get("distributed_args"):
            env["distributed_args"] = meta["distributed_args"]
    return env


def build_postmortem(
    store: Store, run_id: int | None = None, baseline_run_id: int | None = None, job_id: int | None = None
) -> Postmortem:
    """The postmortem of ``run_id`` (its device data and its logs); None: every log in the store."""
    if job_id is not None and run_id is None:
        ids = [r["run_id"] for r in list_runs(store) if r["job_id"] == job_id]
        if not ids:
            raise ValueError(f"no run in job {job_id}")
        run_id = ids[0]
    runs = list_runs(store, run_id) if run_id is not None else []
    if run_id is not None and not runs:
        raise ValueError(f"no run {run_id}")
    run = runs[0] if runs else None
    scope = f"run {run_id} ({run['name']}, {run['platform']})" if run else "every log in the store"
    pm = Postmortem(run_id, baseline_run_id, scope, "", "")

    # -- logs: the incident timeline and the log root cause ------------------------------------------------
    causes = root_causes(store, run_id)
    serious = [c for c in causes if c.severity in ("high", "medium")]
    ordered = sorted(serious, key=lambda c: (c.first_ns is None, c.first_ns or 0, c.rank))
    for i, rc in enumerate(ordered):
        label = "First error" if i == 0 else ("Cascade" if rc.echo_of or rc.role != "cause" else "Then")
        st = _cause_statement(rc)
        st.text = f"{_ts(rc.first_ns)} — {label}: {st.text}"
        pm.what_happened.append(st)
    if ordered:
        last = max((c.last_ns for c in ordered if c.last_ns is not None), default=None)
        if last is not None:
            pm.what_happened.append(
                Statement(f"{_ts(last)} — End: the last flagged log record", {"time_range_ns": [last, last]})
            )
        ranks = sorted({r for c in serious for r in c.ranks})
        pm.impact.append(
            Statement(
                f"{sum(c.count for c in serious)} error/warning record(s) in {len(serious)} root-cause group(s)"
                + (f" on rank(s) {', '.join(map(str, ranks))}" if ranks else ""),
                {
                    "figures": {
                        "records": sum(c.count for c in serious),
                        "groups": len(serious),
                        "ranks": ranks,
                    }
                },
            )
        )

    # -- device data: the performance story ------------------------------------------------------------------
    findings: list[Finding] = []
    if run and run.get("start_ns") is not None:
        bd = breakdown(store, run_id)  # type: ignore[arg-type]
        total = bd.total
        if total and total.e2e_ns:
            findings = device_findings(store, run_id, bd)  # type: ignore[arg-type]
            e2e = total.e2e_ns
            pm.chart = [
                {
                    "bucket": b,
                    "label": BUCKET_LABELS[b],
                    "ns": total.buckets[b],
                    "pct": 100 * total.buckets[b] / e2e,
                }
                for b in BUCKETS
                if total.buckets[b]
            ]
            top = sorted(pm.chart, key=lambda c: -c["ns"])[:3]
            pm.what_happened.append(
                Statement(
                    f"Profiled {len(bd.steps)} step(s) ({bd.step_source}), {e2e / 1e6:,.3f} ms of device time; "
                    "largest shares: " + ", ".join(f"{c['label']} {c['pct']:.1f}%" for c in top),
                    {
                        "time_range_ns": [total.start_ns, total.end_ns],
                        "figures": {"e2e_ns": e2e, "steps": len(bd.steps), "buckets_ns": total.buckets},
                    },
                )
            )
            for f in findings:
                if f.category != "top_ops" and f.impact_ns:
                    st = _finding_statement(f)
                    st.text = (
                        f"Device time lost — {f.title}: {f.impact_ns / 1e6:,.3f} ms ({f.impact_pct:.1f}%)"
                    )
                    pm.impact.append(st)

    # -- the baseline --------------------------------------------------------------------------------------
    if baseline_run_id is not None and run_id is not None:
        cmp = compare(store, run_id, baseline_run_id)
        e2e = next(o for o in cmp.overall if o["bucket"] == "e2e")
        losses = [asdict(c) for c in cmp.top_losses(3)]
        pm.comparison = {
            "run_a": cmp.run_a,
            "run_b": cmp.run_b,
            "steps_a": cmp.steps_a,
            "steps_b": cmp.steps_b,
            "e2e": e2e,
            "top_losses": losses,
            "warnings": cmp.warnings,
        }
        ratio = f"{e2e['ratio']:.2f}×" if e2e["ratio"] else "n/a"
        pm.impact.append(
            Statement(
                f"End-to-end per step: {e2e['per_step_a_ms']:.3f} ms vs {e2e['per_step_b_ms']:.3f} ms on the "
                f"baseline (run {baseline_run_id}) — {ratio}",
                {"figures": e2e},
            )
        )
        for c in losses:
            r = f"{c['ratio']:.2f}×" if c["ratio"] else "baseline has none"
            pm.impact.append(
                Statement(
                    f"Op class {c['op_class']} loses {c['delta_per_step_ms']:.3f} ms per step "
                    f"({c['per_step_a_ns'] / 1e6:.3f} vs {c['per_step_b_ns'] / 1e6:.3f} ms, {r})",
                    {"figures": c},
                )
            )

    # -- root cause, contributing factors, actions ---------------------------------------------------------
    lead = next((c for c in causes if c.severity in ("high", "medium") and c.role == "cause"), None)
    lead = lead or (serious[0] if serious else None)
    ranked = [f for f in findings if f.category != "top_ops" and f.severity in ("high", "medium")]
    if lead is not None:
        st = _cause_statement(lead)
        pm.root_cause = {
            "source": "log",
            "category": lead.category,
            "title": lead.title,
            "severity": lead.severity,
            "explanation": lead.explanation,
            "statement": asdict(st),
        }
        if lead.fix:
            pm.actions.append(Statement(lead.fix, {"from": f"log rule {', '.join(lead.rule_ids)}"}))
    elif ranked:
        f = ranked[0]
        pm.root_cause = {
            "source": "device",
            "category": f.category,
            "title": f.title,
            "severity": f.severity,
            "explanation": "",
            "statement": asdict(_finding_statement(f)),
        }
    elif pm.comparison and pm.comparison["top_losses"]:
        c = pm.comparison["top_losses"][0]
        pm.root_cause = {
            "source": "baseline",
            "category": f"op_class:{c['op_class']}",
            "title": f"Op class {c['op_class']} is slower than on the baseline",
            "severity": "medium",
            "explanation": "",
            "statement": asdict(Statement(f"{c['delta_per_step_ms']:.3f} ms lost per step", {"figures": c})),
        }
    for rc in serious:
        if rc is not lead:
            st = _cause_statement(rc)
            st.text = f"Also in the logs — {st.text}"
            pm.contributing.append(st)
    root_finding = ranked[0] if lead is None and ranked else None
    for f in findings:
        if f is root_finding or f.category not in CONTRIBUTING:
            continue
        pm.contributing.append(_finding_statement(f))
    seen: set[str] = {a.text for a in pm.actions}
    for f in ([root_finding] if root_finding else []) + [f for f in findings if f is not root_finding]:
        if f.suggestion and f.suggestion not in seen and f.category != "top_ops":
            seen.add(f.suggestion)
            pm.actions.append(Statement(f.suggestion, {"from": f"finding: {f.title}"}))
    for rc in serious:
        if rc.fix and rc.fix not in seen:
            seen.add(rc.fix)
            pm.actions.append(Statement(rc.fix, {"from": f"log rule {', '.join(rc.rule_ids)}"}))

    pm.environment = _environment(store, run_id)
    rc_title = pm.root_cause["title"] if pm.root_cause else None
    pm.title = f"Postmortem: {rc_title or 'no root cause found'} — {scope}"
    pm.summary = (
        f"Most likely root cause ({pm.root_cause['source']} evidence): {rc_title}."
        if pm.root_cause
        else "The data holds no error in the logs and no high/medium device finding."
    )
    return pm
