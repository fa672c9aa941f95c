"""Plotly figures and tables of a multi-rank job (diag.analyses.cluster.ClusterView). No SQL, no parsing."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from diag.analyses.cluster import ClusterView
from diag.i18n import t

STEP_METRICS = {  # the English labels; step_metrics() gives them in the session's language
    "step time": "step_ns",
    "computing": "computing_ns",
    "communication not overlapped": "comm_not_overlapped_ns",
    "free": "free_ns",
}
BREAKDOWN = (  # column, catalog key of its label, colour
    ("computing_ns", "page.cluster.computing", "#1f77b4"),
    ("comm_not_overlapped_ns", "page.cluster.comm_not_overlapped", "#9467bd"),
    ("free_ns", "page.cluster.free", "#bdbdbd"),
)


def step_metrics() -> dict[str, str]:
    """The step heatmap's choices: label (session's language) → column."""
    return {
        t("page.cluster.metric_step"): "step_ns",
        t("page.cluster.metric_computing"): "computing_ns",
        t("page.cluster.metric_comm"): "comm_not_overlapped_ns",
        t("page.cluster.metric_free"): "free_ns",
    }


_PX_PER_RANK = 14


def _height(n: int) -> int:
    return max(260, min(1400, 120 + n * _PX_PER_RANK))


def _grid_layout(fig: go.Figure, rows: int, x_title: str, y_title: str) -> go.Figure:
    """A heatmap's layout: one row per rank, top to bottom, categories on both axes."""
    fig.update_layout(
        height=_height(rows),
        margin=dict(l=10, r=10, t=30, b=10),
        xaxis=dict(title=x_title, type="category"),
        yaxis=dict(title=y_title, type="category", autorange="reversed"),
    )
    return fig


def step_heatmap(view: ClusterView, metric: str = "step_ns") -> go.Figure:
    """Rank × step, ms; a slow rank is a bright row, a slow step a bright column."""
    df = pd.DataFrame(view.steps)
    fig = go.Figure()
    if df.empty or df[metric].isna().all():
        return fig
    grid = df.pivot_table(index="rank", columns="step", values=metric, aggfunc="sum") / 1e6
    values = grid.stack()
    median = float(values.median())
    spread = max(0.1 * abs(median), float((values - median).abs().max()))  # jitter stays pale: ±10% at least
    fig.add_trace(
        go.Heatmap(  # blue below the job's median, red above
            z=grid.values,
            x=[str(s) for s in grid.columns],
            y=[str(r) for r in grid.index],
            colorscale="RdBu_r",
            zmin=median - spread,
            zmax=median + spread,
            colorbar=dict(title="ms"),
            hovertemplate=t("page.cluster.hover_step"),
        )
    )
    return _grid_layout(fig, len(grid.index), t("page.cluster.axis_step"), t("page.cluster.axis_rank"))


def rank_breakdown_figure(view: ClusterView) -> go.Figure:
    """Per rank, ms per step: computing, communication not overlapped, free (they sum to the step time)."""
    df = pd.DataFrame(view.ranks)
    fig = go.Figure()
    if df.empty:
        return fig
    steps = df["steps"].clip(lower=1)
    for col, key, color in BREAKDOWN:
        if df[col].isna().all():
            continue
        label = t(key)
        fig.add_trace(
            go.Bar(
                name=label,
                x=df["rank"].astype(str),
                y=df[col].fillna(0) / steps / 1e6,
                marker_color=color,
                hovertemplate=t("page.cluster.hover_breakdown", label=label),
            )
        )
    if df["computing_ns"].isna().all():  # no step_trace: the ProfilerStep spans only
        fig.add_trace(
            go.Bar(name=t("page.cluster.axis_step"), x=df["rank"].astype(str), y=df["step_ns"] / steps / 1e6)
        )
    fig.update_layout(
        barmode="stack",
        height=360,
        margin=dict(l=10, r=10, t=30, b=10),
        xaxis=dict(title=t("page.cluster.axis_rank"), type="category"),
        yaxis=dict(title=t("page.cluster.axis_ms_per_step")),
        legend=dict(orientation="h", y=1.1),
    )
    return fig


def _per(ns: float | None, steps: int) -> float | None:
    """ns over ``steps`` steps as ms per step; None stays None."""
    return None if ns is None else ns / steps / 1e6


def ranks_frame(view: ClusterView) -> pd.DataFrame:
    rows = []
    for r in view.ranks:
        n = max(r["steps"], 1)
        rows.append(
            {
                t("page.cluster.col.rank"): r["rank"],
                t("page.cluster.col.run"): r["run_id"],
                t("page.cluster.col.steps"): r["steps"],
                t("page.cluster.col.step_ms"): r["step_ns"] / n / 1e6,
                t("page.cluster.col.computing_ms"): _per(r["computing_ns"], n),
                t("page.cluster.col.comm_ms"): _per(r["comm_not_overlapped_ns"], n),
                t("page.cluster.col.wait_ms"): _per(r.get("wait_ns"), n),
                t("page.cluster.col.transit_ms"): _per(r.get("transit_ns"), n),
                t("page.cluster.col.vs_median"): r["vs_median_pct"],
                t("page.cluster.col.robust_z"): r["robust_z"],
            }
        )
    return pd.DataFrame(rows)


