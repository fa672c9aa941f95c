"""Log ingest benchmark: ``diag ingest`` of a generated CANN log set against ``grep -c ERROR`` of the same files.

Generates (at run time, nothing stored) a ≥ 1 GB set like ``$HOME/ascend/log`` of an 8-rank job: per rank a
host ``debug/plog/plog-<pid>_<ts>.log`` and a ``debug/device-<id>/device-<pid>_<ts>.log``, with a realistic mix
of INFO / DEBUG / WARNING / ERROR records of several modules (HCCL Entry lines, RUNTIME, GE, ASCENDCL, AICPU…),
multi-line records (GE graph dumps, error-manager TraceBack blocks), glued records, and one failure: an AI Vector
exception on rank 0 and, 1836 s later, EI0002 notify-wait timeouts on the other ranks.

Then, each in its own process (so that every peak RSS belongs to one measurement):

* ``grep -c ERROR`` over every file (once to warm the page cache, then measured);
* ``diag ingest <folder> --db FRESH.duckdb --json`` (wall, peak RSS);
* ``diag ingest`` of one rank's plog alone (peak RSS: memory must not grow with the input);
* ``diag logs --json`` on the result (the root cause must be rank 0's device exception);
* the floor of any DuckDB store of these logs: DuckDB reading the same files as one text column per line and
  storing those lines, unparsed, in a fresh database file (the issue asks for every record's raw text).

Prints lines/s, MB/s and peak RSS next to grep's, the ratio of the speeds, and one JSON line at the end.

    python bench/bench_logs.py [--quick] [--bytes B] [--ranks N] [--workdir DIR] [--keep] [--repeat N]

With ``--repeat N`` the floor and the ingest run N times each, alternating, and the medians are reported with the
ratio of diag's speed to the floor's (the figure to compare across machines: both share the machine's load).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._measure import measure  # noqa: E402

T0 = 1750815000  # 2025-06-25 01:30:00, as local time written by the logs
FAIL_S = 100  # rank 0's device exception, seconds after T0
ECHO_S = FAIL_S + 1836  # the other ranks' EI0002 (HCCL_EXEC_TIMEOUT 1836 s)


class Clock:
    """Timestamps of consecutive records: µs steps, formatted the plog way (YYYY-MM-DD-hh:mm:ss.mmm.uuu)."""

    def __init__(self, start_s: int, step_us: int) -> None:
        self.us, self.step, self._sec, self._prefix = start_s * 1_000_000, step_us, -1, ""

    def next(self) -> str:
        self.us += random.randint(1, 2 * self.step)
        sec, frac = divmod(self.us, 1_000_000)
        if sec != self._sec:
            self._sec, self._prefix = sec, time.strftime("%Y-%m-%d-%H:%M:%S", time.gmtime(sec))
        return f"{self._prefix}.{frac // 1000:03d}.{frac % 1000:03d}"

    @property
    def seconds(self) -> float:
        return self.us / 1e6 - T0


def _host_lines(pid: int, rank: int, clock: Clock) -> list[str]:
    """One block of host plog records (mostly one line each, some multi-line, one glued pair)."""
    tid, h = pid + 7, f"({pid},python3):"
    out = []
    for i in range(1000):
        ts = clock.next()
        r = random.random()
        if r < 0.30:
            out.append(
                f"[INFO] HCCL{h}{ts} [hccl_opbase_atrace_info.cc:56][{tid}]Entry-HcclAllReduce: tag[AllReduce_group_name_0], "
                f"sendBuf[0x12c0c0013000], recvBuf[0x12c0c0014000], count[{i * 64}], dataType[bfloat16], op[sum], "
                f"localRank[{rank}], streamId[7],comm[0xfffe380078d0], deviceLogicId[{rank}]"
            )
        elif r < 0.50:
            out.append(
                f"[INFO] RUNTIME{h}{ts} [stream.cc:812]{tid} SubmitTask:stream_id=2, task_id={i}, task_type=0"
            )
        elif r < 0.62:
            out.append(
                f"[INFO] GE{h}{ts} [graph_manager.cc:1103]{tid} RunGraphAsync:run graph async, graph_id={i % 7}"
            )
        elif r < 0.70:
            out.append(
                f"[INFO] ASCENDCL{h}{ts} [model.cpp:1296]{tid} aclmdlExecuteAsync:start to execute, modelId[{i % 7}]"
            )
        elif r < 0.85:
            out.append(
                f"[DEBUG] RUNTIME{h}{ts} [npu_driver.cc:3390]{tid} MemCopySync:copy size={i * 512}, kind=1"
            )
        elif r < 0.96:
            out.append(
                f"[WARNING] GE{h}{ts} [op_desc_utils.cc:801]{tid} GetConstInputs:node MatMul_{i} has no const input"
            )
        elif r < 0.99:
            out.append(
                f"[ERROR] HCCL{h}{ts} [hccl_communicator.cc:2307] [{tid}][InitNic]call trace: hcclRet -> 19"
            )
        elif r < 0.995:
            out.append(
                f"[ERROR] GE{h}{ts} [graph_builder.cc:88]{tid} BuildGraph:build graph failed, graph dump follows"
            )
            out += [f"    %primals_{k} : [num_users=1] = placeholder[target=primals_{k}]" for k in range(4)]
        else:
            out.append(
                f"[ERROR] HCCL{h}{ts} [hccl_socket_manager.cc:836] [{tid}][Create][Sockets]Wait links establish "
                f"completed failed, local role is client. ret[9][ERROR] HCCL{h}{clock.next()} "
                f"[transport_manager.cc:1402] [{tid}][SetMachinePara]call trace: hcclRet -> 9"
            )
    return out


def _incident(pid: int, rank: int, clock: Clock, done: set[int]) -> list[str]:
    h = f"({pid},python3):"
    if rank == 0 and clock.seconds >= FAIL_S and 0 not in done:
        done.add(0)
        ts = clock.next()
        return [
            f"[ERROR] RUNTIME{h}{ts} [device_error_proc.cc:1409]{pid} ProcessStarsCoreErrorInfo:[INIT][DEFAULT]"
            "report error module_type=5, module_name=EZ9999",
            f"[ERROR] RUNTIME{h}{clock.next()} [device_error_proc.cc:1409]{pid} ProcessStarsCoreErrorInfo:[INIT][DEFAULT]"
            "The error from device(chipId:0, dieId:0), serial number is 7, there is an aivec error exception, core id is 3",
            "        TraceBack (most recent call last):",
            "        Kernel task happen error, retCode=0x31, [vector core exception].[FUNC:PreCheckTaskErr][FILE:davinci_kernel_task.cc][LINE:1539]",
        ]
    if rank and clock.seconds >= ECHO_S and 1 not in done:
        done.add(1)
        return [
            f"[ERROR] HCCL{h}{clock.next()} [task_exception_handler.cc:908] [{pid}][TaskExecStage][Timeout][Host]"
            "Task run failed, base information is streamID:[2], taskID[21], tag[AllReduce_group_name_0]",
            f"[ERROR] ASCENDCL{h}{clock.next()} [log_inner.cpp:161]{pid} EI0002: [PID: {pid}] The wait execution of the "
            "Notify register times out. Reason: The Notify register has not received the Notify record from remote rank: [0].",
        ]
    return []


def _device_lines(pid: int, clock: Clock) -> list[str]:
    h = f"({pid},aicpu_scheduler):"
    out = []
    for i in range(1000):
        ts = clock.next()
        r = random.random()
        if r < 0.85:
            out.append(
                f"[INFO] AICPU{h}{ts} [aicpusd_event_process.cpp:601][ProcessTask][tid:{pid + 3}] task {i} done"
            )
        elif r < 0.97:
            out.append(
                f"[WARNING] HCCL{h}{ts} [aicpu_kfc_utils.cc:387] [{pid + 4}]ErrToWarn: commitTurnCnt: {i},0,0,0"
            )
        else:
            out.append(
                f"[ERROR] CCECPU{h}{ts} [ae_kernel_lib_aicpu.cc:300][TransformKernelErrorCode][tid:{pid + 3}] ret:{i}"
            )
    return out


def generate(folder: Path, total_bytes: float, ranks: int) -> dict:
    """The log set; returns files, bytes and physical lines."""
    random.seed(7)
    per_rank = total_bytes / ranks
    files, size, lines = [], 0, 0
    for rank in range(ranks):
        pid = 3_000_000 + rank * 97
        host = folder / f"node{rank // 8}" / "debug" / "plog" / f"plog-{pid}_20250625013000{rank:03d}.log"
        dev = (
            folder
            / f"node{rank // 8}"
            / "debug"
            / f"device-{rank % 8}"
            / f"device-{pid + 1}_20250625013000{rank:03d}.log"
        )
        for path, share, make in ((host, 0.88, "host"), (dev, 0.12, "device")):
            path.parent.mkdir(parents=True, exist_ok=True)
            step_us = max(1, int(2.5e9 * 170 / (per_rank * share)))  # every file spans ~2500 s of log time
            clock, done, written = Clock(T0, step_us), set(), 0
            with open(path, "w", encoding="utf-8", newline="\n") as fh:
                if make == "host":  # the run log's communicator init names the rank
                    fh.write(
                        f"[INFO] HCCL({pid},python3):{clock.next()} [op_base.cc:1292] [{pid}]Entry-HcclCommInitRootInfoInner:"
                        f"ranks[{ranks}], rank[{rank}], rootinfo: host ip[127.10.0.1] port[60000], deviceLogicId[{rank % 8}]\n"
                    )
                while written < per_rank * share:
                    block = _host_lines(pid, rank, clock) if make == "host" else _device_lines(pid + 1, clock)
                    if make == "host":
                        block += _incident(pid, rank, clock, done)
                    text = "\n".join(block) + "\n"
                    fh.write(text)
                    written += len(text.encode())
                    lines += text.count("\n")
            files.append(path)
            size += path.stat().st_size
    return {"files": files, "bytes": size, "lines": lines}


def _ingest(paths: list[Path], db: Path) -> dict:
    for leftover in (db, db.with_suffix(".duckdb.wal")):
        leftover.unlink(missing_ok=True)
    return measure([sys.executable, "-m", "diag.cli", "ingest", *map(str, paths), "--db", str(db), "--json"])


# Reads every line as one VARCHAR (a delimiter and quote that never occur) and stores it: the least work that
# keeps the raw text.  With 1 GB of memory, more than diag's ingest gets (160 MB, at which this statement runs
# out of memory): the floor is a generous one.
_FLOOR = """
import json, sys, duckdb
db, files = sys.argv[1], json.loads(sys.argv[2])
con = duckdb.connect(db)
con.execute("SET memory_limit='1GB'").fetchall()
con.execute("SET preserve_insertion_order=false").fetchall()
con.execute("SET enable_progress_bar=false").fetchall()
listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
src = (f"read_csv([{listed}], columns={{'line': 'VARCHAR'}}, header=false, delim='\\x01', quote='', escape='', "
       "auto_detect=false, max_line_size=4194304)")
