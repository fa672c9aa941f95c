"""An incident postmortem: what happened, its impact, the root cause and its evidence, in one object.

Built only from the existing analyses (log root causes, device findings, the breakdown, the comparison with a
CUDA baseline, the runs table): every statement carries the evidence it rests on (log lines with file:line,
ops and time ranges, figures). Nothing is stated that those analyses do not show.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

from diag.analyses import owners
from diag.analyses.findings import Finding
from diag.analyses.log_diagnosis import RootCause, log_scope
from diag.analyses.postmortem_device import baseline_story, device_story
from diag.analyses.postmortem_env import environment
from diag.analyses.postmortem_memory import job_memory_story, memory_story
from diag.analyses.postmortem_model import Postmortem, Statement
from diag.analyses.postmortem_notes import load_notes
from diag.analyses.postmortem_serving import serving_story
from diag.analyses.postmortem_steps import FailedStep, StepReport, rank_table, step_report
from diag.analyses.runs import list_runs
from diag.grouping import rank_or_run
from diag.i18n import t
from diag.store import Store

MAX_EVIDENCE_LINES = 5  # log lines shown per statement
CONTRIBUTING = (
    "cpu_fallback",
    "host_fallback",
    "recompile",
    "memory",
    "communication",
    "data_movement",
    "idle",
    "host_sync",
)


def _ts(ns: int | None) -> str:
    if ns is None:
        return t("pm.time_unknown")
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _log_lines(rc: RootCause, n: int = MAX_EVIDENCE_LINES) -> list[dict[str, Any]]:
    return [
        {"file": e.file, "line_no": e.line_no, "ts_ns": e.ts_ns, "rank": e.rank, "code": e.code, "raw": e.raw}
        for e in rc.evidence[:n]
    ]


def _cause_statement(rc: RootCause) -> Statement:
    where = t("pm.on_ranks", ranks=", ".join(map(str, rc.ranks))) if rc.ranks else ""
    codes = ", ".join(c.get("code", "") for c in rc.codes if c.get("code"))
    return Statement(
        t(
            "pm.cause",
            title=rc.title,
            where=where,
            count=rc.count,
            first=_ts(rc.first_ns),
            last=_ts(rc.last_ns),
        )
        + (t("pm.codes", codes=codes) if codes else ""),
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


def failed_step_statements(failed: list[FailedStep], rep: StepReport, run_ids: list[int]) -> list[Statement]:
    """The failed-steps count (per rank) and one statement per failed step, each with its evidence."""
    ranks = [r for r in rep.ranks if r.run_id in run_ids and r.source]
    if not ranks:
        return []
    per_rank = {
        rank_or_run(r.rank, r.run_id): sorted(f.step for f in failed if f.run_id == r.run_id) for r in ranks
    }
    profiled = {rank_or_run(r.rank, r.run_id): len(r.durations) for r in ranks}
    n = sum(len(v) for v in per_rank.values())
    where = "; ".join(
        t("pm.rank_steps", rank=k, steps=", ".join(map(str, v))) for k, v in per_rank.items() if v
    )
    out = [
        Statement(
            t("pm.failed_steps", n=n)
            + (
                t("pm.failed_where", where=where)
                if where
                else t("pm.failed_in", profiled=sum(profiled.values()))
            ),
            {
                "figures": {
                    "failed_steps": n,
                    "failed_per_rank": {k: len(v) for k, v in per_rank.items()},
                    "failed_step_numbers": per_rank,
                    "profiled_steps_per_rank": profiled,
                },
                "from": "failed-step rules: missing | incomplete | error | interrupted (diag.analyses.postmortem_steps)",
            },
        )
    ]
    for f in failed:
        ev = {k: v for k, v in f.evidence.items() if k != "log_lines"}
        lines = [
            {"file": ln.get("file"), "line_no": ln.get("line_no"), "ts_ns": ln.get("ts_ns"), "code": ln.get("code"),
             "raw": ln.get("raw")}
            for ln in f.evidence.get("log_lines", [])
        ]  # fmt: skip
        evidence: dict[str, Any] = {
            "figures": {"reasons": f.reasons, **ev},
            "time_range_ns": [f.start_ns, f.end_ns],
        }
        if lines:
            evidence["log_lines"] = lines
        out.append(
            Statement(
                t(
                    "pm.failed_step",
                    step=f.step,
                    rank=rank_or_run(f.rank, f.run_id),
                    reasons=", ".join(f.reasons),
                    detail=f.detail,
                ),  # fmt: skip
                evidence,
            )
        )
    return out


def job_runs(store: Store, job_id: int, platform: str | None = None) -> list[dict[str, Any]]:
    runs = [r for r in list_runs(store) if r["job_id"] == job_id]
    return [r for r in runs if platform is None or r["platform"] == platform]


def _steps_for_run(pm: Postmortem, store: Store, run: dict[str, Any]) -> None:
    """Failed steps of one run, judged against the other ranks of its job."""
    peers = job_runs(store, run["job_id"], run["platform"]) if run.get("job_id") is not None else [run]
    rep = step_report(store, peers or [run])
    failed = [f for f in rep.failed if f.run_id == run["run_id"]]
    pm.clock = rep.clock
    pm.ranks = [r for r in rank_table(rep) if r["run_id"] == run["run_id"]]
    pm.failed_steps = [f.to_json() for f in failed]
    pm.outlier_steps = [o for o in rep.outliers if o["run_id"] == run["run_id"]]
    pm.impact[:0] = failed_step_statements(failed, rep, [run["run_id"]])


def build_postmortem(
    store: Store,
    run_id: int | None = None,
    baseline_run_id: int | None = None,
    job_id: int | None = None,
    episode: int | None = None,
) -> Postmortem:
    """The postmortem of ``run_id`` (its device data and its logs), of every rank of ``job_id``, or (neither)
    of every log in the store. Notes saved for that scope (title, summary, owner, follow-ups) come with it."""
    if job_id is not None and run_id is None:
        from diag.analyses.postmortem_job import build_job_postmortem  # it builds on this module

        pm = build_job_postmortem(store, job_id, baseline_run_id)
    else:
        pm = _build_run(store, run_id, baseline_run_id, episode)
    pm.notes = load_notes(store, run_id=pm.run_id if pm.job_id is None else None, job_id=pm.job_id)
    scope_runs = [r["run_id"] for r in job_runs(store, pm.job_id)] if pm.job_id is not None else [pm.run_id]
    pm.serving, pm.serving_comparison, said = serving_story(
        store, [r for r in scope_runs if r is not None], baseline_run_id
    )
    pm.impact += [Statement(text, evidence) for text, evidence in said]
    if pm.job_id is None:
        pm.memory, pm.memory_oom = memory_story(store, pm.run_id, _episode_files(pm))
    else:  # each rank's own memory (its device, its logs), the rank named
        pm.memory, pm.memory_oom = job_memory_story(store, job_runs(store, pm.job_id))
    return pm


def _episode_files(pm: Postmortem) -> list[str] | None:
    """With no run: the log files of the episode covered (its OOM records only), None for every log."""
    if pm.run_id is not None or pm.episode is None:
        return None
    return next((e["files"] for e in pm.episodes if e["episode"] == pm.episode), [])


def _build_run(
    store: Store, run_id: int | None, baseline_run_id: int | None, episode: int | None = None
) -> Postmortem:
    runs = list_runs(store, run_id) if run_id is not None else []
    if run_id is not None and not runs:
        raise ValueError(f"no run {run_id}")
    run = runs[0] if runs else None
    scope = (
        t("pm.scope_run", run_id=run_id, name=run["name"], platform=run["platform"])
        if run
        else t("pm.scope_store")
    )
    pm = Postmortem(run_id, baseline_run_id, scope, "", "")

    # -- logs: the incident timeline and the log root cause ------------------------------------------------
    logs = log_scope(store, run_id, episode=episode)
    causes, pm.episodes = logs.causes, [e.to_json() for e in logs.episodes]
    if logs.episode is not None:  # no run: the latest incident episode, not every log stitched together
        pm.episode, pm.scope = logs.episode.episode, logs.scope
    serious = [c for c in causes if c.severity in ("high", "medium")]
    ordered = sorted(serious, key=lambda c: (c.first_ns is None, c.first_ns or 0, c.rank))
    for i, rc in enumerate(ordered):
        label = (
            t("pm.first_error")
            if i == 0
            else t("pm.cascade" if rc.echo_of or rc.role != "cause" else "pm.then")
        )
        st = _cause_statement(rc)
        st.text = t("pm.timeline", time=_ts(rc.first_ns), label=label, text=st.text)
        pm.what_happened.append(st)
    if ordered:
        last = max((c.last_ns for c in ordered if c.last_ns is not None), default=None)
        if last is not None:
            pm.what_happened.append(Statement(t("pm.end", time=_ts(last)), {"time_range_ns": [last, last]}))
        pm.impact.append(log_count_statement(serious))
    if logs.others:
        pm.what_happened.append(
            Statement(t("pm.not_covered", others=logs.others), {"figures": {"episodes": len(logs.episodes)}})
        )

    # -- device data: the performance story ------------------------------------------------------------------
    findings: list[Finding] = []
    if run is not None:
        findings, pm.chart, st = device_story(store, run)
        if st is not None:
            pm.what_happened.append(st)
        pm.impact += [lost_statement(f) for f in findings if f.category != "top_ops" and f.impact_ns]
        _steps_for_run(pm, store, run)
    if baseline_run_id is not None and run_id is not None:
        baseline_story(pm, store, run_id, baseline_run_id)
    lead = next((c for c in causes if c.severity in ("high", "medium") and c.role == "cause"), None)
    conclude(pm, lead or (serious[0] if serious else None), serious, findings)
    pm.environment = environment(store, run_id)
    return pm


def log_count_statement(serious: list[RootCause]) -> Statement:
    ranks = sorted({r for c in serious for r in c.ranks})
    return Statement(
        t("pm.log_count", records=sum(c.count for c in serious), groups=len(serious))
        + (t("pm.on_ranks", ranks=", ".join(map(str, ranks))) if ranks else ""),
        {"figures": {"records": sum(c.count for c in serious), "groups": len(serious), "ranks": ranks}},
    )


def lost_statement(f: Finding) -> Statement:
    st = _finding_statement(f)
    st.text = t("pm.lost", title=f.title, ms=f"{f.impact_ns / 1e6:,.3f}", pct=f"{f.impact_pct:.1f}")
    return st


def _action(text: str, source: str, owner: owners.Owner) -> Statement:
    """A suggested action with its owner (rules/owners.toml): what the report groups it under."""
    return Statement(text, {"from": source}, owner.owner, owner.reason, owner.steps)


def conclude(
    pm: Postmortem,
    lead: RootCause | None,
    serious: list[RootCause],
    findings: list[Finding],
    cause_text: dict[int, str] | None = None,
) -> None:
    """Root cause (logs first, then device findings, then the baseline), contributing factors, actions, title."""
    ranked = sorted(
        (f for f in findings if f.category != "top_ops" and f.severity in ("high", "medium")),
        key=lambda f: -f.impact_ns,
    )
    if lead is not None:
        st = _cause_statement(lead)
        if cause_text and id(lead) in cause_text:
            st.text = cause_text[id(lead)]
        pm.root_cause = {
            "source": "log",
            "category": lead.category,
            "title": lead.title,
            "severity": lead.severity,
            "explanation": lead.explanation,
            "statement": asdict(st),
            **owners.for_log(lead.category, lead.codes).fields(),
        }
        if lead.fix:
            pm.actions.append(
                _action(
                    lead.fix,
                    t("pm.from_log_rule", rules=", ".join(lead.rule_ids)),
                    owners.for_log(lead.category, lead.codes),
                )
            )
    elif ranked:
        f = ranked[0]
        pm.root_cause = {
            "source": "device",
            "category": f.category,
            "title": f.title,
            "severity": f.severity,
            "explanation": "",
            "statement": asdict(_finding_statement(f)),
            **owners.of_finding(f).fields(),
        }
    elif pm.comparison and pm.comparison["top_losses"]:
        c = pm.comparison["top_losses"][0]
        pm.root_cause = {
            "source": "baseline",
            "category": f"op_class:{c['op_class']}",
            "title": t("pm.baseline_title", op_class=c["op_class"]),
            "severity": "medium",
            "explanation": "",
            "statement": asdict(
                Statement(t("pm.baseline_lost", ms=f"{c['delta_per_step_ms']:.3f}"), {"figures": c})
            ),
            **owners.resolve("finding", f"op_class:{c['op_class']}").fields(),
        }
    for rc in serious:
        if rc is not lead:
            st = _cause_statement(rc)
            st.text = t("pm.also", text=(cause_text or {}).get(id(rc), st.text))
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
            pm.actions.append(
                _action(f.suggestion, t("pm.from_finding", title=f.title), owners.of_finding(f))
            )
    for rc in serious:
        if rc.fix and rc.fix not in seen:
            seen.add(rc.fix)
            pm.actions.append(
                _action(
                    rc.fix,
                    t("pm.from_log_rule", rules=", ".join(rc.rule_ids)),
                    owners.for_log(rc.category, rc.codes),
                )
            )
    rc_title = pm.root_cause["title"] if pm.root_cause else None
    pm.title = t("pm.title", root_cause=rc_title or t("pm.no_root_cause"), scope=pm.scope)
    pm.summary = (
        t("pm.summary", source=t(f"pm.source.{pm.root_cause['source']}"), title=rc_title)
        if pm.root_cause
        else t("pm.summary_none")
    )
