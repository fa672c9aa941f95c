"""diag's web app: `diag app` starts it; pages live in app_pages/ and call app.data only."""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run app/main.py` puts app/ on the path, not the repo
    sys.path.insert(0, str(ROOT))

from app import data, state  # noqa: E402
from app.text import md_code  # noqa: E402
from diag.errors import DiagError  # noqa: E402

# An emoji favicon is drawn by the browser from a data: URL; a ":material/…:" favicon is fetched from an external
# font host on every page (fails offline). The page icons below come from the font Streamlit serves itself.
st.set_page_config(page_title="diag — Ascend/CUDA inference diagnosis", page_icon="🩺", layout="wide")
from app.auth import require_login  # noqa: E402

require_login()  # before any page: with [auth] in secrets.toml every page needs a login

PAGES = [
    st.Page("app_pages/01_runs.py", title="Runs", icon=":material/table_rows:", default=True),
    st.Page("app_pages/02_upload.py", title="Upload", icon=":material/upload:"),
    st.Page("app_pages/03_timeline.py", title="Timeline", icon=":material/timeline:"),
    st.Page("app_pages/04_stalls.py", title="Stalls", icon=":material/stacked_bar_chart:"),
    st.Page("app_pages/13_memory.py", title="Memory", icon=":material/memory_alt:"),
    st.Page("app_pages/05_fallback.py", title="Fallback ops", icon=":material/memory:"),
    st.Page("app_pages/14_ops.py", title="Ops", icon=":material/functions:"),
    st.Page("app_pages/06_findings.py", title="Findings", icon=":material/troubleshoot:"),
    st.Page("app_pages/07_logs.py", title="Logs", icon=":material/article:"),
    st.Page("app_pages/08_compare.py", title="Ascend vs CUDA", icon=":material/compare_arrows:"),
    st.Page("app_pages/09_postmortem.py", title="Postmortem", icon=":material/description:"),
    st.Page("app_pages/10_serving.py", title="Serving acceptance", icon=":material/speed:"),
    st.Page("app_pages/11_cluster.py", title="Cluster", icon=":material/grid_view:"),
    st.Page("app_pages/12_glossary.py", title="Glossary", icon=":material/menu_book:"),
]

# expanded: every page stays in the sidebar (past 12 pages Streamlit hides the rest behind "View more")
page = st.navigation(PAGES, expanded=True)
try:
    data.store()  # opened once per process; a database another process is writing waits, then says so
except DiagError as exc:
    st.error(str(exc))
    st.stop()
page.run()

with st.sidebar:  # after the page ran, so that it shows the page's choice
    st.caption(f"database: {md_code(data.db_path())}")
    run_id = state.selected_run()
    if run_id is not None:
        step = state.selected_step()
        st.caption(f"selected run: **{run_id}**" + (f", step {step}" if step is not None else ""))
