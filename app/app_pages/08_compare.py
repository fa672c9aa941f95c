"""Compare: an Ascend run against its CUDA baseline, op class by op class and bucket by bucket."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import data, memory_widgets, state, widgets
from app.before_after_widgets import before_after_section
from app.framework_ops_widgets import framework_ops_section
from app.glossary import help_for
from app.scaling_widgets import scaling_section
from app.tables import show_table
from app.text import md_text

OTHER_PLATFORM = {"ascend": "cuda", "cuda": "ascend", "rocm": "ascend"}


def _first(ids: list[int], platform: dict[int, str], wanted: str, not_run: int | None = None) -> int | None:
    """The first run of platform ``wanted`` among the choices (other than ``not_run``)."""
    return next((i for i in ids if platform[i] == wanted and i != not_run), None)


st.title("Ascend vs CUDA")
st.caption(
    "The same workload on both platforms, measured with the same definitions. Figures are per step, so "
    "captures of different lengths compare; 'lost' is the time A spends beyond B in each class."
)
fp = data.fingerprint()
comparable = set(data.comparable_runs(fp))
rows = [r for r in data.runs(fp) if r["run_id"] in comparable]
if len(rows) < 2:
    st.info("Ingest an Ascend run and a CUDA run of the same workload to compare them.")
    st.stop()
ids = [r["run_id"] for r in rows]
label = {
    r["run_id"]: f"{r['run_id']} · {r['name']} · {r['platform']}"
    + (" (GPU baseline, not CUDA)" if r["platform"] == "rocm" else "")
    + (f" · {r['device_name']}" if r["device_name"] else "")
    for r in rows
}
platform = {r["run_id"]: r["platform"] for r in rows}
default_a = state.index_of_selected(ids, fallback=ids.index(_first(ids, platform, "ascend") or ids[0]))
c1, c2 = st.columns(2)
run_a = c1.selectbox("A (under study)", ids, index=default_a, format_func=label.get, key="cmp_a")
if run_a != state.selected_run():
    state.select_run(run_a)
baseline = _first(ids, platform, OTHER_PLATFORM.get(platform[run_a], "cuda"), not_run=run_a)
if baseline is None:
    baseline = next((i for i in ids if i != run_a), run_a)
run_b = c2.selectbox("B (baseline)", ids, index=ids.index(baseline), format_func=label.get, key="cmp_b")
if run_a == run_b:
    st.warning("Pick two different runs.")
    st.stop()
cmp = data.comparison(fp, run_a, run_b)
for w in cmp.warnings:
    st.warning(md_text(w))
for note in cmp.notes():
    st.info(f"Data quality: {md_text(note)}")
e2e = next(o for o in cmp.overall if o["bucket"] == "e2e")
m = st.columns(5)
m[0].metric("A device time / step", widgets.ms_text(e2e["per_step_a_ms"]), help=help_for("E2E"))
m[1].metric("B device time / step", widgets.ms_text(e2e["per_step_b_ms"]), help=help_for("E2E"))
m[2].metric("A / B", "—" if e2e["ratio"] is None else f"{e2e['ratio']:.2f}×")
loss = cmp.biggest_loss()  # over every bucket: idle, AI CPU, exposed communication and copies too
m[3].metric(
    "biggest loss",
    md_text(loss["label"]) if loss else "—",
    f"+{loss['delta_per_step_ms']:.3f} ms/step" if loss else None,
    delta_color="inverse",
)
top = cmp.top_losses(1)
m[4].metric(
    "biggest op-class loss",
    md_text(top[0].op_class) if top else "—",
    f"+{top[0].delta_per_step_ms:.3f} ms/step" if top else None,
    delta_color="inverse",
)
st.subheader("Where A loses time, by op class")
st.plotly_chart(widgets.compare_classes_figure(cmp), width="stretch", key="cmp_chart")
show_table(widgets.compare_classes_frame(cmp))
st.subheader("Device time per step, same buckets on both")
show_table(widgets.compare_overall_frame(cmp), helps={"bucket": help_for("E2E")})
if cmp.phases:
    st.subheader("By phase (told by each step's attention kernels)")
    show_table(
        pd.DataFrame(
            [
                {
                    "phase": p["phase"],
                    "A steps": p["steps_a"],
                    "B steps": p["steps_b"],
                    "A ms/step": None if p["per_step_a_ms"] is None else round(p["per_step_a_ms"], 3),
                    "B ms/step": None if p["per_step_b_ms"] is None else round(p["per_step_b_ms"], 3),
                    "A/B": None if p["ratio"] is None else round(p["ratio"], 3),
                }
                for p in cmp.phases
            ]
        )
    )
if cmp.ops:
    st.subheader("Framework ops present in both traces")
    show_table(
        pd.DataFrame(
            [
                {
                    "op": o.op,
                    "A calls": o.calls_a,
                    "B calls": o.calls_b,
                    "A/B": None if o.ratio is None else round(o.ratio, 3),
                    "lost ms/step": round(o.delta_per_step_ms, 4),
                }
                for o in cmp.ops
            ]
        )
    )
sides = {
    side: f"{n} step(s)" if src == "timeline" else "nsys stats kernel summary (no steps, no timeline)"
    for side, n, src in (("A", cmp.steps_a, cmp.source_a), ("B", cmp.steps_b, cmp.source_b))
}
for side, c in (("A", cmp.counts_a), ("B", cmp.counts_b)):
    if c and c.device_kernels:
        per_step = "—" if c.kernels_per_step is None else f"{c.kernels_per_step:,.1f}"
        sides[side] += f", {c.device_kernels:,} device kernels, {per_step} kernels per step"
st.caption(f"A: {sides['A']} · B: {sides['B']}. Op classes: diag/rules/op_classes.csv.")
mem = memory_widgets.compare_memory_frame(cmp.memory)
st.subheader("Memory")
if mem.empty:
    st.caption("Neither run holds memory records (profile_memory=True); see the Memory page.")
else:
    st.caption("Each side against its own device's capacity (diag memory); sizes GiB, headroom %.")
    show_table(mem, key="cmp_memory")
serving = data.serving_comparison_for_runs(fp, run_a, run_b)
if serving:
    st.subheader("Serving figures of the two deployments")
    st.caption(
        f"A: {md_text(serving['a']['label'])} · B: {md_text(serving['b']['label'])} — serving results stored beside each profile "
        "(judged on the Serving acceptance page)."
    )
    for w in serving["warnings"]:
        st.warning(md_text(w))
    for line in serving["headline"]:
        st.error(line)
    show_table(widgets.serving_comparison_frame(serving))
scaling_section(fp, run_a, run_b, label)  # time against sequence / KV length (#20)
framework_ops_section(fp, run_a, run_b)  # which framework op got slower: its kernels on both sides (#20)
before_after_section(fp, run_a, run_b)  # two runs of one platform: before (A) / after (B) (#21)
