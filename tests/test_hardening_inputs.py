"""Inputs that used to hang, overflow or vanish without a word (#18): a FIFO named on the command line, an
archive member or a folder nested past any profiler layout, an unreadable folder. Each is one line naming the
input, the rest of the batch is ingested, nothing hangs."""

from __future__ import annotations

import io
import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from bench._crafted import sqlite_file
from diag import archives
from diag.store import Store
from tests.conftest import FIXTURES, REAL_AICPU_TRACE, REAL_LEVEL2, cli_json, ingest_into, query, run_cli

KINETO = FIXTURES / "kineto" / "ok_legacy_capitalised.json"


def _ingest(db: Path, *paths: Path) -> list:
    with Store(db) as store:
        return ingest_into(store, list(paths)).files


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_named_on_the_command_line_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    proc = run_cli("ingest", str(fifo), str(KINETO), "--db", str(tmp_path / "f.duckdb"))
    assert proc.returncode != 0
    assert f"{fifo}: a FIFO, not a file or folder diag reads; refused" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    outcomes = _ingest(tmp_path / "g.duckdb", KINETO)
    assert [o.status for o in outcomes] == ["ok"]


def _deep_zip(path: Path, depth: int) -> Path:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.write(KINETO, "ok/trace.pt.trace.json")
        zf.writestr("/".join(f"d{i}" for i in range(depth)) + "/x.json", "[]")
    path.write_bytes(buf.getvalue())
    return path


def test_an_archive_member_nested_1500_deep_is_refused_naming_it(tmp_path):
    archive = _deep_zip(tmp_path / "deep.zip", 1500)
    (outcome,) = _ingest(tmp_path / "a.duckdb", archive)
    assert outcome.status == "failed"
    assert "is nested 1500 folders deep, more than 64; refused" in outcome.message
    assert outcome.message.startswith(f"{archive}: member 'd0/d1/d2")
    assert "\n" not in outcome.message


def test_an_archive_member_at_the_depth_cap_is_read(tmp_path):
    archive = _deep_zip(tmp_path / "ok.zip", archives.MAX_DEPTH - 1)
    statuses = {o.status for o in _ingest(tmp_path / "b.duckdb", archive)}
    assert "failed" not in statuses


def test_a_folder_tree_deeper_than_the_cap_names_where_it_stopped(tmp_path):
    top = tmp_path / "captures"
    shutil.copytree(
        KINETO.parent, top / "kineto", ignore=lambda d, names: [n for n in names if n != KINETO.name]
    )
    deep = top.joinpath(*[f"d{i}" for i in range(archives.MAX_DEPTH + 5)])
    deep.mkdir(parents=True)
    (deep / "x.json").write_text("[]")
    outcomes = _ingest(tmp_path / "c.duckdb", top)
    by_status = {o.status: o for o in outcomes}
    assert by_status["ok"].source.endswith(KINETO.name)  # the rest of the tree is ingested
    failed = [o for o in outcomes if o.status == "failed"]
    assert len(failed) == 1 and f"folders nested more than {archives.MAX_DEPTH} deep" in failed[0].message


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else True, reason="root reads every folder")
def test_an_unreadable_folder_is_named_not_silently_skipped(tmp_path):
    top = tmp_path / "captures"
    (top / "locked").mkdir(parents=True)
    shutil.copy(KINETO, top / KINETO.name)
    (top / "locked").chmod(0)
    try:
        outcomes = _ingest(tmp_path / "d.duckdb", top)
    finally:
        (top / "locked").chmod(0o755)
    failed = [o for o in outcomes if o.status == "failed"]
    assert len(failed) == 1 and "folder not readable" in failed[0].message


def test_terminal_escape_sequences_in_names_are_printed_as_text(tmp_path):
    run = tmp_path / "run\x1b[31m\x1b]0;pwned\x07red"
    run.mkdir()
    shutil.copy(KINETO, run / "t.json")
    missing = tmp_path / "gone\x1b[2J"
    proc = run_cli("ingest", str(run), str(missing), "--db", str(tmp_path / "e.duckdb"))
    out = proc.stdout + proc.stderr
    assert "\x1b" not in out and "\x07" not in out
    assert "run\\x1b[31m\\x1b]0;pwned\\x07red" in out and "gone\\x1b[2J" in out


