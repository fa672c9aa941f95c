"""Big damaged inputs stay within bounded memory (issue #18): a trace whose tail a crash left zero-filled, a
one-line plog of tens of MB; garbage that looks like an nsys export is noted; a full disk is one line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench._crafted import sqlite_file
from tests.conftest import ROOT, query

MB = 1 << 20
ALLOWANCE = 128 * MB  # the interpreter, DuckDB and the parser's own buffers, whatever the file's size

_PEAK = """
import json, resource, subprocess, sys
p = subprocess.run(json.loads(sys.argv[1]), capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr[-3000:], "peak": peak}))
"""


def ingest_peak(path: Path, db: Path) -> tuple[dict, int]:
    """``diag ingest --json`` of ``path`` in a process of its own: (its JSON, its peak RSS in bytes)."""
    cmd = [sys.executable, "-m", "diag.cli", "ingest", str(path), "--db", str(db), "--json"]
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK, json.dumps(cmd)], capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["rc"] in (0, 1), out["stderr"]
    return json.loads(out["stdout"]), out["peak"]


def the_file(report: dict) -> dict:
    (entry,) = [f for f in report["files"] if f["status"] not in ("skipped",)]
    return entry


def zero_fill(path: Path, keep: int, zeros: int) -> None:
    """Cut ``path`` at ``keep`` bytes and extend it by ``zeros`` NUL bytes (sparse), as a crash leaves it."""
    os.truncate(path, keep)
    os.truncate(path, keep + zeros)


# -- a zero-filled tail ---------------------------------------------------------------------------------------


@pytest.mark.slow
def _ingest_zero_tailed(trace: Path, keep: int, zeros: int, db: Path) -> dict:
    """``trace`` cut at ``keep`` and ``zeros`` of NULs appended (a crash), ingested: peak RSS within the file's
    size plus the allowance, the file partial; its ingest entry."""
    zero_fill(trace, keep, zeros)
    size = trace.stat().st_size
    report, peak = ingest_peak(trace, db)
    assert peak <= size + ALLOWANCE, f"peak RSS {peak / MB:.0f} MB for a {size / MB:.0f} MB file"
    entry = the_file(report)
    assert entry["status"] == "partial"
    return entry


def test_zero_tail_trace_view_stays_under_the_file_size_and_notes_where_the_zeros_start(
    tmp_path: Path,
) -> None:
    subprocess.run(
        [sys.executable, "sample_traces/generate.py", str(tmp_path / "g"), "--ranks", "1", "--files",
         "trace_view", "--target-trace-bytes", str(300 * MB)],
        cwd=ROOT, check=True, capture_output=True,
    )  # fmt: skip
    (trace,) = (tmp_path / "g").rglob("trace_view.json")
    keep = trace.stat().st_size - 200  # the writer died inside the last event
    with open(trace, "rb") as fh:
        fh.seek(keep - MB)
        head_tail = fh.read(MB)
    last = [m.start() for m in re.finditer(rb"\}(?=\s*,\s*\{)", head_tail)][-1]
    complete_up_to = keep - MB + last + 1
    entry = _ingest_zero_tailed(trace, keep, 300 * MB, tmp_path / "z.duckdb")
    assert f"stored the complete events up to byte {complete_up_to}" in entry["message"]
    assert (
        f"the file is zero bytes from byte {keep:,} to its end (314.6 MB of NULs: a crash)"
        in entry["message"]
    )
    (tasks,) = query(tmp_path / "z.duckdb", "SELECT count(*) FROM device_tasks")[0]
    assert tasks > 100_000


KINETO_HEAD = (
    b'{"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}],\n'
    b' "traceEvents": [\n'
)


def write_kineto(path: Path, target: int) -> int:
    """A Kineto trace of GPU kernels, about ``target`` bytes, its array left open; the number of events."""
    event = (
        '{{"ph": "X", "cat": "kernel", "name": "gemm_{k}", "pid": 0, "tid": 7, "ts": {ts}, "dur": 3, '
        '"args": {{"device": 0, "stream": 7, "correlation": {n}, "grid": [132, 1, 1]}}}}'
    )
    n = 0
    with open(path, "wb") as fh:
        fh.write(KINETO_HEAD)
        while fh.tell() < target:
            block = ",\n".join(
                event.format(k=i % 13, ts=1_000_000 + 5 * i, n=i) for i in range(n, n + 20_000)
            )
            fh.write((",\n" if n else "").encode() + block.encode())
            n += 20_000
        fh.write(b',\n{"ph": "X", "cat": "kernel", "name": "cut_her')  # the event the crash cut
    return n


@pytest.mark.slow
def test_zero_tail_kineto_trace_stays_under_the_file_size_and_keeps_every_complete_kernel(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "rank0.pt.trace.json"
    events = write_kineto(trace, 200 * MB)
    keep = trace.stat().st_size
    entry = _ingest_zero_tailed(trace, keep, 200 * MB, tmp_path / "k.duckdb")
    array_at = len(KINETO_HEAD) - 2  # the copy's offsets start at the array's '['
    assert (
        f"the array is zero bytes from byte {keep - array_at:,} to its end (209.7 MB of NULs"
        in entry["message"]
    )
    (kernels,) = query(tmp_path / "k.duckdb", "SELECT count(*) FROM device_tasks")[0]
    assert kernels == events


# -- nsys garbage -------------------------------------------------------------------------------------------
KERNEL_COLUMNS = "start INTEGER, end INTEGER, deviceId INTEGER, streamId INTEGER, correlationId INTEGER, demangledName INTEGER, shortName INTEGER"  # noqa: E501


def ingest_one(path: Path, db: Path) -> dict:
    from tests.conftest import cli_json

    _, report = cli_json("ingest", str(path), "--db", str(db))
    return the_file(report)


def test_nsys_export_whose_gpu_tables_are_empty_is_refused_saying_so(tmp_path: Path) -> None:
    blank = sqlite_file(
        tmp_path / "blank.sqlite",
        ["CREATE TABLE StringIds(id INTEGER, value TEXT)", f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL({KERNEL_COLUMNS})",
         "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(start INTEGER, end INTEGER, bytes INTEGER, copyKind INTEGER)"],
    )  # fmt: skip
    entry = ingest_one(blank, tmp_path / "b.duckdb")
    assert entry["status"] == "failed"
    assert entry["message"].startswith(
        f"{blank}: no GPU activity captured: CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY hold(s) no rows"
    )


def test_sqlite_with_nsys_table_names_but_foreign_columns_is_not_an_nsys_export(tmp_path: Path) -> None:
    garbled = sqlite_file(
        tmp_path / "garbled.sqlite",
        ["CREATE TABLE StringIds(id INTEGER, value TEXT)", "INSERT INTO StringIds VALUES (1, 'k')",
         "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(a INTEGER, b TEXT)",
         "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 'x'), (2, 'y')"],
    )  # fmt: skip
    entry = ingest_one(garbled, tmp_path / "g.duckdb")
    assert entry["status"] == "failed"
    assert entry["message"] == (
        f"{garbled}: not an Nsight Systems export: table CUPTI_ACTIVITY_KIND_KERNEL lacks column(s) start, end "
        "(its GPU activity tables are not nsys's)"
    )


def test_nsys_export_with_one_garbled_gpu_table_is_partial_naming_it(tmp_path: Path) -> None:
    mixed = sqlite_file(
        tmp_path / "mixed.sqlite",
        ["CREATE TABLE StringIds(id INTEGER, value TEXT)", "INSERT INTO StringIds VALUES (1, 'gemm')",
         f"CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL({KERNEL_COLUMNS})",
         "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 250, 0, 7, 1, 1, 1), (300, 320, 0, 7, 2, 1, 1)",
         "CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY(junk TEXT)", "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES ('?')"],
    )  # fmt: skip
    db = tmp_path / "m.duckdb"
    entry = ingest_one(mixed, db)
    assert entry["status"] == "partial"
    assert entry["message"].startswith(
        "partial: table CUPTI_ACTIVITY_KIND_MEMCPY lacks column(s) start, end: not read; no session start time"
    )
    assert query(db, "SELECT name, dur_ns FROM device_tasks ORDER BY start_ns") == [
        ("gemm", 150),
        ("gemm", 20),
    ]


# -- a huge single line in a log -----------------------------------------------------------------------------
def write_one_line_plog(path: Path, line_mb: int) -> Path:
    with open(path, "wb") as fh:
        fh.write(b"[INFO] GE(1234,python):2024-01-01-00:00:00.000.000 [graph.cc:10]1234 start\n")
        fh.write(b"[ERROR] GE(1234,python):2024-01-01-00:00:01.000.000 [graph.cc:11]1234 dump: ")
        fh.write("é tensor ".encode() * (line_mb * MB // 10))
        fh.write(b"\n[ERROR] RUNTIME(1234,python):2024-01-01-00:00:02.000.000 [stream.cc:12]1234 after it\n")
    return path


def test_sixty_mb_single_line_plog_is_stored_cut_in_bounded_memory(tmp_path: Path) -> None:
    plog = write_one_line_plog(tmp_path / "plog-1234_20240101000000000.log", 60)
    db = tmp_path / "p.duckdb"

    report, peak = ingest_peak(plog, db)

    assert peak < 1024 * MB, f"peak RSS {peak / MB:.0f} MB"
    entry = the_file(report)
    assert (entry["status"], entry["rows"]) == ("partial", {"log_records": 3})
    assert entry["message"] == "line 2 cut at 1 MiB of 60.0 MiB: its head is stored"
    rows = query(db, "SELECT line_no, level, strlen(raw), message LIKE 'dump: é tensor é%' FROM log_records")
    assert [r[:2] for r in rows] == [(1, "INFO"), (2, "ERROR"), (3, "ERROR")]
    assert 1_000_000 < rows[1][2] <= 1 << 20 and rows[1][3]


def test_line_cap_keeps_short_lines_and_crlf_as_they_are_across_blocks() -> None:
    import io

    from parsers._line_cap import CutLines, capped_blocks

    text = b"".join(b"line %d\r\n" % i for i in range(200_000))
    cut = CutLines()
    out = b"".join(b for b, _ in capped_blocks(io.BytesIO(text), 1 << 16, cut))
    assert out == text and cut.note() is None
    long = b"a\n" + b"x" * (3 * MB + 5) + b"\nb\n" + b"y" * (MB + 1) + b"\n"
    cut = CutLines()
    out = b"".join(b for b, _ in capped_blocks(io.BytesIO(long), 1 << 16, cut))
    assert out == b"a\n" + b"x" * MB + b"\nb\n" + b"y" * MB + b"\n"
    assert cut.lines == [(2, 3 * MB + 5), (4, MB + 1)]
    assert cut.note() == "line 2 cut at 1 MiB of 3.0 MiB (and 1 more line(s) over 1 MiB)"


# -- a full disk ---------------------------------------------------------------------------------------------
def generated_runs(root: Path) -> tuple[Path, Path]:
    """A small run and a ~40 MB one (generated), for a database that has room for the first only."""
    gen = [sys.executable, "sample_traces/generate.py"]
    small, big = root / "small", root / "big"
    subprocess.run([*gen, str(small), "--ranks", "1", "--files", "trace_view", "--steps", "3"], cwd=ROOT, check=True, capture_output=True)  # fmt: skip  # noqa: E501
    subprocess.run([*gen, str(big), "--ranks", "1", "--seed", "2", "--files", "trace_view", "kernel_details",
                    "--target-trace-bytes", str(40 * MB)], cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    return small, big


def assert_one_line_and_intact(proc: subprocess.CompletedProcess[str], db: Path, before: list[tuple]) -> str:
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "error" in line.lower()]
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert len(errors) == 1, errors
    assert "invalidated" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    assert (
        query(db, "SELECT run_id, count(*) FROM device_tasks GROUP BY 1 ORDER BY 1")[: len(before)] == before
    )
    return errors[0]


def test_file_size_limit_mid_ingest_is_one_line_and_the_store_keeps_its_rows(tmp_path: Path) -> None:
    import resource

    small, big = generated_runs(tmp_path)
    db = tmp_path / "d.duckdb"
    subprocess.run(
        [sys.executable, "-m", "diag.cli", "ingest", str(small), "--db", str(db)], cwd=ROOT, check=True
    )
    before = query(db, "SELECT run_id, count(*) FROM device_tasks GROUP BY 1 ORDER BY 1")
    cap = db.stat().st_size + 4 * MB

    def limit() -> None:  # writes past it fail with EFBIG: the write error class a full disk gives
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap))

    proc = subprocess.run(
        [sys.executable, "-m", "diag.cli", "ingest", str(big), "--db", str(db)],
        cwd=ROOT, capture_output=True, text=True, preexec_fn=limit, timeout=300,
    )  # fmt: skip
    line = assert_one_line_and_intact(proc, db, before)
    assert line.startswith(f"diag: error: {db}: file size limit reached (ulimit -f) (")
    assert "MB free): could not write the database; the files stored before are intact" in line


# "": the database file fills the disk; "30MB": the trace's read spills (DuckDB's temp_directory beside the
# database) and the spill files fill it first — CI's run met the second with the default limit
@pytest.mark.parametrize("ingest_memory", ["", "30MB"], ids=["database_write", "spill_files"])
def test_full_disk_mid_ingest_is_one_line_naming_the_free_space(tmp_path: Path, ingest_memory: str) -> None:
    mnt = tmp_path / "small_disk"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(mnt)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)")
    try:
        small, big = generated_runs(tmp_path)
        db = mnt / "d.duckdb"
        subprocess.run(
            [sys.executable, "-m", "diag.cli", "ingest", str(small), "--db", str(db)], cwd=ROOT, check=True
        )  # noqa: E501
        before = query(db, "SELECT run_id, count(*) FROM device_tasks GROUP BY 1 ORDER BY 1")
        env = {**os.environ, "DIAG_INGEST_MEMORY_LIMIT": ingest_memory} if ingest_memory else None
        proc = subprocess.run(
            [sys.executable, "-m", "diag.cli", "ingest", str(big), "--db", str(db)],
            cwd=ROOT, capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
        line = assert_one_line_and_intact(proc, db, before)
        assert re.match(
            rf"diag: error: {re.escape(str(db))}: disk full \(\d+ MB free\): could not write", line
        )
        if ingest_memory:
            assert "spill files" in line
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
