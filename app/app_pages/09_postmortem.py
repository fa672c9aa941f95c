"""Postmortem: one page that explains what happened, with its evidence; notes saved with the run or job;
md/html/json downloads."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import data, evidence
from app.app_pages import run_picker
from app.text import md_cells, md_text, plain
from diag import report
from diag.analyses.evidence_view import RunClock, evidence_blocks
from diag.analyses.postmortem_model import Postmortem
from diag.i18n import severity_word, t
from diag.report import md_escape, to_html, to_json, to_markdown

# the note fields (their labels: page.postmortem.note_<field>) and the scopes (text keys)
NOTES = ("title", "owner", "summary", "follow_ups")
SCOPES = ("page.postmortem.scope_run", "page.postmortem.scope_job", "page.postmortem.scope_logs")
GPU_BASELINE = {"cuda": "", "rocm": " · GPU baseline (ROCm)"}  # platform -> what its label adds


def _load_notes(scope_key: str, run_id: int | None, job_id: int | None) -> None:
    """Fill the note widgets from the store when the page opens on a scope (or the scope changes)."""
    keys = [f"pm_note_{key}" for key in NOTES]
    if st.session_state.get("pm_notes_scope") == scope_key and all(k in st.session_state for k in keys):
        return  # (Streamlit drops a widget's state once a run leaves it out: back from another page, reload)
    saved = data.notes(run_id, job_id)
    for key in NOTES:
        st.session_state[f"pm_note_{key}"] = saved.get(key, "")
    st.session_state["pm_notes_scope"] = scope_key


def _save_notes(run_id: int | None, job_id: int | None) -> None:
    values = {key: st.session_state.get(f"pm_note_{key}", "") for key in NOTES}
    data.save_notes(values, run_id, job_id)


def _table(columns: tuple[str, ...] | list[str], rows: list[list[str]]) -> None:
    if rows:
        st.table(
            pd.DataFrame(md_cells(rows), columns=list(columns)).set_index(columns[0])
        )  # cells are Markdown


def _statement(stmt: dict, clock: RunClock, key: str) -> None:
    """One statement: its text, its evidence collapsed (tables, log lines, the time range)."""
    st.markdown(f"- {md_escape(stmt['text'])}")
    blocks = evidence_blocks(stmt.get("evidence") or {}, clock)
    if blocks:
        with st.expander(t("report.evidence")):
            evidence.show(blocks, clock, key=key)


def _root_cause(pm: Postmortem, clock: RunClock) -> None:
    r = pm.root_cause
    if not r:
        return
    with st.container(border=True):
        st.markdown(
            f"**{t('report.root_cause_category')}** {md_escape(r['category'])} ({md_escape(severity_word(r['severity']))}, "
            f"{t('report.root_cause_from', source=md_escape(r['source']))})"
        )
        if r.get("explanation"):
            st.markdown(md_escape(r["explanation"]))
        _statement(r["statement"], clock, key="pm_rc")


def _report(pm: Postmortem) -> None:
    """The postmortem drawn natively: the same sections, figures and evidence as the downloads."""
    clock = report.clock(pm)
    notes = pm.notes or {}
    st.header(md_escape(report.title(pm)))  # titles, op names and paths are text, never Markdown / HTML
    st.caption(t("report.scope", scope=md_escape(pm.scope)))
    st.markdown(md_escape(notes.get("summary") or pm.summary))
    if notes.get("owner"):
        st.caption(t("report.owner", owner=md_escape(notes["owner"])))
    _root_cause(pm, clock)
    for n, (name, items) in enumerate(report.sections(pm)):
        if name == t("report.section.root_cause"):
            continue  # drawn above, with its category
        st.subheader(name)
        if not items:
            st.caption(t("report.nothing"))
        grouped = (
            report.action_groups(items)
            if name == report.actions_heading()
            else [("", items[: report.MAX_ROWS])]
        )
        for g, (heading, group) in enumerate(grouped):
            if heading:
                st.markdown(
                    f"**{md_escape(heading)}**"
                )  # the owner: code, a setting, the stack, vendor, hardware
            for i, stmt in enumerate(group):
                _statement(stmt, clock, key=f"pm_{n}_{g}_{i}")
        if len(items) > report.MAX_ROWS:
            st.caption(t("report.more", n=len(items) - report.MAX_ROWS))
    if pm.chart:
        st.subheader(t("report.section.chart"))
        rows = sorted(pm.chart, key=lambda c: c["ns"])[-report.MAX_ROWS :]  # the largest at the top
        fig = go.Figure(
            go.Bar(
                x=[c["ns"] / 1e6 for c in rows],
                y=[plain(c["label"]) for c in rows],
                orientation="h",
                text=[f"{c['pct']:.1f}%" for c in rows],
                hovertemplate="%{y}: %{x:.3f} ms<extra></extra>",
            )
        )
        fig.update_layout(height=60 + 26 * len(rows), margin={"l": 10, "r": 10, "t": 10, "b": 40})
        fig.update_xaxes(title="device time (ms)")
        fig.update_yaxes(automargin=True)
        st.plotly_chart(fig, config={"displayModeBar": False})
    if pm.comparison:
        st.subheader(t("report.section.comparison"))
        for w in pm.comparison.get("warnings", []):
            st.warning(t("page.postmortem.not_comparable", why=md_text(w)))
        _table(report.columns(report.COMPARISON_COLUMNS), report.comparison_rows(pm))
    for name, warnings, columns, rows in report.serving_tables(pm):
        st.subheader(md_text(name))
        for w in warnings:
            st.warning(md_text(w))
        _table(columns, rows)
    if report.rank_rows(pm):
        st.subheader(t("report.section.ranks"))
        _table(report.columns(report.RANK_COLUMNS), report.rank_rows(pm))
    st.subheader(t("report.section.environment"))
    for d in pm.environment_diff:
        st.warning(
            md_text(f"Ranks differ in {d['key']}: " + "; ".join(f"{k}: {v}" for k, v in d["values"].items()))
        )
    if not pm.environment:
        st.caption(t("report.no_environment"))
    _table(("setting", "value"), report.environment_rows(pm))
    if notes.get("follow_ups"):
        st.subheader(t("report.section.follow_ups"))
        st.text(notes["follow_ups"])


st.title(t("page.postmortem.title"))
fp = data.fingerprint()
scopes = [t(key) for key in SCOPES]
if st.session_state.get("pm_scope") not in (*scopes, None):  # chosen in the other language
    del st.session_state["pm_scope"]
scope = scopes.index(st.radio(t("page.postmortem.scope"), scopes, horizontal=True, key="pm_scope"))
run_id: int | None = None
job_id: int | None = None
baseline: int | None = None
runs = data.runs(fp)
if scope == 0:
    run_id = run_picker(fp, key="pm_run")
    if run_id is None:
        st.stop()
elif scope == 1:
    # only the jobs the evidence grouped (diag.grouping): a one-run "job" is its run's postmortem
    jobs = {
        j["job_id"]: f"{j['job_id']} · {j['name']} · {j['ranks']} rank(s)"
        + (" · grouping is a guess" if (j["grouping"] or {}).get("guess") else "")
        for j in data.jobs(fp)
        if j["multi_rank"]
    }
    if not jobs:
        st.info(t("page.postmortem.no_job"))
        st.stop()
    job_id = st.selectbox(t("page.postmortem.job"), list(jobs), format_func=jobs.get, key="pm_job")
if scope != 2:
    # GPU runs as baselines; a ROCm one is offered as such, never silently as a CUDA baseline
    cuda = [r for r in runs if r["platform"] in GPU_BASELINE and r["run_id"] != run_id and r["start_ns"]]
    cuda = [r for r in cuda if job_id is None or r["job_id"] != job_id]
    if cuda:
        names = {r["run_id"]: f"{r['run_id']} · {r['name']}{GPU_BASELINE[r['platform']]}" for r in cuda}
        rocm = any(r["platform"] == "rocm" for r in cuda)
        baseline = st.selectbox(
            t("page.postmortem.gpu_baseline" if rocm else "page.postmortem.cuda_baseline"), [None, *names],
            format_func=lambda i: t("page.postmortem.no_baseline") if i is None else names[i], key="pm_baseline",
        )  # fmt: skip

scope_key = f"job:{job_id}" if job_id is not None else (f"run:{run_id}" if run_id is not None else "logs")
_load_notes(scope_key, run_id, job_id)
pm = data.postmortem(fp, run_id, baseline, job_id)
with st.expander(
    t("page.postmortem.edit_notes", scope=t(f"page.postmortem.saved_with_{scope_key.split(':')[0]}"))
):
    for key in NOTES:
        widget = st.text_area if key in ("summary", "follow_ups") else st.text_input
        widget(
            t(f"page.postmortem.note_{key}"),
            key=f"pm_note_{key}",
            on_change=_save_notes,
            args=(run_id, job_id),
        )
pm.notes = data.notes(run_id, job_id)
if pm.notes.get("updated_at"):
    st.caption(t("page.postmortem.notes_saved", at=pm.notes["updated_at"]))

cols = st.columns(3)
cols[0].download_button(
    "Markdown", to_markdown(pm), file_name="postmortem.md", mime="text/markdown", key="pm_dl_md"
)
cols[1].download_button("HTML", to_html(pm), file_name="postmortem.html", mime="text/html", key="pm_dl_html")
cols[2].download_button(
    "JSON", to_json(pm), file_name="postmortem.json", mime="application/json", key="pm_dl_json"
)
with st.container(border=True):
    _report(pm)
