"""Run identity and order-independent joins (#15).

A run without ``profiler_info`` is known by its content (the hash of its files' relpaths and digests), so the
same bytes from another folder or an archive are stored once; the CSVs of one nsys-stats / ncu capture are one
run; a log joins the run of its folder whatever the order the files are walked or ingested in.
"""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from pathlib import Path

import pytest

from diag.store import Store
from tests.conftest import FIXTURES, ingest_into, query

TRAPS = FIXTURES / "traps"
BARE = TRAPS / "bare_csv_no_profiler_info"
NSYS = TRAPS / "nsys_stats_one_capture"
LOG_RUN = TRAPS / "log_in_run_folder" / "rank0_ascend_pt"
PLOG = "plog-100_20250625104000000.log"


def ingest(db: Path, *paths: Path, jobs: int = 1, **options):  # noqa: ANN201
    with Store(db) as store:
        return ingest_into(store, paths, jobs=jobs, **options)


def statuses(summary) -> list[str]:  # noqa: ANN001
    return sorted(f.status for f in summary.files)


# -- 1. content identity for runs without profiler_info ------------------------------------------------------
def test_bare_kernel_details_from_two_folders_and_an_archive_is_one_run(tmp_path, db):
    a, b = tmp_path / "a" / "capture", tmp_path / "b" / "elsewhere"
    shutil.copytree(BARE, a)
    shutil.copytree(BARE, b)
    archive = tmp_path / "capture.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(BARE, arcname="capture")
    first = ingest(db, a)
    assert [f.status for f in first.files if f.parser] == ["ok"]
    assert [f.status for f in ingest(db, b).files if f.parser] == ["unchanged"]
    assert [f.status for f in ingest(db, archive).files if f.parser] == ["unchanged"]
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]
    assert query(db, "SELECT count(*) FROM kernels") == [(8,)]  # the file's 8 rows, once
    assert query(db, "SELECT count(*) FROM files WHERE status = 'ok'") == [(1,)]
    key = query(db, "SELECT run_key FROM runs")[0][0]
    assert key.startswith("content:") and "path:" not in key
    # the digest hashed for the content key is the ledger's sha256 (hashed once)
    digest = hashlib.sha256((BARE / "kernel_details.csv").read_bytes()).hexdigest()
    assert query(db, "SELECT sha256 FROM files WHERE status = 'ok'") == [(digest,)]


def test_changed_file_of_a_path_identified_folder_replaces_its_rows_in_the_same_run(tmp_path, db):
    folder = tmp_path / "capture"
    shutil.copytree(BARE, folder)
    shutil.copy(FIXTURES / "ascend_kernel_details" / "ok_crlf_tab_na.csv", folder / "other_kernels.csv")
    ingest(db, folder)
    assert query(db, "SELECT count(*) FROM kernels") == [(11,)]
    kd = folder / "kernel_details.csv"
    kd.write_text("\n".join(kd.read_text().splitlines()[:4]) + "\n")  # 3 of its 8 rows left
    again = ingest(db, folder)
    assert sorted((Path(f.source).name, f.status) for f in again.files if f.parser) == [
        ("kernel_details.csv", "ok"),
        ("other_kernels.csv", "unchanged"),
    ]
    assert query(db, "SELECT count(*), count(DISTINCT run_id) FROM kernels") == [(6, 1)]
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]
    # the run is now known by its new content: a copy of the folder as it is now is the same run
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    assert statuses(ingest(db, copy)) == ["skipped", "unchanged", "unchanged"]
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]


def test_one_file_named_then_its_folder_is_one_run(tmp_path, db):
    folder = tmp_path / "capture"
    shutil.copytree(BARE, folder)
    shutil.copy(FIXTURES / "ascend_kernel_details" / "ok_crlf_tab_na.csv", folder / "other_kernels.csv")
    ingest(db, folder / "kernel_details.csv")
    again = ingest(db, folder)
    assert sorted((Path(f.source).name, f.status) for f in again.files if f.parser) == [
        ("kernel_details.csv", "unchanged"),
        ("other_kernels.csv", "ok"),
    ]
    assert query(db, "SELECT count(*), count(DISTINCT run_id) FROM kernels") == [(11, 1)]


def test_logs_only_folder_from_two_paths_is_stored_once(tmp_path, db):
    src = FIXTURES / "cann_log" / "two_ranks" / "rank0" / "debug" / "plog"
    shutil.copytree(src, tmp_path / "x")
    shutil.copytree(src, tmp_path / "y")
    ingest(db, tmp_path / "x")
    assert [f.status for f in ingest(db, tmp_path / "y").files] == ["unchanged"]
    assert query(db, "SELECT count(DISTINCT file_id) FROM log_records") == [(1,)]


