"""CUDA ingest benchmark: ``diag ingest`` of a Kineto trace and an nsys SQLite export, against a bare scan.

Generates at run time, in the formats the real tools write:

* a ≥ 1 GB PyTorch profiler (Kineto) trace — a JSON object with ``deviceProperties``, ``distributedInfo``,
  ``baseTimeNanoseconds`` and a pretty-printed ``traceEvents`` array as Kineto 2.x writes it (one ProfilerStep
  per decode step; per op a ``cpu_op``, its ``cudaLaunchKernel``, the ``kernel`` and the ``ac2g`` flow pair;
  µs timestamps with ns fractions relative to the base time) — plus the same events as a bare JSON array;
* a ≥ 1M-kernel nsys export built with sqlite3 in the 2024+ schema (META_DATA_EXPORT, session start time,
  StringIds, KERNEL with every 2025 column, RUNTIME launches, MEMCPY, NVTX ranges, TARGET_INFO_GPU).

Then measures each in its own process, so that every peak RSS belongs to one measurement:

* ``diag ingest FILE --db FRESH.duckdb --json`` (wall time, peak RSS, rows stored);
* the bare scan: for Kineto, DuckDB's ``read_json`` over the bare event array with the projection diag uses
  (``parsers.kineto_trace.read_json_sql``), ``SELECT count(*), max(ts), sum(dur)``; for nsys, stdlib sqlite3
  ``SELECT count(*), sum(end - start)`` over the kernel table.

Prints MB/s, rows/s and peak RSS of each, and each ingest figure's ratio to the bare scan's, then one JSON
line.  No assertions: figures only.

    python bench/bench_cuda_ingest.py [--quick] [--trace-bytes B] [--kernels N] [--workdir DIR] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._measure import measure  # noqa: E402

FULL = {"trace_bytes": 1.05e9, "kernels": 1_000_000}
QUICK = {"trace_bytes": 5e7, "kernels": 100_000}
BASE_NS = 1711964646000000000
KERNELS = (  # (name, mean µs): a decode step of a 7B model on one GPU, names as Kineto writes them
    ("std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, __nv_bfloat16, __nv_bfloat16, "
     "__nv_bfloat16, float, false, true, true, false, 7, false, cublasGemvParamsEx<int, "
     "cublasGemvTensorStridedBatched<__nv_bfloat16 const>, cublasGemvTensorStridedBatched<__nv_bfloat16 const>, "
     "cublasGemvTensorStridedBatched<__nv_bfloat16>, float> >(cublasGemvParamsEx<int, "
     "cublasGemvTensorStridedBatched<__nv_bfloat16 const>, cublasGemvTensorStridedBatched<__nv_bfloat16 const>, "
     "cublasGemvTensorStridedBatched<__nv_bfloat16>, float>)", 12.0),
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, "
     "cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 4, cutlass::bfloat16_t> >, false, false, false, "
     "false, true, false, true, false>(flash::Flash_fwd_params)", 9.0),
    ("void vllm::rms_norm_kernel<c10::BFloat16>(c10::BFloat16*, c10::BFloat16 const*, c10::BFloat16 const*, "
     "float, int, int)", 2.5),
    ("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(long const*, c10::BFloat16*, c10::BFloat16*, "
     "c10::BFloat16 const*, int, long, long, int, int, int)", 1.8),
    ("void vllm::act_and_mul_kernel<c10::BFloat16, &(c10::BFloat16 vllm::silu_kernel<c10::BFloat16>"
     "(c10::BFloat16 const&)), true>(c10::BFloat16*, c10::BFloat16 const*, int)", 3.1),
    ("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, __nv_bfloat16, (vllm::Fp8KVCacheDataType)0>"
     "(__nv_bfloat16 const*, __nv_bfloat16 const*, __nv_bfloat16*, __nv_bfloat16*, long const*, long, long, "
     "long, int, int, int, float const*, float const*)", 1.5),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 20.0),
)  # fmt: skip
OPS = ("aten::linear", "aten::mm", "aten::_flash_attention_forward", "vllm::rms_norm", "vllm::rotary_embedding",
       "vllm::silu_and_mul", "vllm::reshape_and_cache_flash")  # fmt: skip

_SCAN_JSON = """
import json, sys, duckdb
from diag.store import ingest_memory_limit
from parsers.kineto_trace import read_json_sql
con = duckdb.connect()
for s in (f"SET memory_limit='{ingest_memory_limit()}'", "SET preserve_insertion_order=false",
          "SET enable_progress_bar=false"):
    con.execute(s).fetchall()
