"""The Scaling section of the Compare page: per group, both runs' time against length on log axes, the departure
length marked (diag.analyses.scaling via app.data). No SQL, no parsing."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import data
from app.tables import show_table
from app.text import md_text, plain
from diag.commands._format import header_text  # short labels: diag/rules/cli_headers.csv

COLOURS = ("#d62728", "#1f77b4")  # A (under study), B (baseline)
MAX_TICKS = 12


def scaling_figure(group: dict[str, Any], name_a: str, name_b: str | None) -> go.Figure:
    """Time per step (ms) against length for A and B, log-log, a dashed line at the departure length."""
    pts = group["points"]
    lengths = [p["length"] for p in pts]
    fig = go.Figure()
    sides = [("time_ns", f"A: {name_a}", COLOURS[0])]
    sides += [("baseline_time_ns", f"B: {name_b}", COLOURS[1])] if name_b else []
    for key, name, colour in sides:
        xy = [(n, p[key] / 1e6) for n, p in zip(lengths, pts, strict=True) if p[key]]
        fig.add_trace(
            go.Scatter(
                x=[x for x, _ in xy], y=[y for _, y in xy], name=plain(name), mode="lines+markers",
                line={"color": colour}, hovertemplate="%{x:,} " + plain(group["unit"]) + ": %{y:.3f} ms",
            )
        )  # fmt: skip
    dep = group["departure_length"]
    if dep is not None:  # the label placed by hand: on a log axis an annotation's x is log10 of the value
        fig.add_vline(x=dep, line_dash="dash", line_color="#555")
        fig.add_annotation(
            x=math.log10(dep), y=1, xref="x", yref="paper", xanchor="right", yanchor="top", showarrow=False,
            text=plain(f"departs at {dep:,} (A/B {group['ratio_short']:.2f} → {group['ratio_long']:.2f})"),
        )  # fmt: skip
    fig.update_xaxes(type="log", title=plain(f"length ({group['unit']})"))
    if len(lengths) <= MAX_TICKS:  # a tick at each measured length reads better than log minor ticks
        fig.update_xaxes(tickvals=lengths, ticktext=[f"{n:,}" for n in lengths])
    fig.update_yaxes(type="log", title="ms per step")
    fig.update_layout(
        title=plain(group["label"]), height=320, margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "y": -0.25},
    )  # fmt: skip
    return fig


def _slope_text(s: dict[str, float] | None) -> str:
    return "—" if s is None else f"∝ length^{s['exponent']:.2f} ({s['ns_per_token']:,.1f} ns per token)"


def points_frame(group: dict[str, Any], baseline: bool) -> pd.DataFrame:
    rows = []
    for p in group["points"]:
        row = {f"length ({group['unit']})": p["length"], "A ms": round(p["time_ns"] / 1e6, 3)}
        if baseline:
            b = p["baseline_time_ns"]
            row |= {"B ms": None if b is None else round(b / 1e6, 3),
                    "A/B": None if p["ratio"] is None else round(p["ratio"], 3)}  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)


def scaling_section(fp: str, run_a: int, run_b: int | None, label: dict[int, str]) -> None:
    """The section: the answer line, then per group its plot, slopes and points (in an expander)."""
    st.subheader(header_text("Scaling with sequence / KV length"))
    result = data.scaling(fp, run_a, run_b)
    if not result["groups"]:
        st.info(md_text(result["answer"]))
        return
    st.markdown(md_text(result["answer"]))
    name_b = label.get(run_b, f"run {run_b}") if run_b is not None else None
    for i, g in enumerate(result["groups"]):
        st.plotly_chart(scaling_figure(g, label.get(run_a, f"run {run_a}"), name_b), key=f"scaling_{i}")
        slopes = f"A {_slope_text(g['slope'])}" + (
            f" · B {_slope_text(g['baseline_slope'])}" if name_b else ""
        )
        st.caption(md_text(slopes))
        with st.expander(f"{g['label']}: {len(g['points'])} length(s)"):
            show_table(points_frame(g, name_b is not None))
    for note in result["notes"]:
        st.caption(md_text(f"Note: {note}"))
    st.caption(
        "Per step: its length from the input shapes (diag/rules/op_shape_axes.csv; CUDA: the framework ops' Input "
        "Dims), its time the group's kernel time. Departure: every longer length's A/B exceeds the short-length "
        "ratio by more than the [scaling] threshold (diag/rules/thresholds.toml)."
    )
