"""Timeline: device streams, HCCL, Overlap Analysis and host threads; aggregated when the window is dense.

Widget state: each widget's value is put into st.session_state *before* the widget is drawn and no widget is
given an ``index=`` / ``value=`` as well, so a choice made elsewhere (``data.open_in_timeline``) shows as is and
Streamlit logs no Session State warning. A window that is not a whole step shows as "custom window".
"""

from __future__ import annotations

import streamlit as st

from app import data, timeline_widgets
from app.text import md_text
from diag.commands._format import header_text  # short labels: diag/rules/cli_headers.csv
from diag.i18n import t

WHOLE_RUN, CUSTOM = "whole run", "custom window"


def _on_run_change() -> None:
    st.session_state["run_id"], st.session_state["step"] = st.session_state["tl_run"], None
    st.session_state.pop("tl_window", None)
    st.session_state.pop("tl_step", None)


def _on_step_change() -> None:
    choice = st.session_state["tl_step"]
    st.session_state["step"] = choice if isinstance(choice, int) else None
    if choice != CUSTOM:
        st.session_state.pop("tl_window", None)


def _on_slide(key: str, origin: int) -> None:
    lo_ms, hi_ms = st.session_state[key]
    st.session_state["tl_window"] = (origin + int(lo_ms * 1e6), origin + int(hi_ms * 1e6))
    st.session_state["tl_window_run"] = st.session_state.get("tl_run")


def _on_reset() -> None:
    st.session_state.pop("tl_window", None)
    st.session_state["tl_zoom"] = st.session_state.get("tl_zoom", 0) + 1


st.title(t("page.timeline.title"))
fp = data.fingerprint()
rows = data.runs(fp)
runs_with_time = [r for r in rows if r["start_ns"] is not None]
if not runs_with_time:
    st.info(t("page.timeline.empty"))
    st.stop()

ids = [r["run_id"] for r in runs_with_time]
names = {r["run_id"]: f"{r['run_id']} · {r['name']}" for r in runs_with_time}
if st.session_state.get("run_id") in ids:
    st.session_state["tl_run"] = st.session_state["run_id"]
elif st.session_state.get("tl_run") not in ids:
    st.session_state["tl_run"] = ids[0]
run_id = st.selectbox(header_text("Run"), ids, format_func=names.get, key="tl_run", on_change=_on_run_change)
st.session_state["run_id"] = run_id

run = next(r for r in runs_with_time if r["run_id"] == run_id)
origin, end = run["start_ns"], run["end_ns"]
steps = data.steps(fp, run_id)
step_span = {s: (lo, hi) for s, lo, hi in steps}
window = st.session_state.get("tl_window")
if window is not None and st.session_state.get("tl_window_run") != run_id:  # a window of another run
    st.session_state.pop("tl_window", None)
    window = None
if window is not None:  # inside the run, or the slider refuses it
    window = (min(max(window[0], origin), end), max(min(window[1], end), origin))
step_options = [WHOLE_RUN] + ([CUSTOM] if window is not None else []) + list(step_span)
if window is not None:
    st.session_state["tl_step"] = CUSTOM
elif st.session_state.get("step") in step_span and st.session_state.get("tl_step") not in step_options:
    st.session_state["tl_step"] = st.session_state["step"]
elif st.session_state.get("tl_step") not in step_options:
    st.session_state["tl_step"] = WHOLE_RUN
choice = st.selectbox(
    header_text("Zoom to step"),
    step_options,
    key="tl_step",
    format_func=lambda s: header_text(s) if isinstance(s, str) else t("page.timeline.step", step=s),
    on_change=_on_step_change,
)
if window is None:
    window = step_span[choice] if isinstance(choice, int) else (origin, end)

c1, c2 = st.columns([4, 1])
span_ms = (end - origin) / 1e6
slider_key = f"tl_slider_{run_id}_{choice}_{st.session_state.get('tl_zoom', 0)}"
lo_ms, hi_ms = c1.slider(
    t("page.timeline.window"),
    0.0,
    max(span_ms, 0.001),
    ((window[0] - origin) / 1e6, (window[1] - origin) / 1e6),
    format="%.3f",
    key=slider_key,
    on_change=_on_slide,
    args=(slider_key, origin),
)
c2.button(t("page.timeline.reset_zoom"), key="tl_reset", on_click=_on_reset)
window = (origin + int(lo_ms * 1e6), origin + int(hi_ms * 1e6))

focus = st.session_state.get("tl_focus")
if focus and tuple(focus[1]) == tuple(st.session_state.get("tl_window") or ()):
    st.caption(
        f"Opened on the first call of **{md_text(focus[0])}** in the range asked for; pick “whole run” or widen the window "
        "to see its other calls."
    )
tl = data.timeline(fp, run_id, window[0], window[1], data.TIMELINE_MAX_MARKS)
if tl is None:
    st.info(t("page.timeline.no_events"))
    st.stop()
ai_cpu_note = t("page.timeline.ai_cpu_note") if tl.has_ai_cpu else ""
if tl.mode == "events":
    st.caption(t("page.timeline.events", n=f"{tl.marks_in_window:,}", note=ai_cpu_note))
else:
    st.caption(
        t(
            "page.timeline.binned",
            n=f"{tl.marks_in_window:,}",
            bin=f"{tl.bin_ns / 1e3:,.1f}",
            cells=f"{tl.marks:,}",
        )
        + (t("page.timeline.ai_cpu_bins") if tl.has_ai_cpu else "")
    )
tiles = st.columns(3)
tiles[0].metric(header_text("rows drawn"), f"{len(tl.lanes):,}")
tiles[1].metric(header_text("window (ms)"), f"{(tl.window_end_ns - tl.window_start_ns) / 1e6:,.3f}")
if tl.has_ai_cpu:  # AI_CPU is Ascend's CPU fallback: no such tile on a GPU
    ai_cpu_marks = (
        sum(1 for k in tl.events.column("kind").to_pylist() if k == "AI_CPU")
        if tl.mode == "events"
        else sum(tl.bins.column("ai_cpu").to_pylist())
    )
    tiles[2].metric(header_text("AI_CPU tasks in window"), f"{ai_cpu_marks:,}")
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
        st.session_state["tl_window_run"] = run_id
        st.session_state["tl_zoom"] = st.session_state.get("tl_zoom", 0) + 1  # fresh slider and chart state
        st.rerun()

st.download_button(
    t("page.timeline.download_trace"),
    data=lambda: data.chrome_trace_bytes(run_id),
    file_name=f"run{run_id}.chrome_trace.json",
    mime="application/json",
    key=f"tl_chrome_{run_id}",
    on_click="ignore",
    help=t("page.timeline.download_trace_help"),
)
