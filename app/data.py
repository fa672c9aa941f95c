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

from app import state
from diag.analyses import cluster as cluster_analysis
from diag.analyses import compare as compare_analysis
from diag.analyses import counts as counts_analysis
from diag.analyses import (
    cpu_fallback,
    kernel_summary,
    log_diagnosis,
    postmortem_notes,
    serving_compare,
    stall_breakdown,
)
from diag.analyses import findings as findings_analysis
from diag.analyses import memory as memory_analysis
from diag.analyses import memory_logs as memory_logs_analysis
from diag.analyses import moe as moe_analysis
from diag.analyses import postmortem as postmortem_analysis
from diag.analyses import serving as serving_analysis
from diag.analyses import timeline as tl_analysis
from diag.analyses.runs import list_runs
from diag.i18n import current_language, t
from diag.ingest import FileOutcome
from diag.store import Store
from diag.uploads import (
    DEFAULT_UPLOAD_BYTES,
    Upload,
    ingest_uploads,
    prune_uploads,
    upload_folders,
    upload_root,
)

TIMELINE_MAX_MARKS = int(os.environ.get("DIAG_TIMELINE_MAX_MARKS", "8000"))


def db_path() -> Path:
    return Path(os.environ.get("DIAG_DB", "diag.duckdb"))


@st.cache_resource
def _store(path: str) -> tuple[Store, threading.Lock]:
    # a lake's catalog (diag app --lake) is read-only: its rows are Parquet files the app never writes
    return Store(path, read_only=bool(os.environ.get("DIAG_LAKE"))), threading.Lock()


def store() -> Store:
    return _store(str(db_path()))[0]


def _write_lock() -> threading.Lock:
    return _store(str(db_path()))[1]


def fingerprint() -> str:
    """The cache key of every result: the database's state and the language in effect (finding titles, advice
    and owner texts are built in it, so a language switch must not serve the other language's cached results)."""
    return f"{store().fingerprint()}:{state.language()}"


@st.cache_data(show_spinner=False, max_entries=64)
def runs(fp: str) -> list[dict]:
    return list_runs(store())


@st.cache_data(show_spinner=False, max_entries=64)
def steps(fp: str, run_id: int) -> list[tuple[int, int, int]]:
    return tl_analysis.list_steps(store(), run_id)


@st.cache_data(show_spinner=False, max_entries=32)
def timeline(fp: str, run_id: int, start_ns: int | None, end_ns: int | None, max_marks: int):
    return tl_analysis.build_timeline(store(), run_id, start_ns, end_ns, max_marks)


@st.cache_data(show_spinner=False, max_entries=32)
def breakdown(fp: str, run_id: int) -> stall_breakdown.Breakdown:
    return stall_breakdown.breakdown(store(), run_id)


@st.cache_data(show_spinner=False, max_entries=32)
def fallbacks(fp: str, run_id: int) -> list[cpu_fallback.FallbackOp]:
    bd = breakdown(fp, run_id)
    e2e = bd.total.e2e_ns if bd.total else None
    ops = cpu_fallback.device_fallbacks(store(), run_id, e2e) + cpu_fallback.host_fallbacks(
        store(), run_id, e2e
    )
    # the log lines that name each op (W11001, "will fall back to run on the CPU"): the page shows them under it
    named = log_diagnosis.log_evidence_for_ops(store(), run_id, [o.op_type for o in ops])
    for o in ops:
        o.log_evidence = named.get(o.op_type, [])
    return ops


@st.cache_data(show_spinner=False, max_entries=32)
def findings(fp: str, run_id: int) -> list[findings_analysis.Finding]:
    return findings_analysis.device_findings(
        store(), run_id, breakdown(fp, run_id)
    ) + log_diagnosis.log_findings(store(), run_id)


# -- memory (diag.analyses.memory, diag.analyses.memory_logs): the Memory page --------------------------------------
@st.cache_data(show_spinner=False, max_entries=32)
def memory(fp: str, run_id: int | None, log_file: str | None = None) -> dict:
    """The ``diag memory --json`` object of a run, or of one log file of no run (its OOM figures, KV budget)."""
    return memory_analysis.memory_summary(store(), run_id=run_id, log_file=log_file)


@st.cache_data(show_spinner=False, max_entries=16)
def memory_timeline(fp: str, run_id: int) -> list[dict]:
    """Memory over time per series: ts_ns, source, component, allocated / reserved / active bytes (binned)."""
    return memory_analysis.memory_timeline(store(), run_id)


