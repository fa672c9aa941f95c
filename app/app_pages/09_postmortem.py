"""Postmortem: one page that explains what happened, with its evidence; notes saved with the run or job;
md/html/json downloads."""

from __future__ import annotations

import streamlit as st

from app import data
from app.app_pages import run_picker
from diag.report import to_html, to_json, to_markdown

NOTES = (("title", "Title"), ("owner", "Owner"), ("summary", "Summary"), ("follow_ups", "Follow-ups"))
SCOPES = ("A profiling run", "A job (every rank)", "Every log in the store")
GPU_BASELINE = {"cuda": "", "rocm": " · GPU baseline (ROCm)"}  # platform -> what its label adds


def _load_notes(scope_key: str, run_id: int | None, job_id: int | None) -> None:
    """Fill the note widgets from the store when the page opens on a scope (or the scope changes)."""
    keys = [f"pm_note_{key}" for key, _ in NOTES]
    if st.session_state.get("pm_notes_scope") == scope_key and all(k in st.session_state for k in keys):
        return  # (Streamlit drops a widget's state once a run leaves it out: back from another page, reload)
    saved = data.notes(run_id, job_id)
    for key, _ in NOTES:
        st.session_state[f"pm_note_{key}"] = saved.get(key, "")
    st.session_state["pm_notes_scope"] = scope_key


def _save_notes(run_id: int | None, job_id: int | None) -> None:
    values = {key: st.session_state.get(f"pm_note_{key}", "") for key, _ in NOTES}
    data.save_notes(values, run_id, job_id)


st.title("Postmortem")
fp = data.fingerprint()
scope = st.radio("Scope", SCOPES, horizontal=True, key="pm_scope")
run_id: int | None = None
job_id: int | None = None
baseline: int | None = None
runs = data.runs(fp)
if scope == SCOPES[0]:
    run_id = run_picker(fp, key="pm_run")
    if run_id is None:
        st.stop()
elif scope == SCOPES[1]:
    # only the jobs the evidence grouped (diag.grouping): a one-run "job" is its run's postmortem
    jobs = {
        j["job_id"]: f"{j['job_id']} · {j['name']} · {j['ranks']} rank(s)"
        + (" · grouping is a guess" if (j["grouping"] or {}).get("guess") else "")
        for j in data.jobs(fp)
        if j["multi_rank"]
    }
    if not jobs:
        st.info(
            "No multi-rank job: no stored runs that the data says are ranks of one job (known, distinct ranks "
            "and overlapping capture windows; sharing a folder is not enough). Pick a run instead."
        )
        st.stop()
    job_id = st.selectbox("Job", list(jobs), format_func=jobs.get, key="pm_job")
if scope != SCOPES[2]:
    # GPU runs as baselines; a ROCm one is offered as such, never silently as a CUDA baseline
    cuda = [r for r in runs if r["platform"] in GPU_BASELINE and r["run_id"] != run_id and r["start_ns"]]
    cuda = [r for r in cuda if job_id is None or r["job_id"] != job_id]
    if cuda:
        names = {r["run_id"]: f"{r['run_id']} · {r['name']}{GPU_BASELINE[r['platform']]}" for r in cuda}
        rocm = any(r["platform"] == "rocm" for r in cuda)
        baseline = st.selectbox(
            "GPU baseline (optional: CUDA or ROCm)" if rocm else "CUDA baseline (optional)", [None, *names],
            format_func=lambda i: "none" if i is None else names[i], key="pm_baseline",
        )  # fmt: skip

scope_key = f"job:{job_id}" if job_id is not None else (f"run:{run_id}" if run_id is not None else "logs")
_load_notes(scope_key, run_id, job_id)
pm = data.postmortem(fp, run_id, baseline, job_id)
with st.expander(
    "Edit the report's free text (saved with the " + scope_key.split(":")[0] + ")", expanded=False
):
    for key, label in NOTES:
        widget = st.text_area if key in ("summary", "follow_ups") else st.text_input
        widget(label, key=f"pm_note_{key}", on_change=_save_notes, args=(run_id, job_id))
pm.notes = data.notes(run_id, job_id)
if pm.notes.get("updated_at"):
    st.caption(f"Notes saved {pm.notes['updated_at']} UTC")

md = to_markdown(pm)
cols = st.columns(3)
cols[0].download_button("Markdown", md, file_name="postmortem.md", mime="text/markdown", key="pm_dl_md")
cols[1].download_button("HTML", to_html(pm), file_name="postmortem.html", mime="text/html", key="pm_dl_html")
cols[2].download_button(
    "JSON", to_json(pm), file_name="postmortem.json", mime="application/json", key="pm_dl_json"
)
with st.container(border=True):
    st.markdown(md)
