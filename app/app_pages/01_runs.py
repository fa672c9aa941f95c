"""Runs: every profiling session in the database; pick one (and a step) for the other pages."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import data, page_parts, state, widgets
from app.glossary import help_for
from app.tables import MISSING, show_table
from app.text import md_text
from diag.commands._format import header_text  # short labels: diag/rules/cli_headers.csv
from diag.i18n import t

WHOLE_RUN = "whole run"

st.title(t("page.runs.title"))
fp = data.fingerprint()
rows = data.runs(fp)
if not rows:
    st.info(t("page.runs.empty"))
    st.stop()

ai_cpu = sum(r["ai_cpu_tasks"] for r in rows)
c1, c2, c3, c4 = st.columns(4)
c1.metric(header_text("runs"), len(rows))
c2.metric(header_text("device tasks"), f"{sum(r['device_tasks'] for r in rows):,}", help=help_for("task"))
c3.metric(header_text("host ops"), f"{sum(r['host_ops'] for r in rows):,}")
c4.metric(header_text("AI_CPU tasks (CPU fallback)"), f"{ai_cpu:,}", help=help_for("AI_CPU"))

show_table(widgets.runs_frame(rows), helps=widgets.runs_help())

labels = {
    r["run_id"]: f"{r['run_id']} · {r['name']} · rank {r['rank'] if r['rank'] is not None else MISSING}"
    for r in rows
}
ids = list(labels)
run_id = st.selectbox(
    t("page.runs.selected"),
    ids,
    index=state.index_of_selected(ids),
    format_func=labels.get,
    key="runs_select",
)
if run_id != state.selected_run():
    state.select_run(run_id)

counts = data.kernel_counts(fp, run_id)  # one definition of each count (diag.analyses.counts)
page_parts.kernel_count_metrics(counts)

steps = data.steps(fp, run_id)
if steps:
    # not None for the whole run: a selectbox whose value is None shows its placeholder "Choose an option"
    options: list[int | str] = [WHOLE_RUN] + [s for s, _, _ in steps]
    current = state.selected_step()
    choice = st.selectbox(
        header_text("Step"),
        options,
        format_func=lambda s: header_text(s) if s == WHOLE_RUN else header_text("step") + f" {s}",
        key="runs_step",
        index=options.index(current) if current in options else 0,
    )
    state.select_step(None if choice == WHOLE_RUN else choice)


def check_text(status: str) -> str:
    """supported / mismatched / unknown / ok / bad in the language (--json keeps the English word)."""
    return header_text(status)


st.subheader(t("page.runs.environment"))
env = data.environment_check(fp, run_id)  # versions against the published pairings, settings that cost time
if any(v["status"] == "mismatched" for v in env["versions"]):
    st.warning(md_text(env["answer"]))
else:
    st.caption(md_text(env["answer"]))
if env["versions"]:
    show_table(
        pd.DataFrame(
            [
                [v["component"], v["version"], v["from"], check_text(v["status"]), v["expected"]]
                for v in env["versions"]
            ],
            columns=["component", "version", "from", "check", "pairs with"],
        ),
        key="runs_env_versions",
    )
flagged = [s for s in env["settings"] if s["status"] != "ok"]
if flagged:
    show_table(
        pd.DataFrame(
            [
                [
                    s["name"],
                    s["value"] or header_text("(unset)"),
                    check_text(s["status"]),
                    s["cost"],
                    s["advice"],
                ]
                for s in flagged
            ],
            columns=["variable", "value", "check", "what it costs", "what to set"],
        ),
        key="runs_env_settings",
    )

with st.expander(header_text("Delete this run")):
    st.markdown(
        f"Removes run **{md_text(labels[run_id])}** and every row stored from its files. This cannot be undone."
    )
    sure = st.checkbox("I am sure", key="delete_sure")
    if st.button("Delete run", disabled=not sure, type="primary", key="delete_run"):
        data.delete_run(run_id)
        state.clear_run()
        st.success(f"Deleted run {run_id}.")
        st.rerun()
