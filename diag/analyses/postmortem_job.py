"""The postmortem of a whole job (a multi-rank capture: one run per rank/device).

- What happened: one incident timeline across ranks — the capture, the first error (which rank, when), the
  cascade to the other ranks (how long after), captures cut short by the error, the end.
- Impact: failed steps per rank (diag.analyses.postmortem_steps), step time per rank over the steps every rank
  completed (slowest against fastest), outlier steps, log record counts, device time lost per finding category
  summed over the ranks.
- Root cause: ranked over every rank's logs (severity, then role — cause before symptom — then time: the
  earliest cause on any rank leads, the errors it sets off on other ranks are its cascade), else the largest
  device finding of any rank, else the baseline comparison.
- Environment: what all ranks share, and every key whose values differ between ranks, flagged.
"""

from __future__ import annotations

from typing import Any

from diag.analyses.findings import Finding
from diag.analyses.log_diagnosis import ROLE_ORDER, SEVERITY_ORDER, RootCause, root_causes
from diag.analyses.postmortem import (
    Postmortem,
    Statement,
    _cause_statement,
    _finding_statement,
    _ts,
    baseline_story,
    conclude,
    device_story,
    failed_step_statements,
    job_runs,
    log_count_statement,
)
from diag.analyses.postmortem_env import job_environment
from diag.analyses.postmortem_steps import StepReport, rank_table, step_report
from diag.grouping import is_multi_rank, job_grouping, rank_or_run
from diag.i18n import t
from diag.store import Store


def _job_causes(store: Store, runs: list[dict[str, Any]]) -> list[tuple[RootCause, dict[str, Any]]]:
    """Every rank's serious log root causes, ranked over the job: severity, role, then the earliest first."""
    out = []
    for run in runs:
        for rc in root_causes(store, run["run_id"]):
            if rc.severity in ("high", "medium"):
                if not rc.ranks and run.get("rank") is not None:
                    rc.ranks = [run["rank"]]  # a plog without rank fields: the rank of its run folder
                out.append((rc, run))
    out.sort(
        key=lambda p: (SEVERITY_ORDER[p[0].severity], ROLE_ORDER.get(p[0].role, 9), p[0].first_ns is None,
                       p[0].first_ns or 0)
    )  # fmt: skip
    return out


def _who(rc: RootCause, run: dict[str, Any]) -> str:
    return (
        ", ".join(t("pm.job.rank", rank=r) for r in rc.ranks)
        if rc.ranks
        else rank_or_run(run.get("rank"), run["run_id"])
    )


def _timeline(
    pm: Postmortem, causes: list[tuple[RootCause, dict[str, Any]]], rep: StepReport, capture: Statement | None
) -> dict[int, str]:
    """The incident, in time order (log clock); returns the text of each cause's statement by id()."""
    offset = rep.clock.get("log_offset_ns")
    events: list[tuple[int | None, int, Statement]] = []
    texts: dict[int, str] = {}
    lead = causes[0] if causes else None
    timed = sorted((c for c in causes if c[0].first_ns is not None), key=lambda c: c[0].first_ns)
    first = timed[0] if timed else lead
    for rc, run in causes:
        st = _cause_statement(rc)
        who = _who(rc, run)
        if first is not None and rc is first[0]:
            label = t("pm.first_error")
        elif lead is not None and rc is not lead[0] and set(rc.ranks) != set(lead[0].ranks):
            label = t("pm.cascade")
        else:
            label = t("pm.then")
        after = ""
        if (
            first is not None
            and rc is not first[0]
            and rc.first_ns is not None
            and first[0].first_ns is not None
        ):
            after = t("pm.job.after", s=f"{(rc.first_ns - first[0].first_ns) / 1e9:,.3f}")
        texts[id(rc)] = t("pm.who", who=who, text=st.text)
        st.text = t("pm.job.timeline", time=_ts(rc.first_ns), label=label, who=who, after=after, text=st.text)
        st.evidence.setdefault("figures", {})["run_id"] = run["run_id"]
        events.append((rc.first_ns, 1, st))
    for f in rep.failed:
        if "interrupted" in f.reasons and f.end_ns is not None:
            at = f.end_ns + offset if offset is not None else None
            st = Statement(
                t("pm.job.capture_cut", time=_ts(at), who=rank_or_run(f.rank, f.run_id), step=f.step, detail=f.detail),
                {"time_range_ns": [f.start_ns, f.end_ns], "figures": {"run_id": f.run_id, "step": f.step,
                                                                       "clock": "log" if at else "trace"}},
            )  # fmt: skip
            events.append((at, 2, st))
    events.sort(key=lambda e: (e[0] is None, e[0] or 0, e[1]))
    if capture is not None:
        pm.what_happened.append(capture)
    pm.what_happened += [e[2] for e in events]
    last = max((rc.last_ns for rc, _ in causes if rc.last_ns is not None), default=None)
    if last is not None:
        hit = sorted({r for rc, _ in causes for r in rc.ranks})
        pm.what_happened.append(
            Statement(
                t("pm.job.end", time=_ts(last), hit=len(hit), ranks=len(rep.ranks)),
                {"time_range_ns": [last, last], "figures": {"ranks_with_errors": hit}},
            )
        )
    return texts


