"""``kill -9`` of a real ``diag ingest`` subprocess at random moments of a large ingest.

After every kill the database opens; every file stored before is still stored with the same rows as an
uninterrupted ingest gives it; no file is half stored (ledger and data agree); and the next ingest resumes
(the files already stored are ``unchanged``) and completes.  CI kills a few times; bench/reliability.py
runs the same loop with ``kills=50`` or more.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from diag.store import Store
from tests.conftest import ROOT
from tests.reliability_checks import FileKey, read_db

GENERATE = ROOT / "sample_traces" / "generate.py"


def make_input(dest: Path, ranks: int = 2, trace_bytes: int = 3 << 20) -> Path:
    """Several generated Ascend runs (one per rank), each a trace of about ``trace_bytes`` and its CSVs."""
    if not dest.is_dir():
        cmd = [sys.executable, str(GENERATE), str(dest), "--ranks", str(ranks)]
        subprocess.run([*cmd, "--target-trace-bytes", str(trace_bytes)], check=True, capture_output=True)
    return dest


def start_ingest(src: Path, db: Path, jobs: int = 1) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "diag.cli", "ingest", str(src), "--db", str(db), "--jobs", str(jobs)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def remove_db(db: Path) -> None:
    for p in db.parent.glob(db.name + "*"):
        p.unlink()


@dataclass
class KillReport:
    kills: int = 0  # SIGKILLs that landed while the ingest ran
    finished: int = 0  # ingests that completed before their kill time
    files_checked: int = 0  # stored files compared after kills
    lost: int = 0  # files stored before a kill, missing or changed after it
    lost_keys: set[FileKey] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    reference_s: float = 0.0


def reference(src: Path, work: Path) -> tuple[dict[FileKey, dict[str, int]], float]:
    db = work / "reference.duckdb"
    remove_db(db)
    t0 = time.perf_counter()
    proc = start_ingest(src, db)  # the uninterrupted serial ingest every killed one is held to
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    rows, half = read_db(db)
    assert not half and rows
    return rows, time.perf_counter() - t0


def settled(key: FileKey, rows: dict[str, int] | None) -> dict[str, int] | None:
    """A file's rows without kernel_details' stand-in device tasks, which its run's trace later replaces."""
    if rows is None or not key[1].endswith("kernel_details.csv") or "device_tasks" not in rows:
        return rows
    rest = {t: n for t, n in rows.items() if t != "device_tasks"}
    return {**rest, "_ledger": rows["_ledger"] - rows["device_tasks"]}


def check_after_kill(
    db: Path, before: dict[FileKey, dict[str, int]], ref: dict[FileKey, dict[str, int]], report: KillReport
) -> dict[FileKey, dict[str, int]]:
    if db.exists():
        Store(db).close()  # diag itself opens it (replaying DuckDB's write-ahead log) and can write to it
    now, half = read_db(db) if db.exists() else ({}, [])
    report.problems += half
    for key, rows in before.items():
        if settled(key, now.get(key)) != settled(key, rows):
            report.lost += 1
            report.lost_keys.add(key)
            report.problems.append(f"{key} stored before the kill as {rows}, now {now.get(key)}")
    for key, rows in now.items():
        report.files_checked += 1
        if settled(key, ref.get(key)) != settled(key, rows):
            report.problems.append(f"{key} holds {rows}, an uninterrupted ingest {ref.get(key)}")
    return now


def kill_loop(src: Path, work: Path, kills: int, seed: int = 0, jobs: int = 1) -> KillReport:
    """SIGKILL ``diag ingest src`` ``kills`` times at random moments, checking the database after each."""
    rnd = random.Random(seed)
    ref, ref_s = reference(src, work)
    report = KillReport(reference_s=ref_s)
    db = work / "killed.duckdb"
    remove_db(db)
    stored: dict[FileKey, dict[str, int]] = {}
    while report.kills < kills:
        if stored == ref:  # everything stored: start a fresh database so that kills land mid-ingest again
            remove_db(db)
            stored = {}
        proc = start_ingest(src, db, jobs)
        try:
            proc.wait(timeout=rnd.uniform(0.3, ref_s * 1.1))
            report.finished += 1
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            report.kills += 1
        proc.communicate()
        stored = check_after_kill(db, stored, ref, report)
    # the next ingest resumes: what was stored is unchanged, the rest is added, and it completes
    proc = start_ingest(src, db, jobs)
    out, err = proc.communicate(timeout=600)
    if proc.returncode != 0:
        report.problems.append(f"resumed ingest exited {proc.returncode}: {err.strip()[-300:]}")
    final = check_after_kill(db, stored, ref, report)
    if final != ref:
        missing = sorted(set(ref) - set(final))
        report.problems.append(f"after resuming, {len(missing)} file(s) missing: {missing[:3]}")
    return report


@pytest.fixture(scope="module")
def big_input(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_input(tmp_path_factory.mktemp("crash") / "runs")


@pytest.mark.parametrize("jobs", [1, 2])
def test_kill_9_mid_ingest_loses_nothing_and_resumes(big_input: Path, tmp_path: Path, jobs: int) -> None:
    report = kill_loop(
        big_input, tmp_path, kills=int(os.environ.get("DIAG_CRASH_KILLS", "3")), seed=1, jobs=jobs
    )
    assert report.kills >= 3 and not report.problems, report.problems[:5]
    assert report.lost == 0
