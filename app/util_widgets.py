"""The Utilization section of the Ops page: per op, achieved TFLOPS and GB/s against the device's roofs, and a
roofline scatter (arithmetic intensity vs achieved TFLOPS, log axes, the device's roof). Built from
diag.analyses.op_util results (via app.data); no SQL, no parsing."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app.tables import show_table
from diag.i18n import t

MAX_SHOWN = 1000  # rows drawn in the table and points in the roofline
UTIL_HELP = {
    "TFLOPS": "Achieved: the op's FLOPs (from its shapes, rules/op_cost.toml) ÷ the time of those calls.",
    "unit": "The unit the op ran on, from its core type: vector (AI_VECTOR_CORE, MIX_AIV) or cube (AI_CORE, MIX_AIC; "
    "a GPU's tensor cores). MFU and the ridge point are that unit's.",
    "MFU %": "Achieved TFLOPS ÷ the dense peak of the op's unit for its dtype (rules/devices.toml).",
    "GB/s": "Achieved: the bytes the op must move (each input read once, each output written once) ÷ its time. "
    "Over 100 % of HBM means data served from L2 cache.",
    "BW %": "Achieved GB/s ÷ the device's HBM bandwidth.",
    "FLOP/B": "Arithmetic intensity: FLOPs ÷ bytes. Above the ridge point (peak ÷ bandwidth) an op is compute-bound.",
    "bound": "latency: calls too short to reach either roof; else the roofline side of the ridge point.",
    "PMU bound": "From the PMU pipe ratios: compute when the cube (aic_mac) or vector (aiv_vec) pipe is busy, "
    "memory when an MTE2/MTE3 move pipe is, else latency.",
}


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def util_frame(rows: list[dict[str, Any]], label: str) -> pd.DataFrame:
    """The ops that have figures, largest time first."""
    out = [
        {label: r["name"], "cost class": r["cost_class"], "unit": r.get("unit"), "share %": _round(r["share_pct"], 1),
         "TFLOPS": _round(r["achieved_tflops"], 2), "MFU %": _round(r["mfu_pct"], 1),
         "GB/s": _round(r["achieved_gbps"], 0), "BW %": _round(r["bw_pct"], 1),
         "FLOP/B": _round(r["arithmetic_intensity"], 1), "bound": r["bound"], "PMU bound": r["pmu_bound"]}
        for r in rows if r["costed_calls"]
    ]  # fmt: skip
    return pd.DataFrame(out)


def roofline_figure(rows: list[dict[str, Any]]) -> go.Figure:
    """Intensity vs achieved TFLOPS per op (log axes), with the roof min(peak, intensity × bandwidth) where the
    device is known; op names on hover."""
    pts = [r for r in rows if r["costed_calls"] and r["arithmetic_intensity"] and r["achieved_tflops"]]
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[r["arithmetic_intensity"] for r in pts],
            y=[r["achieved_tflops"] for r in pts],
            mode="markers",
            marker={"size": [8 + min(30.0, (r["share_pct"] or 0)) for r in pts]},
            text=[r["name"] for r in pts],
            customdata=[[r["share_pct"] or 0, r["bound"] or "—"] for r in pts],
            hovertemplate="%{text}<br>%{x:.1f} FLOP/B, %{y:.2f} TFLOPS<br>%{customdata[0]:.1f}% of kernel time, "
            "%{customdata[1]}<extra></extra>",
            name="ops",
        )
    )
    # one roof per unit the ops were judged on (Ascend: the cube's and the vector unit's peak)
    roofs = {
        (r.get("unit") or "cube", r["peak_tflops"], r["hbm_gbps"])
        for r in pts
        if r["peak_tflops"] and r["hbm_gbps"]
    }
    for unit, peak, hbm in sorted(roofs, key=lambda u: -u[1]):
        bw = hbm / 1e3  # TB/s: TFLOPS per FLOP/B
        lo = min(min(r["arithmetic_intensity"] for r in pts), peak / bw) / 4
        hi = max(max(r["arithmetic_intensity"] for r in pts), peak / bw) * 4
        xs = [lo, peak / bw, hi]
        name = "roof" if len(roofs) == 1 else f"roof ({unit})"
        fig.add_trace(go.Scatter(x=xs, y=[min(peak, x * bw) for x in xs], mode="lines", name=name,
                                 hovertemplate=name + " %{y:.1f} TFLOPS<extra></extra>"))  # fmt: skip
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP/byte)")
    fig.update_yaxes(type="log", title="achieved TFLOPS")
    fig.update_layout(height=420, margin={"l": 10, "r": 10, "t": 30, "b": 10})
    return fig


def draw_utilization(rows: list[dict[str, Any]], label: str) -> None:
    """The section: a caption naming the peaks used (or why there are none), the table and the roofline."""
    st.subheader(t("page.ops.utilization"))
    costed = [r for r in rows if r["costed_calls"]]
    if not costed:
        st.caption(t("page.ops.no_cost"))
        return
    peaks = sorted({r["peak_from"] for r in costed if r["peak_from"]})
    st.caption(t("page.ops.peaks", peaks=t("page.ops.peaks_sep").join(peaks)))
    shown = costed[:MAX_SHOWN]  # largest time first: a run of 200k kernels has tens of thousands of names
    if len(costed) > len(shown):
        st.caption(
            f"The {len(shown):,} largest of {len(costed):,}; `diag ops --util --top 0` lists every one."
        )
    show_table(util_frame(shown, label), helps=UTIL_HELP, key="ops_util_table")
    st.plotly_chart(roofline_figure(shown), width="stretch", key="ops_roofline")
