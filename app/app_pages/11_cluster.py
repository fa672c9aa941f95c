"""Cluster: a multi-rank job — step time per rank and step, slow ranks and links, and the rank to open next."""

from __future__ import annotations

import streamlit as st

from app import cluster_widgets as cw
from app import data, moe_widgets, state, widgets
from app.tables import show_table
from diag.grouping import describe_grouping
from diag.i18n import t


def severity_badge(severity: str) -> str:
    """A finding's severity as a coloured badge, in the session's language."""
    colour = {"high": "red", "medium": "orange", "low": "blue"}.get(severity)
    word = {"high": t("page.cluster.high"), "medium": t("page.cluster.medium"), "low": t("page.cluster.low")}
    return f":{colour}-badge[{word[severity]}]" if colour else severity


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


st.title(t("page.cluster.title"))
fp = data.fingerprint()
jobs = [j for j in data.jobs(fp) if j["multi_rank"]]  # only runs the data says are ranks of one job
if not jobs:
    st.info(t("page.cluster.empty"))
    st.stop()
labels = {
    j["job_id"]: f"{j['job_id']} · {j['name']} · {t('page.cluster.n_ranks', n=j['ranks'])}"
    + (t("page.cluster.guess") if j["grouping"].get("guess") else "")
    for j in jobs
}
job_ids = list(labels)
job_id = st.selectbox(
    t("page.cluster.job"),
    job_ids,
    index=job_ids.index(_job_to_open(job_ids)),
    format_func=labels.get,
    key="cluster_job",
)
state.select_job(job_id)
view = data.cluster(fp, job_id)
if view.grouping and view.grouping.get("guess"):
    st.warning(widgets.md(describe_grouping(view.grouping)))
else:
    st.caption(widgets.md(describe_grouping(view.grouping)))
if not view.ranks:
    st.info(t("page.cluster.no_steps"))
    st.stop()

steps = max(r["steps"] for r in view.ranks)
st.caption(
    t(
        "page.cluster.summary",
        ranks=len(view.ranks),
        steps=steps,
        source=view.step_source,
        groups=len(view.groups),
        links=len(view.links),
    )
)
opened = st.session_state.pop("cluster_opened", None)
if opened:
    st.success(t("page.cluster.opened", rank=opened[0], run=opened[1]))
if view.open_next:
    with st.container(border=True):
        st.markdown(
            t(
                "page.cluster.open_next",
                rank=view.open_next.rank,
                run=view.open_next.run_id,
                why=widgets.md(view.open_next.why),
            )
        )
        if st.button(
            t("page.cluster.open_rank", rank=view.open_next.rank), key="cluster_open_next", type="primary"
        ):
            open_rank(view.open_next.rank, view.open_next.run_id)

st.subheader(t("page.cluster.findings"))
if not view.findings:
    st.info(t("page.cluster.no_findings"))
run_of = {r["rank"]: r["run_id"] for r in view.ranks}
for i, f in enumerate(view.findings):
    with st.container(border=True):
        st.markdown(
            f"{severity_badge(f.severity)} **{widgets.md(f.title)}**  \n"
            + t(
                "page.cluster.impact",
                pct=f"{f.impact_pct:.2f}",
                ms=f"{f.impact_ns / 1e6:,.3f}",
                category=f.category,
            )
        )
        st.markdown(widgets.md(f.suggestion))
        with st.expander(t("page.cluster.evidence")):
            st.json(f.evidence, expanded=False)
        if f.rank in run_of and st.button(t("page.cluster.open_rank", rank=f.rank), key=f"cluster_open_{i}"):
            open_rank(f.rank, run_of[f.rank])

tab_steps, tab_ranks, tab_groups, tab_links = st.tabs(
    [
        t("page.cluster.tab_steps"),
        t("page.cluster.tab_ranks"),
        t("page.cluster.tab_groups"),
        t("page.cluster.tab_links"),
    ]
)
with tab_steps:
    st.caption(t("page.cluster.steps_caption"))
    metrics = cw.step_metrics()
    metric = st.radio(t("page.cluster.show"), list(metrics), horizontal=True, key="cluster_metric")
    st.plotly_chart(cw.step_heatmap(view, metrics[metric]), width="stretch")
with tab_ranks:
    st.plotly_chart(cw.rank_breakdown_figure(view), width="stretch")
    show_table(cw.ranks_frame(view))
    rank = st.selectbox(t("page.cluster.rank"), list(run_of), key="cluster_rank")
    if st.button(t("page.cluster.open_rank", rank=rank), key="cluster_open_rank"):
        open_rank(rank, run_of[rank])
with tab_groups:
    if not view.groups:
        st.info(t("page.cluster.no_groups"))
    else:
        show_table(cw.groups_frame(view))
        names = {
            g[
                "group"
            ]: f"{g['label']} · {t('page.cluster.n_ranks', n=len(g['members']))} · …{g['group'][-6:]}"
            for g in view.groups
        }
        focus = view.open_next.rank if view.open_next else None
        first = next((i for i, g in enumerate(view.groups) if focus in g["members"]), 0)
        gid = st.selectbox(
            t("page.cluster.group"), list(names), index=first, format_func=names.get, key="cluster_group"
        )
        st.plotly_chart(
            cw.group_wait_figure(next(g for g in view.groups if g["group"] == gid)), width="stretch"
        )
with tab_links:
    transports = sorted({x["transport"] for x in view.links})
    if not transports:
        st.info(t("page.cluster.no_links"))
    else:
        slow = next((transports.index(x["transport"]) for x in view.links if x["slow"]), 0)
        transport = st.selectbox(t("page.cluster.transport"), transports, index=slow, key="cluster_transport")
        st.plotly_chart(cw.link_heatmap(view, transport), width="stretch")
        show_table(cw.links_frame(view, transport))
    if view.transports:
        st.caption(t("page.cluster.transports"))
        show_table(cw.transports_frame(view))

moe_widgets.section(data.moe(fp, job_id), lambda phase: data.moe_grid(fp, job_id, phase))  # MoE (#22)
