"""Streamlit pages. Shared widgets for pages live here; no SQL, no parsing."""

from __future__ import annotations

import streamlit as st

from app import data


def run_picker(fp: str, key: str) -> int | None:
    """The run selector shared by the analysis pages; remembers the choice across pages."""
    rows = [r for r in data.runs(fp) if r["start_ns"] is not None]
    if not rows:
        st.info("No run with device data yet: upload one on the Upload page.")
        return None
    ids = [r["run_id"] for r in rows]
    names = {r["run_id"]: f"{r['run_id']} · {r['name']} · {r['platform']}" for r in rows}
    current = st.session_state.get("run_id")
    run_id = st.selectbox(
        "Run", ids, index=ids.index(current) if current in ids else 0, format_func=names.get, key=key
    )
    if run_id != current:
        st.session_state["run_id"], st.session_state["step"] = run_id, None
    return run_id