n = con.execute(f"CREATE TABLE raw_lines AS SELECT line FROM {src}").fetchall()[0][0]
con.execute("CHECKPOINT").fetchall()
print(json.dumps({"rows": n}))
"""


def _floor(files: list[str], db: Path) -> dict:
    for leftover in (db, db.with_suffix(".duckdb.wal")):
        leftover.unlink(missing_ok=True)
    m = measure([sys.executable, "-c", _FLOOR, str(db), json.dumps(files)])
    db.unlink(missing_ok=True)
    if m["rc"] != 0:  # a figure from a failed run would be a lie
        raise SystemExit(f"the DuckDB floor measurement failed: {m['stderr'][-500:]}")
    return m


def _alternating(files: list[str], logs: Path, work: Path, repeat: int) -> tuple[dict, dict]:
    """The DuckDB floor and diag's ingest, ``repeat`` times each, alternating (a machine shared with other work
    slows both alike); the run of median wall time of each, with every run's figures under "runs"."""
    floors, ingests = [], []
    for i in range(max(1, repeat)):
        floors.append(_floor(files, work / "bench_floor.duckdb"))
        ingests.append(_ingest([logs], work / "bench_logs.duckdb"))
        print(f"run {i + 1}: DuckDB floor {floors[-1]['wall_s']:.2f} s, diag ingest {ingests[-1]['wall_s']:.2f} s "
              f"(ratio {floors[-1]['wall_s'] / ingests[-1]['wall_s']:.3f}), peak RSS {ingests[-1]['peak_rss'] / 1e6:,.0f} MB")  # fmt: skip

    def median(runs: list[dict]) -> dict:
        chosen = dict(sorted(runs, key=lambda m: m["wall_s"])[len(runs) // 2])
        chosen["runs"] = [
            {"wall_s": round(m["wall_s"], 2), "peak_rss_mb": round(m["peak_rss"] / 1e6, 1)} for m in runs
        ]
        return chosen

    return median(floors), median(ingests)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="~60 MB instead of 1.1 GB")
    p.add_argument("--bytes", type=float, default=None, help="size of the log set (default 1.1e9)")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--workdir", type=Path, default=None, help="where to generate (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the generated files")
    p.add_argument(
        "--repeat", type=int, default=1, help="floor and ingest runs, alternating (medians reported)"
    )
    a = p.parse_args(argv)
    total = a.bytes or (6e7 if a.quick else 1.1e9)
    work = a.workdir or Path(tempfile.mkdtemp(prefix="diag-bench-logs-"))
    work.mkdir(parents=True, exist_ok=True)
    logs = work / "ascend_log"
    try:
        t = time.perf_counter()
        gen = generate(logs, total, a.ranks)
        print(f"generated {len(gen['files'])} files, {gen['bytes'] / 1e6:,.1f} MB, {gen['lines']:,} lines "
              f"in {time.perf_counter() - t:.1f} s under {logs}")  # fmt: skip
        files = [str(f) for f in gen["files"]]
        measure(["grep", "-c", "ERROR", *files], ok_codes=(0, 1))  # warm the page cache for both contenders
        grep = measure(["grep", "-c", "ERROR", *files], ok_codes=(0, 1))
        errors = sum(int(line.rsplit(":", 1)[1]) for line in grep["stdout"].splitlines())
        floor, full = _alternating(files, logs, work, a.repeat)
        payload = json.loads(full["stdout"]) if full["stdout"].strip() else {}
        one = _ingest([gen["files"][0]], work / "bench_one.duckdb")
        logs_cmd = measure(
            [
                sys.executable,
                "-m",
                "diag.cli",
                "logs",
                "--db",
                str(work / "bench_logs.duckdb"),
                "--json",
                "--limit",
                "5",
            ]
        )
        causes = json.loads(logs_cmd["stdout"])["root_causes"] if logs_cmd["rc"] == 0 else []
        if logs_cmd["rc"] != 0:
            print(f"diag logs failed: {logs_cmd['stderr']}", file=sys.stderr)
        result = report(gen, grep, full, one, payload, errors, causes, logs_cmd, floor)
        print(json.dumps(result))
    finally:
        for leftover in work.glob("bench_*.duckdb*"):
            leftover.unlink(missing_ok=True)
        shutil.rmtree(work / ".diag_tmp", ignore_errors=True)
        if not a.keep and a.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def report(
    gen: dict,
    grep: dict,
    full: dict,
    one: dict,
    payload: dict,
    errors: int,
    causes: list,
    logs_cmd: dict,
    floor: dict,
) -> dict:
    mb, lines = gen["bytes"] / 1e6, gen["lines"]
    rows = payload.get("summary", {}).get("rows", {}).get("log_records")
    statuses = sorted({f["status"] for f in payload.get("files", [])})
    one_mb = Path(gen["files"][0]).stat().st_size / 1e6

    def fig(m: dict, size_mb: float) -> dict:
        return {"wall_s": round(m["wall_s"], 2), "mb_per_s": round(size_mb / m["wall_s"], 1),
                "lines_per_s": round(lines * size_mb / mb / m["wall_s"]), "peak_rss_mb": round(m["peak_rss"] / 1e6, 1),
                **({"runs": m["runs"]} if "runs" in m else {})}  # fmt: skip

    g, i, o, f = fig(grep, mb), fig(full, mb), fig(one, one_mb), fig(floor, mb)
    print(f"\n{'what':<34} {'MB':>9} {'wall s':>8} {'MB/s':>9} {'lines/s':>12} {'peak RSS MB':>12}")
    for label, m, size in (("grep -c ERROR (all files)", g, mb), ("DuckDB: store raw lines only", f, mb),
                           ("diag ingest (all files)", i, mb), ("diag ingest (one plog)", o, one_mb)):  # fmt: skip
        print(
            f"{label:<34} {size:>9,.1f} {m['wall_s']:>8.2f} {m['mb_per_s']:>9,.1f} {m['lines_per_s']:>12,} {m['peak_rss_mb']:>12,.1f}"
        )
    ratio = i["mb_per_s"] / g["mb_per_s"]
    print(f"\ndiag ingest speed / grep speed = {ratio:.4f} (target ≥ 0.25)")
    print(f"DuckDB storing the raw lines alone / grep speed = {f['mb_per_s'] / g['mb_per_s']:.4f}")
    floor_ratio = i["mb_per_s"] / f["mb_per_s"]
    print(
        f"diag ingest speed / DuckDB floor speed = {floor_ratio:.3f} (target ≥ 0.5; medians of {len(i.get('runs', [1]))})"
    )
    print(
        f"stored {rows:,} records ({statuses}); grep counted {errors:,} ERROR lines"
        if rows
        else f"ingest failed: {full['stderr']}"
    )
    print(
        f"peak RSS: {i['peak_rss_mb']:,.0f} MB for {mb:,.0f} MB of logs, {o['peak_rss_mb']:,.0f} MB for {one_mb:,.0f} MB"
    )
    top = causes[0] if causes else {}
    print(f"root cause #1: {top.get('category')} on rank {top.get('ranks')} ({top.get('role')}); "
          f"#2: {causes[1]['category'] if len(causes) > 1 else None} echo_of {causes[1]['echo_of'] if len(causes) > 1 else None}"
          f"  [diag logs: {logs_cmd['wall_s']:.2f} s]")  # fmt: skip
    return {"bytes": gen["bytes"], "lines": lines, "files": len(gen["files"]), "grep": g, "ingest": i,
            "duckdb_store_raw_lines": f, "floor_ratio_vs_grep": round(f["mb_per_s"] / g["mb_per_s"], 4),
            "ingest_one_file": o, "ratio_vs_grep": round(ratio, 4), "stored_records": rows,
            "root_cause": top.get("category"), "root_cause_ranks": top.get("ranks"),
            "logs_command_s": round(logs_cmd["wall_s"], 2), "ratio_vs_floor": round(floor_ratio, 4)}  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
