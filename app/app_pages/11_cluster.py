"""Cluster: a multi-rank job — step time per rank and step, slow ranks and links, and the rank to open next."""

from __future__ import annotations

import streamlit as st

from app import cluster_widgets as cw
from app import data, moe_widgets, state, widgets
from app.tables import show_table
from diag.grouping import describe_grouping

SEVERITY = {"high": ":red-badge[high]", "medium": ":orange-badge[medium]", "low": ":blue-badge[low]"}


def open_rank(rank: int, run_id: int) -> None:
    """Select the rank's run for the other pages; go to its Stalls when it has device data."""
    data.open_run(run_id)
    run = next((r for r in data.runs(fp) if r["run_id"] == run_id), None)
    if run is not None and run["start_ns"] is not None:
        st.switch_page("app_pages/04_stalls.py")
    st.session_state["cluster_opened"] = (rank, run_id)
    st.rerun()  # to say so at the top of the page


def _job_to_open(job_ids: list[int]) -> int:
    """The job holding the selected run, else the job opened last, else the first (most ranks)."""
    run = next((r for r in data.runs(fp) if r["run_id"] == state.selected_run()), None)
    for candidate in (run["job_id"] if run else None, state.selected_job()):
        if candidate in job_ids:
            return candidate
    return job_ids[0]


st.title("Cluster")
fp = data.fingerprint()
jobs = [j for j in data.jobs(fp) if j["multi_rank"]]  # only runs the data says are ranks of one job
if not jobs:
    st.info(
        "No multi-rank job: no stored runs that the data says are ranks of one job (known, distinct ranks and "
        "overlapping capture windows; sharing a folder is not enough). Upload every rank's export "
        "(`rank*_ascend_pt/`) of one run on the Upload page."
    )
    st.stop()
labels = {
    j["job_id"]: f"{j['job_id']} · {j['name']} · {j['ranks']} ranks"
    + (" · grouping is a guess" if j["grouping"].get("guess") else "")
    for j in jobs
}
job_ids = list(labels)
job_id = st.selectbox(
    "Job", job_ids, index=job_ids.index(_job_to_open(job_ids)), format_func=labels.get, key="cluster_job"
)
state.select_job(job_id)
view = data.cluster(fp, job_id)
if view.grouping and view.grouping.get("guess"):
    st.warning(widgets.md(describe_grouping(view.grouping)))
else:
    st.caption(widgets.md(describe_grouping(view.grouping)))
if not view.ranks:
    st.info("This job's runs have no step data (step_trace_time.csv or ProfilerStep ranges).")
    st.stop()

steps = max(r["steps"] for r in view.ranks)
st.caption(
    f"{len(view.ranks)} ranks · {steps} step(s) · step figures from `{view.step_source}` · "
    f"{len(view.groups)} communication group(s) · {len(view.links)} link(s)"
)
opened = st.session_state.pop("cluster_opened", None)
if opened:
    st.success(
        f"Rank {opened[0]} (run {opened[1]}) is selected for the other pages. It holds no device timeline "
        "(only step and communication summaries), so they have little to show for it."
    )
if view.open_next:
    with st.container(border=True):
        st.markdown(
            f"**Open rank {view.open_next.rank} next** (run {view.open_next.run_id}): {widgets.md(view.open_next.why)}"
        )
        if st.button(f"Open rank {view.open_next.rank}", key="cluster_open_next", type="primary"):
            open_rank(view.open_next.rank, view.open_next.run_id)

st.subheader("Findings")
if not view.findings:
    st.info("No slow rank, imbalance or slow link in this job.")
run_of = {r["rank"]: r["run_id"] for r in view.ranks}
for i, f in enumerate(view.findings):
    with st.container(border=True):
        st.markdown(
            f"{SEVERITY.get(f.severity, f.severity)} **{widgets.md(f.title)}**  \n"
            f"impact {f.impact_pct:.2f}% of a rank's step time · {f.impact_ns / 1e6:,.3f} ms · {f.category}"
        )
        st.markdown(widgets.md(f.suggestion))
        with st.expander("evidence"):
            st.json(f.evidence, expanded=False)
        if f.rank in run_of and st.button(f"Open rank {f.rank}", key=f"cluster_open_{i}"):
            open_rank(f.rank, run_of[f.rank])

tab_steps, tab_ranks, tab_groups, tab_links = st.tabs(["Step time", "Per rank", "Groups", "Links"])
with tab_steps:
    st.caption(
        "In a synchronous job every rank's step time is about the same: the rank the others wait for shows in "
        "*computing*, the ranks that wait in *communication not overlapped*. Blue is below the job's median, red above (the scale spans at least ±10 %)."
    )
    metric = st.radio("Show", list(cw.STEP_METRICS), horizontal=True, key="cluster_metric")
    st.plotly_chart(cw.step_heatmap(view, cw.STEP_METRICS[metric]), width="stretch")
with tab_ranks:
    st.plotly_chart(cw.rank_breakdown_figure(view), width="stretch")
    show_table(cw.ranks_frame(view))
    rank = st.selectbox("Rank", list(run_of), key="cluster_rank")
    if st.button(f"Open rank {rank}", key="cluster_open_rank"):
        open_rank(rank, run_of[rank])
with tab_groups:
    if not view.groups:
        st.info("No communication.json in this job.")
    else:
        show_table(cw.groups_frame(view))
        names = {
            g["group"]: f"{g['label']} · {len(g['members'])} ranks · …{g['group'][-6:]}" for g in view.groups
        }
        focus = view.open_next.rank if view.open_next else None
        first = next((i for i, g in enumerate(view.groups) if focus in g["members"]), 0)
        gid = st.selectbox("Group", list(names), index=first, format_func=names.get, key="cluster_group")
        st.plotly_chart(
            cw.group_wait_figure(next(g for g in view.groups if g["group"] == gid)), width="stretch"
        )
with tab_links:
    transports = sorted({x["transport"] for x in view.links})
    if not transports:
        st.info("No communication_matrix.json in this job.")
    else:
        slow = next((transports.index(x["transport"]) for x in view.links if x["slow"]), 0)
        transport = st.selectbox("Transport", transports, index=slow, key="cluster_transport")
        st.plotly_chart(cw.link_heatmap(view, transport), width="stretch")
        show_table(cw.links_frame(view, transport))
    if view.transports:
        st.caption("Bandwidth per rank and transport (communication.json)")
        show_table(cw.transports_frame(view))

moe_widgets.section(data.moe(fp, job_id), lambda phase: data.moe_grid(fp, job_id, phase))  # MoE (#22)
