"""The one bridge between the pages and diag: a cached store, cached analysis results, the upload service.

Results are cached by the database fingerprint, which changes whenever an ingest or delete commits.
Writes (uploads, deletes) are serialised with one lock; reads use a DuckDB cursor per call.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from diag.analyses import timeline as tl_analysis
from diag.analyses.runs import list_runs
from diag.ingest import FileOutcome
from diag.store import Store
from diag.uploads import DEFAULT_UPLOAD_BYTES, Upload, ingest_uploads, upload_root

TIMELINE_MAX_MARKS = int(os.environ.get("DIAG_TIMELINE_MAX_MARKS", "8000"))


def db_path() -> Path:
    return Path(os.environ.get("DIAG_DB", "diag.duckdb"))


@st.cache_resource
def _store(path: str) -> tuple[Store, threading.Lock]:
    return Store(path), threading.Lock()


def store() -> Store:
    return _store(str(db_path()))[0]


def _write_lock() -> threading.Lock:
    return _store(str(db_path()))[1]


def fingerprint() -> str:
    return store().fingerprint()


@st.cache_data(show_spinner=False, max_entries=64)
def runs(fp: str) -> list[dict]:
    return list_runs(store())


@st.cache_data(show_spinner=False, max_entries=64)
def steps(fp: str, run_id: int) -> list[tuple[int, int, int]]:
    return tl_analysis.list_steps(store(), run_id)


@st.cache_data(show_spinner=False, max_entries=32)
def timeline(fp: str, run_id: int, start_ns: int | None, end_ns: int | None, max_marks: int):
    return tl_analysis.build_timeline(store(), run_id, start_ns, end_ns, max_marks)


def upload_cap_bytes() -> int:
    return DEFAULT_UPLOAD_BYTES


def ingest(uploads: list[Upload], on_file_done: Callable[[FileOutcome], None] | None = None) -> list[dict]:
    with _write_lock():
        outcomes = ingest_uploads(
            store(), uploads, upload_root(db_path()), max_bytes=upload_cap_bytes(), on_file_done=on_file_done
        )
    return [o.to_json() for o in outcomes]


def delete_run(run_id: int) -> None:
    with _write_lock():
        store().delete_run(run_id)