def _kineto_with_bad_ts(path: Path, how_many: int | None) -> Path:
    data = json.loads(KINETO.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    timed = [e for e in events if e.get("ph") == "X"]
    for e in timed[: how_many if how_many is not None else len(timed)]:
        e["ts"] = "abc"
    path.write_text(json.dumps(data))
    return path


def test_a_trace_whose_times_do_not_read_is_refused_not_stored_ok(tmp_path):
    path = _kineto_with_bad_ts(tmp_path / "bad_ts.json", None)
    (outcome,) = _ingest(tmp_path / "t.duckdb", path)
    assert outcome.status == "failed"
    assert outcome.message == f"{path}: none of its 5 complete events has a readable 'ts' / 'dur'"


def test_events_whose_times_do_not_read_are_left_out_and_named(tmp_path):
    path = _kineto_with_bad_ts(tmp_path / "some_bad_ts.json", 2)
    db = tmp_path / "p.duckdb"
    (outcome,) = _ingest(db, path)
    assert outcome.status == "partial"
    assert (
        outcome.message == "partial: 2 of 5 complete events have no readable 'ts' / 'dur' and were not stored"
    )
    assert query(db, "SELECT count(*) FROM device_tasks WHERE start_ns IS NULL") == [(0,)]
    assert query(db, "SELECT count(*) FROM host_ops WHERE start_ns IS NULL") == [(0,)]
    code, out = cli_json("compare", "1", "1", "--db", str(db))
    assert code == 0 and out


@pytest.mark.parametrize("bad", [1e30, 1e28, "1e+30", 9.3e15, "12345678901234567890123"])
def test_one_event_with_an_absurd_duration_is_left_out_not_the_whole_trace(tmp_path, bad):
    data = json.loads(KINETO.read_text())
    events = data["traceEvents"] if isinstance(data, dict) else data
    next(e for e in events if e.get("ph") == "X")["dur"] = bad
    path = tmp_path / "absurd.json"
    path.write_text(json.dumps(data))
    (outcome,) = _ingest(tmp_path / "a.duckdb", path)
    assert outcome.status == "partial", outcome.message
    assert (
        outcome.message == "partial: 1 of 5 complete events have no readable 'ts' / 'dur' and were not stored"
    )


@pytest.mark.parametrize("bad", [1e30, "abc", "1e+30"])
def test_a_torch_npu_trace_with_one_unreadable_duration_keeps_the_rest(tmp_path, bad):
    trace = json.loads(REAL_AICPU_TRACE.read_text())
    events = trace if isinstance(trace, list) else trace["traceEvents"]
    next(e for e in events if e.get("ph") == "X")["dur"] = bad
    run = tmp_path / "run_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    run.mkdir(parents=True)
    (run / "trace_view.json").write_text(json.dumps(trace))
    (outcome,) = _ingest(tmp_path / "t.duckdb", run / "trace_view.json")
    assert outcome.status == "partial"
    assert outcome.message == (
        "partial: 1 of 2,212 complete events have no readable 'ts' / 'dur' and were not stored"
    )


@pytest.fixture(scope="module")
def good_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("good") / "good.duckdb"
    assert [o.status for o in _ingest(db, KINETO)] == ["ok"]
    return db


@pytest.mark.parametrize("damage", ["bit_flips", "truncated", "not_a_database"])
def test_a_damaged_database_is_one_line_with_what_to_do_and_is_left_as_it_was(tmp_path, good_db, damage):
    db = tmp_path / "damaged.duckdb"
    data = good_db.read_bytes()
    if damage == "bit_flips":
        data = data[:12288] + bytes(b ^ 0xFF for b in data[12288:17288]) + data[17288:]
    elif damage == "truncated":
        data = data[:20000]
    else:
        data = b"garbage, not a database\n"
    db.write_bytes(data)
    for args in (["runs"], ["ingest", str(KINETO)]):
        proc = run_cli(*args, "--db", str(db))
        assert proc.returncode != 0 and "Traceback" not in proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"diag: error: {db}: cannot open database: ")
        assert "the database file is damaged or not a diag database" in line
    assert db.read_bytes() == data  # nothing written into it


def _plog_lines(n: int, pid: int) -> list[str]:
    return [
        f"[ERROR] RUNTIME({pid},python3):2025-06-25-10:45:{i // 1000 % 60:02d}.{i % 1000:03d}.200 "
        f"[stream.cc:1021] {pid} Stream Synchronize failed, ErrCode=507035"
        for i in range(n)
    ]


