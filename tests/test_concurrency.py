"""Several app-like writers upload at once while a CLI ``diag ingest`` runs on the same database file.

Each writer is a real process that goes through ``app.data.ingest`` — the Upload page's own call (its write
lock, ``diag.uploads.ingest_uploads``, the Ingestor) — while a thread of it reads through a cursor as other
Streamlit sessions do.  DuckDB lets one process write a file at a time: opening waits for the lock
(``diag.store``, ``DIAG_DB_BUSY_TIMEOUT_S``) and then either stores every file once or gives up with a
one-line "database busy … retry" message.  Readers, in-process or in another process, never see a file half
stored.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pytest

from tests.conftest import FIXTURES, ROOT
from tests.reliability_checks import half_stored, read_db
from tests.test_crash_safety import make_input, remove_db, start_ingest

RUN = FIXTURES / "real" / "msinsight_test_rank_0"
KINETO = FIXTURES / "kineto" / "ok_rank2.pt.trace.json.gz"
KD = FIXTURES / "ascend_kernel_details" / "ok_crlf_tab_na.csv"

WRITER = r"""
import json, os, sys, threading
from pathlib import Path
from diag.errors import DiagError
from diag.uploads import Upload
from tests.reliability_checks import half_stored
import app.data as data

files = json.loads(sys.argv[1])  # upload name -> local path
uploads = [Upload(name, open(path, "rb"), os.path.getsize(path)) for name, path in files.items()]
seen, stop = [], threading.Event()

def read():  # another session of the same app reading while this one writes
    while not stop.wait(0.05):
        try:
            cur = data.store().cursor()
        except DiagError:
            return
        seen.extend(half_stored(cur))
        cur.close()

reader = threading.Thread(target=read)
reader.start()
try:
    outcomes = data.ingest(uploads)
except DiagError as exc:
    print(json.dumps({"error": str(exc)}))
    sys.exit(exc.exit_code)
finally:
    stop.set()
    reader.join()
print(json.dumps({"outcomes": outcomes, "half_seen": seen}))
"""

READER = r"""
import json, sys, time
from diag.errors import DatabaseBusyError
from diag.store import Store
from tests.reliability_checks import half_stored
reads, busy, seen, end = 0, 0, [], time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    try:
        with Store(sys.argv[1], read_only=True) as store:
            seen += half_stored(store.con)
            reads += 1
    except DatabaseBusyError:
        busy += 1
    time.sleep(0.05)
print(json.dumps({"reads": reads, "busy": busy, "half_seen": seen}))
"""


@dataclass
class ConcurrencyReport:
    writers: int = 0
    stored: int = 0  # writers whose every file was stored (ok / partial / unchanged)
    busy: int = 0  # writers refused with the one-line busy message
    reads: int = 0
    problems: list[str] = field(default_factory=list)


def _writer(db: Path, files: dict[str, Path], timeout_s: float) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DIAG_DB": str(db),
        "DIAG_DB_BUSY_TIMEOUT_S": str(timeout_s),
        "PYTHONPATH": str(ROOT),
    }
    payload = json.dumps({k: str(v) for k, v in files.items()})
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, payload],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _uploads(i: int) -> dict[str, Path]:
    """What writer ``i`` uploads: a run folder and a trace every writer also uploads, and a kernel_details.csv in a folder of its own (the same bytes each time)."""
    run = {
        f"rank0_ascend_pt/{p.relative_to(RUN).as_posix()}": p for p in sorted(RUN.rglob("*")) if p.is_file()
    }
    return {**run, "trace.pt.trace.json.gz": KINETO, f"w{i}/kernel_details.csv": KD}


def _wait_for_lock(db: Path, proc: subprocess.Popen[str], timeout: float = 60) -> bool:
    """True once another process holds the database's write lock."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and proc.poll() is None:
        try:
            duckdb.connect(str(db), read_only=True).close()
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                return True
        except duckdb.Error:
            pass
        time.sleep(0.05)
    return False


def _judge_writer(i: int, proc: subprocess.Popen[str], report: ConcurrencyReport) -> None:
    out, err = proc.communicate(timeout=600)
    report.writers += 1
    try:
        result = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        report.problems.append(f"writer {i} exited {proc.returncode} without a result: {err.strip()[-400:]}")
        return
    if "error" in result:
        msg = result["error"]
        if "database busy" in msg and "retry" in msg and "\n" not in msg and proc.returncode == 4:
            report.busy += 1
        else:
            report.problems.append(f"writer {i}: {msg!r}")
        return
    bad = [o for o in result["outcomes"] if o["status"] not in ("ok", "partial", "unchanged")]
    report.problems += [f"writer {i}: {o['path']} {o['status']}: {o['message']}" for o in bad]
    report.problems += [f"writer {i} read a half-stored file: {h}" for h in result["half_seen"]]
    report.stored += not bad


