"""Logs: the ranked root causes found in CANN / torch_npu logs — for the logs of no run, those of one incident
episode (the latest by default; diag.analyses.log_episodes) — then the classified records with filters, each
with the raw lines around it.  No SQL here: the analysis layer (diag.analyses.log_diagnosis) answers,
cached by the database fingerprint."""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime

import pandas as pd
import streamlit as st

from app import data, evidence
from app.text import md_code, md_text
from diag.analyses import log_diagnosis as diagnosis
from diag.analyses import log_episodes
from diag.analyses.evidence_view import MISSING, RunClock, log_blocks
from diag.commands._format import header_text
from diag.i18n import current_language, role_word, severity_word, t

SEVERITY = {
    "high": ":red-badge[{}]",
    "medium": ":orange-badge[{}]",
    "low": ":blue-badge[{}]",
    "info": ":gray-badge[{}]",
}


def severity_badge(severity: str) -> str:
    badge = SEVERITY.get(severity)
    return badge.format(severity_word(severity)) if badge else severity


# sized so that a code (EZ9999, ERR00100, EI0002…) and the message are read whole, not clipped
RECORD_COLUMNS = {
    "time": st.column_config.TextColumn(width=175),
    "level": st.column_config.TextColumn(width=65),
    "code": st.column_config.TextColumn(width=85),
    "category": st.column_config.TextColumn(width=125),
    "message": st.column_config.TextColumn(width=620, help=t("page.logs.message_help")),
    "file": st.column_config.TextColumn(width=200),
    "line": st.column_config.NumberColumn(width=60, format="%d"),
    "module": st.column_config.TextColumn(width=90),
    "rank": st.column_config.TextColumn(width=50),
}


@st.cache_data(show_spinner=False, max_entries=16)
def _scopes(fp: str, lang: str) -> list[dict]:  # lang: titles and meanings are in the session's language
    return diagnosis.log_scopes(data.store())


@st.cache_data(show_spinner=False, max_entries=16)
def _episodes(fp: str, run_id: int | None) -> list[log_episodes.Episode]:
    return diagnosis.episodes(data.store(), run_id)


@st.cache_data(show_spinner=False, max_entries=16)
def _causes(fp: str, run_id: int | None, episode: int | None, lang: str) -> list[diagnosis.RootCause]:
    return diagnosis.root_causes(data.store(), run_id, episode=episode)


@st.cache_data(show_spinner=False, max_entries=16)
def _values(fp: str, run_id: int | None) -> dict:
    return diagnosis.filter_values(data.store(), run_id)


@st.cache_data(show_spinner=False, max_entries=64)
def _records(fp: str, run_id: int | None, filters: tuple) -> list[dict]:
    return diagnosis.log_records(data.store(), run_id, **dict(filters))


@st.cache_data(show_spinner=False, max_entries=64)
def _context(fp: str, file_id: int, record_no: int) -> list[dict]:
    return diagnosis.record_context(data.store(), file_id, record_no, before=8, after=8)


def _time(ns: int | None) -> str:
    return (
        MISSING if ns is None else datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    )


def _dt(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).replace(tzinfo=None)


def _ns(dt: datetime) -> int:
    return int(dt.replace(tzinfo=UTC).timestamp() * 1_000_000) * 1000


st.title(t("page.logs.title"))
fp = data.fingerprint()
scopes = _scopes(fp, current_language())
if not scopes:
    st.info(t("page.logs.empty"))
    st.stop()
choices: list[int | None] = [None] + [s["run_id"] for s in scopes if s["run_id"] is not None]
names = {None: t("page.logs.scope_every", n=sum(s["files"] for s in scopes))}
names |= {
    s["run_id"]: t("page.logs.scope_run", run=s["run_id"], name=s["name"], n=s["files"])
    for s in scopes
    if s["run_id"]
}
run_id = st.selectbox(t("page.logs.scope"), choices, format_func=names.get, key="logs_scope")

st.subheader(t("page.logs.root_causes"))
episode = None
if run_id is None:  # logs of no run: one incident episode at a time, never every log stitched together
    eps = _episodes(fp, run_id)
    latest = log_episodes.latest_incident(eps)
    if eps and latest is not None:
        numbers = [e.episode for e in eps]
        labels = {e.episode: log_episodes.describe(e) for e in eps}
        labels[latest.episode] += t("page.logs.latest_incident") if latest.incident else t("page.logs.latest")
        episode = st.selectbox(
            t("page.logs.episode_pick", n=len(eps)), numbers, index=numbers.index(latest.episode), format_func=labels.get,
            key="logs_episode",
        )  # fmt: skip
causes = _causes(fp, run_id, episode, current_language())
if not causes:
    st.success(t("page.logs.no_error"))
