"""The one selection every page honours: a run, a step of it, and the job holding it.

Pages read and set the selection through these functions, never through ``st.session_state`` keys by hand.
The keys are kept stable (the Timeline page and ``app.data.open_in_timeline`` read and write ``run_id``, ``step``
and the ``tl_`` keys directly):

- ``run_id``   the selected run (an int), or absent / None when nothing is selected;
- ``step``     the selected step of that run, None for the whole run;
- ``job_id``   the job last opened on the Cluster page (the selected run's job wins when it has one);
- ``tl_run``, ``tl_step``  the Timeline page's own run / step widgets (it starts them from ``run_id`` / ``step``);
- ``tl_window``  a (start_ns, end_ns) window the Timeline page opens once ("Show on the timeline");
- ``lang``     the sidebar's language switch (``zh`` / ``en``); absent: ``$DIAG_LANG``, else the locale (diag.i18n).
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from diag import i18n

RUN, STEP, JOB = "run_id", "step", "job_id"
TL_RUN, TL_STEP, TL_WINDOW = "tl_run", "tl_step", "tl_window"
LANG = "lang"


def selected_run() -> int | None:
    return st.session_state.get(RUN)


def selected_step() -> int | None:
    return st.session_state.get(STEP)


def select_run(run_id: int | None, step: int | None = None) -> None:
    """Select a run (and a step of it) for every page. The Timeline page's own widgets (``tl_run``,
    ``tl_step``) start from it: they are not set here, since a widget given a value both by Session State and by
    its ``index`` makes Streamlit warn."""
    st.session_state[RUN], st.session_state[STEP] = run_id, step


def select_step(step: int | None) -> None:
    st.session_state[STEP] = step


def clear_run() -> None:
    """Nothing selected (the selected run was deleted)."""
    for key in (RUN, STEP, TL_RUN, TL_STEP, TL_WINDOW):
        st.session_state.pop(key, None)


def selected_job() -> int | None:
    return st.session_state.get(JOB)


def select_job(job_id: int | None) -> None:
    st.session_state[JOB] = job_id


def index_of_selected(ids: Sequence[int], fallback: int = 0) -> int:
    """Where the selected run sits in a picker's choices (``fallback`` when it is not among them)."""
    current = selected_run()
    return list(ids).index(current) if current in ids else fallback


def language() -> str:
    """The session's language: the sidebar switch once used, else the environment's (``$DIAG_LANG``, locale)."""
    return i18n.normalize(st.session_state.get(LANG)) or i18n.language_from_environment()


def apply_language() -> str:
    """Make the session's language the one ``diag.i18n.t`` answers in, for this script run (each run of a
    session is its own thread: the choice never leaks into another session)."""
    return i18n.set_language(language())


def language_switch() -> None:
    """The sidebar's 中文 / English switch; its choice lasts for the session (Session State key ``lang``)."""
    current = language()
    st.radio(
        i18n.t("lang.switch"),
        i18n.LANGUAGES,
        index=i18n.LANGUAGES.index(current),
        format_func=lambda code: i18n.catalog(code)["lang.name"],
        horizontal=True,
        key=LANG,
    )
