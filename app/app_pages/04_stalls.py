"""Stalls: where device time goes, per step, next to the profiler's own step_trace_time figures."""

from __future__ import annotations

import streamlit as st

from app import data, page_parts, widgets
from app.app_pages import run_picker
from app.glossary import help_for
from app.tables import show_table
from diag.i18n import t

st.title(t("page.stalls.title"))
st.caption(t("page.stalls.caption"))
fp = data.fingerprint()
run_id = run_picker(fp, key="stalls_run")
if run_id is None:
    st.stop()
bd = data.breakdown(fp, run_id)
if not bd.steps:
    st.info(t("page.stalls.empty"))
    st.stop()
total = bd.total
c = st.columns(5)
c[0].metric(t("page.stalls.e2e"), f"{total.e2e_ns / 1e6:,.3f} ms", help=help_for("E2E"))
c[1].metric(
    t("page.stalls.computing"), f"{100 * total.computing_ns / total.e2e_ns:.1f}%", help=help_for("Computing")
)
c[2].metric(
    t("page.stalls.comm_exposed"),
    f"{100 * total.buckets['comm_exposed'] / total.e2e_ns:.1f}%",
    help=help_for("Communication(Not Overlapped)"),
)
c[3].metric(
    t("page.stalls.ai_cpu"), f"{100 * total.buckets['ai_cpu'] / total.e2e_ns:.2f}%", help=help_for("AI_CPU")
)
c[4].metric(t("page.stalls.free"), f"{100 * total.free_ns / total.e2e_ns:.1f}%", help=help_for("Free"))
counts = data.kernel_counts(fp, run_id)
page_parts.kernel_count_metrics(counts)
st.plotly_chart(widgets.breakdown_figure(bd), width="stretch", key="stalls_chart")
show_table(widgets.breakdown_frame(bd), helps=widgets.breakdown_helps())
st.subheader(t("page.stalls.versus"))
cmp = widgets.export_comparison_frame(bd)
if cmp.empty:
    st.info(t("page.stalls.no_step_trace"))
else:
    bad = cmp[cmp["agrees (≤1%)"] == "no"]
    if len(bad):
        st.warning(t("page.stalls.export_differs", n=len(bad)))
    show_table(cmp)
st.caption(t("page.stalls.steps_from", source=bd.step_source.replace("_", " ")))
