"""The Memory page's figures and tables, from ``diag memory --json`` (diag.analyses.memory.memory_summary) and the
run's memory samples: the answer line, allocated / reserved / active over time with the steps and the peak, the
CANN components stacked, the top allocators, an OOM's figures against the capacity, the KV-cache budget split.

Times are ms from the run's start, sizes GiB (MiB in tables of allocations); a missing figure reads "—".
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from app.text import plain
from diag.analyses.postmortem_memory import verdict_text
from diag.i18n import t

GIB, MIB = 1 << 30, 1 << 20
MISSING = "—"
MAX_POINTS = 20_000  # samples drawn per line: every k-th beyond that, the peak sample always kept
MAX_STACKED = 8  # CANN components drawn in the stack; the rest are summed as "other components"
MAX_STEP_BANDS = 200
STACK_SOURCES = {"npu_module_mem"}  # reserved per CANN module: drawn stacked, never as the process total
LEGEND_BELOW = {"orientation": "h", "yanchor": "top", "y": -0.18}  # under the x-axis title, not over it
CAPACITY_FROM = {"device_table": "the device table", "log": "the OOM message's total capacity"}
LINES = (("allocated_bytes", "allocated"), ("reserved_bytes", "reserved"), ("active_bytes", "active"))


def gib(value: float | None, digits: int = 2) -> str:
    return MISSING if value is None else f"{value / GIB:,.{digits}f} GiB"


def pct(value: float | None) -> str:
    return MISSING if value is None else f"{value:.1f}%"


def peak_ms(summary: dict[str, Any], run_start_ns: int | None) -> float | None:
    """When the peak was, in ms from the run's start (the analysis's own figure where it gives one)."""
    if summary.get("peak_ts_ms") is not None:
        return float(summary["peak_ts_ms"])
    if summary.get("peak_ts_ns") is None or run_start_ns is None:
        return None
    return (summary["peak_ts_ns"] - run_start_ns) / 1e6


def capacity_note(summary: dict[str, Any]) -> str | None:
    """Where the capacity comes from, in words (None when unknown)."""
    origin = summary.get("capacity_from")
    if not origin:
        return None
    text = f"capacity from {CAPACITY_FROM.get(origin, origin)}"
    return text + (f" ({summary['device_name']})" if summary.get("device_name") else "")


def has_figures(summary: dict[str, Any]) -> bool:
    return any(
        summary.get(k)
        for k in ("peak_reserved_bytes", "peak_allocated_bytes", "oom", "kv_cache", "components")
    )


def _peak_sentence(summary: dict[str, Any], run_start_ns: int | None) -> str:
    peak, cap = summary.get("peak_reserved_bytes"), summary.get("capacity_bytes")
    text = f"Peak reserved {gib(peak)}"
    if cap:
        text += f" of {gib(cap)} ({100 * peak / cap:.1f}%)"
    when = peak_ms(summary, run_start_ns)
    if when is not None:
        text += f" at {when:,.1f} ms"
    if summary.get("peak_step") is not None:
        text += f", step {summary['peak_step']}"
    if summary.get("peak_op"):
        text += f", during {summary['peak_op']}"
    if summary.get("headroom_pct") is not None:
        text += f" — headroom {summary['headroom_pct']:.1f}%"
    else:
        text += " — device capacity unknown: headroom not judged"
    if summary.get("peak_allocated_bytes") is not None:
        text += f"; peak allocated {gib(summary['peak_allocated_bytes'])}"
    return text + "."


def oom_sentence(event: dict[str, Any]) -> str:
    """One OOM record in a line: what was asked, what was free of what, the verdict (a record that names no
    request — vLLM's negative KV budget, a pool that failed to initialise — says its reason instead)."""
    if event.get("requested_bytes") is None:
        reason = event.get("verdict_reason") or "the message gives no figures"
        return f"Out of memory — {verdict_text(event.get('verdict'))}: {reason}"
    text = f"Out of memory: tried to allocate {gib(event.get('requested_bytes'))}"
    if event.get("free_bytes") is not None:
        text += f" with {gib(event['free_bytes'])} free"
    if event.get("capacity_bytes") is not None:
        text += f" of {gib(event['capacity_bytes'])}"
    return text + f" — {verdict_text(event.get('verdict'))}."


def answer_text(summary: dict[str, Any], run_start_ns: int | None) -> str:
    """The page's first line: the peak, the headroom, when and during which op; else the OOM; else the budget."""
    if summary.get("peak_reserved_bytes") is not None:
        return _peak_sentence(summary, run_start_ns)
    if summary.get("oom"):
        return oom_sentence(summary["oom"][0])
    kv = summary.get("kv_cache")
    if kv:
        return f"KV-cache budget {gib(kv.get('kv_cache_bytes'))} — verdict: {kv.get('verdict') or 'unknown'}."
    return "No memory figures."


def metrics(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, value) of the headline figures."""
    slack = summary.get("slack_peak_bytes")
    return [
        ("peak reserved", gib(summary.get("peak_reserved_bytes"))),
        ("peak allocated", gib(summary.get("peak_allocated_bytes"))),
        ("device capacity", gib(summary.get("capacity_bytes"))),  # as precise as the answer line above it
        ("headroom", pct(summary.get("headroom_pct"))),
        ("slack peak (reserved − allocated)", gib(slack)),
    ]


# -- over time ---------------------------------------------------------------------------------------------------
def samples_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    cols = ["ts_ns", "source", "component", "allocated_bytes", "reserved_bytes", "active_bytes"]
    return pd.DataFrame(rows, columns=cols)


def _series(df: pd.DataFrame, name: str | None) -> pd.DataFrame:
    """The samples of one series named "source:component" (the analysis's ``reserved_series``…), in time order."""
    if not name or ":" not in name:
        return df.iloc[0:0]
    source, component = name.split(":", 1)
    return df[(df["source"] == source) & (df["component"] == component)].sort_values("ts_ns")


def _thin(part: pd.DataFrame) -> pd.DataFrame:
    if len(part) <= MAX_POINTS:
        return part
    step = -(-len(part) // MAX_POINTS)
    keep = part.iloc[::step]
    return pd.concat([keep, part.loc[[part["reserved_bytes"].idxmax()]]]).sort_values("ts_ns")


def _step_bands(fig: go.Figure, steps: list[Any], t0: int) -> None:
    for i, s in enumerate(steps[:MAX_STEP_BANDS]):
        number, start, end = (s["step"], s["start_ns"], s["end_ns"]) if isinstance(s, dict) else s[:3]
        fig.add_vrect(
            x0=(start - t0) / 1e6,
            x1=(end - t0) / 1e6,
            fillcolor="#7f7f7f" if i % 2 else "#bcbd22",
            opacity=0.08,
            line_width=0,
            annotation_text=f"step {number}",
            annotation_position="top left",
        )


def _line(part: pd.DataFrame, col: str, name: str, t0: int) -> go.Scatter:
    return go.Scatter(
        x=(part["ts_ns"] - t0) / 1e6,
        y=part[col] / GIB,
        name=plain(name),
        mode="lines",
        line_shape="hv",
        hovertemplate=f"{plain(name)} %{{y:.3f}} GiB at %{{x:,.3f}} ms<extra></extra>",
    )


def timeline_figure(df: pd.DataFrame, steps: list[Any], summary: dict[str, Any], t0: int) -> go.Figure | None:
    """Allocated / reserved / active of the allocator's series and the reserved of the process total over time
    (ms from the run's start, GiB), steps shaded, the peak marked; None when neither series has samples."""
    alloc = _thin(_series(df, summary.get("allocator_series")))
    total = _series(df, summary.get("reserved_series"))
    fig = go.Figure()
    if not total.empty and summary.get("reserved_series") != summary.get("allocator_series"):
        name = summary["reserved_series"].split(":", 1)[1]
        fig.add_trace(_line(_thin(total), "reserved_bytes", f"{name} reserved (process total)", t0))
    for col, label in LINES:
        if alloc[col].notna().any():
            name = summary["allocator_series"].split(":", 1)[1]
            fig.add_trace(_line(alloc, col, f"{name} {label}", t0))
    if not fig.data:
        return None
    _step_bands(fig, steps, t0)
    if summary.get("peak_ts_ns") is not None and summary.get("peak_reserved_bytes") is not None:
        fig.add_trace(
            go.Scatter(
                x=[(summary["peak_ts_ns"] - t0) / 1e6],
                y=[summary["peak_reserved_bytes"] / GIB],
                name="peak reserved",
                mode="markers",
                marker={"size": 12, "symbol": "x", "color": "#d62728"},
                hovertemplate="peak reserved %{y:.3f} GiB at %{x:,.3f} ms<extra></extra>",
            )
        )
    fig.update_layout(height=420, margin={"l": 10, "r": 10, "t": 30, "b": 40}, legend=LEGEND_BELOW)
    fig.update_xaxes(title="time from the run's start (ms)")
    fig.update_yaxes(title="device memory (GiB)", rangemode="tozero")
    return fig


def components_figure(df: pd.DataFrame, t0: int) -> go.Figure | None:
    """Reserved memory per CANN component (npu_module_mem) stacked over time; None when there is none."""
    mods = df[df["source"].isin(STACK_SOURCES) & df["reserved_bytes"].notna()]
    peaks = mods.groupby("component")["reserved_bytes"].max()
    peaks = peaks[peaks > 0].sort_values(ascending=False)
    if peaks.empty:
        return None
    shown = list(peaks.index[:MAX_STACKED])
    fig = go.Figure()
    for name in shown:
        part = mods[mods["component"] == name].sort_values("ts_ns")
        fig.add_trace(_area((part["ts_ns"] - t0) / 1e6, part["reserved_bytes"] / GIB, plain(name)))
    rest = mods[mods["component"].isin(peaks.index[MAX_STACKED:])]
    if not rest.empty:
        summed = rest.groupby("ts_ns", as_index=False)["reserved_bytes"].sum()
        label = f"other components ({len(peaks) - MAX_STACKED})"
        fig.add_trace(_area((summed["ts_ns"] - t0) / 1e6, summed["reserved_bytes"] / GIB, label))
    fig.update_layout(height=360, margin={"l": 10, "r": 10, "t": 10, "b": 40}, legend=LEGEND_BELOW)
    fig.update_xaxes(title="time from the run's start (ms)")
    fig.update_yaxes(title="reserved by component (GiB)", rangemode="tozero")
    return fig


def _area(x: pd.Series, y: pd.Series, name: str) -> go.Scatter:
    return go.Scatter(
        x=x,
        y=y,
        name=name,
        mode="lines",
        stackgroup="components",
        stackgaps="interpolate",
        hovertemplate=f"{name} %{{y:.3f}} GiB at %{{x:,.3f}} ms<extra></extra>",
    )


# -- tables --------------------------------------------------------------------------------------------------------
def components_frame(summary: dict[str, Any]) -> pd.DataFrame:
    """Peak per memory series: where it comes from, the component, peak reserved and allocated (GiB)."""
    rows = [
        {
            "source": c.get("source"),
            "component": c["component"],
            "peak reserved (GiB)": _round(c.get("peak_reserved_bytes"), GIB, 3),
            "peak allocated (GiB)": _round(c.get("peak_allocated_bytes"), GIB, 3),
        }
        for c in summary.get("components") or []
    ]
    return pd.DataFrame(rows, columns=["source", "component", "peak reserved (GiB)", "peak allocated (GiB)"])


def allocators_frame(summary: dict[str, Any]) -> pd.DataFrame:
    """Top allocators: operator, bytes it held (MiB), how long (ms)."""
    rows = [
        {
            "operator": a["name"],
            "held (MiB)": _round(a.get("bytes"), MIB, 1),
            "held for (ms)": _round(a.get("held_ns"), 1e6, 3),
            "allocations": a.get("count"),
        }
        for a in summary.get("top_allocators") or []
    ]
    return pd.DataFrame(rows, columns=["operator", "held (MiB)", "held for (ms)", "allocations"])


OOM_FIGURES = (
    ("requested_bytes", "requested"),
    ("free_bytes", "free"),
    ("allocated_bytes", "allocated"),
    ("reserved_bytes", "reserved"),
    ("active_bytes", "active"),
    ("process_in_use_bytes", "in use by the process"),
)


def oom_frame(summary: dict[str, Any]) -> pd.DataFrame:
    """One row per OOM record: its figures in GiB, the verdict, where it was logged."""
    rows = []
    for e in summary.get("oom") or []:
        row = {"verdict": verdict_text(e.get("verdict"))}
        row |= {f"{label} (GiB)": _round(e.get(key), GIB, 2) for key, label in OOM_FIGURES[:4]}
        row["capacity (GiB)"] = _round(e.get("capacity_bytes"), GIB, 2)
        row["logged at"] = _where(e)
        rows.append(row)
    return pd.DataFrame(rows)


def _where(e: dict[str, Any]) -> str:
    if not e.get("file"):
        return MISSING
    name = str(e["file"]).replace("\\", "/").rsplit("/", 1)[-1]
    return f"{name}:{e['line']}" if e.get("line") is not None else name


def _round(value: float | None, unit: float, digits: int) -> float | None:
    return None if value is None else round(value / unit, digits)


# -- an OOM against the capacity; the KV-cache budget -----------------------------------------------------------------
def oom_figure(event: dict[str, Any]) -> go.Figure | None:
    """The OOM's figures as horizontal bars (GiB) against a line at the device's capacity."""
    bars = [(label, event[key] / GIB) for key, label in OOM_FIGURES if event.get(key) is not None]
    if not bars:
        return None
    fig = go.Figure(
        go.Bar(
            x=[v for _, v in bars],
            y=[label for label, _ in bars],
            orientation="h",
            text=[f"{v:,.2f} GiB" for _, v in bars],
            textposition="auto",
            marker_color=["#d62728" if label == "requested" else "#1f77b4" for label, _ in bars],
            hovertemplate="%{y}: %{x:.3f} GiB<extra></extra>",
        )
    )
    if event.get("capacity_bytes"):
        cap = event["capacity_bytes"] / GIB
        fig.add_vline(x=cap, line_dash="dash", annotation_text=f"capacity {cap:,.2f} GiB")
    fig.update_layout(height=60 + 34 * len(bars), margin={"l": 10, "r": 10, "t": 30, "b": 40})
    fig.update_xaxes(title="GiB", rangemode="tozero")
    fig.update_yaxes(autorange="reversed", automargin=True)
    return fig


KV_PARTS = (
    ("weights_bytes", "model weights", "#1f77b4"),
    ("activation_peak_bytes", "activation peak", "#ff7f0e"),
    ("non_torch_bytes", "non-torch memory", "#9467bd"),
    ("kv_cache_bytes", "KV cache", "#2ca02c"),
)


def kv_figure(kv: dict[str, Any]) -> go.Figure | None:
    """The budget split (weights / activations / non-torch / KV cache) as one stacked bar, with the budget
    (capacity × gpu_memory_utilization) and the capacity as lines. A negative KV cache is drawn to the left."""
    parts = [(label, kv[key] / GIB, colour) for key, label, colour in KV_PARTS if kv.get(key) is not None]
    if not parts:
        return None
    fig = go.Figure()
    for label, value, colour in parts:
        fig.add_trace(
            go.Bar(
                x=[value],
                y=["budget split"],
                name=label,
                orientation="h",
                marker_color="#d62728" if value < 0 else colour,
                text=[f"{value:,.2f} GiB"],
                hovertemplate=f"{label}: %{{x:.3f}} GiB<extra></extra>",
            )
        )
    for key, label in (("budget_bytes", "budget"), ("capacity_bytes", "capacity")):
        if kv.get(key):
            fig.add_vline(
                x=kv[key] / GIB, line_dash="dash", annotation_text=f"{label} {kv[key] / GIB:,.2f} GiB"
            )
    fig.update_layout(
        barmode="relative",
        height=200,
        margin={"l": 10, "r": 10, "t": 30, "b": 40},
        legend={"orientation": "h"},
    )
    fig.update_xaxes(title="GiB")
    return fig


def kv_rows(kv: dict[str, Any]) -> pd.DataFrame:
    """The KV budget's figures as a two-column table (sizes GiB)."""
    rows = [(label, gib(kv.get(key))) for key, label, _ in KV_PARTS]
    util = kv.get("gpu_memory_utilization")
    rows += [
        ("budget (capacity × gpu_memory_utilization)", gib(kv.get("budget_bytes"))),
        ("capacity", gib(kv.get("capacity_bytes"))),
        ("gpu_memory_utilization", MISSING if util is None else f"{util:.2f}"),
        ("KV blocks", MISSING if kv.get("num_blocks") is None else f"{kv['num_blocks']:,}"),
        ("verdict", kv.get("verdict") or MISSING),
    ]
    return pd.DataFrame(rows, columns=["figure", "value"])


def compare_memory_frame(block: dict[str, Any] | None) -> pd.DataFrame:
    """The comparison's memory block (diag compare --json ``memory``) as figure / A / B rows; empty when neither
    side has a memory figure."""
    from diag.analyses.compare_memory import has_memory, memory_rows

    columns = [t("page.compare.col.figure"), "A", "B"]
    if not has_memory(block):
        return pd.DataFrame(columns=columns)
    return pd.DataFrame(memory_rows(block), columns=columns)
