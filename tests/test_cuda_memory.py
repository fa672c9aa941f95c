"""CUDA-side memory: Kineto ``[memory]`` events and Nsight Systems device-memory tables → ``memory`` / ``op_memory``.

The generated trace (``generate_cuda.py --memory``) carries its truth; a small hand-written trace pins the
pairing and naming rules; an nsys export built here with the 2024.6 column names pins the running totals; real
corpus files with memory events (none today) are checked against json / sqlite3 reading them directly.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
from pathlib import Path

import pytest

from diag.store import Store
from sample_traces.generate_cuda import generate
from tests.conftest import CORPUS, SAMPLES, ingest_into, query
from tests.test_cuda_parsers import BASE, GTID, build_nsys

MIB = 1 << 20
KINETO_BASE = 1736933600000000000  # generate_cuda.py's baseTimeNanoseconds


def ingest(db: Path, *paths: Path) -> list[dict]:
    with Store(db) as store:
        return [f.to_json() for f in ingest_into(store, paths).files]


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, dict]:
    """The generated CUDA twin with ``[memory]`` events, ingested: (db, the file's ledger line, the truth)."""
    work = tmp_path_factory.mktemp("cuda_memory")
    truth = generate(SAMPLES / "generated" / "llm_decode_tp2", work / "trace", memory=True)["memory"]
    db = work / "t.duckdb"
    [out] = ingest(db, work / "trace" / "h100_decode_tp1.pt.trace.json")
    return db, out, truth


def test_kineto_memory_rows_and_peaks(generated):
    db, out, truth = generated
    assert (out["status"], out["rows"]["memory"], out["rows"]["op_memory"]) == ("ok", 18, 10)
    assert (truth["memory_rows"], truth["op_memory_rows"]) == (18, 10)
    assert out["message"] == "4 [memory] event(s) of host or non-CUDA memory not stored"
    rows = query(db, "SELECT source, component, device, count(*), max(allocated_bytes), max(reserved_bytes), "
                     "arg_max(ts_ns, allocated_bytes) FROM memory GROUP BY ALL")  # fmt: skip
    assert rows == [("kineto", "PyTorch", "cuda:0", 18, 2_248_146_944, 2_256_535_552,
                     KINETO_BASE + truth["peak_allocated_ts_ns"])]  # fmt: skip
    assert (truth["peak_allocated_bytes"], truth["peak_reserved_bytes"]) == (2_248_146_944, 2_256_535_552)


def test_kineto_alloc_free_pairs(generated):
    db, _, truth = generated
    mm = query(db, "SELECT size_bytes, dur_ns, alloc_ns - $b FROM op_memory WHERE name = 'aten::mm' "
                   "ORDER BY alloc_ns".replace("$b", str(KINETO_BASE)))  # fmt: skip
    assert [(s // MIB, d) for s, d, _ in mm] == [(8, 11000), (16, 11000), (24, 11000), (8, 11000)]
    assert mm[0][2] == 1_005_000  # the first step starts at 1000 µs; the workspace is taken 5 µs in
    by_op = query(db, "SELECT name, sum(size_bytes), count(*), count(release_ns) FROM op_memory "
                      "WHERE size_bytes > 0 GROUP BY 1 ORDER BY 1")  # fmt: skip
    assert by_op == [
        ("aten::cat", 64 * MIB, 1, 0),
        ("aten::empty", 128 * MIB, 4, 4),
        ("aten::mm", 56 * MIB, 4, 4),
    ]
    assert {n: b for n, b, _, _ in by_op} == truth["bytes_by_op"]
    largest = query(db, "SELECT name, size_bytes, release_ns, alloc_total_allocated_bytes FROM op_memory "
                        "ORDER BY size_bytes DESC LIMIT 1")  # fmt: skip
    assert largest == [("aten::cat", 64 * MIB, None, 2_248_146_944)]  # never freed: the window's peak
    assert truth["largest_alloc"] == {"name": "aten::cat", "bytes": 64 * MIB}
    before = query(db, "SELECT name, size_bytes, alloc_ns, release_ns - $b, release_total_allocated_bytes "
                       "FROM op_memory WHERE size_bytes < 0".replace("$b", str(KINETO_BASE)))  # fmt: skip
    assert before == [(None, -4 * MIB, None, 1_001_000, 2 << 30)]


def _trace(path: Path, events: list[dict]) -> Path:
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _op(name: str, ts: float, dur: float) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 7, "tid": 8, "ts": ts, "dur": dur, "args": {}}


def _mem(ts: float, addr: int, size: int, total: int, device_type: int = 1) -> dict:
    args = {"Total Reserved": 1 << 30, "Total Allocated": total, "Bytes": size, "Addr": addr,
            "Device Id": 1, "Device Type": device_type}  # fmt: skip
    return {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 7, "tid": 8, "ts": ts,
            "args": args}  # fmt: skip


def test_kineto_pairs_at_one_timestamp_and_innermost_op(tmp_path, db):
    """A block freed and taken again at the same µs pairs with its old and new owner; a block taken and given
    back within one µs is one pair of 0 ns; the innermost op running the allocation names it, back-to-back
    ops included; an allocation that failed ([OutOfMemory]) is a note, host memory is not stored."""
    trace = _trace(tmp_path / "t.json", [
        _op("aten::linear", 5, 10), _op("aten::mm", 9, 3), _mem(10, 0xA, 100, 100),
        _op("aten::add", 19, 2), _mem(20, 0xA, -100, 0), _mem(20, 0xA, 300, 300),
        _mem(30, 0xA, -300, 0),
        _op("aten::empty", 39, 1), _op("aten::zeros", 40, 2), _mem(40, 0xB, 64, 64), _mem(40, 0xB, -64, 0),
        _mem(45, 0xC, 8, 8, device_type=0), {**_mem(50, 0, 2 << 30, 64), "name": "[OutOfMemory]"},
    ])  # fmt: skip
    [out] = ingest(db, trace)
    assert (out["status"], out["rows"]["memory"], out["rows"]["op_memory"]) == ("ok", 6, 3)
    assert out["message"] == (
        "[OutOfMemory] on cuda:1: 2,147,483,648 B requested with 64 B allocated and 1,073,741,824 B reserved by "
        "PyTorch; 1 [memory] event(s) of host or non-CUDA memory not stored"
    )
    rows = query(
        db, "SELECT name, size_bytes, alloc_ns, release_ns, dur_ns, device FROM op_memory ORDER BY alloc_ns"
    )
    assert rows == [
        ("aten::mm", 100, 10_000, 20_000, 10_000, "cuda:1"),
        ("aten::add", 300, 20_000, 30_000, 10_000, "cuda:1"),
        ("aten::zeros", 64, 40_000, 40_000, 0, "cuda:1"),  # aten::empty ended as aten::zeros began
    ]


def _usage_tables(con: sqlite3.Connection) -> None:
    """CUDA_GPU_MEMORY_USAGE_EVENTS / _POOL_EVENTS and their enums as nsys 2024.6 writes them."""
    con.executescript("""
        CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL,
            bytes INTEGER NOT NULL, memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name TEXT,
            correlationId INTEGER, streamId INTEGER, localMemoryPoolAddress INTEGER,
            localMemoryPoolReleaseThreshold INTEGER, localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER,
            importedMemoryPoolAddress INTEGER, importedMemoryPoolProcessId INTEGER);
        CREATE TABLE CUDA_GPU_MEMORY_POOL_EVENTS (start INTEGER NOT NULL, globalPid INTEGER NOT NULL,
            deviceId INTEGER NOT NULL, address INTEGER NOT NULL, operationType INTEGER NOT NULL,
            poolType INTEGER NOT NULL, correlationId INTEGER, minBytesToKeep INTEGER,
            localMemoryPoolReleaseThreshold INTEGER, localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER);
        CREATE TABLE ENUM_CUDA_MEM_KIND (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
        CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER NOT NULL PRIMARY KEY, name TEXT, label TEXT);
        INSERT INTO ENUM_CUDA_MEM_KIND VALUES (0, 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable'),
            (1, 'CUDA_MEMOPR_MEMORY_KIND_PINNED', 'Pinned'), (2, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE', 'Device'),
            (3, 'CUDA_MEMOPR_MEMORY_KIND_ARRAY', 'Array'), (4, 'CUDA_MEMOPR_MEMORY_KIND_MANAGED', 'Managed'),
            (5, 'CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC', 'Device Static'),
            (6, 'CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC', 'Managed Static'),
            (7, 'CUDA_MEMOPR_MEMORY_KIND_UNKNOWN', 'Unknown');
        INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (0, 'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION', 'Allocation'),
            (1, 'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION', 'Deallocation');
        INSERT INTO StringIds VALUES (30, 'cudaMalloc_v3020'), (31, 'cudaFree_v3020'), (32, 'cudaMallocAsync_v11020');
    """)
    gpid = GTID >> 24 << 24
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0, NULL)",
                    [(1090, 1110, GTID, 21, 30), (1190, 1210, GTID, 22, 30), (1390, 1410, GTID, 23, 31),
                     (1490, 1510, GTID, 24, 32), (1240, 1260, GTID, 25, 30)])  # fmt: skip
    usage = [  # start, device, address, bytes, kind, op, corr, pool address, pool size, pool used
        (1000, 0, 0xA0, 4096, 2, 1, None, None, None, None),  # freed, allocated before the capture
        (1100, 0, 0x1000, MIB, 2, 0, 21, None, None, None),
        (1200, 0, 0x2000, 2 * MIB, 2, 0, 22, None, None, None),
        (1250, 1, 0x1000, 4 * MIB, 2, 0, 25, None, None, None),  # the same address on another GPU
        (1300, 0, 0x5000, 8 * MIB, 1, 0, None, None, None, None),  # pinned host memory: not device memory
        (1400, 0, 0x1000, MIB, 2, 1, 23, None, None, None),
        (1500, 0, 0x3000, MIB // 2, 2, 0, 24, 0x9000, 2 * MIB, MIB // 2),
    ]
    con.executemany("INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS VALUES (?, ?, ?, 1, ?, 0, ?, ?, ?, NULL, ?, 7, ?, "
                    "NULL, ?, ?, NULL, NULL)", [(s, gpid, d, a, b, k, o, c, p, ps, pu)
                                                for s, d, a, b, k, o, c, p, ps, pu in usage])  # fmt: skip
    con.executemany("INSERT INTO CUDA_GPU_MEMORY_POOL_EVENTS VALUES (?, ?, 0, 36864, ?, 1, NULL, 0, 0, ?, ?)",
                    [(1490, gpid, 1, 2 * MIB, 0), (1600, gpid, 3, MIB, MIB // 2)])  # fmt: skip


def test_nsys_device_memory_running_totals(tmp_path, db):
    export = build_nsys(tmp_path / "report1.sqlite")
    with sqlite3.connect(export) as con:
        _usage_tables(con)
    [out] = ingest(db, export)
    assert (out["status"], out["rows"]["memory"], out["rows"]["op_memory"]) == ("ok", 9, 5)
    assert out["message"] == (
        "GPU 0: frees of 4,096 B more than the capture saw allocated (allocations made before it): its allocated "
        "bytes are a lower bound, raised by that much"
    )
    rows = query(db, "SELECT component, device, ts_ns - $b, allocated_bytes, reserved_bytes FROM memory "
                     "WHERE source = 'nsys' ORDER BY component, device, ts_ns".replace("$b", str(BASE)))  # fmt: skip
    assert rows == [
        ("CUDA", "cuda:0", 1000, 0, None), ("CUDA", "cuda:0", 1100, MIB, None),
        ("CUDA", "cuda:0", 1200, 3 * MIB, None), ("CUDA", "cuda:0", 1400, 2 * MIB, None),
        ("CUDA", "cuda:0", 1500, 5 * MIB // 2, None), ("CUDA", "cuda:1", 1250, 4 * MIB, None),
        ("CUDA pool", "cuda:0", 1490, 0, 2 * MIB), ("CUDA pool", "cuda:0", 1500, MIB // 2, 2 * MIB),
        ("CUDA pool", "cuda:0", 1600, MIB // 2, MIB),
    ]  # fmt: skip
    pairs = query(db, "SELECT name, device, size_bytes, alloc_ns - $b, release_ns - $b, alloc_total_allocated_bytes "
                      "FROM op_memory ORDER BY device, coalesce(alloc_ns, release_ns)".replace("$b", str(BASE)))  # fmt: skip
    assert pairs == [
        (None, "cuda:0", -4096, None, 1000, None),
        ("cudaMalloc", "cuda:0", MIB, 1100, 1400, MIB),
        ("cudaMalloc", "cuda:0", 2 * MIB, 1200, None, 3 * MIB),
        ("cudaMallocAsync", "cuda:0", MIB // 2, 1500, None, 5 * MIB // 2),
        ("cudaMalloc", "cuda:1", 4 * MIB, 1250, None, 4 * MIB),
    ]


# -- real files: every corpus CUDA file with memory events, against json / sqlite3 -------------------------
def _kineto_memory_events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as fh:
        doc = json.load(fh)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else []
    return [
        e for e in events if e.get("name") == "[memory]" and (e.get("args") or {}).get("Device Type") == 1
    ]


def _nsys_device_events(path: Path) -> int:
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as con:
        tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "CUDA_GPU_MEMORY_USAGE_EVENTS" not in tables:
            return 0
        return con.execute("SELECT count(*) FROM CUDA_GPU_MEMORY_USAGE_EVENTS WHERE memKind IN (2, 3, 5) "
                           "AND memoryOperationType IN (0, 1)").fetchone()[0]  # fmt: skip


def _check_against_independent_reading(paths: list[Path], work: Path) -> int:
    """Ingest each file holding CUDA memory events and compare its rows with json / sqlite3; how many held any."""
    expected: dict[Path, tuple[str, int, int | None]] = {}  # path -> (source, rows, peak Total Reserved)
    for path in paths:
        if path.suffix == ".sqlite":
            if n := _nsys_device_events(path):
                expected[path] = ("nsys", n, None)
            continue
        totals = [(e["args"].get("Total Allocated"), e["args"].get("Total Reserved"))
                  for e in _kineto_memory_events(path)]  # fmt: skip
        if sampled := [t for t in totals if t != (None, None)]:
            expected[path] = (
                "kineto",
                len(sampled),
                max((r for _, r in sampled if r is not None), default=None),
            )
    for i, (path, (source, count, peak_reserved)) in enumerate(expected.items()):
        db = work / f"c{i}.duckdb"
        ingest(db, path)
        component = "PyTorch" if source == "kineto" else "CUDA"
        got = query(db, "SELECT count(*), max(reserved_bytes) FROM memory WHERE source = ? AND component = ?",
                    [source, component])  # fmt: skip
        assert got == [(count, peak_reserved)], path
    return len(expected)


def test_independent_reading_checks_the_generated_trace(generated, tmp_path):
    _, _, truth = generated
    trace = next(generated[0].parent.glob("trace/*.pt.trace.json"))
    assert _check_against_independent_reading([trace], tmp_path) == 1
    assert truth["peak_reserved_bytes"] == 2_256_535_552


def test_corpus_cuda_memory_against_independent_reading(tmp_path):
    cuda = CORPUS / "cuda"
    if not cuda.is_dir():
        pytest.skip("../shared/corpus is not present (a user's clone has none)")
    paths = sorted([*cuda.rglob("*.json*"), *cuda.rglob("*.sqlite")])
    if not _check_against_independent_reading(paths, tmp_path):
        pytest.skip(f"none of the {len(paths)} corpus CUDA files holds [memory] events or device-memory rows")
