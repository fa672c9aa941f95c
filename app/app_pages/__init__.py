"""Streamlit pages. Shared widgets for pages live here; no SQL, no parsing."""

from __future__ import annotations

import streamlit as st

from app import data, state
from diag.i18n import t


def run_picker(fp: str, key: str) -> int | None:
    """The run selector shared by the analysis pages: starts from the selected run, and a choice here selects it
    for every other page (app.state)."""
    rows = [r for r in data.runs(fp) if r["start_ns"] is not None]
    if not rows:
        st.info(t("page.run_picker.empty"))
        return None
    ids = [r["run_id"] for r in rows]
    names = {r["run_id"]: f"{r['run_id']} · {r['name']} · {r['platform']}" for r in rows}
    run_id = st.selectbox(
        t("page.run_picker.label"), ids, index=state.index_of_selected(ids), format_func=names.get, key=key
    )
    if run_id != state.selected_run():
        state.select_run(run_id)
    return run_id
