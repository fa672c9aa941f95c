"""Memory: the peak and the headroom against the device's capacity, when and during which op; memory over time
with the steps and the peak; the CANN components; who allocated; an OOM's figures and verdict; the KV-cache
budget. A log of no run (an OOM log alone) shows its OOM figures. Figures: diag.analyses.memory via app.data."""

from __future__ import annotations

import streamlit as st

from app import data, evidence
from app import memory_widgets as mw
from app.app_pages import run_picker
from app.tables import show_table
from app.text import md_text
from diag.analyses.evidence_view import finding_blocks
from diag.i18n import t

SCOPES = ("A profiling run", "A log of no run")
SEVERITY = {"high": ":red-badge[high]", "medium": ":orange-badge[medium]", "low": ":blue-badge[low]"}


def _run_start(fp: str, run_id: int | None) -> int | None:
    return next((r["start_ns"] for r in data.runs(fp) if r["run_id"] == run_id), None)


def _over_time(fp: str, run_id: int, summary: dict, t0: int | None) -> None:
    df = mw.samples_frame(data.memory_timeline(fp, run_id))
    if df.empty or t0 is None:
        return
    fig = mw.timeline_figure(df, data.memory_steps(fp, run_id), summary, t0)
    if fig is not None:
        st.subheader(t("page.memory.over_time"))
        st.plotly_chart(fig, width="stretch", key="mem_timeline")
        series = ", ".join(
            md_text(summary[k]) for k in ("reserved_series", "allocator_series") if summary.get(k)
        )
        st.caption(f"series: {series}; steps shaded, the peak reserved marked ×")
    stack = mw.components_figure(df, t0)
    if stack is not None:
        st.subheader(t("page.memory.by_component"))
        st.plotly_chart(stack, width="stretch", key="mem_components")


def _oom(summary: dict) -> None:
    events = summary.get("oom") or []
    if not events:
        return
    st.subheader(t("page.memory.oom"))
    for i, event in enumerate(events[:3]):
        if i or summary.get("peak_reserved_bytes") is not None:  # else the answer line above says it
            st.markdown(md_text(mw.oom_sentence(event)))
        if event.get("verdict_reason"):
            st.caption(md_text(event["verdict_reason"]))
        fig = mw.oom_figure(event)
        if fig is not None:
            st.plotly_chart(fig, width="stretch", key=f"mem_oom_{i}")
    show_table(mw.oom_frame(summary), key="mem_oom_table")


def _kv(summary: dict) -> None:
    kv = summary.get("kv_cache")
    if not kv:
        return
    st.subheader(t("page.memory.kv_budget"))
    if kv.get("verdict_reason"):
        st.markdown(md_text(kv["verdict_reason"]))
    fig = mw.kv_figure(kv)
    if fig is not None:
        st.plotly_chart(fig, width="stretch", key="mem_kv")
    show_table(mw.kv_rows(kv), key="mem_kv_table")


def _findings(fp: str, run_id: int | None, summary: dict) -> None:
    items = summary.get("findings") or []
    if not items:
        return
    st.subheader(t("page.memory.findings"))
    clock = evidence.clock_of(fp, run_id)
    for i, f in enumerate(items):
        with st.container(border=True):
            st.markdown(
                f"{SEVERITY.get(f.get('severity'), md_text(f.get('severity', '')))} **{md_text(f['title'])}**"
            )
            if f.get("suggestion"):
                st.markdown(md_text(f["suggestion"]))
            blocks = finding_blocks(
                f.get("evidence") or {}, f.get("start_ns"), f.get("end_ns"), clock, "memory"
            )
            if blocks:
                with st.expander(t("page.logs.cause_evidence")):
                    evidence.show(blocks, clock, key=f"mem_finding_{i}")


def _show(fp: str, run_id: int | None, summary: dict) -> None:
    t0 = _run_start(fp, run_id)
    st.markdown(f"**{md_text(mw.answer_text(summary, t0))}**")
    if summary.get("peak_reserved_bytes") is not None:
        cols = st.columns(5)
        for col, (label, value) in zip(cols, mw.metrics(summary), strict=True):
            col.metric(label, value)
        if mw.capacity_note(summary):
            st.caption(md_text(mw.capacity_note(summary)))
    if run_id is not None:
        _over_time(fp, run_id, summary, t0)
    if summary.get("components"):
        st.subheader(t("page.memory.peak_per_component"))
        show_table(mw.components_frame(summary), key="mem_components_table")
    if summary.get("top_allocators"):
        st.subheader(t("page.memory.top_allocators"))
        show_table(mw.allocators_frame(summary), key="mem_allocators")
    _oom(summary)
    _kv(summary)
    _findings(fp, run_id, summary)


st.title(t("page.memory.title"))
st.caption(t("page.memory.caption"))
fp = data.fingerprint()
log_files = data.oom_log_files(fp)
has_runs = any(r["start_ns"] is not None for r in data.runs(fp))
if log_files:  # with only logs in the store, the page opens on them
    scope = st.radio("Scope", SCOPES, index=0 if has_runs else 1, horizontal=True, key="mem_scope")
else:
    scope = SCOPES[0]
if scope == SCOPES[0]:
    chosen_run = run_picker(fp, key="mem_run")
    if chosen_run is None:
        st.stop()
    summary = data.memory(fp, chosen_run)
else:
    chosen_run = None
    log_file = st.selectbox("Log file", log_files, key="mem_log")
    summary = data.memory(fp, None, log_file)
if not mw.has_figures(summary):
    st.info(t("page.memory.empty"))
    st.stop()
_show(fp, chosen_run, summary)