@st.cache_data(show_spinner=False, max_entries=16)
def memory_steps(fp: str, run_id: int) -> list[dict]:
    """The step windows (step, start_ns, end_ns) to shade on the memory timeline."""
    return memory_analysis.memory_steps(store(), run_id)


@st.cache_data(show_spinner=False, max_entries=16)
def oom_log_files(fp: str) -> list[str]:
    """Log files of no run that hold an OOM record (the Memory page's log-only choice), as ingested."""
    return sorted(
        {e["file"] for e in memory_logs_analysis.oom_events(store()) if e["run_id"] is None and e.get("file")}
    )


@st.cache_data(show_spinner=False, max_entries=64)
def log_lines(fp: str, refs: tuple[int, ...]) -> list[dict]:
    """The raw log records behind ``record_ref`` ids (for evidence shown on other pages)."""
    return log_diagnosis.records_by_ref(store(), list(refs))


@st.cache_data(show_spinner=False, max_entries=16)
def jobs(fp: str) -> list[dict]:
    """Jobs with their run and rank counts, most ranks first."""
    return cluster_analysis.list_jobs(store())


# A spinner's text given to st.cache_data is fixed when the module is imported (one language for every
# session): the spinner is drawn here instead, in the session's language, around the cached call.
def cluster(fp: str, job_id: int) -> cluster_analysis.ClusterView:
    with st.spinner(t("app.spinner.cluster")):
        return _cluster(fp, job_id)


@st.cache_data(show_spinner=False, max_entries=16)
def _cluster(fp: str, job_id: int) -> cluster_analysis.ClusterView:
    return cluster_analysis.cluster_view(store(), job_id)


def moe(fp: str, job_id: int) -> moe_analysis.MoeView:
    with st.spinner(t("app.spinner.moe")):
        return _moe(fp, job_id)


@st.cache_data(show_spinner=False, max_entries=16)
def _moe(fp: str, job_id: int) -> moe_analysis.MoeView:
    return moe_analysis.moe_view(store(), job_id=job_id)


@st.cache_data(show_spinner=False, max_entries=16)
def moe_grid(fp: str, job_id: int, phase: str | None) -> list[tuple[int, int, int]]:
    return moe_analysis.load_grid(store(), job_id, phase)


def open_run(run_id: int) -> None:
    """Select a run for the other pages (their run pickers, the Timeline's too, start from it: app.state)."""
    state.select_run(run_id)


@st.cache_data(show_spinner=False, max_entries=32)
def comparison(fp: str, run_a: int, run_b: int) -> compare_analysis.Comparison:
    return compare_analysis.compare(store(), run_a, run_b)


@st.cache_data(show_spinner=False, max_entries=32)
def kernel_counts(fp: str, run_id: int) -> counts_analysis.KernelCounts:
    """Device kernels, operator types, kernels per step and duplicate rows of a run (one definition)."""
    return counts_analysis.kernel_counts(store(), run_id, breakdown(fp, run_id))


@st.cache_data(show_spinner=False, max_entries=8)
def comparable_runs(fp: str) -> list[int]:
    """Runs with device tasks or an nsys stats kernel summary (the Compare page's choices)."""
    return kernel_summary.comparable_runs(store())


def postmortem(
    fp: str, run_id: int | None, baseline: int | None, job_id: int | None = None
) -> postmortem_analysis.Postmortem:
    """The postmortem of a run, a job or every log (its saved notes are read by ``notes``, not cached), in the
    session's language (its statements are text: cached per language)."""
    with st.spinner(t("app.spinner.postmortem")):
        return _postmortem(fp, run_id, baseline, job_id, current_language())


@st.cache_data(show_spinner=False, max_entries=16)
def _postmortem(
    fp: str, run_id: int | None, baseline: int | None, job_id: int | None, lang: str
) -> postmortem_analysis.Postmortem:
    return postmortem_analysis.build_postmortem(store(), run_id, baseline, job_id=job_id)


def notes(run_id: int | None = None, job_id: int | None = None) -> dict[str, str]:
    return postmortem_notes.load_notes(store(), run_id, job_id)


def save_notes(
    values: dict[str, str], run_id: int | None = None, job_id: int | None = None
) -> dict[str, str]:
    """Save a postmortem's free text with its run / job (a write: under the write lock)."""
    with _write_lock():
        return postmortem_notes.save_notes(store(), values, run_id, job_id)


