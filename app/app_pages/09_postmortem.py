"""Postmortem: one page that explains what happened, with its evidence; editable notes; md/html/json downloads."""

from __future__ import annotations

import streamlit as st

from app import data
from app.app_pages import run_picker
from diag.analyses.postmortem import Postmortem, build_postmortem
from diag.report import to_html, to_json, to_markdown

NOTES = (("title", "Title"), ("owner", "Owner"), ("summary", "Summary"), ("follow_ups", "Follow-ups"))


@st.cache_data(show_spinner="Building the postmortem…", max_entries=16)
def _postmortem(fp: str, run_id: int | None, baseline: int | None) -> Postmortem:
    return build_postmortem(data.store(), run_id, baseline)


st.title("Postmortem")
fp = data.fingerprint()
scope = st.radio("Scope", ["A profiling run", "Every log in the store"], horizontal=True, key="pm_scope")
run_id: int | None = None
baseline: int | None = None
if scope == "A profiling run":
    run_id = run_picker(fp, key="pm_run")
    if run_id is None:
        st.stop()
    cuda = [r for r in data.runs(fp) if r["platform"] == "cuda" and r["run_id"] != run_id and r["start_ns"]]
    if cuda:
        names = {r["run_id"]: f"{r['run_id']} · {r['name']}" for r in cuda}
        baseline = st.selectbox(
            "CUDA baseline (optional)", [None, *names], format_func=lambda i: "none" if i is None else names[i],
            key="pm_baseline",
        )  # fmt: skip

pm = _postmortem(fp, run_id, baseline)
notes = st.session_state.setdefault("pm_notes", {})
with st.expander("Edit the report's free text", expanded=False):
    for key, label in NOTES:
        widget = st.text_area if key in ("summary", "follow_ups") else st.text_input
        notes[key] = widget(label, value=notes.get(key, ""), key=f"pm_note_{key}")
pm.notes = {k: v for k, v in notes.items() if v}

md = to_markdown(pm)
cols = st.columns(3)
cols[0].download_button("Markdown", md, file_name="postmortem.md", mime="text/markdown", key="pm_dl_md")
cols[1].download_button("HTML", to_html(pm), file_name="postmortem.html", mime="text/html", key="pm_dl_html")
cols[2].download_button(
    "JSON", to_json(pm), file_name="postmortem.json", mime="application/json", key="pm_dl_json"
)
with st.container(border=True):
    st.markdown(md)
