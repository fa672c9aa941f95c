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
from diag.i18n import t

OTHER_PLATFORM = {"ascend": "cuda", "cuda": "ascend", "rocm": "ascend"}


def _first(ids: list[int], platform: dict[int, str], wanted: str, not_run: int | None = None) -> int | None:
    """The first run of platform ``wanted`` among the choices (other than ``not_run``)."""
    return next((i for i in ids if platform[i] == wanted and i != not_run), None)


def _per_step_delta(ms: float) -> str:
    return t("page.compare.per_step_delta", ms=f"{ms:.3f}")


st.title(t("page.compare.title"))
st.caption(t("page.compare.caption"))
fp = data.fingerprint()
comparable = set(data.comparable_runs(fp))
rows = [r for r in data.runs(fp) if r["run_id"] in comparable]
if len(rows) < 2:
    st.info(t("page.compare.need_two"))
    st.stop()
ids = [r["run_id"] for r in rows]
label = {
    r["run_id"]: f"{r['run_id']} · {r['name']} · {r['platform']}"
    + (t("page.compare.rocm_baseline") if r["platform"] == "rocm" else "")
    + (f" · {r['device_name']}" if r["device_name"] else "")
    for r in rows
}
platform = {r["run_id"]: r["platform"] for r in rows}
default_a = state.index_of_selected(ids, fallback=ids.index(_first(ids, platform, "ascend") or ids[0]))
c1, c2 = st.columns(2)
run_a = c1.selectbox(t("page.compare.run_a"), ids, index=default_a, format_func=label.get, key="cmp_a")
if run_a != state.selected_run():
    state.select_run(run_a)
baseline = _first(ids, platform, OTHER_PLATFORM.get(platform[run_a], "cuda"), not_run=run_a)
if baseline is None:
    baseline = next((i for i in ids if i != run_a), run_a)
run_b = c2.selectbox(
    t("page.compare.run_b"), ids, index=ids.index(baseline), format_func=label.get, key="cmp_b"
)
if run_a == run_b:
    st.warning(t("page.compare.pick_two"))
    st.stop()
cmp = data.comparison(fp, run_a, run_b)
for w in cmp.warnings:
    st.warning(md_text(w))
for note in cmp.notes():
    st.info(t("page.compare.data_quality", note=md_text(note)))
e2e = next(o for o in cmp.overall if o["bucket"] == "e2e")
m = st.columns(5)
m[0].metric(t("page.compare.a_per_step"), widgets.ms_text(e2e["per_step_a_ms"]), help=help_for("E2E"))
m[1].metric(t("page.compare.b_per_step"), widgets.ms_text(e2e["per_step_b_ms"]), help=help_for("E2E"))
m[2].metric(t("page.compare.ratio"), "—" if e2e["ratio"] is None else f"{e2e['ratio']:.2f}×")
loss = cmp.biggest_loss()  # over every bucket: idle, AI CPU, exposed communication and copies too
m[3].metric(
    t("page.compare.biggest_loss"),
    widgets.bucket_label(loss["bucket"]) if loss else "—",
    _per_step_delta(loss["delta_per_step_ms"]) if loss else None,
    delta_color="inverse",
    help=widgets.bucket_label(loss["bucket"])
    if loss
    else None,  # the whole label: a long one is cut in the tile
)
top = cmp.top_losses(1)
m[4].metric(
    t("page.compare.biggest_class_loss"),
    md_text(top[0].op_class) if top else "—",
    _per_step_delta(top[0].delta_per_step_ms) if top else None,
    delta_color="inverse",
)
st.subheader(t("page.compare.by_class"))
st.plotly_chart(widgets.compare_classes_figure(cmp), width="stretch", key="cmp_chart")
show_table(widgets.compare_classes_frame(cmp))
st.subheader(t("page.compare.overall"))
show_table(widgets.compare_overall_frame(cmp), helps={t("page.compare.col.bucket"): help_for("E2E")})
if cmp.phases:
    st.subheader(t("page.compare.by_phase"))
    show_table(
        pd.DataFrame(
            [
                {
                    t("page.compare.col.phase"): p["phase"],
                    t("page.compare.col.a_steps"): p["steps_a"],
                    t("page.compare.col.b_steps"): p["steps_b"],
                    t("page.compare.col.a_ms_step"): widgets.rounded(p["per_step_a_ms"], 3),
                    t("page.compare.col.b_ms_step"): widgets.rounded(p["per_step_b_ms"], 3),
                    t("page.compare.col.ratio"): widgets.rounded(p["ratio"], 3),
                }
                for p in cmp.phases
            ]
        )
    )
if cmp.ops:
    st.subheader(t("page.compare.ops"))
    show_table(
        pd.DataFrame(
            [
                {
                    t("page.compare.col.op"): o.op,
                    t("page.compare.col.a_calls"): o.calls_a,
                    t("page.compare.col.b_calls"): o.calls_b,
                    t("page.compare.col.ratio"): widgets.rounded(o.ratio, 3),
                    t("page.compare.col.lost_ms_step"): round(o.delta_per_step_ms, 4),
                }
                for o in cmp.ops
            ]
        )
    )
sides = {
    side: t("page.compare.side_steps", n=n) if src == "timeline" else t("page.compare.side_summary")
    for side, n, src in (("A", cmp.steps_a, cmp.source_a), ("B", cmp.steps_b, cmp.source_b))
}
for side, c in (("A", cmp.counts_a), ("B", cmp.counts_b)):
    if c and c.device_kernels:
        per_step = "—" if c.kernels_per_step is None else f"{c.kernels_per_step:,.1f}"
        sides[side] += t("page.compare.side_kernels", kernels=f"{c.device_kernels:,}", per_step=per_step)
st.caption(t("page.compare.sides", a=sides["A"], b=sides["B"]))
mem = memory_widgets.compare_memory_frame(cmp.memory)
st.subheader(t("page.compare.memory"))
if mem.empty:
    st.caption(t("page.compare.no_memory"))
else:
    st.caption(t("page.compare.memory_caption"))
    show_table(mem, key="cmp_memory")
serving = data.serving_comparison_for_runs(fp, run_a, run_b)
if serving:
    st.subheader(t("page.compare.serving"))
    st.caption(
        t("page.compare.serving_caption", a=md_text(serving["a"]["label"]), b=md_text(serving["b"]["label"]))
    )
    for w in serving["warnings"]:
        st.warning(md_text(w))
    for line in serving["headline"]:
        st.error(line)
    show_table(widgets.serving_comparison_frame(serving))
scaling_section(fp, run_a, run_b, label)  # time against sequence / KV length (#20)
framework_ops_section(fp, run_a, run_b)  # which framework op got slower: its kernels on both sides (#20)
before_after_section(fp, run_a, run_b)  # two runs of one platform: before (A) / after (B) (#21)
