"""The MoE section of the Cluster page: expert load heatmap (layer × expert, prefill / decode) and, per rank,
GroupedMatmul vs all-to-all wait (diag.analyses.moe).  No SQL, no parsing: the page hands in app.data results."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import widgets
from app.tables import show_table
from diag.analyses.moe import MoeView
from diag.i18n import t

SECTION = "MoE expert load"  # the English heading; the page draws t("page.moe.title")


def load_heatmap(cells: list[tuple[int, int, int]], phase: str) -> go.Figure:
    df = pd.DataFrame(cells, columns=["layer", "expert", "tokens"])  # internal names: the axes say them
    grid = df.pivot(index="layer", columns="expert", values="tokens").sort_index()
    fig = go.Figure(
        go.Heatmap(
            z=grid.to_numpy(), x=[str(c) for c in grid.columns], y=[str(i) for i in grid.index],
            colorscale="Reds", colorbar={"title": t("page.moe.tokens")},
            hovertemplate=t("page.moe.hover_load"),
        )
    )  # fmt: skip
    fig.update_layout(
        title=t("page.moe.load_title", phase=phase), xaxis_title=t("page.moe.expert"),
        yaxis_title=t("page.moe.layer"),
        yaxis={"autorange": "reversed", "type": "category"}, xaxis={"type": "category"},
        height=max(260, min(900, 120 + 18 * len(grid.index))), margin={"t": 40, "b": 40},
    )  # fmt: skip
    return fig


def rank_bars(view: MoeView) -> go.Figure:
    ranks = [str(r["rank"]) for r in view.ranks]
    fig = go.Figure()
    fig.add_bar(name=t("page.moe.gmm_per_step"), x=ranks, y=[(r["grouped_matmul_ns"] or 0) / 1e6 for r in view.ranks],
                marker_color="#1f77b4")  # fmt: skip
    fig.add_bar(name=t("page.moe.wait_per_step"), x=ranks, y=[(r["alltoall_wait_ns"] or 0) / 1e6 for r in view.ranks],
                marker_color="#9467bd")  # fmt: skip
    fig.update_layout(barmode="group", xaxis_title=t("page.cluster.axis_rank"),
                      yaxis_title=t("page.cluster.axis_ms_per_step"), xaxis={"type": "category"},
                      height=320, margin={"t": 30, "b": 40}, legend={"orientation": "h"})  # fmt: skip
    return fig


def ranks_frame(view: MoeView) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                t("page.cluster.col.rank"): r["rank"], t("page.cluster.col.run"): r["run_id"],
                t("page.moe.col.tokens"): r["tokens"],
                t("page.moe.col.gmm_ms"): None if r["grouped_matmul_ns"] is None else r["grouped_matmul_ns"] / 1e6,
                t("page.moe.col.vs_median"): r["vs_median_pct"],
                t("page.moe.col.wait_ms"): None if r["alltoall_wait_ns"] is None else r["alltoall_wait_ns"] / 1e6,
            }
            for r in view.ranks
        ]
    )  # fmt: skip


def section(view: MoeView, grid: Callable[[str | None], list[tuple[int, int, int]]]) -> None:
    """The section: nothing but one line when the job has no expert load and no MoE ops."""
    st.subheader(t("page.moe.title"))
    if not view.layers and not any(r["grouped_matmul_ns"] for r in view.ranks):
        st.caption(t("page.moe.empty"))
        return
    for f in view.findings:
        with st.container(border=True):
            st.markdown(
                f"**{widgets.md(f.title)}**  \n"
                + t("page.moe.finding", owner=f.evidence.get("owner", "—"), ms=f"{f.impact_ns / 1e6:,.3f}")
            )
            st.markdown(widgets.md(f.suggestion))
    phases = sorted({layer["phase"] or "unknown" for layer in view.layers}, key=lambda p: p != "prefill")
    if phases:
        phase = st.radio(t("page.moe.phase"), phases, horizontal=True, key="moe_phase")
        cells = grid(None if phase == "unknown" else phase)
        if cells:
            st.plotly_chart(load_heatmap(cells, phase), width="stretch")
    if view.ranks:
        st.caption(t("page.moe.per_rank", source=view.wait_source or "—"))
        st.plotly_chart(rank_bars(view), width="stretch")
        show_table(ranks_frame(view))