HOLD = "import sys, time; from diag.store import Store; s = Store(sys.argv[1]); print('held', flush=True); time.sleep(120)"


def hold_lock(db: Path) -> subprocess.Popen[str]:
    """A process that keeps the database open for writing until killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(db)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def concurrency_round(work: Path, big_input: Path, writers: int = 3) -> ConcurrencyReport:
    """An impatient upload (may wait 0.5 s) while another process writes: told 'busy'.  Then a CLI ingest of
    ``big_input`` and, while it holds the lock, ``writers`` uploads (waiting up to 120 s) and a read-only
    reader in another process."""
    db = work / "shared.duckdb"
    remove_db(db)
    report = ConcurrencyReport()
    holder = hold_lock(db)
    try:
        _judge_writer(99, _writer(db, _uploads(99), 0.5), report)
    finally:
        holder.kill()
        holder.communicate()
    if report.busy != 1:
        report.problems.append(
            "an upload that may wait 0.5 s while another process writes was not told 'busy'"
        )
    cli = start_ingest(big_input, db)
    if not _wait_for_lock(db, cli):
        report.problems.append("the CLI ingest never held the database")
    procs = [_writer(db, _uploads(i), 120) for i in range(writers)]
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(db), "20"], cwd=ROOT, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "DIAG_DB_BUSY_TIMEOUT_S": "0.2", "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    for i, proc in enumerate(procs):
        _judge_writer(i, proc, report)
    cli_out, cli_err = cli.communicate(timeout=600)
    if cli.returncode != 0:
        report.problems.append(f"the CLI ingest exited {cli.returncode}: {cli_err.strip()[-300:]}")
    reads = json.loads(reader.communicate(timeout=120)[0].strip().splitlines()[-1])
    report.reads = reads["reads"]
    report.problems += [f"reader process saw {h}" for h in reads["half_seen"]]
    _check_final(db, writers, report)
    return report


def _check_final(db: Path, writers: int, report: ConcurrencyReport) -> None:
    files, half = read_db(db)
    report.problems += half
    with duckdb.connect(str(db), read_only=True) as con:
        dup = con.execute(
            "SELECT scope, relpath, count(*) FROM files WHERE status IN ('ok', 'partial') "
            "GROUP BY ALL HAVING count(*) > 1"
        ).fetchall()
        kineto_runs = con.execute("SELECT count(*) FROM runs WHERE platform = 'cuda'").fetchall()[0][0]
        own = con.execute(
            "SELECT count(*) FROM files WHERE relpath = 'kernel_details.csv' AND status = 'ok'"
        ).fetchall()[0][0]
        half += half_stored(con)
    report.problems += [f"stored {n} times: {s} {r}" for s, r, n in dup]
    if kineto_runs != 1:
        report.problems.append(f"the trace every writer uploaded is {kineto_runs} runs, not 1")
    if own != 1:  # the same bytes in each writer's own folder: one run without profiler_info, stored once
        report.problems.append(
            f"the kernel_details.csv each writer uploaded in its own folder is stored {own} times"
        )
    if not any(
        k[1] == "ASCEND_PROFILER_OUTPUT/kernel_details.csv" and "profiler_info" in k[0] for k in files
    ):
        report.problems.append("the run folder every writer uploaded is missing")


@pytest.fixture(scope="module")
def big_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_input(tmp_path_factory.mktemp("concurrency") / "runs", ranks=2, trace_bytes=2 << 20)


def test_uploads_while_cli_ingests_store_each_file_once_or_say_busy(tmp_path: Path, big_input: Path) -> None:
    report = concurrency_round(tmp_path, big_input, writers=3)
    assert not report.problems, report.problems[:5]
    assert report.stored == 3 and report.busy == 1


def test_busy_message_is_one_line_from_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "locked.duckdb"
    holder = hold_lock(db)
    try:
        env = {**os.environ, "DIAG_DB_BUSY_TIMEOUT_S": "0.3"}
        cmd = [sys.executable, "-m", "diag.cli", "runs", "--db", str(db)]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    finally:
        holder.kill()
        holder.communicate()
    assert proc.returncode == 4, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "database busy" in lines[0] and "retry" in lines[0] and str(db) in lines[0]