def test_replace_reparses_a_content_identified_run_in_place(tmp_path, db):
    ingest(db, BARE)
    again = ingest(db, BARE, replace=True)
    assert [f.status for f in again.files if f.parser] == ["ok"]
    assert query(db, "SELECT count(*), count(DISTINCT run_id) FROM kernels") == [(8, 1)]
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]


# -- 2. one capture, one run -------------------------------------------------------------------------------
def test_nsys_stats_csvs_of_one_capture_are_one_run_and_two_captures_two(db):
    summary = ingest(db, NSYS)
    assert sorted(f.status for f in summary.files if f.parser) == ["ok"] * 6
    runs = query(
        db,
        "SELECT r.name, count(DISTINCT f.file_id) FROM runs r JOIN files f USING (run_id) "
        "GROUP BY ALL ORDER BY 1",
    )
    assert runs == [("report1", 4), ("report2", 2)]
    assert query(db, "SELECT source FROM runs ORDER BY 1") == [(f"{NSYS}/report1*",), (f"{NSYS}/report2*",)]
    by_run = query(
        db,
        "SELECT r.name, s.report, count(*) FROM kernel_stats s JOIN runs r USING (run_id) GROUP BY ALL ORDER BY 1, 2",
    )
    assert by_run == [
        ("report1", "cuda_api_sum", 3),
        ("report1", "cuda_gpu_kern_sum", 2),
        ("report1", "nvtx_sum", 1),
        ("report2", "cuda_api_sum", 2),
        ("report2", "cuda_gpu_kern_sum", 3),
    ]
    assert query(
        db, "SELECT r.name, count(*) FROM kernel_metrics m JOIN runs r USING (run_id) GROUP BY ALL"
    ) == [("report1", 7)]  # cuda_gpu_mem_size_sum: count, total, avg, med, min, max, stddev
    assert [f.status for f in ingest(db, NSYS).files if f.parser] == ["unchanged"] * 6
    assert query(db, "SELECT count(*) FROM runs") == [(2,)]


def test_nsys_stats_capture_from_a_copy_is_the_same_run(tmp_path, db):
    ingest(db, NSYS)
    shutil.copytree(NSYS, tmp_path / "copy")
    assert [f.status for f in ingest(db, tmp_path / "copy").files if f.parser] == ["unchanged"] * 6
    assert query(db, "SELECT count(*) FROM runs") == [(2,)]


def test_stdout_concatenation_without_a_report_name_is_its_own_run(tmp_path, db):
    folder = tmp_path / "f"
    shutil.copytree(NSYS, folder)
    shutil.copy(FIXTURES / "nsys_stats_csv" / "ok_concatenated_reports.csv", folder)
    ingest(db, folder)
    assert query(db, "SELECT name FROM runs ORDER BY name") == [
        ("ok_concatenated_reports.csv",),
        ("report1",),
        ("report2",),
    ]


def test_ncu_csvs_of_one_profiled_process_are_one_run(corpus, tmp_path, db):
    folder = tmp_path / "ncu"
    folder.mkdir()
    for f in (corpus / "cuda" / "llm-perf-opt").glob("ncu_*.csv"):
        shutil.copy(f, folder)
    shutil.copy(FIXTURES / "ncu_csv" / "ok_raw_wide.csv", folder)  # another process (pid 108)
    summary = ingest(db, folder)
    assert sorted(f.status for f in summary.files if f.parser) == ["ok"] * 5
    assert query(
        db,
        "SELECT r.name, count(DISTINCT f.file_id) FROM runs r JOIN files f USING (run_id) GROUP BY ALL ORDER BY 2",
    ) == [("ok_raw_wide.csv", 1), ("ncu_kernel0001_gemvx", 4)]


def test_per_stage_kernel_summaries_of_the_corpus_stay_separate_runs(corpus, db):
    ingest(db, corpus / "cuda" / "llm-perf-opt")
    names = query(db, "SELECT name FROM runs WHERE name LIKE 'nsys%' ORDER BY 1")
    assert names == [
        ("nsys_cuda_gpu_kern_sum_decode.csv",),
        ("nsys_cuda_gpu_kern_sum_prefill.csv",),
        ("nsys_cuda_gpu_kern_sum_projector.csv",),
        ("nsys_cuda_gpu_kern_sum_sam.csv",),
    ]