def _capture_statement(rep: StepReport, job_name: str) -> Statement | None:
    starts = [r.capture_start_ns for r in rep.ranks if r.capture_start_ns is not None]
    ends = [r.capture_end_ns for r in rep.ranks if r.capture_end_ns is not None]
    if not starts:
        return None
    clock = rep.clock.get("basis", "")
    return Statement(
        t(
            "pm.job.capture",
            time=_ts(min(starts)),
            job=job_name,
            ranks=len(rep.ranks),
            end=_ts(max(ends)),
            clock=clock,
        ),
        {"time_range_ns": [min(starts), max(ends)], "figures": {"clock": rep.clock}},
    )


def _step_time_statements(rows: list[dict[str, Any]], rep: StepReport) -> list[Statement]:
    ranked = [r for r in rows if r["common_steps_mean_ns"] is not None]
    out = [_rank_gap_statement(ranked, rep)] if len(ranked) > 1 else []  # one run: no slowest and fastest
    if rep.outliers:
        out.append(
            Statement(
                t("pm.job.outliers", n=len(rep.outliers), ms=f"{rep.median_ns / 1e6:,.3f}"),
                {"figures": {"median_ns": rep.median_ns, "outliers": rep.outliers}},
            )
        )
    return out


def _rank_gap_statement(ranked: list[dict[str, Any]], rep: StepReport) -> Statement:
    slow = max(ranked, key=lambda r: r["common_steps_mean_ns"])
    fast = min(ranked, key=lambda r: r["common_steps_mean_ns"])
    gap = slow["common_steps_mean_ns"] - fast["common_steps_mean_ns"]
    pct = 100 * gap / fast["common_steps_mean_ns"] if fast["common_steps_mean_ns"] else 0.0
    steps = rep.common_steps
    return Statement(
        t(
            "pm.job.rank_gap",
            n=len(steps),
            span=_span(steps),
            slow=rank_or_run(slow["rank"], slow["run_id"]),
            slow_ms=f"{slow['common_steps_mean_ns'] / 1e6:,.3f}",
            fast=rank_or_run(fast["rank"], fast["run_id"]),
            fast_ms=f"{fast['common_steps_mean_ns'] / 1e6:,.3f}",
            gap_ms=f"{gap / 1e6:,.3f}",
            pct=f"{pct:.2f}",
        ),
        {
            "figures": {
                "common_steps": steps,
                "slowest_rank": slow["rank"],
                "fastest_rank": fast["rank"],
                "gap_ns": gap,
                "gap_pct": round(pct, 3),
                "mean_step_ns_per_rank": {
                    rank_or_run(r["rank"], r["run_id"]): r["common_steps_mean_ns"] for r in ranked
                },
                "step_source_per_rank": {
                    rank_or_run(r["rank"], r["run_id"]): r["step_source"] for r in ranked
                },
            }
        },
    )


def _span(steps: list[int]) -> str:
    if not steps:
        return t("pm.job.span_none")
    return (
        t("pm.job.span_one", step=steps[0]) if len(steps) == 1 else t("pm.job.span", a=steps[0], b=steps[-1])
    )