def test_a_small_plog_with_nul_padding_is_read_not_skipped(tmp_path):
    # a writer killed mid-block leaves NUL padding; under 64 KB it made the whole head look binary
    lines = _plog_lines(100, 4321)
    path = tmp_path / "plog-4321_20250625104000000.log"
    path.write_bytes(("\n".join(lines[:50]) + "\n" + "\x00" * 3000 + "\n".join(lines[50:]) + "\n").encode())
    db = tmp_path / "n.duckdb"
    (outcome,) = _ingest(db, path)
    assert outcome.status == "ok" and outcome.rows == {"log_records": 100}
    assert query(db, "SELECT count(*) FROM log_records WHERE level = 'ERROR' AND code = '507035'") == [(100,)]


def test_a_cr_only_log_is_one_record_per_line(tmp_path):
    lines = _plog_lines(50_000, 4322)
    path = tmp_path / "plog-4322_20250625104000000.log"
    path.write_bytes(("\r".join(lines) + "\r").encode())
    db = tmp_path / "c.duckdb"
    (outcome,) = _ingest(db, path)
    assert outcome.status == "ok" and outcome.rows == {"log_records": 50_000}
    assert query(db, "SELECT min(line_no), max(line_no) FROM log_records") == [(1, 50_000)]


def test_a_real_binary_file_named_like_a_log_is_still_refused(tmp_path):
    path = tmp_path / "plog-1_20250625104000000.log"
    path.write_bytes(bytes(range(256)) * 64)
    (outcome,) = _ingest(tmp_path / "b.duckdb", path)
    assert outcome.status in ("failed", "skipped") and outcome.rows == {}


def test_rich_markup_in_a_path_or_a_first_line_is_printed_as_text_and_the_batch_goes_on(tmp_path):
    odd = tmp_path / "run[" / "red][bold]x"  # the path reads ".../run[/red][bold]x": a closing tag
    odd.mkdir(parents=True)
    shutil.copy(KINETO, odd / "t.json")
    first_line = tmp_path / "notes[bold].txt"
    first_line.write_text("[/red] [bold]not a trace[/bold] [link=http://x]y[/link]\n")
    proc = run_cli("ingest", str(first_line), str(odd), "--db", str(tmp_path / "m.duckdb"))
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and "MarkupError" not in out
    assert "[/red] [bold]not a trace[/bold]" in out  # the first line, shown as it is
    assert "run[/red][bold]x" in out and "1 ok" in out  # the other input is ingested


def _sqlite_with_a_non_utf8_column(path: Path, table: str) -> Path:
    sqlite_file(
        path,
        [f'CREATE TABLE "{table}" (zzzzzz INTEGER, step INTEGER)', f'INSERT INTO "{table}" VALUES (1, 2)'],
    )
    data = path.read_bytes()
    assert data.count(b"zzzzzz") == 1  # the name, in the table's CREATE statement only
    path.write_bytes(data.replace(b"zzzzzz", b"\xe7\x9a\xe7\x9a\xe7\x9a"))  # bytes a fuzzer flipped
    return path


def test_a_profiler_db_whose_column_name_is_not_utf8_is_refused_in_one_line(tmp_path):
    # found by bench/reliability.py's fuzz: sqlite3 decodes column names strictly (UnicodeDecodeError)
    path = _sqlite_with_a_non_utf8_column(tmp_path / "analysis.db", "StepTraceTime")
    (outcome,) = _ingest(tmp_path / "u.duckdb", path)
    assert outcome.status == "failed" and outcome.parser == "ascend_analysis_db"
    assert outcome.message.startswith(f"{path}: cannot read as SQLite: ") and "\n" not in outcome.message


def test_an_nsys_export_whose_column_name_is_not_utf8_is_refused_in_one_line(tmp_path):
    path = _sqlite_with_a_non_utf8_column(tmp_path / "report.sqlite", "CUPTI_ACTIVITY_KIND_KERNEL")
    (outcome,) = _ingest(tmp_path / "n.duckdb", path)
    assert outcome.status in ("failed", "skipped") and "\n" not in (outcome.message or "")
    assert "Traceback" not in (outcome.message or "") and "UnicodeDecodeError" not in (outcome.message or "")


def test_a_csv_time_that_does_not_read_names_its_column_not_the_sql(tmp_path):
    run = tmp_path / "r_ascend_pt"
    shutil.copytree(REAL_LEVEL2, run)
    kd = run / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    lines = kd.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    cells = lines[1].split(",")
    cells[header.index("Start Time(us)")] = "abc"
    kd.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n", encoding="utf-8")
    outcomes = {Path(o.source).name: o for o in _ingest(tmp_path / "k.duckdb", kd)}
    message = outcomes["kernel_details.csv"].message
    assert message.endswith('Could not convert string "abc" to DECIMAL(38,9) (column "Start Time(us)")'), (
        message
    )
    assert "LINE 1" not in message and "NULLIF" not in message
