"""Findings: what costs the most device time in this run, ranked by impact, each with its evidence."""

from __future__ import annotations

import streamlit as st

from app import data, evidence
from app.app_pages import run_picker
from app.text import md_text
from diag.analyses import owners
from diag.analyses.evidence_view import finding_blocks
from diag.i18n import t

SEVERITY = {
    "high": ":red-badge[high]",
    "medium": ":orange-badge[medium]",
    "low": ":blue-badge[low]",
    "info": ":gray-badge[info]",
}

st.title(t("page.findings.title"))
fp = data.fingerprint()
run_id = run_picker(fp, key="findings_run")
if run_id is None:
    st.stop()
items = data.findings(fp, run_id)
clock = evidence.clock_of(fp, run_id)
if not items:
    st.info(t("page.findings.empty"))
st.caption(t("page.findings.caption", n=len(items)))
for _, heading, group in owners.group(enumerate(items), lambda it: it[1].resolved_owner()):
    st.subheader(heading)  # who acts: rules/owners.toml, in its order; ranked by impact within
    for i, f in group:
        who = owners.of_finding(f)
        with st.container(border=True):
            st.markdown(
                f"{SEVERITY.get(f.severity, f.severity)} **{md_text(f.title)}**  \n"
                f"impact {f.impact_pct:.2f}% · {f.impact_ns / 1e6:,.3f} ms · {md_text(f.category)}"
            )
            st.markdown(md_text(f.suggestion))
            if who.reason:
                steps = " → ".join(f"{s['step']} ({s['owner']})" for s in who.steps)
                st.caption(md_text(f"{who.reason} {steps}".strip()))
            blocks = finding_blocks(f.evidence, f.start_ns, f.end_ns, clock, f.category)
            if blocks:
                with st.expander(t("page.logs.cause_evidence")):
                    evidence.show(blocks, clock, key=f"finding_{i}")
