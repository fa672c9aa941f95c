"""Inputs crafted outside the fuzz seeds (issue #18), each built here, run through the real ``diag`` CLI in a
process of its own, and counted as one of: ok, traceback, hang, wrong data.

A case is a function ``(work folder) -> Verdict``: it writes its inputs, runs ``diag``, and checks what was
stored or printed against what the input holds (never against what diag printed last time).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import duckdb

from bench._measure import measure

ROOT = Path(__file__).resolve().parent.parent
KINETO = ROOT / "tests" / "fixtures" / "kineto" / "ok_legacy_capitalised.json"
MB = 1 << 20
HANG_S = 120


@dataclass
class Verdict:
    outcome: str  # ok | traceback | hang | wrong data
    detail: str = ""


class Hang(Exception):
    pass


def diag(*args: str, **kw) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    try:
        return subprocess.run(
            [sys.executable, "-m", "diag.cli", *args], cwd=ROOT, capture_output=True, text=True,
            timeout=HANG_S, **kw,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise Hang(" ".join(args)[:200]) from None


def ingest_json(path: Path, db: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    proc = diag("ingest", str(path), "--db", str(db), "--json")
    try:
        return proc, json.loads(proc.stdout)
    except ValueError:
        return proc, {"files": []}


def rows(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def traceback_in(proc: subprocess.CompletedProcess[str]) -> bool:
    text = proc.stdout + proc.stderr
    return "Traceback" in text or "internal error" in text or proc.returncode == 70


def judged(proc: subprocess.CompletedProcess[str], good: bool, detail: str) -> Verdict:
    if traceback_in(proc):
        return Verdict("traceback", (proc.stderr or proc.stdout).strip().splitlines()[-1][:200])
    return Verdict("ok") if good else Verdict("wrong data", detail)


def generate(out: Path, *args: str) -> Path:
    subprocess.run([sys.executable, "sample_traces/generate.py", str(out), "--ranks", "1", *args],
                   cwd=ROOT, check=True, capture_output=True)  # fmt: skip
    return next(out.glob("*_ascend_pt"))


def _tasks(db: Path) -> int:
    return rows(db, "SELECT count(*) FROM device_tasks")[0][0]


# -- paths ----------------------------------------------------------------------------------------------------
def _glob_case(name: str) -> Callable[[Path], Verdict]:
    def case(work: Path) -> Verdict:
        alone = generate(work / "a", "--steps", "3", "--files", "trace_view")
        other = generate(work / "b", "--steps", "6", "--seed", "2", "--files", "trace_view")
        target = work / "runs" / name
        shutil.copytree(alone, target)
        for n in ("rank0_ascend_pt", "rank1_ascend_pt", "run1_ascend_pt", "runA_ascend_pt"):
            shutil.copytree(other, work / "runs" / n)
        proc, _ = ingest_json(target, work / "g.duckdb")
        ref_proc, _ = ingest_json(alone, work / "ref.duckdb")
        got, want = _tasks(work / "g.duckdb"), _tasks(work / "ref.duckdb")
        return judged(proc, got == want, f"{name}: {got} device tasks stored, the folder holds {want}")

    return case


def fifo(work: Path) -> Verdict:
    path = work / "trace.json"
    os.mkfifo(path)
    proc = diag("ingest", str(path), "--db", str(work / "f.duckdb"))
    return judged(proc, proc.returncode != 0 and "FIFO" in proc.stdout + proc.stderr, "FIFO not refused")


def deep_member(work: Path) -> Verdict:
    archive = work / "deep.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(KINETO, "ok/trace.pt.trace.json")
        zf.writestr("/".join(f"d{i}" for i in range(1500)) + "/x.json", "[]")
    proc, out = ingest_json(archive, work / "d.duckdb")
    (entry,) = out["files"] or [{}]
    good = entry.get("status") == "failed" and "nested 1500 folders deep" in entry.get("message", "")
    return judged(proc, good, f"{entry.get('status')}: {entry.get('message', '')[:120]}")


def markup_and_escapes(work: Path) -> Verdict:
    run = work / "[" / "red]run\x1b[31m\x1b]0;pwned\x07[bold]"  # the path holds '[/red]'
    run.mkdir(parents=True)
    shutil.copy(KINETO, run / "t.json")
    (run / "x.log").write_text("[/red] [link=http://x]first line[/link]\n[ERROR] oops\n")
    proc = diag("ingest", str(run), "--db", str(work / "m.duckdb"))
    raw = "\x1b" in proc.stdout + proc.stderr or "\x07" in proc.stdout + proc.stderr
    return judged(proc, proc.returncode == 0 and not raw, f"rc {proc.returncode}, raw escapes printed: {raw}")


# -- logs -----------------------------------------------------------------------------------------------------
def _plog(n: int) -> list[str]:
    return [f"[ERROR] RUNTIME(4321,python3):2025-06-25-10:45:{i // 1000 % 60:02d}.{i % 1000:03d}.200 "
            f"[stream.cc:1021] 4321 Stream Synchronize failed, ErrCode=507035" for i in range(n)]  # fmt: skip


def nul_small_plog(work: Path) -> Verdict:
    lines = _plog(100)
    path = work / "plog-4321_20250625104000000.log"
    path.write_bytes(("\n".join(lines[:50]) + "\n" + "\x00" * 3000 + "\n".join(lines[50:]) + "\n").encode())
    proc, _ = ingest_json(path, work / "n.duckdb")
    got = rows(work / "n.duckdb", "SELECT count(*) FROM log_records WHERE level = 'ERROR'")[0][0]
    return judged(proc, got == 100, f"{got} of 100 ERROR records stored")


def cr_only_log(work: Path) -> Verdict:
    path = work / "plog-4322_20250625104000000.log"
    path.write_bytes(("\r".join(_plog(50_000)) + "\r").encode())
    proc, _ = ingest_json(path, work / "c.duckdb")
    got = rows(work / "c.duckdb", "SELECT count(*) FROM log_records")[0][0]
    return judged(proc, got == 50_000, f"{got} of 50,000 records")


def one_line_plog(work: Path) -> Verdict:
    path = work / "plog-1234_20240101000000000.log"
    with open(path, "wb") as fh:
        fh.write(b"[ERROR] GE(1234,python):2024-01-01-00:00:01.000.000 [graph.cc:11]1234 dump: ")
        fh.write(b"tensor ab " * (6 * MB))
        fh.write(b"\n[ERROR] RUNTIME(1234,python):2024-01-01-00:00:02.000.000 [stream.cc:12]1234 after\n")
    m = measure(
        [sys.executable, "-m", "diag.cli", "ingest", str(path), "--db", str(work / "o.duckdb")], (0, 1)
    )
    got = rows(work / "o.duckdb", "SELECT count(*) FROM log_records")[0][0]
    good = got == 2 and m["peak_rss"] < 1024 * MB
    return _measured(m, good, f"{got} of 2 records, peak RSS {m['peak_rss'] / MB:.0f} MB")


def _measured(m: dict, good: bool, detail: str) -> Verdict:
    if "Traceback" in m["stderr"] or "internal error" in m["stderr"] + m["stdout"]:
        return Verdict("traceback", m["stderr"].strip().splitlines()[-1][:200])
    return Verdict("ok", detail) if good else Verdict("wrong data", detail)


# -- traces ---------------------------------------------------------------------------------------------------
def _kineto_with(work: Path, name: str, change: Callable[[list[dict]], None]) -> Path:
    data = json.loads(KINETO.read_text())
    change([e for e in data["traceEvents"] if e.get("ph") == "X"])
    path = work / name
    path.write_text(json.dumps(data))
    return path


def ts_abc(work: Path) -> Verdict:
    path = _kineto_with(work, "ts_abc.json", lambda ev: ev[0].update(ts="abc"))
    proc, _ = ingest_json(path, work / "t.duckdb")
    nulls = rows(work / "t.duckdb", "SELECT count(*) FROM device_tasks WHERE start_ns IS NULL")[0][0]
    report = diag("compare", "1", "1", "--db", str(work / "t.duckdb"))
    bad = traceback_in(report)
    return judged(proc, nulls == 0 and not bad, f"{nulls} tasks with no start; compare crashed: {bad}")


def dur_1e30(work: Path) -> Verdict:
    path = _kineto_with(work, "dur.json", lambda ev: ev[0].update(dur=1e30))
    proc, out = ingest_json(path, work / "u.duckdb")
    statuses = [f["status"] for f in out["files"]]
    return judged(proc, statuses == ["partial"], f"statuses {statuses}")


def zero_tail(work: Path) -> Verdict:
    trace = generate(work / "z", "--files", "trace_view", "--target-trace-bytes", str(300 * MB))
    path = trace / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
    keep = path.stat().st_size - 100
    os.truncate(path, keep)
    os.truncate(path, keep + 300 * MB)  # sparse zeros, as a crash of a writer that pre-allocated leaves
    cmd = [sys.executable, "-m", "diag.cli", "ingest", str(path), "--db", str(work / "z.duckdb"), "--json"]
    m = measure(cmd, (0, 1))
    (entry,) = json.loads(m["stdout"])["files"] if m["stdout"].strip().startswith("{") else [{}]
    good = entry.get("status") == "partial" and m["peak_rss"] <= path.stat().st_size + 128 * MB
    return _measured(m, good, f"{entry.get('status')}, peak RSS {m['peak_rss'] / MB:.0f} MB "
                              f"for {path.stat().st_size / MB:.0f} MB")  # fmt: skip


# -- nsys -----------------------------------------------------------------------------------------------------
def sqlite_file(path: Path, statements: list[str]) -> Path:
    """A SQLite file made of ``statements`` (also used by tests/test_hardening_*.py)."""
    con = sqlite3.connect(path)
    for sql in statements:
        con.execute(sql)
    con.commit()
    con.close()
    return path


def nsys_garbage(work: Path) -> Verdict:
    strings = "CREATE TABLE StringIds(id INTEGER, value TEXT)"
    blank = sqlite_file(
        work / "blank.sqlite", [strings, "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(start, end, deviceId)"]
    )
    garbled = sqlite_file(work / "garbled.sqlite", [strings, "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL(a, b)",
                                                 "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (1, 2)"])  # fmt: skip
    statuses = []
    for path in (blank, garbled):
        proc, out = ingest_json(path, work / f"{path.stem}.duckdb")
        if traceback_in(proc):
            return judged(proc, False, "")
        statuses += [f["status"] for f in out["files"]]
    return Verdict("ok") if statuses == ["failed", "failed"] else Verdict("wrong data", f"stored {statuses}")


# -- the database ---------------------------------------------------------------------------------------------
def corrupt_db(work: Path) -> Verdict:
    good = work / "good.duckdb"
    ingest_json(KINETO, good)
    db = work / "bad.duckdb"
    data = good.read_bytes()[:20000]
    db.write_bytes(data)
    proc = diag("ingest", str(KINETO), "--db", str(db))
    one = len(proc.stderr.strip().splitlines()) == 1 and proc.returncode != 0
    return judged(proc, one and db.read_bytes() == data, "not one line, or the file was changed")


def disk_full(work: Path) -> Verdict:
    import resource

    small = generate(work / "s", "--steps", "3", "--files", "trace_view")
    big = generate(work / "b", "--seed", "2", "--files", "trace_view", "kernel_details",
                   "--target-trace-bytes", str(40 * MB))  # fmt: skip
    db = work / "full.duckdb"
    ingest_json(small, db)
    before = _tasks(db)
    cap = db.stat().st_size + 4 * MB
    proc = diag("ingest", str(big), "--db", str(db),
                preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (cap, cap)))  # fmt: skip
    errors = [x for x in (proc.stdout + proc.stderr).splitlines() if "error" in x.lower()]
    after = _tasks(db)
    return judged(
        proc, len(errors) == 1 and after >= before, f"{len(errors)} error lines, tasks {before}->{after}"
    )


def sql_escapes(work: Path) -> Verdict:
    db = work / "s.duckdb"
    ingest_json(KINETO, db)
    escapes = [f"COPY runs TO '{work}/x.csv'", f"EXPORT DATABASE '{work}/dump'",
               "SELECT * FROM read_text('/etc/passwd')", "SELECT * FROM glob('/*')", "INSTALL httpfs",
               "SET enable_external_access = true"]  # fmt: skip
    for sql in escapes:
        proc = diag("sql", sql, "--db", str(db))
        if traceback_in(proc) or proc.returncode == 0:
            return judged(proc, False, f"not refused: {sql}")
    written = sorted(p.name for p in work.iterdir() if p.name in ("x.csv", "dump"))
    return Verdict("ok") if not written else Verdict("wrong data", f"written: {written}")


CASES: dict[str, Callable[[Path], Verdict]] = {
    "glob [] in a path": _glob_case("rank[0]_ascend_pt"),
    "glob * in a path": _glob_case("run*_ascend_pt"),
    "glob ? in a path": _glob_case("run?_ascend_pt"),
    "FIFO on the command line": fifo,
    "1,500-deep archive member": deep_member,
    "markup / escapes in names": markup_and_escapes,
    "NUL-bearing small plog": nul_small_plog,
    "CR-only log (50,000 lines)": cr_only_log,
    "60 MB one-line plog": one_line_plog,
    'Kineto ts: "abc"': ts_abc,
    "Kineto dur: 1e30": dur_1e30,
    "zero-filled trace tail": zero_tail,
    "nsys garbage": nsys_garbage,
    "corrupt --db": corrupt_db,
    "full disk (file size limit)": disk_full,
    "diag sql escapes": sql_escapes,
}


def run_crafted(work: Path) -> dict[str, Verdict]:
    """Every case in its own folder; an exception in the bench's own checks counts as a traceback."""
    out: dict[str, Verdict] = {}
    for i, (name, case) in enumerate(CASES.items()):
        folder = work / f"crafted{i:02d}"
        folder.mkdir(parents=True)
        try:
            out[name] = case(folder)
        except Hang as exc:
            out[name] = Verdict("hang", str(exc))
        except Exception as exc:  # noqa: BLE001 - a check that could not run is reported, not hidden
            out[name] = Verdict("traceback", f"bench check failed: {type(exc).__name__}: {exc}"[:200])
        shutil.rmtree(folder, ignore_errors=True)
    return out


__all__ = ["CASES", "Verdict", "run_crafted"]