def open_in_timeline(
    run_id: int, start_ns: int | None, end_ns: int | None, names: tuple[str, ...] | list[str] = ()
) -> None:
    """Select a run and a time window for the Timeline page (pages call st.switch_page after this).

    The window is the range's own span (with ``names``: the first call of that op in it), padded by a small
    fraction that never reaches a neighbouring op (``diag.analyses.timeline.focus_window``). Only plain state is
    set here: the Timeline page puts it into its widgets before drawing them (no Session State warning)."""
    st.session_state["run_id"] = run_id
    st.session_state["step"] = None
    st.session_state.pop("tl_step", None)  # the page shows "custom window" for a window that is not a step
    st.session_state.pop("tl_focus", None)
    if start_ns is not None and end_ns is not None:
        lo, hi, op = tl_analysis.focus_window(store(), run_id, start_ns, end_ns, tuple(names))
        st.session_state["tl_window"], st.session_state["tl_window_run"] = (lo, hi), run_id
        if op is not None:
            st.session_state["tl_focus"] = (op, (lo, hi))  # the page says which call it opened on
    else:
        st.session_state.pop("tl_window", None)
    st.session_state["tl_zoom"] = st.session_state.get("tl_zoom", 0) + 1


def upload_cap_bytes() -> int:
    return DEFAULT_UPLOAD_BYTES


def _refuse_on_lake(what: str) -> None:
    """``diag app --lake``: the catalog is read-only; a write says so on the page instead of a traceback (#23)."""
    lake = os.environ.get("DIAG_LAKE")
    if lake:
        st.error(
            f"This app reads the Parquet lake {lake} read-only: {what} is not possible here; "
            f"add or replace runs with `diag ingest PATH… --lake {lake}`."
        )
        st.stop()


def ingest(uploads: list[Upload], on_file_done: Callable[[FileOutcome], None] | None = None) -> list[dict]:
    _refuse_on_lake("uploading files")
    with _write_lock():
        outcomes = ingest_uploads(
            store(), uploads, upload_root(db_path()), max_bytes=upload_cap_bytes(), on_file_done=on_file_done
        )
    return [o.to_json() for o in outcomes]


def delete_run(run_id: int) -> None:
    """Delete a run, then the upload folders nothing stored comes from any more (diag.uploads retention)."""
    _refuse_on_lake("deleting a run")
    with _write_lock():
        folders = upload_folders(store(), upload_root(db_path()), run_id)
        store().delete_run(run_id)
        prune_uploads(store(), upload_root(db_path()), folders)


def _serving_rules_stamp() -> str:
    """Part of the cache key of serving results: editing the thresholds file changes the verdicts; the language
    their texts (details, warnings, headline) are in."""
    path = serving_analysis.thresholds_path()
    return (f"{path}:{path.stat().st_mtime_ns}" if path.exists() else str(path)) + f":{current_language()}"


@st.cache_data(show_spinner=False, max_entries=32)
def _serving_acceptance(fp: str, rules_stamp: str) -> list[dict]:
    return serving_analysis.accept(store().cursor())


def serving_acceptance(fp: str) -> list[dict]:
    """Every serving run judged against diag/rules/serving_thresholds.toml (checks, verdict, margins)."""
    return _serving_acceptance(fp, _serving_rules_stamp())


@st.cache_data(show_spinner=False, max_entries=32)
def _serving_comparison(fp: str, rules_stamp: str, serving_a: int, serving_b: int) -> dict:
    return serving_compare.compare_serving(store().cursor(), serving_a, serving_b)


def serving_comparison(fp: str, serving_a: int, serving_b: int) -> dict:
    """Serving run A against B (the baseline): figures side by side with ratios, gaps and warnings."""
    return _serving_comparison(fp, _serving_rules_stamp(), serving_a, serving_b)


@st.cache_data(show_spinner=False, max_entries=32)
def _serving_for_runs(fp: str, rules_stamp: str, run_ids: tuple[int, ...]) -> list[dict]:
    return serving_analysis.serving_for_runs(store().cursor(), list(run_ids))


def serving_for_runs(fp: str, run_ids: tuple[int, ...]) -> list[dict]:
    """The judged serving runs of the same deployment as these profile runs (postmortem / compare pages)."""
    return _serving_for_runs(fp, _serving_rules_stamp(), tuple(run_ids))


