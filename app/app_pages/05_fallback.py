"""Fallback ops: tasks that left the AI Core for the AI CPU, and inferred host fallbacks."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import data
from app.app_pages import run_picker
from app.glossary import help_for
from app.tables import show_table
from app.text import md_text
from diag.i18n import t

st.title(t("page.fallback.title"))
fp = data.fingerprint()
run_id = run_picker(fp, key="fallback_run")
if run_id is None:
    st.stop()
ops = data.fallbacks(fp, run_id)
device = [o for o in ops if o.where == "AI_CPU"]
host = [o for o in ops if o.where == "host"]
c = st.columns(3)
c[0].metric(t("page.fallback.tasks"), f"{sum(o.count for o in device):,}", help=help_for("AI_CPU"))
c[1].metric(
    t("page.fallback.time"), f"{sum(o.total_ns for o in device) / 1e6:,.3f} ms", help=help_for("AI_CPU")
)
share = sum(o.share_of_step_pct or 0 for o in device)
c[2].metric(t("page.fallback.share"), f"{share:.2f}%", help=help_for("E2E"))
if not device:
    st.success(t("page.fallback.none"))
for i, o in enumerate(device):
    with st.container(border=True):
        st.markdown(
            t(
                "page.fallback.op_line",
                op=md_text(o.op_type),
                n=o.count,
                ms=f"{o.total_ns / 1e6:,.3f}",
                pct=f"{(o.share_of_step_pct or 0):.2f}",
                longest=f"{o.max_ns / 1e3:,.1f}",
            )  # fmt: skip
        )
        st.markdown(md_text(o.hint))
        show_table(
            pd.DataFrame(
                {
                    t("page.fallback.col_kernels"): [", ".join(o.names)],
                    t("page.fallback.col_shapes"): [" | ".join(o.input_shapes) or "—"],
                    t("page.fallback.col_dtypes"): [" | ".join(o.input_dtypes) or "—"],
                    t("page.fallback.col_launched_by"): [", ".join(o.host_ops) or "—"],
                }
            )
        )
        if o.log_evidence:
            with st.expander(t("page.fallback.log_lines", n=len(o.log_evidence))):
                for rec in data.log_lines(fp, tuple(o.log_evidence[:20])):
                    st.caption(md_text(f"{rec['file']}:{rec['line_no']}"))
                    st.code(rec["raw"], language=None)
        if o.call_stack:
            with st.expander(t("page.fallback.call_stack")):
                st.code(o.call_stack.replace(";", "\n"), language=None)
        if st.button(t("page.fallback.show_on_timeline"), key=f"fb_tl_{i}"):
            data.open_in_timeline(run_id, o.first_start_ns, o.last_end_ns, names=o.names)
            st.switch_page("app_pages/03_timeline.py")
if host:
    st.subheader(t("page.fallback.inferred"))
    st.caption(t("page.fallback.inferred_caption"))
    show_table(
        pd.DataFrame(
            [
                {
                    "op": o.op_type,
                    "calls": o.count,
                    "host self (ms)": round(o.total_ns / 1e6, 3),
                    "longest (ms)": round(o.max_ns / 1e6, 3),
                }
                for o in host
            ]
        )
    )
