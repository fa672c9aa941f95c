"""Ops: the kernel / op table of a run (nsys stats cuda_gpu_kern_sum, msprof op_statistic), one op's shapes, and
PMU / L2 figures per op."""

from __future__ import annotations

import streamlit as st

from app import data
from app import ops_widgets as ow
from app import util_widgets as uw
from app.app_pages import run_picker
from app.tables import show_table
from app.text import md_text
from diag.commands._format import header_text  # short labels: diag/rules/cli_headers.csv
from diag.i18n import t

st.title(t("page.ops.title"))
st.caption(t("page.ops.caption"))
fp = data.fingerprint()
run_id = run_picker(fp, key="ops_run")
if run_id is None:
    st.stop()
c1, c2 = st.columns(2)
by = c1.radio(
    t("page.ops.group_by"),
    list(ow.BY_LABELS),
    format_func=lambda k: header_text(ow.BY_LABELS[k]),
    horizontal=True,
    key="ops_by",
)
choices, default = data.op_baselines(fp, run_id)
names = {r["run_id"]: f"{r['run_id']} · {r['name']} · {r['platform']}" for r in data.runs(fp)}
options = [None, *choices]
baseline = c2.selectbox(
    t("page.ops.baseline"),
    options,
    index=options.index(default),
    format_func=lambda i: header_text("none") if i is None else names.get(i, str(i)),
    key=f"ops_baseline_{run_id}",
)
rows = data.op_table(fp, run_id, by, baseline)
if not rows:
    st.info(t("page.ops.empty"))
    st.stop()
m = st.columns(4)
m[0].metric(header_text(ow.BY_PLURALS[by]), f"{len(rows):,}")
m[1].metric(
    header_text("kernel time"),
    f"{sum(r['total_ns'] for r in rows) / 1e6:,.3f} ms",
    help=ow.OPS_HELP["share %"],
)
m[2].metric(header_text("largest"), md_text(str(rows[0]["name"])[:40]))
m[3].metric(header_text("its share"), "—" if rows[0]["share_pct"] is None else f"{rows[0]['share_pct']:.1f}%")
show_table(ow.ops_frame(rows[: ow.MAX_ROWS], by, baseline is not None), helps=ow.OPS_HELP, key="ops_table")
if len(rows) > ow.MAX_ROWS:  # a grid of tens of thousands of kernel names helps no one and slows the browser
    st.caption(
        f"The largest {ow.MAX_ROWS:,} of {len(rows):,} rows; `diag ops --by {by} --top 0` lists every one."
    )

if by != "class":
    with_shapes = [r["name"] for r in rows if r["shapes"]]
    st.subheader(t("page.ops.shapes"))
    if not with_shapes:
        st.caption(t("page.ops.no_shapes"))
    else:
        name = st.selectbox(header_text(ow.BY_LABELS[by]), with_shapes, key=f"ops_shape_{by}_{run_id}")
        shapes = data.op_shapes(fp, run_id, name, by)
        varying = sorted({v["label"] for s in shapes for v in s["varying"]})
        st.caption(
            t("page.ops.distinct_shapes", n=f"{len(shapes):,}")
            + (
                t("page.ops.varying", dims=md_text(", ".join(varying)))
                if varying
                else t("page.ops.none_varying")
            )
        )
        st.plotly_chart(ow.shapes_figure(shapes), width="stretch", key="ops_shapes_chart")
        show_table(ow.shapes_frame(shapes), key="ops_shapes_table")
        per_step = data.op_shapes_by_step(fp, run_id, name, by)
        if len(per_step) > 1:
            with st.expander(t("page.ops.shapes_per_step", n=len(per_step))):
                show_table(ow.steps_frame(per_step))

    st.subheader(t("page.ops.pmu"))
    pmu = data.op_pmu(fp, run_id, by)
    if pmu:
        st.caption(t("page.ops.pmu_caption"))
        show_table(ow.pmu_frame(pmu, by), key="ops_pmu_table")
    else:
        st.caption(t("page.ops.no_pmu"))

    uw.draw_utilization(data.op_utilization(fp, run_id, by), ow.BY_LABELS[by])  # #20 utilization