st.caption(t("page.logs.ranked"))
for c in causes:
    with st.container(border=True):
        echo = t("page.logs.cause_echo", rank=c.echo_of) if c.echo_of else ""
        ranks = t("page.logs.ranks", ranks=", ".join(map(str, c.ranks))) if c.ranks else ""
        st.markdown(
            f"**#{c.rank}** {severity_badge(c.severity)} **{md_text(c.title)}** · {md_text(role_word(c.role))}{echo}{ranks} · "
            + t("page.logs.cause_count", n=c.count, first=_time(c.first_ns))
        )
        st.markdown(md_text(c.explanation))
        st.markdown(f"**{t('page.logs.fix')}:** {md_text(c.fix)}")
        if c.codes:
            st.caption(" · ".join(f"{md_code(k['code'])} {md_text(k.get('meaning', ''))}" for k in c.codes))
        blocks = log_blocks([asdict(e) for e in c.evidence])
        if blocks:
            with st.expander(t("page.logs.cause_evidence")):
                evidence.show(blocks, RunClock(), key=f"logs_cause_{c.rank}")

st.subheader(t("page.logs.records"))
values = _values(fp, run_id)
cols = st.columns(5)
pick = t("page.logs.choose")  # Streamlit's own placeholder is English
levels = cols[0].multiselect(header_text("level"), values["level"], key="logs_level", placeholder=pick)
modules = cols[1].multiselect(header_text("module"), values["module"], key="logs_module", placeholder=pick)
codes = cols[2].multiselect(header_text("code"), values["code"], key="logs_code", placeholder=pick)
categories = cols[3].multiselect(
    header_text("category"), values["category"], key="logs_category", placeholder=pick
)
ranks = cols[4].multiselect(header_text("rank"), values["rank"], key="logs_rank", placeholder=pick)
flagged = st.checkbox(t("page.logs.flagged_only"), value=True, key="logs_flagged")
window = None
if values["start_ns"] is not None and values["end_ns"] > values["start_ns"]:
    lo, hi = _dt(values["start_ns"]), _dt(values["end_ns"])
    window = st.slider(
        t("page.logs.time_window"), lo, hi, (lo, hi), format="YYYY-MM-DD HH:mm:ss", key="logs_time"
    )
filters = {
    "levels": levels or None,
    "modules": modules or None,
    "codes": codes or None,
    "categories": categories or None,
    "ranks": ranks or None,
    "flagged_only": flagged,
    "limit": 2000,
}
if window and (window[0] > _dt(values["start_ns"]) or window[1] < _dt(values["end_ns"])):
    filters |= {"start_ns": _ns(window[0]), "end_ns": _ns(window[1]) + 999_999}
rows = _records(fp, run_id, tuple(sorted(filters.items())))
st.caption(
    t("page.logs.record_count", n=f"{len(rows):,}") + (t("page.logs.first_2000") if len(rows) == 2000 else "")
)
if rows:
    table = pd.DataFrame(
        {
            "time": [_time(r["ts_ns"]) for r in rows],
            "level": [r["level"] or MISSING for r in rows],
            "code": [r["code"] or MISSING for r in rows],
            "category": [r["category"] or MISSING for r in rows],
            "message": [(r["message"] or "").split("\n", 1)[0][:300] or MISSING for r in rows],
            "file": [r["source"].rsplit("/", 1)[-1] for r in rows],
            "line": [r["line_no"] for r in rows],
            "module": [r["module"] or MISSING for r in rows],
            "rank": [MISSING if r["rank"] is None else str(r["rank"]) for r in rows],
        }
    )
    st.dataframe(  # headers in the language (diag/rules/cli_headers.csv, as the other tables)
        table.rename(columns=header_text),
        hide_index=True,
        width="stretch",
        column_config={header_text(k): v for k, v in RECORD_COLUMNS.items()},
    )
    st.caption(t("page.logs.records_caption"))
    pick = st.selectbox(
        t("page.logs.raw_lines_around"),
        range(len(rows)),
        format_func=lambda i: (
            f"{rows[i]['source'].rsplit('/', 1)[-1]}:{rows[i]['line_no']} — "
            f"{(rows[i]['message'] or '').split(chr(10), 1)[0][:120]}"
        ),
        key="logs_context",
    )
    here = rows[pick]
    around = _context(fp, here["file_id"], here["record_no"])
    # the file's name as uploaded (an upload lives under its upload id); the whole path in the tooltip
    st.caption(
        t("page.logs.lines_around", file=md_text(here["source"].rsplit("/", 1)[-1]), line=here["line_no"]),
        help=here["source"],
    )
    st.code(
        "\n".join(
            ("▶ " if r["record_no"] == here["record_no"] else "  ") + r["raw"].replace("\n", "\n  ")
            for r in around
        ),
        language=None,
        wrap_lines=True,
    )
