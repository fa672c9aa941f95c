"""Upload: profiler files, folders or archives from the browser, ingested like `diag ingest`."""

from __future__ import annotations

import streamlit as st

from app import data, state, widgets
from app.tables import show_table
from app.text import md_text
from diag.i18n import t
from diag.uploads import Upload, describe_stored, run_to_select

st.title(t("page.upload.title"))
cap_mb = data.upload_cap_bytes() // (1 << 20)
st.write(t("page.upload.drop_help", cap_mb=f"{cap_mb:,}"))
files = st.file_uploader(t("page.upload.files"), accept_multiple_files=True, key="upload_files")
folder = st.file_uploader(t("page.upload.folder"), accept_multiple_files="directory", key="upload_dir")
chosen = list(files or []) + list(folder or [])

if st.button(t("page.upload.ingest"), type="primary", disabled=not chosen, key="ingest"):
    bar = st.progress(0.0, text=t("page.upload.ingesting"))
    total = max(1, sum(f.size for f in chosen))
    done = {"bytes": 0}

    def advance(outcome) -> None:  # noqa: ANN001
        done["bytes"] += outcome.size_bytes
        bar.progress(min(1.0, done["bytes"] / total), text=f"{outcome.status}: {md_text(outcome.source)}")

    outcomes = data.ingest([Upload(f.name, f, f.size) for f in chosen], on_file_done=advance)
    bar.progress(1.0, text=t("page.upload.done"))
    st.session_state["last_upload"] = outcomes
    device_runs = {r["run_id"] for r in data.runs(data.fingerprint()) if r["start_ns"] is not None}
    chosen_run = run_to_select(outcomes, device_runs)
    if chosen_run is not None:
        state.select_run(chosen_run)

outcomes = st.session_state.get("last_upload")
if outcomes:
    failed = [o for o in outcomes if o["status"] == "failed"]
    ok = [o for o in outcomes if o["status"] in ("ok", "partial")]
    if ok:
        lines = "\n".join(f"- {line}" for line in describe_stored(outcomes))  # diag's own words: no file text
        selected = state.selected_run()
        tail = t("page.upload.selected", run=selected) if selected in {o["run_id"] for o in ok} else ""
        st.success(t("page.upload.stored", n=len(ok), lines=lines, tail=tail))
    elif not failed:
        st.info(
            "\n".join(f"- {widgets.md(line)}" for line in describe_stored(outcomes))
            or t("page.upload.nothing")
        )
    for o in failed:
        st.error(md_text(o["message"] or f"{o['path']}: failed"))
    for o in outcomes:
        if o["status"] == "partial":
            st.warning(md_text(f"{o['path']}: {o['message']}"))
    show_table(widgets.outcomes_frame(outcomes))
