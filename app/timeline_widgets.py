"""The Timeline page's figure: device streams, HCCL, Overlap Analysis and host threads on one ms axis."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from app.text import plain, template_text
from diag.analyses.timeline import Timeline

KIND_COLORS = {
    "AI_CORE": "#1f77b4",
    "AI_VECTOR_CORE": "#6baed6",
    "MIX_AIC": "#756bb1",
    "MIX_AIV": "#9e9ac8",
    "FFTS_PLUS": "#3182bd",
    "AI_CPU": "#d62728",
    "COMMUNICATION": "#2ca02c",
    "COMM_TASK": "#98df8a",
    "MEMCPY": "#ff7f0e",
    "SYNC": "#bdbdbd",
    "DSA": "#8c6d31",
    "OTHER": "#969696",
    "OVERLAP": "#17becf",
    "CPU_OP": "#8c564b",
    "PYTHON_FUNCTION": "#c49c94",
    "CANN_API": "#e377c2",
    "ENQUEUE": "#bcbd22",
    "DEQUEUE": "#dbdb8d",
}
OVERLAP_COLORS = {
    "Computing": "#1f77b4",
    "Communication": "#2ca02c",
    "Communication(Not Overlapped)": "#9467bd",
    "Free": "#d9d9d9",
}
AI_CPU_MARKER = dict(symbol="triangle-down", size=11, color="#d62728", line=dict(color="black", width=1))


def _ms(ns: pd.Series, origin: int) -> pd.Series:
    return (ns - origin) / 1e6


def ms_label(ns: float) -> str:
    """A duration in ms, the axis unit, with three significant digits however short (0.0936 ms, 0.00210 ms)."""
    ms = ns / 1e6
    if ms >= 1 or ms <= 0:
        return f"{ms:,.3f} ms"
    decimals = 3
    while ms < 10 ** (2 - decimals) and decimals < 9:
        decimals += 1
    return f"{ms:.{decimals}f} ms"


def _times(df: pd.DataFrame, start: str, dur: str, origin: int) -> pd.Series:
    """'start 13.527 ms · dur 0.188 ms' for each row: hover text in the axis unit, start since run start."""
    starts = ((df[start] - origin) / 1e6).map(lambda v: f"start {v:,.3f} ms")
    return starts + " · dur " + df[dur].map(ms_label)


def _as_text(df: pd.DataFrame, columns: tuple[str, ...]) -> None:
    """Thread, op and kind names come from the trace: Plotly would draw their <a>, <b>, <br> as markup."""
    for col in columns:
        df[col] = df[col].map(lambda v: plain(v) if isinstance(v, str) else v)


def timeline_figure(tl: Timeline) -> go.Figure:
    lanes = [plain(lane) for lane in tl.lanes]
    fig = go.Figure()
    origin = tl.run_start_ns
    if tl.mode == "events" and tl.events is not None and tl.events.num_rows:
        df = tl.events.to_pandas()
        df["start_ms"] = _ms(df["start_ns"], origin)
        df["dur_ms"] = df["dur_ns"].clip(lower=1) / 1e6
        df["detail"] = df["detail"].fillna("")
        df["times"] = _times(df, "start_ns", "dur_ns", origin)
        _as_text(df, ("lane", "name", "detail"))
        for kind, part in df.groupby("kind", sort=True):
            color = KIND_COLORS.get(kind, "#7f7f7f")
            if kind == "OVERLAP":
                color = part["name"].map(OVERLAP_COLORS).fillna("#17becf").tolist()
            fig.add_trace(
                go.Bar(
                    name=plain(kind),
                    orientation="h",
                    y=part["lane"],
                    x=part["dur_ms"],
                    base=part["start_ms"],
                    marker=dict(color=color, line=dict(width=1.5 if kind == "AI_CPU" else 0, color="black")),
                    customdata=part[["name", "detail", "times"]].to_numpy(),
                    hovertemplate="<b>%{customdata[0]}</b><br>"
                    + template_text(kind)
                    + "<br>%{customdata[1]}<br>"
                    "%{customdata[2]}<extra>%{y}</extra>",
                )
            )
        ai = df[df["kind"] == "AI_CPU"]
        if len(ai):
            fig.add_trace(
                go.Scatter(
                    name="AI_CPU (CPU fallback)",
                    x=ai["start_ms"] + ai["dur_ms"] / 2,
                    y=ai["lane"],
                    mode="markers",
                    marker=AI_CPU_MARKER,
                    customdata=ai[["name", "times"]].to_numpy(),
                    hovertemplate="<b>AI_CPU fallback</b><br>%{customdata[0]}<br>%{customdata[1]}<extra>%{y}</extra>",
                )
            )
        fig.update_layout(barmode="overlay")
    elif tl.mode == "bins" and tl.bins is not None and tl.bins.num_rows:
        df = tl.bins.to_pandas()
        df["x_ms"] = _ms(df["bin_start_ns"] + df["bin_ns"] / 2, origin)
        df["occupancy"] = (df["busy_ns"] / df["bin_ns"]).clip(upper=1.0) * 100
        df["times"] = _times(df, "bin_start_ns", "bin_ns", origin).str.replace("start", "bin from", n=1)
        _as_text(df, ("lane", "top_kind"))
        fig.add_trace(
            go.Heatmap(
                x=df["x_ms"],
                y=df["lane"],
                z=df["occupancy"],
                colorscale="Blues",
                zmin=0,
                zmax=100,
                colorbar=dict(title="busy %", thickness=12),
                xgap=0,
                ygap=2,
                customdata=df[["count", "top_kind", "ai_cpu", "times"]].to_numpy(),
                hovertemplate="%{y}<br>%{customdata[3]}<br>busy %{z:.0f}%<br>%{customdata[0]} events, mostly "
                "%{customdata[1]}"
                + ("<br>AI_CPU: %{customdata[2]}" if tl.has_ai_cpu else "")
                + "<extra></extra>",
                name="occupancy",
            )
        )
        ai = df[df["ai_cpu"] > 0]
        if len(ai):
            fig.add_trace(
                go.Scatter(
                    name="AI_CPU (CPU fallback)",
                    x=ai["x_ms"],
                    y=ai["lane"],
                    mode="markers",
                    marker=AI_CPU_MARKER,
                    customdata=ai[["ai_cpu", "times"]].to_numpy(),
                    hovertemplate="<b>%{customdata[0]} AI_CPU task(s)</b><br>%{customdata[1]}<extra>%{y}</extra>",
                )
            )
    fig.update_yaxes(categoryorder="array", categoryarray=list(reversed(lanes)), title=None, automargin=True)
    fig.update_xaxes(
        title="time since run start (ms)",
        range=[(tl.window_start_ns - origin) / 1e6, (tl.window_end_ns - origin) / 1e6],
    )
    fig.update_layout(
        height=max(320, 28 * len(lanes) + 200),
        margin=dict(l=10, r=10, t=30, b=110),
        # below the plot, under the axis title: the modebar sits top right and would cover a legend there
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0.01, x=0, xanchor="left"),
        dragmode="select",
        hovermode="closest",
    )
    return fig
