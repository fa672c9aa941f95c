"""CUDA-side parsers: nsys SQLite, nsys stats CSV, Kineto traces, ncu CSV, Nsight binary reports.

Small fixtures written from the documented formats (tests/fixtures/{nsys_stats_csv,kineto,ncu_csv}, and nsys
exports built here with sqlite3) with exact figures; then every real file of ../shared/corpus/cuda, its
figures checked against an independent reading of the source (sqlite3 / json in this file), and the HTA
temporal breakdown checked against HTA's algorithm recomputed here in plain Python.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
import sqlite3
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diag.analyses.temporal_breakdown import temporal_breakdown
from diag.store import Store
from parsers import detect_path
from parsers._base import ParseContext
from parsers._sqlite_export import Export, open_readonly, stage
from parsers.kineto_trace import us_to_ns
from tests.conftest import FIXTURES, REAL_AICPU_TRACE, cli_json, ingest_into, query

KINETO = FIXTURES / "kineto"
BASE = 1_700_000_000_000_000_000  # session start of the built nsys exports
GTID = (1 << 56) | (4242 << 24) | 4243  # serialized GlobalId: pid 4242, tid 4243
CUTLASS = (
    "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>(T1::Params)"
)
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
MANGLED = (
    "_ZN7cutlass7Kernel2I59cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8EEvNT_6ParamsE"
)


def ingest(db: Path, *paths: Path) -> list[dict]:
    with Store(db) as store:
        return [f.to_json() for f in ingest_into(store, paths).files]


# -- nsys SQLite: exports built here in the 2024+ schema (column names as nsys writes them) ------------------
def build_nsys(
    path: Path, *, meta: bool = True, kernels: bool = True, strings: dict[int, str] | None = None
) -> Path:
    con = sqlite3.connect(path)
    ddl = {
        "StringIds": "id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL",
        "TARGET_INFO_GPU": "vmId INTEGER, id INTEGER, name TEXT, busLocation TEXT, smCount INTEGER",
        "TARGET_INFO_SYSTEM_ENV": "globalVid INTEGER, devStateName TEXT, name TEXT, nameEnum INTEGER, value TEXT",
        "PROCESSES": "globalPid INTEGER, pid INTEGER, name TEXT",
        "CUPTI_ACTIVITY_KIND_RUNTIME": "start INTEGER NOT NULL, end INTEGER NOT NULL, eventClass INTEGER NOT NULL, "
        "globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL, returnValue INTEGER NOT NULL, callchainId INTEGER",
    }
    act = "start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, greenContextId INTEGER, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid INTEGER"
    if kernels:
        ddl["CUPTI_ACTIVITY_KIND_KERNEL"] = (
            act
            + ", demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, gridX INTEGER NOT NULL"
        )
        ddl["CUPTI_ACTIVITY_KIND_MEMCPY"] = (
            act + ", bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER"
        )
        ddl["CUPTI_ACTIVITY_KIND_MEMSET"] = (
            act + ", value INTEGER NOT NULL, bytes INTEGER NOT NULL, memKind INTEGER"
        )
        ddl["CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"] = (
            act + ", syncType INTEGER NOT NULL, eventId INTEGER NOT NULL"
        )
        ddl["ENUM_CUDA_MEMCPY_OPER"] = "id INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, label TEXT"
        ddl["NVTX_EVENTS"] = (
            "start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER"
        )
    if meta:
        ddl["META_DATA_EXPORT"] = "name TEXT NOT NULL, value TEXT"
        ddl["TARGET_INFO_SESSION_START_TIME"] = "utcEpochNs INTEGER, utcTime TEXT, localTime TEXT"
    for table, cols in ddl.items():
        con.execute(f"CREATE TABLE {table} ({cols})")
    names = strings or {1: CUTLASS, 2: "Kernel2", 3: MANGLED, 4: NCCL, 5: "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                        6: "cudaLaunchKernel_v7000", 7: "cuLaunchKernel", 8: "forward", 10: "", 11: "rms_norm_kernel"}  # fmt: skip
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", list(names.items()))
    con.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, 0, 'NVIDIA H100 80GB HBM3', '0000:18:00.0', 132)")
    con.executemany("INSERT INTO TARGET_INFO_SYSTEM_ENV VALUES (1, 'Local', ?, 0, ?)",
                    [("CudaDriverVersion", "12040"), ("NvDriverVersion", "550.54.15")])  # fmt: skip
    con.execute("INSERT INTO PROCESSES VALUES (?, 4242, 'python3')", [GTID >> 24 << 24])
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, ?, ?, ?, ?, 0, NULL)",
                    [(900, 950, 0, GTID, 11, 6), (960, 990, 1, GTID, 12, 7)])  # fmt: skip
    if kernels:
        k = "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 1, NULL, ?, ?, ?, ?, ?, ?, 1)"
        con.executemany(k, [(1000, 3000, 7, 11, 1, 1, 2, 3), (2500, 6500, 20, 12, 1, 4, 5, None),
                            (7000, 7500, 7, 13, 1, 10, 11, None), (8000, 8100, 7, 17, 1, 10, 2, 3)])  # fmt: skip
        m = "INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, 0, 1, NULL, 7, ?, 1, ?, ?, 0, 2)"
        con.executemany(m, [(100, 600, 14, 1048576, 1), (9000, 9300, 18, 4096, 8)])
        con.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (9500, 9600, 0, 1, NULL, 7, 15, 1, 0, 512, 2)"
        )
        con.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (9600, 9900, 0, 1, NULL, 4294967295, 16, 1, 4, 0)"
        )
        con.executemany("INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?, ?, ?)",
                        [(1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"), (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device")])  # fmt: skip
        n = "INSERT INTO NVTX_EVENTS VALUES (?, ?, ?, ?, ?, ?, ?)"
        con.executemany(n, [(-5, None, 75, "vLLM", GTID, None, 1), (800, 9800, 59, None, GTID, 8, 1),
                            (1500, 4500, 60, "decode step", GTID, None, 0), (5000, None, 34, "tick", GTID, None, 0)])  # fmt: skip
    if meta:
        con.executemany("INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
                        [("EXPORT_PRODUCT_VERSION", "2025.3.2.367"), ("EXPORT_SCHEMA_VERSION", "3.20.3"),
                         ("EXPORT_PARAM_TIME_NORMALIZE", "false"), ("EXPORT_PARAM_TIME_SHIFT", "0")])  # fmt: skip
        con.execute(
            "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '2023-11-14T22:13:20', '')", [BASE]
        )
    con.commit()
    con.close()
    return path


def test_nsys_export_exact_rows(tmp_path, db):
    export = build_nsys(tmp_path / "report1.sqlite")
    [out] = ingest(db, export)
    assert (out["status"], out["parser"], out["rows"]) == (
        "ok",
        "nsys_sqlite",
        {"device_tasks": 8, "host_ops": 5},
    )
    rows = query(db, "SELECT task_kind, task_type, name, stream, stream_id, start_ns - $b, dur_ns, connection_id, "
                     "memcpy_bytes, memcpy_direction FROM device_tasks ORDER BY start_ns".replace("$b", str(BASE)))  # fmt: skip
    assert rows == [
        (
            "MEMCPY",
            "CUDA_MEMCPY_HtoD",
            "[CUDA memcpy Host-to-Device]",
            "Stream 7",
            7,
            100,
            500,
            14,
            1048576,
            "HtoD",
        ),
        ("CUDA_KERNEL", "CUDA_KERNEL", CUTLASS, "Stream 7", 7, 1000, 2000, 11, None, None),
        ("COMMUNICATION", "CUDA_KERNEL", NCCL, "Stream 20", 20, 2500, 4000, 12, None, None),
        (
            "CUDA_KERNEL",
            "CUDA_KERNEL",
            "rms_norm_kernel",
            "Stream 7",
            7,
            7000,
            500,
            13,
            None,
            None,
        ),  # no demangled
        (
            "CUDA_KERNEL",
            "CUDA_KERNEL",
            MANGLED,
            "Stream 7",
            7,
            8000,
            100,
            17,
            None,
            None,
        ),  # short 'Kernel2' says nothing
        (
            "MEMCPY",
            "CUDA_MEMCPY_DtoD",
            "[CUDA memcpy Device-to-Device]",
            "Stream 7",
            7,
            9000,
            300,
            18,
            4096,
            "DtoD",
        ),
        ("MEMCPY", "CUDA_MEMSET", "[CUDA memset]", "Stream 7", 7, 9500, 100, 15, 512, None),
        ("SYNC", "CUDA_SYNC", "Context sync", "Context sync", None, 9600, 300, 16, None, None),
    ]
    host = query(db, f"SELECT pid, tid, process, category, name, start_ns - {BASE}, dur_ns, correlation, api_level "
                     "FROM host_ops ORDER BY start_ns")  # fmt: skip
    assert host == [
        (4242, 4243, "python3", "nvtx", "forward", 800, 9000, None, "vLLM"),
        (4242, 4243, "python3", "cuda_runtime", "cudaLaunchKernel", 900, 50, 11, None),
        (4242, 4243, "python3", "cuda_driver", "cuLaunchKernel", 960, 30, 12, None),
        (4242, 4243, "python3", "nvtx", "decode step", 1500, 3000, None, None),
        (4242, 4243, "python3", "nvtx", "tick", 5000, 0, None, None),
    ]
    run = query(
        db,
        "SELECT platform, name, device, device_name, versions::VARCHAR, start_ns - $b FROM runs".replace(
            "$b", str(BASE)
        ),
    )
    assert run[0][:4] == ("cuda", "report1.sqlite", 0, "NVIDIA H100 80GB HBM3") and run[0][5] == 100
    assert json.loads(run[0][4]) == {"nsys": "2025.3.2.367", "nsys_export_schema": "3.20.3", "cuda_driver": "12040",
                                     "nvidia_driver": "550.54.15"}  # fmt: skip
    [b] = temporal_breakdown(Store(db, read_only=True))
    assert (b.kernel_time_ns, b.idle_ns, b.compute_ns, b.non_compute_ns) == (9500, 2500, 2600, 4400)
    assert ingest(db, export)[0]["status"] == "unchanged"


def test_nsys_legacy_export_without_metadata_keeps_session_times(tmp_path, db):
    [out] = ingest(db, build_nsys(tmp_path / "legacy.sqlite", meta=False))
    assert out["status"] == "ok" and out["rows"]["device_tasks"] == 8
    [(first, versions)] = query(
        db, "SELECT min(d.start_ns), r.versions::VARCHAR FROM device_tasks d, runs r GROUP BY 2"
    )
    assert first == 100 and json.loads(versions)["nsys_export_schema"] == "legacy"


def test_nsys_export_without_gpu_activity_is_refused_with_the_reason(tmp_path, db):
    [out] = ingest(db, build_nsys(tmp_path / "runtime_only.sqlite", kernels=False))
    assert out["status"] == "failed" and out["parser"] == "nsys_sqlite"
    assert (
        "no GPU activity captured" in out["message"]
        and "cuLaunchKernel, cudaLaunchKernel_v7000" in out["message"]
    )
    assert query(db, "SELECT count(*) FROM runs") == [(0,)]


def test_nsys_time_parameters_and_table_versions(tmp_path):
    path = build_nsys(tmp_path / "x.sqlite")
    con = sqlite3.connect(path)
    con.execute("UPDATE META_DATA_EXPORT SET value = '250' WHERE name = 'EXPORT_PARAM_TIME_SHIFT'")
    con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO CUPTI_ACTIVITY_KIND_KERNEL_V2")
    con.commit()
    ex = Export(open_readonly(path))
    assert ex.offset_ns() == (BASE - 250, None) and ex.kernel_table() == "CUPTI_ACTIVITY_KIND_KERNEL_V2"
    con.execute("UPDATE META_DATA_EXPORT SET value = 'true' WHERE name = 'EXPORT_PARAM_TIME_NORMALIZE'")
    con.commit()
    assert Export(open_readonly(path)).offset_ns() == (-250, None)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40),
                min_size=1, max_size=8))  # fmt: skip
def test_nsys_strings_survive_the_sqlite_to_duckdb_path(tmp_path, names):
    path = tmp_path / "s.sqlite"
    path.unlink(missing_ok=True)
    build_nsys(path, strings=dict(enumerate(names, 100)))
    con = duckdb.connect()
    ctx = ParseContext(store=None, con=con, path=path, display="s", run_id=1, file_id=1, tmpdir=tmp_path)  # type: ignore[arg-type]
    temp = stage(
        Export(open_readonly(path)), ctx, "StringIds", {"id": ("id", "BIGINT"), "value": ("value", "VARCHAR")}
    )
    got = dict(con.execute(f"SELECT id, coalesce(value, '') FROM {temp}").fetchall())
    assert got == dict(enumerate(names, 100))


# -- nsys stats CSV ---------------------------------------------------------------------------------------
def test_nsys_stats_old_and_new_headers_banners_and_units(db):
    [out] = ingest(db, FIXTURES / "nsys_stats_csv" / "ok_concatenated_reports.csv")
    assert (out["status"], out["rows"]) == ("ok", {"kernel_stats": 6, "kernel_metrics": 7})
    rows = query(db, "SELECT report, left(name, 25), op_class, count, total_ns, avg_ns, med_ns, min_ns, max_ns, "
                     "stddev_ns, time_pct FROM kernel_stats ORDER BY report, total_ns DESC")  # fmt: skip
    assert rows == [
        (
            "cuda_gpu_kern_sum",
            "void cutlass::Kernel2<cut",
            "gemm",
            2,
            3000,
            1500.0,
            None,
            1000,
            2000,
            None,
            75.0,
        ),
        (
            "cuda_gpu_kern_sum",
            "ncclKernel_AllReduce_RING",
            "communication",
            1,
            1000,
            1000.0,
            None,
            1000,
            1000,
            None,
            25.0,
        ),
        (
            "cuda_gpu_kern_sum",
            "void at::native::vectoriz",
            "elementwise",
            3,
            600,
            200.0,
            200.0,
            100,
            300,
            100.0,
            60.0,
        ),
        (
            "cuda_gpu_kern_sum",
            "void flash::flash_fwd_spl",
            "attention_decode",
            1,
            400,
            400.0,
            400.0,
            400,
            400,
            0.0,
            40.0,
        ),
        (
            "cuda_gpu_mem_time_sum",
            "[CUDA memcpy Host-to-Devi",
            "memcpy",
            2,
            9500,
            4750.0,
            4750.0,
            1500,
            8000,
            4596.0,
            90.0,
        ),
        ("cuda_gpu_mem_time_sum", "[CUDA memset]", "memset", 1, 1056, 1056.0, 1056.0, 1056, 1056, 0.0, 10.0),
    ]
    sizes = query(db, "SELECT metric, unit, value, value_text FROM kernel_metrics ORDER BY metric")
    assert ("total", "B", 2097000.0, "2.097 MB") in sizes and ("count", "", 2.0, "2") in sizes
    assert query(db, "SELECT DISTINCT section, kernel_name FROM kernel_metrics") == [
        ("cuda_gpu_mem_size_sum", "[CUDA memcpy Host-to-Device]")
    ]


# -- Kineto ------------------------------------------------------------------------------------------------
def test_kineto_gz_exact_rows_and_run_info(db):
    [out] = ingest(db, KINETO / "ok_rank2.pt.trace.json.gz")
    assert (out["status"], out["parser"]) == ("ok", "kineto_trace")
    assert out["rows"] == {"device_tasks": 4, "host_ops": 6, "steps": 1, "links": 2}
    base = 1711964646000000000 + 4458676522000000  # baseTimeNanoseconds + the first ts
    rows = query(db, f"SELECT task_kind, task_type, stream, start_ns - {base}, dur_ns, connection_id, memcpy_bytes, "
                     "memcpy_direction FROM device_tasks ORDER BY start_ns")  # fmt: skip
    assert rows == [
        ("CUDA_KERNEL", "CUDA_KERNEL", "Stream 7", 30001, 10000, 77, None, None),
        ("COMMUNICATION", "CUDA_KERNEL", "Stream 20", 35000, 30000, 78, None, None),
        ("MEMCPY", "CUDA_MEMCPY_HtoD", "Stream 7", 70000, 4500, 79, 1048576, "HtoD"),
        ("MEMCPY", "CUDA_MEMSET", "Stream 7", 80000, 1000, 80, 4096, None),
    ]
    host = query(db, f"SELECT category, name, start_ns - {base}, dur_ns, correlation, process, input_dims "
                     "FROM host_ops ORDER BY start_ns, category")  # fmt: skip
    assert [h[:5] for h in host] == [
        ("user_annotation", "ProfilerStep#3", 0, 100000, None),
        ("python_function", "model.py(12): forward", 5000, 90000, None),
        ("cpu_op", "aten::mm", 10500, 20250, None),
        ("cuda_runtime", "cudaLaunchKernel", 15125, 5001, 77),
        ("gpu_user_annotation", "ProfilerStep#3", 30001, 50999, None),
        ("cuda_driver", "cuLaunchKernel", 40000, 3000, 81),
    ]
    assert host[2][5:] == ("python3.11", "[[8,16],[16,32]]")
    assert query(db, f"SELECT step, start_ns - {base}, end_ns - {base} FROM steps") == [(3, 0, 100000)]
    assert query(db, f"SELECT flow_cat, src_ts_ns - {base}, dst_ts_ns - {base}, dst_tid FROM links ORDER BY 1") == [
        ("ac2g", 15125, 30001, 7), ("fwdbwd", 10500, 90000, 1235)]  # fmt: skip
    run = query(db, "SELECT rank, device, device_name, versions::VARCHAR FROM runs")[0]
    assert run[:3] == (2, 0, "NVIDIA H100 80GB HBM3")
    assert json.loads(run[3]) == {"kineto_schema": 1, "cupti_version": 24, "cuda_runtime_version": 12040,
                                  "cuda_driver_version": 12040, "nccl": "2.21.5", "distributed_backend": "nccl"}  # fmt: skip
    [b] = temporal_breakdown(Store(db, read_only=True))
    assert (b.kernel_time_ns, b.idle_ns, b.compute_ns, b.non_compute_ns) == (50999, 10500, 10000, 30499)


def test_kineto_truncated_trace_stores_complete_events_as_partial(db):
    [out] = ingest(db, KINETO / "truncated_epoch_ns.pt.trace.json")
    assert out["status"] == "partial" and out["rows"]["device_tasks"] == 2 and out["rows"]["host_ops"] == 1
    assert "truncated trace" in out["message"]
    # 19 significant digits: exact only through the text, never a double
    assert query(db, "SELECT start_ns, dur_ns FROM device_tasks ORDER BY 1") == [
        (1712195495505582988, 4928), (1712195495507888958, 2080)]  # fmt: skip


def test_kineto_cut_gzip_stream_is_partial(tmp_path, db):
    data = (KINETO / "ok_rank2.pt.trace.json.gz").read_bytes()
    cut = tmp_path / "cut.pt.trace.json.gz"
    cut.write_bytes(data[: len(data) * 7 // 10])  # inflates to the middle of the memcpy event
    [out] = ingest(db, cut)
    assert out["status"] == "partial" and out["rows"]["device_tasks"] == 2 and out["rows"]["host_ops"] == 5
    assert "the metadata after the events is lost too" in out["message"]


def test_kineto_legacy_categories_and_flows(db):
    [out] = ingest(db, KINETO / "ok_legacy_capitalised.json")
    assert out["rows"] == {"device_tasks": 3, "host_ops": 2, "steps": 0, "links": 1}
    assert query(db, "SELECT task_kind, task_type, memcpy_bytes FROM device_tasks ORDER BY start_ns") == [
        ("CUDA_KERNEL", "CUDA_KERNEL", None), ("MEMCPY", "CUDA_MEMCPY_DtoH", 256), ("MEMCPY", "CUDA_MEMSET", 64)]  # fmt: skip
    assert query(db, "SELECT category, tid FROM host_ops ORDER BY 1") == [
        ("cpu_op", 44),
        ("cuda_runtime", 44),
    ]
    assert query(db, "SELECT flow_cat, rank FROM links, runs") == [("async_gpu", 1)]


@given(st.integers(min_value=0, max_value=9 * 10**18), st.sampled_from(["int", "ns3", "quoted"]))
def test_kineto_microseconds_convert_to_exact_nanoseconds(ns, form):
    us, frac = divmod(ns, 1000)
    text = {"int": str(us), "ns3": f"{us}.{frac:03d}", "quoted": f"{us}.{frac:03d}"}[form]
    expected = us * 1000 if form == "int" else ns
    assert duckdb.sql(f"SELECT {us_to_ns(repr(text))}").fetchall() == [(expected,)]


def test_detection_does_not_cross_platforms():
    assert detect_path(KINETO / "ok_rank2.pt.trace.json.gz").name == "kineto_trace"
    assert detect_path(KINETO / "ok_legacy_capitalised.json").name == "kineto_trace"
    assert detect_path(REAL_AICPU_TRACE).name == "ascend_trace_view"  # a bare array stays Ascend's


# -- ncu CSV and Nsight binary reports ---------------------------------------------------------------------
def test_ncu_details_and_raw_layouts(db):
    outs = ingest(
        db, FIXTURES / "ncu_csv" / "ok_details_no_rules.csv", FIXTURES / "ncu_csv" / "ok_raw_wide.csv"
    )
    assert [(o["status"], o["rows"]) for o in outs] == [
        ("ok", {"kernel_metrics": 6}),
        ("ok", {"kernel_metrics": 6}),
    ]
    rows = query(db, "SELECT launch_id, section, metric, unit, value, value_text FROM kernel_metrics "
                     "ORDER BY file_id, launch_id, metric")  # fmt: skip
    assert rows[:4] == [
        (0, "GPU Speed Of Light Throughput", "DRAM Frequency", "cycle/nsecond", 1.59, "1.59"),
        (0, "GPU Speed Of Light Throughput", "Duration", "usecond", 23.42, "23.42"),
        (0, "GPU Speed Of Light Throughput", "Elapsed Cycles", "cycle", 46970.0, "46,970"),
        (0, "Command line profiler metrics", "flop_count_hp.sum", None, None, "n/a"),
    ]
    assert (1, "Memory Workload Analysis", "Memory Throughput", "Gbyte/second", 1234.5, "1,234.5") in rows
    assert rows[6:] == [
        (0, "raw", "dram__bytes_read.sum", "Mbyte", 32.0, "32"),
        (0, "raw", "gpu__time_duration.sum", "usecond", 12.5, "12.5"),
        (0, "raw", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", None, "n/a"),
        (1, "raw", "dram__bytes_read.sum", "Mbyte", 4.5, "4.5"),
        (1, "raw", "gpu__time_duration.sum", "usecond", 1212.25, "1,212.25"),
        (1, "raw", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", 61.2, "61.2"),
    ]


def test_refusals_name_the_command_to_run(db):
    code, payload = cli_json("ingest", str(FIXTURES / "nsys_sqlite" / "bad_report1.nsys-rep"),
                             str(FIXTURES / "ncu_csv" / "bad_profile.ncu-rep"),
                             str(FIXTURES / "ncu_csv" / "bad_error_only.csv"), "--db", str(db))  # fmt: skip
    assert code == 1
    messages = [f["message"] for f in payload["files"]]
    assert "`nsys export --type sqlite -o bad_report1.sqlite bad_report1.nsys-rep`" in messages[0]
    assert "`ncu --import bad_profile.ncu-rep --csv --page details > bad_profile.csv`" in messages[1]
    assert "ncu wrote no metrics table: ==ERROR== Option '--section .*SpeedOfLight.*'" in messages[2]
    assert all("\n" not in m for m in messages)


# -- the real corpus ---------------------------------------------------------------------------------------
_CORPUS_DB: dict[str, object] = {}
NOT_CUDA_EXPORTS = {"PROVENANCE.md", "ncu_command.yaml", "top-kernels.yaml"} | {
    f"nsys_cmd_{s}.txt"
    for s in ("decode", "prefill", "projector", "sam")  # command lines, not exports
}
# nsys 2025.3 GPT-Neo capture: 2 CUDA API calls and no GPU table at all. Our call: refuse it, saying why
# (a run with nothing on the GPU would only show zeros); the memset-only 2025.5 export is stored instead.
REFUSED = {"report1_nsys2025.3_gptneo_runtime_only.sqlite": "no GPU activity captured"}
NSYS_KERNELS = {  # file -> (kernels, total kernel ns), also checked against sqlite3 below
    "report1_nsys2023.2_cutlass_gemm.sqlite": (6, 162000609),
    "nsys_profile_nsys2022.1_pytorch_pyprof_nvtx.sqlite": (59, 589147),
    "report1_nsys2023.1_tensorrt_nvtx.sqlite": (36, 6415244),
    "report1_nsys2021-era.sqlite": (12, 8544420),
    "report1_nsys2026.1.sqlite": (4, 536542),
    "report1_nsys2025.5_memset_runtime_only.sqlite": (0, 0),
}


@pytest.fixture
def cuda_corpus(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, dict]]:
    if not (corpus / "cuda").is_dir():
        pytest.skip("../shared/corpus/cuda is not present")
    if "db" not in _CORPUS_DB:
        db = tmp_path_factory.mktemp("cuda_corpus") / "cuda.duckdb"
        code, payload = cli_json("ingest", str(corpus / "cuda"), "--db", str(db))
        _CORPUS_DB.update(db=db, code=code, files={Path(f["path"]).name: f for f in payload["files"]})
    return corpus / "cuda", _CORPUS_DB["db"], _CORPUS_DB["files"]  # type: ignore[return-value]


def _kernel_figures(db: Path, file_id: int) -> tuple[int, int]:
    return query(db, "SELECT count(*), coalesce(sum(dur_ns), 0) FROM device_tasks "
                     "WHERE file_id = ? AND task_kind IN ('CUDA_KERNEL', 'COMMUNICATION')", [file_id])[0]  # fmt: skip


def _file_id(db: Path, name: str) -> int:
    return query(db, "SELECT file_id FROM files WHERE source LIKE ? AND status <> 'failed'", [f"%/{name}"])[
        0
    ][0]


@pytest.mark.corpus
def test_every_cuda_file_ingests_or_is_refused_for_a_stated_reason(cuda_corpus):
    _, _, files = cuda_corpus
    ours = {"nsys_sqlite", "kineto_trace", "nsys_stats_csv", "ncu_csv", "nsight_report"}
    for name, f in files.items():
        if name in NOT_CUDA_EXPORTS:
            assert f["parser"] not in ours, name
        elif name in REFUSED:
            assert f["status"] == "failed" and REFUSED[name] in f["message"], f
        else:
            assert f["status"] == "ok" and f["parser"] in ours, f
    assert sum(1 for n in files if n not in NOT_CUDA_EXPORTS) == 23  # 8 Kineto, 7 nsys, 4 stats, 4 ncu


@pytest.mark.corpus
def test_nsys_exports_match_sqlite(cuda_corpus):
    root, db, _ = cuda_corpus
    for path in sorted(root.glob("nsys-sqlite-*/*.sqlite")):
        if path.name in REFUSED:
            continue
        src = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
        tables = {r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

        def one(sql: str, table: str, default: tuple = (0, 0)) -> tuple:
            return src.execute(sql).fetchall()[0] if table in tables else default  # noqa: B023

        kernels = one(
            'SELECT count(*), coalesce(sum("end" - start), 0) FROM CUPTI_ACTIVITY_KIND_KERNEL',
            "CUPTI_ACTIVITY_KIND_KERNEL",
        )
        fid = _file_id(db, path.name)
        assert _kernel_figures(db, fid) == kernels == NSYS_KERNELS[path.name], path.name
        copies = one("SELECT count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMCPY")[0] + \
            one("SELECT count(*), sum(bytes) FROM CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_MEMSET")[0]  # fmt: skip
        assert query(
            db, "SELECT count(*) FROM device_tasks WHERE file_id = ? AND task_kind = 'MEMCPY'", [fid]
        ) == [(copies,)]
        calls = one("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_RUNTIME", (0,))[
            0
        ]
        nvtx = one(
            "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (34, 35, 37, 59, 60)", "NVTX_EVENTS", (0,)
        )[0]
        assert query(db, "SELECT count(*) FILTER (category <> 'nvtx'), count(*) FILTER (category = 'nvtx') "
                         "FROM host_ops WHERE file_id = ?", [fid]) == [(calls, nvtx)]  # fmt: skip
        if "TARGET_INFO_SESSION_START_TIME" in tables and kernels[0]:
            first = src.execute("SELECT min(k.start) + (SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME) "
                                "FROM CUPTI_ACTIVITY_KIND_KERNEL k").fetchall()[0][0]  # fmt: skip
            assert query(db, "SELECT min(start_ns) FROM device_tasks WHERE file_id = ? AND task_type = 'CUDA_KERNEL'",
                         [fid]) == [(first,)]  # fmt: skip


def _kineto_events(path: Path) -> tuple[list[dict], dict]:
    trace = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)
    return trace["traceEvents"], trace


def _ns(value: object) -> int:
    return int(Decimal(str(value)) * 1000)


@pytest.mark.corpus
def test_kineto_traces_match_json(cuda_corpus):
    root, db, _ = cuda_corpus
    for path in sorted(root.glob("hta/*.json.gz")):
        events, trace = _kineto_events(path)
        kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "Kernel")]
        fid = _file_id(db, path.name)
        expected = (len(kernels), sum(_ns(e["dur"]) for e in kernels))
        assert _kernel_figures(db, fid) == expected, path.name
        base = int(trace.get("baseTimeNanoseconds", 0))
        if kernels:
            first = min(_ns(e["ts"]) for e in kernels) + base
            assert query(db, "SELECT min(start_ns) FROM device_tasks WHERE file_id = ? AND task_type = 'CUDA_KERNEL'",
                         [fid]) == [(first,)]  # fmt: skip
        host = [e for e in events if e.get("ph") == "X" and e.get("cat") in (
            "cpu_op", "python_function", "user_annotation", "gpu_user_annotation", "cuda_runtime", "Runtime", "cuda_driver")]  # fmt: skip
        assert query(db, "SELECT count(*) FROM host_ops WHERE file_id = ?", [fid]) == [(len(host),)], (
            path.name
        )


# HTA 0.5 (hta/utils/utils.py): kernel types by name, and the temporal breakdown's merged intervals
_NCCL_RE = re.compile(r"^nccl.*Kernel")
_MEMORY_RE = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_NOT_COMPUTE_RE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")


def _union(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total, end = total + e - s, e
        elif e > end:
            total, end = total + e - end, e
    return total


def hta_temporal_breakdown(events: list[dict]) -> tuple[int, int, int, int]:
    gpu = [
        e
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") in ("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset")
    ]
    spans = [(_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])) for e in gpu]
    kernel_time = max(e for _, e in spans) - min(s for s, _ in spans)
    idle = kernel_time - _union(spans)
    compute = _union([iv for iv, e in zip(spans, gpu, strict=True)
                      if not _NCCL_RE.match(e["name"]) and not _MEMORY_RE.match(e["name"]) and not _NOT_COMPUTE_RE.match(e["name"])])  # fmt: skip
    return kernel_time, idle, compute, kernel_time - compute - idle


@pytest.mark.corpus
def test_temporal_breakdown_matches_hta_within_one_percent(cuda_corpus):
    root, db, _ = cuda_corpus
    ours = {b.run_id: b for b in temporal_breakdown(Store(db, read_only=True))}
    for path in sorted(root.glob("hta/*.json.gz")):
        run = query(db, "SELECT run_id FROM files WHERE file_id = ?", [_file_id(db, path.name)])[0][0]
        span, idle, compute, non_compute = hta_temporal_breakdown(_kineto_events(path)[0])
        b = ours[run]
        assert b.kernel_time_ns == span, path.name
        for got, want in ((b.idle_ns, idle), (b.compute_ns, compute), (b.non_compute_ns, non_compute)):
            assert abs(got - want) <= 0.01 * span, (path.name, got, want)


@pytest.mark.corpus
def test_nsys_stats_and_ncu_corpus_rows(cuda_corpus):
    root, db, files = cuda_corpus
    for path in sorted(root.glob("llm-perf-opt/nsys_cuda_gpu_kern_sum_*.csv")):
        rows = list(csv.DictReader(path.open()))
        assert query(db, "SELECT count(*), sum(total_ns), sum(count) FROM kernel_stats WHERE file_id = ?",
                     [_file_id(db, path.name)]) == [(len(rows), sum(int(r["Total Time (ns)"]) for r in rows),
                                                     sum(int(r["Instances"]) for r in rows))]  # fmt: skip
    assert {n: files[n]["rows"]["kernel_metrics"] for n in files if n.startswith("ncu_kernel")} == {
        "ncu_kernel0001_gemvx_details.csv": 48, "ncu_kernel0001_gemvx_raw_metrics.csv": 15,
        "ncu_kernel0001_gemvx_section_Occupancy.csv": 14, "ncu_kernel0001_gemvx_section_SpeedOfLight.csv": 11}  # fmt: skip
