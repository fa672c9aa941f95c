"""Tables and figures of the Ops page, built from diag.analyses.ops* results. No SQL, no parsing."""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from app.text import plain

BY_LABELS = {"op": "op type", "kernel": "kernel", "class": "op class"}
MAX_ROWS = 1000  # rows of the op table drawn on the page (largest total first)
BY_PLURALS = {"op": "op types", "kernel": "kernels", "class": "op classes"}
OPS_HELP = {
    "share %": "Share of the run's summed kernel time (every row of the table; the rows sum to 100%). "
    "Overlapping streams count in full, as in nsys stats Time (%) and msprof op_statistic Ratio(%).",
    "core": "Where the op ran: AI_CORE (cube), AI_VECTOR_CORE, MIX_AIC / MIX_AIV, AI_CPU, HCCL; GPU for a CUDA kernel.",
    "shapes": "Distinct input shapes of the op in this run (— when the export carries no shapes).",
    "max shapes / step": "The most distinct input shapes the op ran with in one step: shape churn a dynamic-shape "
    "op pays for (recompiles or re-tiling).",
    "OP State": "kernel_details OP State: dynamic or static shape.",
    "B calls": "Calls of the op's class on the baseline run.",
    "B total ms": "Total time of the op's class on the baseline run.",
    "A/B class per step": "The op class's time per step on this run ÷ on the baseline (per call when either run is "
    "a kernel summary without steps): the Compare page's ratio.",
}


def _ms(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 3)


def _us(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e3, 1)


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def ops_frame(rows: list[dict[str, Any]], by: str, baseline: bool) -> pd.DataFrame:
    """The op table for people: ms and µs, shares in %; the baseline's class figures right after the share, so
    that the comparison is in view without scrolling sideways."""
    out = []
    for r in rows:
        row = {BY_LABELS[by]: r["name"]}
        if by != "class":
            row["op class"] = r["op_class"]
        row.update({"core": r["core_type"], "calls": r["calls"], "total ms": _ms(r["total_ns"])})
        row["share %"] = _round(r["share_pct"], 1)
        if baseline:
            row.update(
                {"B total ms": _ms(r["baseline_total_ns"]), "A/B class per step": _round(r["ratio"], 2)}
            )
        row.update(
            {
                "mean µs": _us(r["mean_ns"]),
                "min µs": _us(r["min_ns"]),
                "max µs": _us(r["max_ns"]),
                "shapes": r["shapes"],
                "max shapes / step": r["max_shapes_per_step"],
                "dtypes": r["dtypes"],
                "OP State": r["op_state"],
            }
        )
        if baseline:
            row["B calls"] = r["baseline_calls"]
        out.append(row)
    return pd.DataFrame(out)


def varying_text(values: list[dict[str, Any]]) -> str | None:
    """``tokens (M) = 128 · KV length (S2) = 4096`` for one shape, or None when nothing varies."""
    return " · ".join(f"{v['label']} = {v['value']:,}" for v in values) or None


SHORT_DIMS = {"tokens": "tokens", "query_seq": "S1", "kv_len": "KV", "batch": "B", "batch_or_tokens": "B/T"}


def short_varying(values: list[dict[str, Any]]) -> str | None:
    """``S1 4,096 · KV 4,096``: the varying dimensions of one shape, short enough for a chart's axis."""
    parts = [f"{SHORT_DIMS.get(v['dim'], v['label'])} {v['value']:,}" for v in values]
    return " · ".join(dict.fromkeys(parts)) or None


def shapes_frame(shapes: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "input shapes": s["input_shapes"],
                "varying": varying_text(s["varying"]),
                "calls": s["calls"],
                "total ms": _ms(s["total_ns"]),
                "mean µs": _us(s["mean_ns"]),
                "min µs": _us(s["min_ns"]),
                "max µs": _us(s["max_ns"]),
                "steps": s["steps"],
                "OP State": s["op_state"],
            }
            for s in shapes
        ]
    )


def shapes_figure(shapes: list[dict[str, Any]], top: int = 30) -> go.Figure:
    """Horizontal bars: total time per distinct input shape (the largest ``top``), mean per call on hover."""
    rows = sorted(shapes, key=lambda s: -s["total_ns"])[:top][::-1]
    labels = [plain(short_varying(s["varying"]) or s["input_shapes"] or "no shape") for s in rows]
    fig = go.Figure(
        go.Bar(
            x=[s["total_ns"] / 1e6 for s in rows],
            y=labels,
            orientation="h",
            marker_color="#1f77b4",
            customdata=[[s["calls"], s["mean_ns"] / 1e3 if s["mean_ns"] else 0] for s in rows],
            hovertemplate="%{y}<br>%{x:.3f} ms total, %{customdata[0]} calls, %{customdata[1]:.1f} µs mean"
            "<extra></extra>",
        )
    )
    fig.update_layout(
        height=max(220, 40 + 26 * len(rows)),
        margin=dict(l=10, r=10, t=20, b=40),
        xaxis_title="total time (ms)",
        yaxis=dict(automargin=True),
    )
    return fig


def steps_frame(steps: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "step": s["step"],
                "calls": s["calls"],
                "distinct shapes": s["shapes"],
                "total ms": _ms(s["total_ns"]),
            }
            for s in steps
        ]
    )


def pmu_frame(rows: list[dict[str, Any]], by: str) -> pd.DataFrame:
    """PMU ratios (duration-weighted) and L2 rates per op, three decimals; columns no op has are dropped."""
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df = df.rename(
        columns={"name": BY_LABELS[by], "l2_hit_rate": "L2 hit rate", "l2_victim_rate": "L2 victim rate"}
    )
    df = df.dropna(axis=1, how="all")
    for col in df.columns[1:]:
        df[col] = df[col].map(lambda v: None if v is None or pd.isna(v) else round(float(v), 3))
    return df