def groups_frame(view: ClusterView) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                t("page.cluster.col.group"): g["label"],
                t("page.cluster.col.id"): g["group"],
                t("page.cluster.col.ranks"): len(g["members"]),
                t("page.cluster.col.members"): ", ".join(map(str, g["members"][:16]))
                + (" …" if len(g["members"]) > 16 else ""),
                t("page.cluster.col.ops"): g["ops"],
                t("page.cluster.col.wait_ms"): g["wait_ns"] / 1e6,
                t("page.cluster.col.transit_ms"): g["transit_ns"] / 1e6,
                t("page.cluster.col.wait_share"): 100 * g["wait_ratio"],
                t("page.cluster.col.least_waiting"): g["least_waiting_rank"],
            }
            for g in view.groups
        ]
    )


def group_wait_figure(group: dict) -> go.Figure:
    """One communication group: wait vs transit per member rank (the rank that waits least is the one waited for)."""
    df = pd.DataFrame(group["ranks"])
    fig = go.Figure()
    for col, label, color in (
        ("transit_ns", t("page.cluster.transit"), "#2ca02c"),
        ("wait_ns", t("page.cluster.wait"), "#d62728"),
    ):
        fig.add_trace(
            go.Bar(
                name=label,
                x=df["rank"].astype(str),
                y=df[col].fillna(0) / 1e6,
                marker_color=color,
                hovertemplate=t("page.cluster.hover_wait", label=label),
            )
        )
    fig.update_layout(
        barmode="stack",
        height=320,
        margin=dict(l=10, r=10, t=30, b=10),
        xaxis=dict(title=t("page.cluster.axis_rank"), type="category"),
        yaxis=dict(title=t("page.cluster.axis_ms_capture")),
        legend=dict(orientation="h", y=1.12),
    )
    return fig


def link_heatmap(view: ClusterView, transport: str) -> go.Figure:
    """src × dst bandwidth (GB/s) of the links of one transport that moved enough bytes to compare."""
    df = pd.DataFrame([x for x in view.links if x["transport"] == transport and x["compared_ok"]])
    fig = go.Figure()
    if df.empty or df["dst_rank"].isna().all():
        return fig
    df = df.dropna(subset=["dst_rank"])
    grid = df.pivot_table(index="src_rank", columns="dst_rank", values="bandwidth_gbps", aggfunc="min")
    median = float(df["median_gbps"].iloc[0])
    fig.add_trace(
        go.Heatmap(  # 0 → the median in red → green, so that jitter around the median stays one colour
            z=grid.values,
            zmin=0,
            zmax=max(median * 1.1, float(df["bandwidth_gbps"].max())),
            x=[str(int(c)) for c in grid.columns],
            y=[str(int(r)) for r in grid.index],
            colorscale="RdYlGn",
            colorbar=dict(title="GB/s"),
            hovertemplate="%{y} → %{x}: %{z:.2f} GB/s<extra></extra>",
        )
    )
    return _grid_layout(fig, len(grid.index), t("page.cluster.axis_dst"), t("page.cluster.axis_src"))


def links_frame(view: ClusterView, transport: str | None = None) -> pd.DataFrame:
    rows = [x for x in view.links if transport is None or x["transport"] == transport]
    return pd.DataFrame(
        [
            {
                t("page.cluster.col.slow"): "⚠" if x["slow"] else "",
                t("page.cluster.col.src"): x["src_rank"],
                t("page.cluster.col.dst"): x["dst_rank"]
                if x["dst_rank"] is not None
                else t("page.cluster.local", n=x["dst_local"]),
                t("page.cluster.col.transport"): x["transport"],
                t("page.cluster.col.group"): x["label"],
                "MB": x["size_bytes"] / 1e6,
                t("page.cluster.col.transit_ms"): x["transit_ns"] / 1e6,
                "GB/s": x["bandwidth_gbps"],
                t("page.cluster.col.median_gbps"): x["median_gbps"],
                t("page.cluster.col.vs_median"): None if x["ratio"] is None else 100 * x["ratio"],
            }
            for x in rows
        ]
    )


def transports_frame(view: ClusterView) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                t("page.cluster.col.rank"): x["rank"],
                t("page.cluster.col.transport"): x["transport"],
                "MB": x["size_bytes"] / 1e6,
                t("page.cluster.col.transit_ms"): x["transit_ns"] / 1e6,
                "GB/s": x["bandwidth_gbps"],
                t("page.cluster.col.median_gbps"): x["median_gbps"],
                t("page.cluster.col.vs_median"): None if x["ratio"] is None else 100 * x["ratio"],
            }
            for x in view.transports
        ]
    )