# -- 3. order-independent joins ------------------------------------------------------------------------------
def _log_attachment(db: Path) -> list[tuple]:
    return query(
        db,
        "SELECT (SELECT count(*) FROM runs), f.run_id IS NOT NULL, count(l.file_id), count(l.run_id) "
        "FROM files f JOIN log_records l USING (file_id) WHERE f.relpath = ? GROUP BY ALL",
        [PLOG],
    )


@pytest.mark.parametrize("jobs", [1, 2])
def test_log_in_run_folder_joins_its_run(db, jobs):
    ingest(db, LOG_RUN, jobs=jobs)
    assert _log_attachment(db) == [(1, True, 4, 4)]


def test_log_ingested_before_its_run_joins_it_later(db):
    first = ingest(db, LOG_RUN / PLOG)
    assert [f.run_id for f in first.files] == [None]
    ingest(db, LOG_RUN)
    assert _log_attachment(db) == [(1, True, 4, 4)]
    run_id = query(db, "SELECT run_id FROM runs")[0][0]
    assert query(db, "SELECT DISTINCT run_id FROM log_records") == [(run_id,)]


def test_log_of_a_bare_folder_ingested_first_joins_the_run_made_later(tmp_path, db):
    folder = tmp_path / "capture"
    shutil.copytree(BARE, folder)
    shutil.copy(LOG_RUN / PLOG, folder)
    ingest(db, folder / PLOG)
    ingest(db, folder)
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]
    assert query(db, "SELECT count(*), count(run_id) FROM log_records") == [(4, 4)]
    assert query(db, "SELECT count(*) FROM files WHERE relpath = ? AND run_id IS NOT NULL", [PLOG]) == [(1,)]


def test_outcomes_keep_the_input_order(db):
    summary = ingest(db, LOG_RUN)
    assert [Path(f.source).name for f in summary.files] == [
        PLOG,
        "profiler_info_0.json",
        "kernel_details.csv",
    ]


def test_ncu_pages_of_two_processes_with_the_same_pid_stay_two_runs(tmp_path, db):
    folder = tmp_path / "ncu"
    folder.mkdir()
    for name in ("ok_details_no_rules.csv", "ok_raw_wide.csv"):  # pid 108 in both: python3.10, two_kernels
        shutil.copy(FIXTURES / "ncu_csv" / name, folder)
    ingest(db, folder)
    assert query(db, "SELECT name FROM runs ORDER BY 1") == [
        ("ok_details_no_rules.csv",),
        ("ok_raw_wide.csv",),
    ]


@pytest.mark.parametrize(
    ("file_name", "capture"),
    [
        ("report1_cuda_gpu_kern_sum.csv", "nsys_stats:report1"),
        ("report1_cuda_gpu_kern_gb_sum.csv", "nsys_stats:report1"),  # the longer id, not '…_kern_gb' + 'sum'
        ("run_7_nvtx_kern_sum.csv", "nsys_stats:run_7"),
        ("old_gpukernsum.csv", "nsys_stats:old"),  # nsys < 2023.1 report ids
        ("cuda_api_sum.csv", "nsys_stats:"),  # --output '' : the report id alone
        ("nsys_cuda_gpu_kern_sum_decode.csv", None),  # renamed: not the PREFIX_<report> shape
        ("stats_stdout.csv", None),  # stdout concatenation
    ],
)
def test_nsys_stats_capture_is_read_from_the_output_prefix(tmp_path, file_name, capture):
    from parsers import Probe
    from parsers.nsys_stats_csv import PARSER

    path = tmp_path / file_name
    shutil.copy(NSYS / "report1_cuda_api_sum.csv", path)
    assert PARSER.capture_of(Probe.of(path)) == capture


def test_jobs_2_stores_captures_and_copies_as_jobs_1_does(tmp_path):
    shutil.copytree(BARE, tmp_path / "a" / "capture")
    shutil.copytree(BARE, tmp_path / "b" / "capture")
    sql = (
        "SELECT r.run_id, r.name, f.relpath, f.status, f.rows FROM runs r JOIN files f USING (run_id) "
        "ORDER BY ALL"
    )
    stored = {}
    for jobs in (1, 2):
        db = tmp_path / f"jobs{jobs}.duckdb"
        ingest(db, NSYS, tmp_path / "a", tmp_path / "b", jobs=jobs)
        stored[jobs] = query(db, sql)
    assert stored[2] == stored[1]
    assert len(stored[1]) == 7 and {r[1] for r in stored[1]} == {"report1", "report2", "capture"}
