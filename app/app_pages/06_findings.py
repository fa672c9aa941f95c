"""Findings: what costs the most device time in this run, ranked by impact, each with its evidence."""

from __future__ import annotations

import streamlit as st

from app import data
from app.app_pages import run_picker

SEVERITY = {
    "high": ":red-badge[high]",
    "medium": ":orange-badge[medium]",
    "low": ":blue-badge[low]",
    "info": ":gray-badge[info]",
}

st.title("Findings")
fp = data.fingerprint()
run_id = run_picker(fp, key="findings_run")
if run_id is None:
    st.stop()
items = data.findings(fp, run_id)
if not items:
    st.info("No findings for this run.")
st.caption(
    f"{len(items)} finding(s), ranked by impact on the run's device time. Severity: ≥5% high, ≥3% medium."
)
for i, f in enumerate(items):
    with st.container(border=True):
        st.markdown(
            f"{SEVERITY.get(f.severity, f.severity)} **{f.title}**  \n"
            f"impact {f.impact_pct:.2f}% · {f.impact_ns / 1e6:,.3f} ms · {f.category}"
        )
        st.write(f.suggestion)
        with st.expander("evidence"):
            st.json(f.evidence, expanded=False)
        if f.start_ns is not None and st.button(
            "Open this time range in the timeline", key=f"finding_tl_{i}"
        ):
            data.open_in_timeline(run_id, f.start_ns, f.end_ns)
            st.switch_page("app_pages/03_timeline.py")
