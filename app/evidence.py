"""Evidence drawn the same way on every page: the blocks of diag.analyses.evidence_view as small tables, log
lines (file:line, the text, its next lines) and a time range with a button to the timeline."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import data
from app.text import md_cells, md_code, md_text
from diag.analyses.evidence_view import Block, LogLines, RunClock, Table, TimeRange
from diag.i18n import t


def clock_of(fp: str, run_id: int | None) -> RunClock:
    """The capture window of ``run_id`` (no run: no window, times are shown on their own clock)."""
    run = next((r for r in data.runs(fp) if r["run_id"] == run_id), None) if run_id is not None else None
    if run is None:
        return RunClock()
    return RunClock(run["start_ns"], run["end_ns"], run_id)


def _table(t: Table) -> None:
    if t.title:
        st.caption(md_text(t.title))
    # a static table: it wraps long op names and paths, and sizes itself to its rows
    st.table(pd.DataFrame(md_cells(t.rows), columns=t.columns).set_index(t.columns[0]))
    if t.more:
        st.caption(f"… {t.more} more row(s) (see the JSON)")


def _log(block: LogLines) -> None:
    for line in block.lines:
        meta = " · ".join(
            md_text(x)
            for x in (line.time, f"rank {line.rank}" if line.rank != "—" else "", line.code, line.note)
            if x and x != "—"
        )
        st.caption(md_code(line.where) + (f" · {meta}" if meta else ""), help=md_text(line.path) or None)
        st.code("\n".join([line.text, *("  " + c for c in line.context)]), language=None, wrap_lines=True)
    if block.more:
        st.caption(f"… {block.more} more line(s)")


def _range(r: TimeRange, clock: RunClock, key: str) -> None:
    st.caption(t("report.time_range", text=md_text(r.text)))
    if r.in_run and clock.run_id is not None and st.button("Open in the timeline", key=key):
        data.open_in_timeline(clock.run_id, r.start_ns, r.end_ns)
        st.switch_page("app_pages/03_timeline.py")


def show(blocks: list[Block], clock: RunClock, key: str) -> None:
    """Draw ``blocks``; ``key`` makes the timeline button's key unique on the page."""
    for block in blocks:
        if isinstance(block, Table):
            _table(block)
        elif isinstance(block, LogLines):
            _log(block)
        else:
            _range(block, clock, key=f"{key}_tl")