def _device_findings(pm: Postmortem, store: Store, runs: list[dict[str, Any]]) -> list[Finding]:
    """Every rank's device findings; the impact per category summed over the ranks; the chart of the first."""
    findings: list[Finding] = []
    by_cat: dict[str, dict[str, Any]] = {}
    rank_of = {r["run_id"]: rank_or_run(r.get("rank"), r["run_id"]) for r in runs}
    for run in runs:
        fs, chart, st = device_story(store, run)
        if st is not None:
            st.text = t("pm.who", who=rank_of[run["run_id"]], text=st.text)
            pm.what_happened.append(st)
        if chart and not pm.chart:
            pm.chart = chart
        for f in fs:
            findings.append(f)
            if f.category == "top_ops" or not f.impact_ns:
                continue
            agg = by_cat.setdefault(f.category, {"ns": 0, "per_rank": {}, "largest": f})
            agg["ns"] += f.impact_ns
            agg["per_rank"][rank_of[f.run_id]] = agg["per_rank"].get(rank_of[f.run_id], 0) + f.impact_ns
            if f.impact_ns > agg["largest"].impact_ns:
                agg["largest"] = f
    for cat, agg in sorted(by_cat.items(), key=lambda kv: -kv[1]["ns"]):
        big = agg["largest"]
        st = _finding_statement(big)
        per = ", ".join(f"{k} {v / 1e6:,.3f} ms" for k, v in agg["per_rank"].items())
        st.text = t("pm.job.lost", cat=cat, ms=f"{agg['ns'] / 1e6:,.3f}", ranks=len(agg["per_rank"]), per=per,
                    who=rank_of[big.run_id], title=big.title)  # fmt: skip
        st.evidence["figures"] = {
            **st.evidence["figures"],
            "total_ns": agg["ns"],
            "per_rank_ns": agg["per_rank"],
        }
        pm.impact.append(st)
    return findings


def build_job_postmortem(store: Store, job_id: int, baseline_run_id: int | None = None) -> Postmortem:
    runs = job_runs(store, job_id)
    if not runs:
        raise ValueError(f"no run in job {job_id}")
    grouping = job_grouping(store.cursor(), job_id)
    if len(runs) > 1 and not is_multi_rank(grouping):
        raise ValueError(
            f"job {job_id} holds {len(runs)} runs grouped by folder only (stored by an older diag): ingest its "
            "files again to group them by evidence, or ask for one run's postmortem (--run)"
        )
    name = runs[0].get("job") or str(job_id)
    ranks = sorted({r["rank"] for r in runs if r.get("rank") is not None})
    scope = t(
        "pm.job.scope", job_id=job_id, name=name, runs=len(runs), ranks=", ".join(map(str, ranks)) or "?"
    )
    if grouping and grouping.get("guess"):
        scope += t("pm.job.scope_guess")
    pm = Postmortem(None, baseline_run_id, scope, "", "", job_id=job_id)
    if grouping is not None and is_multi_rank(grouping) and grouping.get("guess"):
        pm.contributing.append(_grouping_caveat(grouping))
    rep = step_report(store, runs)
    pm.clock = rep.clock
    pm.ranks = rank_table(rep)
    pm.failed_steps = [f.to_json() for f in rep.failed]
    pm.outlier_steps = rep.outliers
    causes = _job_causes(store, runs)
    texts = _timeline(pm, causes, rep, _capture_statement(rep, name))
    serious = [rc for rc, _ in causes]
    pm.impact += failed_step_statements(rep.failed, rep, [r["run_id"] for r in runs])
    pm.impact += _step_time_statements(pm.ranks, rep)
    if serious:
        pm.impact.append(log_count_statement(serious))
    findings = _device_findings(pm, store, runs)
    if baseline_run_id is not None:
        first = next((r for r in runs if r.get("start_ns") is not None), None)
        if first is None:
            raise ValueError(f"job {job_id} has no run with device data to compare with the baseline")
        overall = baseline_story(pm, store, first["run_id"], baseline_run_id)
        overall.text += t("pm.job.measured_on", who=rank_or_run(first.get("rank"), first["run_id"]))
    conclude(pm, serious[0] if serious else None, serious, _one_per_category(findings), texts)
    pm.environment, _, pm.environment_diff = job_environment(store, runs)
    for d in pm.environment_diff:
        vals = "; ".join(f"{k}: {v}" for k, v in d["values"].items())
        pm.contributing.append(
            Statement(
                t("pm.job.env_differs", key=d["key"], values=vals),
                {"figures": d, "from": "environment per rank"},
            )
        )
    return pm


def _grouping_caveat(grouping: dict[str, Any]) -> Statement:
    """A job grouped on weak evidence (diag.grouping): every cross-rank statement above rests on it."""
    return Statement(
        t("pm.job.caveat", basis="; ".join(grouping.get("basis") or [])),
        {"figures": {"grouping": grouping}, "from": "diag.grouping"},
    )


def _one_per_category(findings: list[Finding]) -> list[Finding]:
    """The largest finding of each category over the ranks (the impact statements already sum them)."""
    best: dict[str, Finding] = {}
    for f in findings:
        if f.category not in best or f.impact_ns > best[f.category].impact_ns:
            best[f.category] = f
    return sorted(best.values(), key=lambda f: -f.impact_ns)