row = con.execute(f"SELECT count(*), max(ts), sum(TRY_CAST(dur AS DOUBLE)) FROM {read_json_sql(sys.argv[1])}").fetchall()[0]
print(json.dumps({"rows": row[0]}))
"""
_SCAN_SQLITE = """
import json, sqlite3, sys
con = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro&immutable=1", uri=True)
row = con.execute('SELECT count(*), sum("end" - start) FROM CUPTI_ACTIVITY_KIND_KERNEL').fetchall()[0]
print(json.dumps({"rows": row[0]}))
"""


# -- generators --------------------------------------------------------------------------------------------
def _event(ph_cat: str, name: str, pid: int, tid: int, ts: float, dur: float, args: str) -> str:
    return (
        f'  {{\n    "ph": "X", "cat": "{ph_cat}", "name": "{name}", "pid": {pid}, "tid": {tid},\n'
        f'    "ts": {ts:.3f}, "dur": {dur:.3f},\n    "args": {{\n      {args}\n    }}\n  }}'
    )


def generate_kineto(trace: Path, events_array: Path, target_bytes: int, epoch_ns: bool = False) -> int:
    """Write the trace object and the bare array of the same events; returns the number of events.

    ``epoch_ns``: epoch µs with ns fractions and no baseTimeNanoseconds (19-digit timestamps, which diag
    must read as text: the slower path), instead of µs relative to baseTimeNanoseconds."""
    rng = random.Random(7)
    head = (
        '{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {\n      "id": 0, "name": "NVIDIA H100 80GB HBM3", '
        '"totalGlobalMem": 85029158912,\n      "computeMajor": 9, "computeMinor": 0, "numSms": 132\n    }\n  ],\n'
        '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2, "nccl_version": "2.21.5"},\n'
        '  "cupti_version": 24,\n  "cuda_runtime_version": 12040,\n  "cuda_driver_version": 12040,\n'
        '  "record_shapes": 1,\n  "traceEvents": [\n'
    )
    base = "" if epoch_ns else ',\n  "baseTimeNanoseconds": 1711964646000000000'
    tail = f'\n],\n  "traceName": "bench.pt.trace.json",\n  "displayTimeUnit": "ms"{base}\n}}\n'
    t0 = 1712195495000000.0 if epoch_ns else 4458676000000.0
    pid, tid, ts, gpu_ts, ext, corr, n, step = 4242, 4243, t0, t0, 1, 1000, 0, 0
    written = len(head)
    with open(trace, "w", encoding="utf-8") as ft, open(events_array, "w", encoding="utf-8") as fa:
        ft.write(head)
        fa.write("[\n")
        first = True
        while written < target_bytes:
            step += 1
            batch = [
                _event(
                    "user_annotation", f"ProfilerStep#{step}", pid, tid, ts, 8000.0, f'"External id": {ext}'
                )
            ]
            ext += 1
            for layer in range(28):
                for (kname, mean), op in zip(KERNELS, OPS, strict=False):
                    ts += rng.uniform(2.0, 6.0)
                    dims = '"Input Dims": [[1, 4096], [4096, 4096]], "Input type": ["c10::BFloat16", "c10::BFloat16"]'
                    batch.append(
                        _event(
                            "cpu_op",
                            op,
                            pid,
                            tid,
                            ts,
                            9.5,
                            f'"External id": {ext}, "Sequence number": {layer}, {dims}',
                        )
                    )
                    launch = ts + 1.125
                    batch.append(_event("cuda_runtime", "cudaLaunchKernel", pid, tid, launch, 4.25,
                                        f'"External id": {ext}, "cbid": 211, "correlation": {corr}'))  # fmt: skip
                    gpu_ts = max(gpu_ts, launch + 5.0) + rng.uniform(0.5, 2.0)
                    dur = rng.uniform(0.5, 1.5) * mean
                    stream = 20 if kname.startswith("nccl") else 7
                    batch.append(
                        f'  {{\n    "ph": "s", "id": {corr}, "pid": {pid}, "tid": {tid}, "ts": {launch:.3f},\n    "cat": "ac2g", "name": "ac2g"\n  }}'
                    )
                    batch.append(_event("kernel", kname, 0, stream, gpu_ts, dur,
                                        f'"External id": {ext}, "queued": 0, "device": 0, "context": 1, "stream": {stream}, '
                                        f'"correlation": {corr}, "registers per thread": 128, "shared memory": 49152, '
                                        f'"grid": [132, 1, 1], "block": [384, 1, 1]'))  # fmt: skip
                    batch.append(
                        f'  {{\n    "ph": "f", "id": {corr}, "pid": 0, "tid": {stream}, "ts": {gpu_ts:.3f},\n    "cat": "ac2g", "name": "ac2g", "bp": "e"\n  }}'
                    )
                    gpu_ts += dur
                    ext, corr = ext + 1, corr + 1
            text = ",\n".join(batch)
            sep = "" if first else ",\n"
            ft.write(sep + text)
            fa.write(sep + text)
            first = False
            written += len(sep) + len(text)
            n += len(batch)
            ts = max(ts, gpu_ts) + 50.0
        ft.write(tail)
        fa.write("\n]\n")
    return n


def generate_nsys(path: Path, kernels: int) -> None:
    """An nsys 2025.3-style export (schema 3.20) with ``kernels`` kernels and as many runtime launches."""
    rng = random.Random(11)
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    act = ("start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, "
           "greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER")  # fmt: skip
    ddl = {
        "META_DATA_EXPORT": "name TEXT NOT NULL, value TEXT",
        "TARGET_INFO_SESSION_START_TIME": "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT",
        "TARGET_INFO_GPU": "vmId INTEGER, id INTEGER, name TEXT, busLocation TEXT, smCount INTEGER",
        "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
        "ENUM_CUDA_MEMCPY_OPER": "id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT",
        "CUPTI_ACTIVITY_KIND_KERNEL": act + ", demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, "
        "mangledName INTEGER, launchType INTEGER, cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, "
        "gridX INTEGER NOT NULL, gridY INTEGER NOT NULL, gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, "
        "blockY INTEGER NOT NULL, blockZ INTEGER NOT NULL, staticSharedMemory INTEGER NOT NULL, "
        "dynamicSharedMemory INTEGER NOT NULL, localMemoryPerThread INTEGER NOT NULL, "
        "localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, "
        "graphNodeId INTEGER, sharedMemoryLimitConfig INTEGER",
        "CUPTI_ACTIVITY_KIND_MEMCPY": act + ", bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, "
        "deprecatedSrcId INTEGER, srcKind INTEGER, dstKind INTEGER",
        "CUPTI_ACTIVITY_KIND_RUNTIME": "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
        "globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, "
        "callchainId INTEGER",
        "NVTX_EVENTS": "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, rangeId INTEGER, "
        "category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId INTEGER, "
        "domainId INTEGER",
    }
    for table, cols in ddl.items():
        con.execute(f"CREATE TABLE {table} ({cols})")
    con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
                    [("EXPORT_PRODUCT_VERSION", "2025.3.2.367"), ("EXPORT_SCHEMA_VERSION", "3.20.3"),
                     ("EXPORT_PARAM_TIME_NORMALIZE", "false"), ("EXPORT_PARAM_TIME_SHIFT", "0")])  # fmt: skip
    con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '', '')", [BASE_NS])
    con.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'NVIDIA H100 80GB HBM3', '0000:18:00.0', 132)")
    names = [k for k, _ in KERNELS]
    strings = [(i + 1, n) for i, n in enumerate(names)] + [
        (100 + i, n.split("(")[0].split("::")[-1][:40]) for i, n in enumerate(names)
    ]
    strings += [(200, "cudaLaunchKernel_v7000"), (201, "decode_step"), (202, "cudaMemcpyAsync_v3020")]
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", strings)
    con.executemany("INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?, ?, ?)",
                    [(1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"), (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host")])  # fmt: skip
    gtid, gpid = (4242 << 24) | 4243, 4242 << 24

    def rows():  # (kernel row, runtime row)
        t_cpu, t_gpu = 1_000_000, 1_000_000
        for i in range(kernels):
            k = i % len(KERNELS)
            t_cpu += rng.randint(2000, 6000)
            t_gpu = max(t_gpu, t_cpu + 5000) + rng.randint(500, 2000)
            dur = int(KERNELS[k][1] * 1000 * rng.uniform(0.5, 1.5))
            stream = 20 if names[k].startswith("nccl") else 7
            yield ((t_gpu, t_gpu + dur, 0, 1, None, stream, i, gpid, k + 1, 100 + k, None, 1, 0, 128, 132, 1, 1,
                    384, 1, 1, 0, 49152, 0, 0, i, 49152, None, 1),
                   (t_cpu, t_cpu + 4250, 0, gtid, i, 200, 0, None))  # fmt: skip
            t_gpu += dur

    batch_k, batch_r = [], []
    for krow, rrow in rows():
        batch_k.append(krow)
        batch_r.append(rrow)
        if len(batch_k) >= 100_000:
            con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({','.join('?' * 28)})", batch_k)
            con.executemany(
                "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?, ?, ?, ?)", batch_r
            )
            batch_k, batch_r = [], []
    if batch_k:
        con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({','.join('?' * 28)})", batch_k)
        con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?, ?, ?, ?)", batch_r)
    steps = kernels // (28 * len(KERNELS)) + 1
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 1, NULL, 7, ?, ?, 8192, 1, NULL, 0, 2)",
                    [(1_000_000 + s * 1000, 1_000_500 + s * 1000, kernels + s, gpid) for s in range(steps)])  # fmt: skip
    con.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, NULL, NULL, NULL, NULL, ?, ?, 201, 0)",
                    [(1_000_000 + s * 5_000_000, 5_999_000 + s * 5_000_000, gtid, gtid) for s in range(steps)])  # fmt: skip
    con.commit()
    con.close()


# -- measuring ---------------------------------------------------------------------------------------------


def bench(label: str, path: Path, scan: list[str], workdir: Path) -> dict:
    size = path.stat().st_size
    bare = measure(scan)
    scanned = json.loads(bare["stdout"].strip().splitlines()[-1])["rows"]
    db = workdir / f"ingest_{label}.duckdb"
    db.unlink(missing_ok=True)
    ing = measure([sys.executable, "-m", "diag.cli", "ingest", str(path), "--db", str(db), "--json"])
    payload = json.loads(ing["stdout"]) if ing["stdout"].strip() else {}
    stored = payload.get("summary", {}).get("rows", {})
    status = [f["status"] for f in payload.get("files", [])]
    db.unlink(missing_ok=True)
    shutil.rmtree(workdir / ".diag_tmp", ignore_errors=True)

    def figures(m: dict, rows: int) -> dict:
        return {"wall_s": round(m["wall_s"], 2), "mb_per_s": round(size / 1e6 / m["wall_s"], 1),
                "rows": rows, "rows_per_s": round(rows / m["wall_s"]), "peak_rss_mb": round(m["peak_rss"] / 1e6, 1)}  # fmt: skip

    out = {
        "file": label,
        "bytes": size,
        "ingest": figures(ing, sum(stored.values())),
        "bare_scan": figures(bare, scanned),
    }
    out["ingest"] |= {"status": status, "stored": stored}
    out["ratio_ingest_to_bare"] = {
        k: round(out["ingest"][k] / out["bare_scan"][k], 3) for k in ("mb_per_s", "rows_per_s", "peak_rss_mb")
    }
    return out


def print_table(results: list[dict]) -> None:
    print(
        f"{'file':<8} {'MB':>8} | {'what':<9} {'wall s':>7} {'MB/s':>8} {'rows':>11} {'rows/s':>11} {'peak RSS MB':>12}"
    )
    for r in results:
        for what in ("ingest", "bare_scan"):
            m = r[what]
            print(f"{r['file']:<8} {r['bytes'] / 1e6:>8.1f} | {what:<9} {m['wall_s']:>7.2f} {m['mb_per_s']:>8.1f} "
                  f"{m['rows']:>11,} {m['rows_per_s']:>11,} {m['peak_rss_mb']:>12.1f}")  # fmt: skip
        ratio = r["ratio_ingest_to_bare"]
        print(f"{'':<8} {'':>8} | ingest / bare: MB/s {ratio['mb_per_s']}, rows/s {ratio['rows_per_s']}, "
              f"peak RSS {ratio['peak_rss_mb']}   stored {r['ingest']['stored']} {r['ingest']['status']}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="~50 MB trace and 100k kernels")
    p.add_argument("--trace-bytes", type=float, default=None)
    p.add_argument("--kernels", type=int, default=None)
    p.add_argument("--workdir", type=Path, default=None)
    p.add_argument("--keep", action="store_true", help="keep the generated files")
    p.add_argument(
        "--epoch-ns", action="store_true", help="Kineto timestamps as 19-digit epoch µs (text path)"
    )
    a = p.parse_args(argv)
    sizes = QUICK if a.quick else FULL
    workdir = a.workdir or Path(tempfile.mkdtemp(prefix="diag-bench-cuda-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        t = time.perf_counter()
        trace, array = workdir / "rank0.pt.trace.json", workdir / "rank0.events.json"
        n = generate_kineto(trace, array, int(a.trace_bytes or sizes["trace_bytes"]), a.epoch_ns)
        t_kineto = time.perf_counter() - t
        t = time.perf_counter()
        nsys = workdir / "report1.sqlite"
        generate_nsys(nsys, a.kernels or sizes["kernels"])
        print(f"generated {trace.stat().st_size / 1e6:.0f} MB Kineto trace ({n:,} events) in {t_kineto:.1f} s, "
              f"{nsys.stat().st_size / 1e6:.0f} MB nsys export in {time.perf_counter() - t:.1f} s, under {workdir}",
              flush=True)  # fmt: skip
        results = [
            bench("kineto", trace, [sys.executable, "-c", _SCAN_JSON, str(array)], workdir),
            bench("nsys", nsys, [sys.executable, "-c", _SCAN_SQLITE, str(nsys)], workdir),
        ]
        print()
        print_table(results)
        print()
        print(json.dumps({"machine": {"cpus": os.cpu_count()}, "results": results}, separators=(",", ":")))
    finally:
        if not a.keep and a.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