@st.cache_data(show_spinner=False, max_entries=32)
def _serving_comparison_for_runs(fp: str, rules_stamp: str, run_a: int, run_b: int) -> dict | None:
    return serving_compare.serving_comparison_for_runs(store().cursor(), run_a, run_b)


def serving_comparison_for_runs(fp: str, run_a: int, run_b: int) -> dict | None:
    """Serving figures of profile run A's deployment against run B's, or None when either has none."""
    return _serving_comparison_for_runs(fp, _serving_rules_stamp(), run_a, run_b)


def chrome_trace_bytes(run_id: int) -> bytes:
    """The run as a Chrome / Perfetto trace (diag export --format chrome), built when the user clicks download."""
    import tempfile

    from diag import chrome_trace

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        chrome_trace.write_chrome_trace(store(), run_id, path)
        return path.read_bytes()


# --- Ops page (#20): the op table, one op's shapes, PMU / L2 per op (imports local: this section only appends) ---


@st.cache_data(show_spinner=False, max_entries=32)
def op_table(fp: str, run_id: int, by: str, baseline: int | None) -> list[dict]:
    """The run's kernels by op type, kernel or op class (diag.analyses.ops), the baseline's classes beside."""
    from diag.analyses import ops

    return ops.op_table(store(), run_id, by, baseline)


@st.cache_data(show_spinner=False, max_entries=64)
def op_shapes(fp: str, run_id: int, name: str, by: str) -> list[dict]:
    """One op's distinct input shapes with their time and varying dimension (diag.analyses.ops_shapes)."""
    from diag.analyses import ops_shapes

    return ops_shapes.op_shapes(store(), run_id, name, by)


@st.cache_data(show_spinner=False, max_entries=64)
def op_shapes_by_step(fp: str, run_id: int, name: str, by: str) -> list[dict]:
    from diag.analyses import ops_shapes

    return ops_shapes.shapes_by_step(store(), run_id, name, by)


@st.cache_data(show_spinner=False, max_entries=32)
def op_pmu(fp: str, run_id: int, by: str) -> list[dict]:
    """PMU ratios and L2 rates per op type or kernel (diag.analyses.ops_pmu); empty without kernel_details PMU."""
    from diag.analyses import ops_pmu

    return ops_pmu.op_pmu(store(), run_id, by)


def op_baselines(fp: str, run_id: int) -> tuple[list[int], int | None]:
    """Runs that can be this run's baseline (every other comparable run) and the default one: the first run of
    the other platform (an Ascend run's CUDA run), as the Compare page picks its pair; None when there is none."""
    platform = {r["run_id"]: r["platform"] for r in runs(fp)}
    choices = [i for i in comparable_runs(fp) if i != run_id and i in platform]
    other = "ascend" if platform.get(run_id) in ("cuda", "rocm") else "cuda"
    return choices, next((i for i in choices if platform[i] == other), None)


@st.cache_data(show_spinner=False, max_entries=32)
def op_utilization(fp: str, run_id: int, by: str) -> list[dict]:
    """Per op type or kernel: FLOPs, bytes, achieved TFLOPS / GB/s, MFU, bound (diag.analyses.op_util; #20)."""
    from diag.analyses import op_util

    return op_util.op_utilization(store(), run_id, by)


@st.cache_data(show_spinner=False, max_entries=32)
def environment_check(fp: str, run_id: int) -> dict:
    """A run's versions against the published pairings and its settings (diag.analyses.env_check; #21)."""
    from diag.analyses.env_check import environment_check as check

    return check(store(), run_id)


# --- Scaling section of the Compare page (#20): time against sequence / KV length (append-only) ---


@st.cache_data(show_spinner=False, max_entries=32)
def scaling(fp: str, run_id: int, baseline: int | None) -> dict:
    """Per group the points, slopes, ratio curve and departure length (diag.analyses.scaling)."""
    from diag.analyses import scaling as scaling_analysis

    return scaling_analysis.scaling(store(), run_id, baseline)


# --- Before / after section of the Compare page (#21): two runs of one platform (append-only) ---


@st.cache_data(show_spinner=False, max_entries=32)
def before_after(fp: str, run_a: int, run_b: int) -> dict | None:
    """Per op and class what changed beyond noise, and what differs in the environments; None for a pair of two
    platforms (diag.analyses.before_after)."""
    from diag.analyses import before_after as ba

    if not ba.same_platform(store(), run_a, run_b):
        return None
    return ba.before_after(store(), run_a, run_b)
