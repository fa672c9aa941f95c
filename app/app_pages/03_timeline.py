"""Timeline: device streams, HCCL, Overlap Analysis and host threads; aggregated when the window is dense."""

from __future__ import annotations

import streamlit as st

from app import data, timeline_widgets

st.title("Timeline")
fp = data.fingerprint()
rows = data.runs(fp)
runs_with_time = [r for r in rows if r["start_ns"] is not None]
if not runs_with_time:
    st.info("No run with timed events yet: upload one on the Upload page.")
    st.stop()

ids = [r["run_id"] for r in runs_with_time]
names = {r["run_id"]: f"{r['run_id']} · {r['name']}" for r in runs_with_time}
current = st.session_state.get("run_id")
run_id = st.selectbox(
    "Run", ids, index=ids.index(current) if current in ids else 0, format_func=names.get, key="tl_run"
)
if run_id != current:
    st.session_state["run_id"], st.session_state["step"] = run_id, None
    st.session_state.pop("tl_window", None)

run = next(r for r in runs_with_time if r["run_id"] == run_id)
origin, end = run["start_ns"], run["end_ns"]
steps = data.steps(fp, run_id)
step_options = [None] + [s for s, _, _ in steps]
step = st.selectbox(
    "Zoom to step",
    step_options,
    key="tl_step",
    index=step_options.index(st.session_state.get("step"))
    if st.session_state.get("step") in step_options
    else 0,
    format_func=lambda s: "whole run" if s is None else f"step {s}",
)
if step != st.session_state.get("step"):
    st.session_state["step"] = step
    st.session_state.pop("tl_window", None)

window = st.session_state.get("tl_window")
if window is None:
    if step is not None:
        _, lo, hi = next(s for s in steps if s[0] == step)
        window = (lo, hi)
    else:
        window = (origin, end)

c1, c2 = st.columns([4, 1])
span_ms = (end - origin) / 1e6
lo_ms, hi_ms = c1.slider(
    "Window (ms since run start)",
    0.0,
    max(span_ms, 0.001),
    ((window[0] - origin) / 1e6, (window[1] - origin) / 1e6),
    format="%.3f",
    key=f"tl_slider_{run_id}_{step}_{st.session_state.get('tl_zoom', 0)}",
)
if c2.button("Reset zoom", key="tl_reset"):
    st.session_state.pop("tl_window", None)
    st.session_state["tl_zoom"] = st.session_state.get("tl_zoom", 0) + 1
    st.rerun()
window = (origin + int(lo_ms * 1e6), origin + int(hi_ms * 1e6))

tl = data.timeline(fp, run_id, window[0], window[1], data.TIMELINE_MAX_MARKS)
if tl is None:
    st.info("This run has no timed events.")
    st.stop()
if tl.mode == "events":
    st.caption(
        f"{tl.marks_in_window:,} events in this window, drawn one by one. "
        "Drag a box on the chart to zoom in; AI_CPU (CPU-fallback) tasks are red with a ▼ marker."
    )
else:
    st.caption(
        f"{tl.marks_in_window:,} events in this window: too many to draw, shown as busy % per "
        f"{tl.bin_ns / 1e3:,.1f} µs bin ({tl.marks:,} cells). Drag a box or narrow the window to see events; "
        "▼ marks bins holding AI_CPU (CPU-fallback) tasks."
    )
ai_cpu_marks = (
    sum(1 for k in tl.events.column("kind").to_pylist() if k == "AI_CPU")
    if tl.mode == "events"
    else sum(tl.bins.column("ai_cpu").to_pylist())
)
st.metric("AI_CPU tasks in window", f"{ai_cpu_marks:,}")
event = st.plotly_chart(
    timeline_widgets.timeline_figure(tl),
    width="stretch",
    on_select="rerun",
    selection_mode="box",
    key=f"tl_chart_{run_id}_{st.session_state.get('tl_zoom', 0)}",
)
box = (
    (event or {}).get("selection", {}).get("box")
    if isinstance(event, dict) or hasattr(event, "get")
    else None
)
if box:
    xs = box[0].get("x") or []
    if len(xs) == 2:
        a, b = sorted(xs)
        st.session_state["tl_window"] = (origin + int(a * 1e6), origin + int(b * 1e6))
        st.session_state["tl_zoom"] = st.session_state.get("tl_zoom", 0) + 1  # fresh slider and chart state
        st.rerun()
