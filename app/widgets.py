"""Plotly figures and display tables built from analysis results. No SQL, no parsing."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from app.glossary import help_for
from app.text import md_text, plain
from diag.analyses.stall_breakdown import BUCKET_LABELS, BUCKETS, Breakdown, bucket_label
from diag.i18n import t

RUNS_COLUMNS = {  # the columns a person reads first come first; the long source path last
    "run_id": "run",
    "platform": "platform",
    "name": "name",
    "rank": "rank",
    "steps": "steps",
    "span (ms)": "span (ms)",
    "ai_cpu_tasks": "AI_CPU tasks",
    "device": "device",
    "profiler_level": "level",
    "torch_npu_version": "torch_npu",
    "cann_version": "CANN",
    "host_ops": "host_ops",
    # row counts of the stored tables; the run's device kernels are counted once below the table
    "device_tasks": "device task rows",
    "kernels": "kernel_details rows",
    "files": "files",
    "failed_files": "failed",
    "source": "source",
}


def runs_help() -> dict[str, str]:
    """Column tooltips of the runs table, in the session's language (built per call: a module-level dict would
    keep the language of the first session that imported this module)."""
    return {
        "AI_CPU tasks": help_for("AI_CPU"),
        "device task rows": help_for("task"),
        "kernel_details rows": help_for("Kernel Details"),
        "CANN": help_for("CANN"),
        "torch_npu": help_for("torch_npu"),
        "level": "The profiler level the run was captured with (torch_npu Level0/1/2); higher levels record more.",
        "steps": "Profiler steps found in the run (ProfilerStep#N ranges or step_trace_time.csv rows).",
    }


def runs_frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    df["span (ms)"] = (df["duration_ns"] / 1e6).round(3)
    return df[list(RUNS_COLUMNS)].rename(columns=RUNS_COLUMNS)


def outcomes_frame(outcomes: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(outcomes)
    if df.empty:
        return df
    df["rows"] = df["rows"].map(lambda r: sum(r.values()) if isinstance(r, dict) else 0)
    return df[["status", "path", "parser", "run_id", "rows", "message"]]


BUCKET_COLORS = {
    "ai_cpu": "#d62728",
    "attention": "#756bb1",
    "layout": "#fdae6b",
    "cube": "#1f77b4",
    "vector": "#6baed6",
    "other": "#9ecae1",
    "comm_exposed": "#2ca02c",
    "memcpy_exposed": "#ff7f0e",
    "idle": "#d9d9d9",
}


def breakdown_figure(bd: Breakdown) -> go.Figure:
    """Stacked bars: one per step, device time in ms by bucket (the buckets sum to the step's E2E)."""
    steps = bd.steps
    labels = [
        t("page.stalls.whole_run") if s.step is None else t("page.timeline.step", step=s.step) for s in steps
    ]
    fig = go.Figure()
    for b in BUCKETS:
        values = [s.buckets[b] / 1e6 for s in steps]
        shares = [100 * s.buckets[b] / max(s.e2e_ns, 1) for s in steps]
        name = bucket_label(b)
        fig.add_trace(
            go.Bar(
                name=name,
                x=labels,
                y=values,
                marker_color=BUCKET_COLORS[b],
                customdata=shares,
                hovertemplate="%{x}<br>" + name + ": %{y:.3f} ms (%{customdata:.1f}%)<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        height=420,
        margin=dict(l=10, r=10, t=30, b=40),
        yaxis_title=t("page.stalls.axis_device_ms"),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),
        xaxis_type="category",
    )
    return fig


BUCKET_TERMS = {  # the glossary term (diag/rules/glossary.toml) explaining each bucket
    "ai_cpu": "AI_CPU",
    "cube": "Cube",
    "vector": "Vector",
    "layout": "TransData",
    "comm_exposed": "Communication(Not Overlapped)",
    "memcpy_exposed": "PCIE_DMA_SQE",
    "idle": "Free",
}


BUCKET_SHORT = {  # table headers short enough for a laptop screen; BUCKET_LABELS is the column's tooltip
    "ai_cpu": "AI CPU",
    "attention": "Attention",
    "layout": "Layout",
    "cube": "Cube",
    "vector": "Vector",
    "other": "Other",
    "comm_exposed": "Comm exposed",
    "memcpy_exposed": "Memcpy exposed",
    "idle": "Idle",
}


def breakdown_helps() -> dict[str, str]:
    """Column label → tooltip for the Stalls table (breakdown_frame's columns): the bucket, then its glossary
    term."""
    helps = {
        f"{BUCKET_SHORT[b]} (ms)": f"{BUCKET_LABELS[b]}. " + help_for(BUCKET_TERMS.get(b, ""))
        for b in BUCKETS
    }
    return {"E2E (ms)": help_for("E2E"), "step": help_for("Step"), **helps}


def breakdown_frame(bd: Breakdown) -> pd.DataFrame:
    rows = []
    for s in bd.steps:
        row = {"step": "run" if s.step is None else s.step, "E2E (ms)": round(s.e2e_ns / 1e6, 3)}
        for b in BUCKETS:
            row[f"{BUCKET_SHORT[b]} (ms)"] = round(s.buckets[b] / 1e6, 3)
        rows.append(row)
    return pd.DataFrame(rows)


def export_comparison_frame(bd: Breakdown) -> pd.DataFrame:
    rows = []
    for s in bd.steps:
        for r in s.ours_vs_export():
            rows.append(
                {
                    "step": s.step,
                    "metric": r["metric"],
                    "diag (ms)": round(r["ours_ns"] / 1e6, 3),
                    "profiler export (ms)": None
                    if r["export_ns"] is None
                    else round(r["export_ns"] / 1e6, 3),
                    "difference %": None if r["diff_pct"] is None else round(r["diff_pct"], 3),
                    "agrees (≤1%)": "no" if r["mismatch"] else "yes",
                }
            )
    return pd.DataFrame(rows)


def compare_classes_figure(cmp) -> go.Figure:  # noqa: ANN001
    """Per op class, device ms per step on both runs, sorted by the time A loses."""
    rows = [c for c in cmp.classes if c.per_step_a_ns or c.per_step_b_ns]
    names = [c.op_class for c in rows]
    fig = go.Figure()
    for side, run, attr, color in (
        ("A", cmp.run_a, "per_step_a_ns", "#d62728"),
        ("B", cmp.run_b, "per_step_b_ns", "#2ca02c"),
    ):
        fig.add_trace(
            go.Bar(
                name=plain(f"{side}: {run['name']} ({run['platform']})"),
                x=[plain(n) for n in names],
                y=[getattr(c, attr) / 1e6 for c in rows],
                marker_color=color,
                hovertemplate=f"%{{x}}: %{{y:.3f}} {t('page.compare.ms_per_step')}<extra>{side}</extra>",
            )
        )
    fig.update_layout(
        barmode="group",
        height=420,
        margin=dict(l=10, r=10, t=30, b=40),
        yaxis_title=t("page.compare.axis_per_step"),
        legend=dict(orientation="h", y=1.08, x=0),
    )
    return fig


def compare_classes_frame(cmp) -> pd.DataFrame:  # noqa: ANN001
    return pd.DataFrame(
        [
            {
                t("page.compare.col.op_class"): c.op_class,
                t("page.compare.col.a_calls"): c.count_a,
                t("page.compare.col.b_calls"): c.count_b,
                t("page.compare.col.a_ms_step"): round(c.per_step_a_ns / 1e6, 4),
                t("page.compare.col.b_ms_step"): round(c.per_step_b_ns / 1e6, 4),
                t("page.compare.col.a_mean_us"): None if c.mean_a_ns is None else round(c.mean_a_ns / 1e3, 2),
                t("page.compare.col.b_mean_us"): None if c.mean_b_ns is None else round(c.mean_b_ns / 1e3, 2),
                t("page.compare.col.a_share"): round(c.share_a_pct, 1),
                t("page.compare.col.b_share"): round(c.share_b_pct, 1),
                t("page.compare.col.ratio"): None if c.ratio is None else round(c.ratio, 3),
                t("page.compare.col.lost_ms_step"): round(c.delta_per_step_ms, 4),
            }
            for c in cmp.classes
        ]
    )


def compare_overall_frame(cmp) -> pd.DataFrame:  # noqa: ANN001
    return pd.DataFrame(
        [
            {
                t("page.compare.col.bucket"): t("page.compare.e2e")
                if o["bucket"] == "e2e"
                else bucket_label(o["bucket"]),
                t("page.compare.col.a_ms_step"): rounded(o["per_step_a_ms"], 4),
                t("page.compare.col.b_ms_step"): rounded(
                    o["per_step_b_ms"], 4
                ),  # None: a kernel summary: no buckets
                t("page.compare.col.ratio"): rounded(o["ratio"], 3),
                t("page.compare.col.lost_ms_step"): rounded(o["delta_per_step_ms"], 4),
            }
            for o in cmp.overall
        ]
    )


def ms_text(value: float | None) -> str:
    """A per-step figure in ms for a metric, or '—' (a kernel summary has no device span)."""
    return "—" if value is None else f"{value:.3f} ms"


def rounded(value: float | None, digits: int = 2) -> float | None:
    """A figure for a table cell: rounded, or None (an empty cell) when missing."""
    return None if value is None else round(value, digits)


def _better(direction: str) -> str:
    """ "higher" / "lower" (which way a serving figure is better) in the session's language."""
    return {"higher": t("page.compare.higher"), "lower": t("page.compare.lower")}.get(direction, direction)


def serving_comparison_frame(cmp: dict) -> pd.DataFrame:
    """Serving figures of A and B side by side (diag.analyses.serving_compare.compare_serving), worse ones marked."""
    return pd.DataFrame(
        [
            {
                t("page.compare.col.figure"): f["figure"],
                t("page.compare.col.unit"): f["unit"],
                t("page.compare.col.better"): _better(f["better"]),
                "A": f["a"],
                "B": f["b"],
                t("page.compare.col.ratio"): rounded(f["ratio"], 3),
                t("page.compare.col.gap"): rounded(f["gap_pct"], 1),
                t("page.compare.col.worse"): t("page.compare.yes") if f["worse"] else "",
            }
            for f in cmp["figures"]
            if f["a"] is not None or f["b"] is not None
        ]
    )


def md(text: object) -> str:
    """File-derived text for st.markdown / labels: shown literally, never as markup or links."""
    return md_text(text)
