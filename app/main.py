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
from diag.i18n import t  # noqa: E402

state.apply_language()  # the sidebar switch of the last run, else $DIAG_LANG / the locale: before any text

# An emoji favicon is drawn by the browser from a data: URL; a ":material/…:" favicon is fetched from an external
# font host on every page (fails offline). The page icons below come from the font Streamlit serves itself.
st.set_page_config(page_title=t("app.page_title"), page_icon="🩺", layout="wide")
from app.auth import require_login  # noqa: E402

require_login()  # before any page: with [auth] in secrets.toml every page needs a login

PAGES = [
    st.Page("app_pages/01_runs.py", title=t("nav.runs"), icon=":material/table_rows:", default=True),
    st.Page("app_pages/02_upload.py", title=t("nav.upload"), icon=":material/upload:"),
    st.Page("app_pages/03_timeline.py", title=t("nav.timeline"), icon=":material/timeline:"),
    st.Page("app_pages/04_stalls.py", title=t("nav.stalls"), icon=":material/stacked_bar_chart:"),
    st.Page("app_pages/13_memory.py", title=t("nav.memory"), icon=":material/memory_alt:"),
    st.Page("app_pages/05_fallback.py", title=t("nav.fallback"), icon=":material/memory:"),
    st.Page("app_pages/14_ops.py", title=t("nav.ops"), icon=":material/functions:"),
    st.Page("app_pages/06_findings.py", title=t("nav.findings"), icon=":material/troubleshoot:"),
    st.Page("app_pages/07_logs.py", title=t("nav.logs"), icon=":material/article:"),
    st.Page("app_pages/08_compare.py", title=t("nav.compare"), icon=":material/compare_arrows:"),
    st.Page("app_pages/09_postmortem.py", title=t("nav.postmortem"), icon=":material/description:"),
    st.Page("app_pages/10_serving.py", title=t("nav.serving"), icon=":material/speed:"),
    st.Page("app_pages/11_cluster.py", title=t("nav.cluster"), icon=":material/grid_view:"),
    st.Page("app_pages/12_glossary.py", title=t("nav.glossary"), icon=":material/menu_book:"),
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
    state.language_switch()
    st.caption(t("app.database", path=md_code(data.db_path())))
    run_id = state.selected_run()
    if run_id is not None:
        step = state.selected_step()
        st.caption(
            t("app.selected_run", run=run_id)
            + (t("app.selected_step", step=step) if step is not None else "")
        )
