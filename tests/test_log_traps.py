"""Log records say only what their own lines say (issue #15): the trap gallery of the log parser, and one test
per shape of the code and figure rules files.

Each trap under ``tests/fixtures/traps/<class>/`` is a small real-shaped input (README.md there says where its
shape comes from); each test ingests it and asserts the exact records, origins, codes, times and figures."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from parsers import _log_codes, _log_figures, cann_log
from tests.conftest import FIXTURES
from tests.test_cann_logs import classify_lines, ingest, ns

TRAPS = FIXTURES / "traps"
COLS = ("record_no", "line_no", "line_count", "ts_ns", "level", "pid", "rank", "device_id", "origin", "code",
        "codes", "figures", "category", "raw")  # fmt: skip
GIB, MIB = 2**30, 2**20


def records(tmp_path: Path, *files: Path) -> list[dict]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    store, ingested = ingest(tmp_path / "db.duckdb", *files)
    assert [f.status for f in ingested] == ["ok"] * len(files), [f.message for f in ingested]
    rows = store.cursor().execute(f"SELECT {', '.join(COLS)} FROM log_records ORDER BY file_id, record_no")
    out = [dict(zip(COLS, r, strict=True)) for r in rows.fetchall()]
    store.close()
    for r in out:
        r["figures"] = json.loads(r["figures"]) if r["figures"] else None
    return out


# -- 1 + 2: records never span two sources; rank, pid, time are the record's own -----------------------------
MIXED = TRAPS / "mixed_console_two_processes" / "console.log"
RANK1, ENGINE, PLOG = "rank1", "EngineCore_DP0 pid=1228", "pid 2717288"


def test_mixed_console_records_never_span_two_sources(tmp_path):
    r = records(tmp_path, MIXED)
    # (first line, origin, lines of the record): rank1's traceback keeps its four lines around the plog line
    # and the engine's lines; the engine's traceback goes on after the blank line (not in rank1's EI0006) and
    # around the unprefixed EL0004 block, which keeps its own indented lines
    assert [(x["line_no"], x["origin"], x["raw"].count("\n") + 1) for x in r] == [
        (1, RANK1, 4),
        (3, PLOG, 1),
        (6, ENGINE, 1),
        (7, ENGINE, 5),
        (8, PLOG, 1),
        (9, RANK1, 1),
        (10, RANK1, 1),
        (11, RANK1, 1),
        (15, "pid 1613532", 4),
        (20, ENGINE, 1),
    ]
    assert all(x["raw"].startswith("[rank1]:") for x in r if x["origin"] == RANK1)
    assert all(
        ln.startswith("(EngineCore_DP0") for x in r if x["origin"] == ENGINE for ln in x["raw"].split("\n")
    )
    assert not any(ln.startswith("(") for ln in r[8]["raw"].split("\n"))
    assert (r[3]["line_count"], r[0]["line_count"]) == (13, 5)  # first to last line, others' lines between
    assert r[3]["raw"].endswith("ctypes.CDLL(path)")
    assert [(x["code"], x["category"]) for x in r[7:]] == [
        ("EI0006", "hccl_timeout"),
        ("EL0004", "oom"),
        (None, "version_mismatch"),  # the engine's OSError: the 507033 line after it is the EL0004 block's
    ]
    assert r[8]["codes"] == ["EL0004", "507033"] and r[9]["codes"] is None


def test_mixed_console_rank_pid_time_are_the_records_own(tmp_path):
    r = records(tmp_path, MIXED)
    assert [(x["rank"], x["pid"], x["device_id"]) for x in r] == [
        (1, None, None),  # the [rank1] prefix: its own origin's rank
        (12, 2717288, None),  # rank[12] in its own text, pid from its own header
        (None, 1228, None),
        (None, 1228, None),
        (None, 2717288, None),
        (1, None, None),
        (1, 1292363, 1),  # (PID:1292363, Device:1, RankID:1)
        (1, 1292363, None),
        (None, 1613532, None),  # RecentErrMsg: [PID: 1613532]
        (None, 1228, None),  # the engine core states no rank: none borrowed from [rank1] lines around it
    ]
    assert [x["ts_ns"] for x in r] == [
        None,
        ns("2025-07-23 03:49:57.177194"),
        None,  # vLLM's stamp has no year and no record of the same origin has one: not borrowed from others
        None,
        ns("2025-07-23 03:49:57.177265"),
        None,
        ns("2025-04-08 18:07:20"),
        ns("2025-04-08 18:07:20.444436"),
        ns("2026-03-24 12:14:45.885234"),  # its own stamp, after RecentErrMsg: [PID: n]
        None,
    ]


def test_a_source_that_starts_mid_record_keeps_its_lines_together():
    lines = [  # the paste of corpus 013, then of 014 (which begins inside a traceback)
        "EZ3002: [PID: 141730] 2025-05-14-07:42:33.234.136 Optype [TransData] of Ops kernel [AIcoreEngine] is "
        "unsupported.",
        '(train pid=8464)   File "/usr/local/python3.10.16/lib/python3.10/site-packages/vllm-ascend/vllm_ascend/'
        'attention.py", line 856, in forward',
        "(train pid=8464)     torch.npu.synchronize()",
        "(train pid=8464) RuntimeError: npuSynchronizeDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:479 "
        "NPU function error: AclrtSynchronizeDeviceWithTimeout, error code is 507048",
    ]
    rec = classify_lines(lines)
    assert [(r["line_no"], r["raw"].count("\n") + 1, r["origin"]) for r in rec] == [
        (1, 1, "pid 141730"),
        (2, 2, "train pid=8464"),
        (4, 1, "train pid=8464"),
    ]


def test_concatenated_pastes_do_not_run_into_each_other():
    lines = [  # corpus 003 ends with an error-manager record, corpus 004 begins with indented lines of its own
        "EZ9999[PID: 244584] 2026-01-06-19:37:15.407.487 (EZ9999):  The error from device(chipId:4, dieId:1), "
        "serial number is 2, exception of fftsplus aivector error",
        "",
        "        The extend info from device(0), serial number is 111, there is aicore error, core id is 20",
    ]
    rec = classify_lines(lines)
    assert [(r["line_no"], r["dev"], r["pid"]) for r in rec] == [(1, None, 244584), (3, 0, None)]


@pytest.mark.corpus
def test_a_concatenation_of_the_corpus_gives_each_file_its_own_records(corpus, tmp_path):
    files = sorted((corpus / "cann_logs").glob("*.log"))
    if not files:
        pytest.skip("../shared/corpus/cann_logs is not present")
    text, spans, first = "", [], 1
    for path in files:  # one console capture: every excerpt, a blank line between them
        body = path.read_text(encoding="utf-8").rstrip("\n") + "\n"
        spans.append((path, first, first + body.count("\n") - 1))
        text, first = text + body + "\n", first + body.count("\n") + 1
    (tmp_path / "all.log").write_text(text, encoding="utf-8")
    keys = ("line_no", "raw", "ts_ns", "level", "pid", "rank", "device_id", "code", "codes", "category")
    together = [{k: r[k] for k in keys} for r in records(tmp_path / "all", tmp_path / "all.log")]
    differ = []
    for path, lo, hi in spans:
        alone = [{k: r[k] for k in keys} for r in records(tmp_path / path.stem, path)]
        for r in alone:
            r["line_no"] += lo - 1
        if alone != [r for r in together if lo <= r["line_no"] <= hi]:
            differ.append(path.name)
    assert (
        differ == [] and len(together) == 234
    )  # 235 before round 7: a TORCH_LOGS message over lines is one record


SOURCES = (  # (line prefix, record header, continuation) of three processes writing to one console
    ("(VllmWorker TP0 pid=961) ", "ERROR 06-25 10:45:23 [worker.py:581] Traceback (most recent call last):",
     'ERROR 06-25 10:45:23 [worker.py:581]   File "/x/worker.py", line {k}, in execute'),
    ("[rank6]:", "[W625 10:45:23.024496247 compiler_depend.ts:57] Warning: EZ9999: Inner Error!",
     "        TraceBack (most recent call last): {k}"),
    ("", "[ERROR] HCCL(2717288,python3):2025-07-23-03:49:57.177.194 [hccl.cc:1] [2734049]wait socket timeout",
     "        continuation {k}"),
)  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), min_size=1, max_size=12), st.randoms())
def test_property_interleaved_sources_keep_their_records(spec, rnd):
    per_source: list[list[str]] = [[], [], []]
    expect: list[list[str]] = [[], [], []]
    for i, (src, conts) in enumerate(spec):
        prefix, head, cont = SOURCES[src]
        lines = [prefix + head] + [prefix + cont.format(k=f"{i}.{k}") for k in range(conts)]
        per_source[src] += lines
        expect[src].append("\n".join(lines))
    queues, console = [list(q) for q in per_source], []
    while any(queues):  # any interleaving that keeps each process's own order, as `tee` of several does
        q = rnd.choice([q for q in queues if q])
        console.append(q.pop(0))
    got: list[list[str]] = [[], [], []]
    source_of = {"VllmWorker TP0 pid=961": 0, "rank6": 1, "pid 2717288": 2}
    for r in classify_lines(console):
        got[source_of[r["origin"]]].append(r["raw"])
    assert got == expect


def _records_by_file(db: Path, files: list[Path]) -> dict[str, list[tuple]]:
    store, ingested = ingest(db, *files)
    assert {f.status for f in ingested} == {"ok"}
    rows = store.cursor().execute(
        "SELECT f.relpath, l.* EXCLUDE (run_id, file_id, ts_ns) FROM log_records l JOIN files f USING (file_id) "
        "ORDER BY f.relpath, l.record_no"
    )
    out: dict[str, list[tuple]] = {}
    for row in rows.fetchall():
        out.setdefault(Path(row[0]).name, []).append(row[1:])
    store.close()
    return out


def _small_blocks_differ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: list[Path]) -> list[str]:
    """The files whose records change when blocks are cut every 300 bytes (inside every other record).

    ts_ns is left out: a yearless stamp takes its year from a dated record of the same block only."""
    whole = _records_by_file(tmp_path / "whole.duckdb", files)
    monkeypatch.setattr(cann_log, "BLOCK_BYTES", 300)
    cut = _records_by_file(tmp_path / "cut.duckdb", files)
    assert len(whole) == len(files)
    return sorted(name for name in whole if whole[name] != cut.get(name))


def test_block_cuts_never_split_a_prefixed_console_record(tmp_path, monkeypatch):
    files = []
    for src in (FIXTURES / "cann_log" / "ok_console_vllm.log", TRAPS / "code_mid_line" / "console.log",
                TRAPS / "oom_figures" / "console.log"):  # fmt: skip
        files.append(tmp_path / f"{src.parent.name}.log")
        files[-1].write_bytes(src.read_bytes())
    assert _small_blocks_differ(tmp_path, monkeypatch, files) == []


@pytest.mark.corpus
def test_block_cuts_never_split_a_corpus_record(corpus, tmp_path, monkeypatch):
    files = sorted((corpus / "cann_logs").glob("*.log"))
    if not files:
        pytest.skip("../shared/corpus/cann_logs is not present")
    assert _small_blocks_differ(tmp_path, monkeypatch, files) == []


# -- 3: codes anywhere in a record, classification by code ---------------------------------------------------
def test_codes_mid_line_are_listed_and_classify(tmp_path):
    folder = TRAPS / "code_mid_line"
    r = records(tmp_path, folder / "console.log", folder / "plog-16243_20220922112701791.log")
    assert [(x["line_no"], x["codes"], x["code"], x["category"]) for x in r] == [
        (1, ["507018"], "507018", "device_exception"),
        (2, None, None, "device_exception"),
        (4, ["EH9999"], "EH9999", "device_exception"),
        (6, ["EH9999", "507018"], "507018", "device_exception"),  # the runtime code, not its wrapper
        (8, ["EZ9999", "507048"], "507048", "task_timeout"),  # `synchronize stream failed, runtime result =`
        (1, ["0x2a"], None, "device_exception"),  # a hex retCode is listed, never the primary code
        (2, ["507018"], "507018", "device_exception"),  # ErrCode=507018 (InnerCode=0x715002a is no code)
        (3, ["EE8888"], "EE8888", "error_wrapper"),  # a wrapper code alone (#16)
    ]
    assert [x["level"] for x in r[:5]] == ["WARNING", "ERROR", "ERROR", "ERROR", "ERROR"]


@pytest.mark.parametrize(
    ("line", "codes", "code", "rule_id"),
    [
        ("EZ9999: Inner Error!\n        synchronize stream failed, runtime result = 507048[FUNC:ReportCallError]",
         ["EZ9999", "507048"], "507048", "task_timeout"),
        ("[ERROR] 2025-06-25-10:45:23 (PID:1, Device:0, RankID:8) ERR00100 PTA call acl api failed",
         ["ERR00100"], "ERR00100", "wrapper_pta"),
        ("RuntimeError: ERR99999 UNKNOWN applicaiton exception; EI0002: wait timeout", ["ERR99999", "EI0002"],
         "EI0002", "hccl_notify_timeout"),
        ("[ERROR] GE(507048,python):2025-01-02-03:04:05.006.007 [graph.cc:1]507048 build graph done", None, None,
         "unclassified_error"),  # a pid, not a code; an ERROR no rule places: honest unknown (#16)
    ],
)  # fmt: skip
def test_primary_code_is_the_most_specific(line, codes, code, rule_id):
    (rec,) = classify_lines(line.split("\n"))
    assert (rec["codes"], rec["code"], rec["rule_id"]) == (codes, code, rule_id)


# -- 4: logger prefixes keep their level and time ------------------------------------------------------------
def test_logger_prefixes_keep_level_and_time(tmp_path):
    r = records(tmp_path, TRAPS / "logger_prefix" / "console.log")
    assert [(x["line_no"], x["level"], x["ts_ns"]) for x in r] == [
        (1, "INFO", ns("2025-04-11 10:12:08.927596")),  # glog: the year of the next dated record, 0.65 s on
        (2, None, None),
        (3, "ERROR", ns("2025-04-11 10:12:09.580593")),
        (4, "INFO", ns("2025-04-11 10:12:10.694284")),  # INFO:root: <CANN stamp>
        (5, "ERROR", ns("2025-04-11 10:12:11.694")),  # [2025-04-11 10:12:11,694] [ERROR]
        (6, "ERROR", ns("2025-04-11 10:12:12")),  # vLLM ERROR 04-11 10:12:12 [engine.py:400]
        (8, "ERROR", ns("2025-04-11 10:12:13.000120")),  # glog E0411
        (9, "INFO", None),  # glog I0413: two days from every dated record, the year is not guessed
    ]
    assert r[5]["raw"].count("\n") == 1 and "GEInitialize failed." in r[5]["raw"]  # vLLM's re-emitted GE line


# -- 5: OOM figures ------------------------------------------------------------------------------------------
def test_oom_figures(tmp_path):
    r = records(tmp_path, TRAPS / "oom_figures" / "console.log")
    npu_ray = {"requested_bytes": 30 * MIB, "device": 3, "capacity_bytes": round(60.96 * GIB),
               "allocated_bytes": round(60.34 * GIB), "active_bytes": round(60.34 * GIB),
               "free_bytes": round(14.24 * MIB), "reserved_bytes": round(60.60 * GIB)}  # fmt: skip
    npu_new = {"requested_bytes": 72 * MIB, "device": 0, "capacity_bytes": round(61.27 * GIB),
               "allocated_bytes": round(56.05 * GIB), "active_bytes": round(56.05 * GIB),
               "free_bytes": round(5.04 * MIB), "reserved_bytes": round(58.39 * GIB)}  # fmt: skip
    cuda = {"requested_bytes": round(22.78 * GIB), "device": 0, "capacity_bytes": round(31.47 * GIB),
            "free_bytes": round(12.73 * GIB), "process_in_use_bytes": round(18.73 * GIB),
            "allocated_bytes": round(9.08 * GIB), "reserved_unallocated_bytes": round(9.35 * GIB)}  # fmt: skip
    kv_small = {"max_model_len": 32000, "kv_cache_needed_bytes": round(1.1 * GIB),
                "kv_cache_bytes": round(0.59 * GIB), "estimated_max_model_len": 17000}  # fmt: skip
    assert [x["figures"] for x in r] == [
        npu_ray, npu_new, cuda, {"kv_cache_bytes": round(-23.55 * GIB)}, None, kv_small,
    ]  # fmt: skip
    assert [x["category"] for x in r] == ["oom", "oom", "oom", "oom", "oom", "oom"]
    assert [x["device_id"] for x in r[:3]] == [3, 0, None]


# -- the rules files: one example per shape ------------------------------------------------------------------
CODE_EXAMPLES = {
    "cann": ("RecentErrMsg: EZ9999: Inner Error! (EI0002): module_name=E39999 W11001", ["EZ9999", "EI0002",
             "E39999", "W11001"]),
    "torch_npu": ("[ERROR] 2025-06-25-10:45:23 (PID:1, Device:0, RankID:8) ERR00100 PTA call acl api failed",
                  ["ERR00100"]),
    "runtime": ("aclrtSynchronizeStream(stream) failed: 507015; ErrCode=507018; error code is 507035; "
                "runtime result = 507048; Call aclInit(nullptr) failed : 507008; ACL error 500002; "
                "failed with aclnnStatus=561002", ["507015", "507018", "507035", "507048", "507008", "500002",
                "561002"]),
    "hccl": ("HCCL function error: HcclAllReduce(a, b), error code is 9; call trace: hcclRet -> 4", ["HCCL:9", "HCCL:4"]),
    "hccl_errno": ("[Init]errNo[0x0000000005000009] timeout; [Link]errNo[0x000000000501000c] fail", ["HCCL:9", "HCCL:12"]),
    "dcmi": ("dcmi model initialized failed, because the device is used. ret is -8020", ["DCMI:-8020"]),
    "task_return": ("Kernel task happen error, retCode=0x31, [vector core exception].", ["0x31"]),
    # CUDA side (the examples of tests/test_log_cuda.py hold the real lines)
    "cuda_named": ("code=700(cudaErrorIllegalAddress) \"cudaDeviceSynchronize()\"", ["CUDA:cudaErrorIllegalAddress"]),
    "cuda_message": ("RuntimeError: CUDA error: an illegal memory access was encountered",
                     ["CUDA:cudaErrorIllegalAddress"]),
    # NCCL's CUDACHECK under "ncclUnhandledCudaError: … Last error:" (w3_050)
    "nccl_cuda_failure": ("(VllmWorker rank=7 pid=240) Cuda failure 'out of memory'", ["CUDA:cudaErrorMemoryAllocation"]),
    # TensorRT-LLM's check() and llama.cpp's ggml-cuda allocator: the CUDA error string after the call
    "cuda_call_message": ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 144817.04 MiB on device 0: cudaMalloc "
                          "failed: out of memory", ["CUDA:cudaErrorMemoryAllocation"]),
    "cuda_number": ("CUDA error 2 at kernel.cu:12", ["CUDA:cudaErrorMemoryAllocation"]),
    "nccl_named": ("ncclSystemError: System call (e.g. socket, malloc) or external library call failed",
                   ["NCCL:ncclSystemError"]),
    "nccl_message": ("NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled cuda error (run with NCCL_DEBUG=INFO for "
                     "details), NCCL version 2.18.1", ["NCCL:ncclUnhandledCudaError"]),
    "cublas": ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx( handle)`",
               ["CUBLAS:CUBLAS_STATUS_NOT_SUPPORTED"]),
    "cudnn": ("RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED", ["CUDNN:CUDNN_STATUS_EXECUTION_FAILED"]),
    # ROCm / XPU (tests/test_log_codes_rocm_xpu.py: the printers' formats, the categories)
    "hip_named": ("hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
                  ["HIP:hipErrorNoBinaryForGpu"]),
    "hip_message": ("RuntimeError: HIP error: an illegal memory access was encountered", ["HIP:hipErrorIllegalAddress"]),
    "hip_number": ("HIP error 700 at attn.hip:91", ["HIP:hipErrorIllegalAddress"]),
    "rocblas": ("rocblas_gemm_ex failed: rocblas_status_internal_error", ["ROCBLAS:rocblas_status_internal_error"]),
    "hipblas": ("RuntimeError: CUDA error: HIPBLAS_STATUS_NOT_SUPPORTED when calling `hipblasGemmEx(handle, …)`",
                ["HIPBLAS:HIPBLAS_STATUS_NOT_SUPPORTED"]),
    "ur": ("RuntimeError: Native API failed. Native API returns: 20 (UR_RESULT_ERROR_DEVICE_LOST)",
           ["UR:UR_RESULT_ERROR_DEVICE_LOST"]),
    "ze": ("zeCommandQueueSynchronize returned ZE_RESULT_ERROR_DEVICE_LOST", ["ZE:ZE_RESULT_ERROR_DEVICE_LOST"]),
    "pi_named": ("RuntimeError: Native API failed. Native API returns: -5 (PI_ERROR_OUT_OF_RESOURCES) -5 "
                 "(PI_ERROR_OUT_OF_RESOURCES)", ["PI:PI_ERROR_OUT_OF_RESOURCES"]),
    "pi_message": ("Native API failed. Native API returns: -999 (Unknown PI error) -999 (Unknown PI error)",
                   ["PI:PI_ERROR_UNKNOWN"]),
}  # fmt: skip

FIGURE_EXAMPLES = {
    "torch_oom_caching_allocator": (
        "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total capacity; 49.47 GiB "
        "already allocated; 51.12 GiB current active; 1.20 GiB free; 57.55 GiB reserved in total by PyTorch)",
        {"requested_bytes": 2 * GIB, "device": 0, "capacity_bytes": round(60.97 * GIB),
         "allocated_bytes": round(49.47 * GIB), "active_bytes": round(51.12 * GIB), "free_bytes": round(1.2 * GIB),
         "reserved_bytes": round(57.55 * GIB)},
    ),
    "cuda_oom_since_torch_2_1": (
        "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a total capacty of "
        "6.00 GiB of which 0 bytes is free. Of the allocated memory 2.93 GiB is allocated by PyTorch, and 2.30 GiB "
        "is reserved by PyTorch but unallocated.",
        {"requested_bytes": round(1.7 * GIB), "device": 0, "capacity_bytes": 6 * GIB, "free_bytes": 0,
         "allocated_bytes": round(2.93 * GIB), "reserved_unallocated_bytes": round(2.3 * GIB)},
    ),
    "vllm_kv_cache_too_small": (
        "ValueError: To serve at least one request with the models's max seq len (32000), (1.1 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (0.59 GiB).",
        {"max_model_len": 32000, "kv_cache_needed_bytes": round(1.1 * GIB), "kv_cache_bytes": round(0.59 * GIB)},
    ),
    "vllm_available_kv_cache": (
        "(EngineCore pid=258) INFO gpu_worker.py:440 Available KV cache memory: 0.56 GiB",
        {"kv_cache_bytes": round(0.56 * GIB)},
    ),
    "vllm_v0_memory_profile": (
        "INFO 02-10 12:52:23 worker.py:249] the current vLLM instance can use total_gpu_memory (79.22GiB) x "
        "gpu_memory_utilization (0.90) = 71.29GiB; the rest of the memory reserved for KV Cache is 50.11GiB.",
        {"capacity_bytes": round(79.22 * GIB), "gpu_memory_utilization": 0.9, "budget_bytes": round(71.29 * GIB),
         "kv_cache_bytes": round(50.11 * GIB)},
    ),
    "vllm_model_loading": (
        "(EngineCore pid=258) INFO gpu_model_runner.py:4879 Model loading took 2.89 GiB memory and 60.29 seconds",
        {"weights_bytes": round(2.89 * GIB)},
    ),
    "gpu_memory_utilization_setting": (
        "INFO 03-30 03:00:50 [utils.py:233] non-default args: {'model': 'q', 'gpu_memory_utilization': 0.92}; "
        "vllm serve q --gpu-memory-utilization 0.85",
        {"gpu_memory_utilization": 0.92},
    ),
    "cann_failed_to_allocate": (
        "[PID: 2103452] 2025-11-03-20:18:46.447.213 Resource_Error_Insufficient_Device_Memory(EI0011): Failed to "
        "allocate [2097152] bytes of NPU memory.",
        {"requested_bytes": 2097152},
    ),
    "cann_malloc_failed_size": (
        "[ERROR] RUNTIME(1,python):2026-01-01-00:00:00.000.001 [mem.cc:9]1 rtMalloc failed, size=1073741824",
        {"requested_bytes": GIB},
    ),
    "cuda_oom_private_pools": (
        "Of the allocated memory 22.88 GiB is allocated by PyTorch, with 24.00 MiB allocated in private pools (e.g., "
        "CUDA Graphs), and 275.38 MiB is reserved by PyTorch but unallocated.",
        {"allocated_bytes": round(22.88 * GIB), "private_pool_bytes": 24 * MIB,
         "reserved_unallocated_bytes": round(275.38 * MIB)},
    ),
    # the start-up memory profile (issue #19; the real excerpts are tests/fixtures/memory_logs/)
    "vllm_loading_model_weights_gb": (
        "[model_runner_v1.py:2114] Loading model weights took 56.6034 GB", {"weights_bytes": round(56.6034 * GIB)},
    ),
    "vllm_model_loading_and_seconds": (
        "INFO [model_runner.py:1115] Model loading took 6.5935 GiB and 7.243515 seconds",
        {"weights_bytes": round(6.5935 * GIB)},
    ),
    "vllm_v0_profile_split": (
        "INFO 01-16 09:40:00 worker.py:238] model weights take 19.86GiB; non_torch_memory takes -0.05GiB; PyTorch "
        "activation peak memory takes 36.63GiB; the rest of the memory reserved for KV Cache is -7.83GiB.",
        {"weights_bytes": round(19.86 * GIB), "non_torch_bytes": round(-0.05 * GIB),
         "activation_peak_bytes": round(36.63 * GIB), "kv_cache_bytes": round(-7.83 * GIB)},
    ),
    "vllm_v0_6_profile_results": (
        "INFO 12-06 14:55:15 worker.py:232] Memory profiling results: total_gpu_memory=7.92GiB "
        "initial_memory_usage=0.37GiB peak_torch_memory=0.71GiB memory_usage_post_profile=0.39GiB "
        "non_torch_memory=0.15GiB kv_cache_size=6.27GiB gpu_memory_utilization=0.90",
        {"capacity_bytes": round(7.92 * GIB), "non_torch_bytes": round(0.15 * GIB),
         "kv_cache_bytes": round(6.27 * GIB), "gpu_memory_utilization": 0.9},
    ),
    "vllm_v1_profile_result": (
        "DEBUG Memory profiling takes 17.96 seconds. Total non KV cache memory: 17.12GiB; torch peak memory "
        "increase: 1.89GiB; non-torch forward increase memory: 0.25GiB; weights memory: 14.99GiB.",
        {"non_kv_cache_bytes": round(17.12 * GIB), "activation_peak_bytes": round(1.89 * GIB),
         "non_torch_bytes": round(0.25 * GIB), "weights_bytes": round(14.99 * GIB)},
    ),
    "vllm_v0_device_blocks": (
        "INFO 02-23 21:39:03 executor_base.py:111] # npu blocks: 35511, # CPU blocks: 4681", {"num_blocks": 35511},
    ),
    "vllm_ascend_0_7_1_blocks_misprint": (
        "INFO 02-10 12:52:23 executor_base.py:110] # CPU blocks: 35064, # CPU blocks: 2730", {"num_blocks": 35064},
    ),
    "vllm_kv_cache_size_tokens": (
        "INFO 04-24 16:33:13 [kv_cache_utils.py:634] GPU KV cache size: 158,656 tokens", {"kv_cache_tokens": 158656},
    ),
    "vllm_max_concurrency": (
        "INFO 04-24 16:33:13 [kv_cache_utils.py:637] Maximum concurrency for 32,768 tokens per request: 4.84x",
        {"max_model_len": 32768, "max_concurrency": 4.84},
    ),
    "vllm_free_memory_on_startup": (
        "ValueError: Free memory on device cuda:1 (19.77/22.05 GiB) on startup is less than desired GPU memory "
        "utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
        {"free_bytes": round(19.77 * GIB), "capacity_bytes": round(22.05 * GIB), "gpu_memory_utilization": 0.9,
         "budget_bytes": round(19.84 * GIB)},
    ),
    "vllm_ascend_actual_usage": (
        "INFO 04-15 06:30:01 [worker.py:575] Actual usage: 1.14 GiB for weights, 0.22 GiB for peak activation, 0.13 "
        "GiB for non-torch memory, 0.04 GiB for NPU graph memory.",
        {"weights_bytes": round(1.14 * GIB), "activation_peak_bytes": round(0.22 * GIB),
         "non_torch_bytes": round(0.13 * GIB)},
    ),
    "max_model_len_setting": (
        "INFO 04-11 12:37:49 [llm_engine.py:242] Initializing a V0 LLM engine (v0.8.3) with config: dtype=torch.float16, "
        "max_seq_len=8192, download_dir=None", {"max_model_len": 8192},
    ),
    "hccl_device_memory_resource": (
        "Failed to allocate resource[DeviceMemory] with info [size:2147483648]. Reason: Memory resources are exhausted.",
        {"requested_bytes": 2147483648},
    ),
}  # fmt: skip


def _shape_ids(path: Path) -> list[str]:
    with open(path, "rb") as fh:
        return [s["id"] for s in tomllib.load(fh)["shape"]]


def test_every_code_and_figure_shape_has_an_example():
    assert _shape_ids(_log_codes.CODES_PATH) == list(CODE_EXAMPLES)
    assert _shape_ids(_log_figures.FIGURES_PATH) == list(FIGURE_EXAMPLES)
    for path in (_log_codes.CODES_PATH, _log_figures.FIGURES_PATH):
        with open(path, "rb") as fh:
            for shape in tomllib.load(fh)["shape"]:
                re.compile(shape["pattern"])  # Python re (here) and Rust regex (Polars, the examples) agree


@pytest.mark.parametrize("shape_id", list(CODE_EXAMPLES))
def test_code_shape(shape_id):
    line, codes = CODE_EXAMPLES[shape_id]
    (rec,) = classify_lines([line])
    assert rec["codes"] == codes


@pytest.mark.parametrize("shape_id", list(FIGURE_EXAMPLES))
def test_figure_shape(shape_id):
    line, figures = FIGURE_EXAMPLES[shape_id]
    (rec,) = classify_lines([line])
    assert json.loads(rec["figures"]) == figures


def test_no_figures_without_numbers():
    lines = ["NPU out of memory. Tried to allocate more than 1EB memory",
             "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when",
             "[PID: 2103452] 2025-11-03-20:18:46.447.213 Resource_Error_Insufficient_Device_Memory(EI0011): Failed "
             "to allocate [size: [0.25MB, 3MB], Affected by QP depth configuration.] bytes of NPU memory."]  # fmt: skip
    assert [r["figures"] for r in classify_lines(lines)] == [None, None, None]


def test_rule_regexes_are_ascii_in_polars():
    from parsers._log_regex import ascii_regex

    rx = ascii_regex(r"(?:^|[^\w])[EWI][0-9A-Z]\d{4}\b|C:\\bin")
    assert rx == r"(?:^|[^[0-9A-Za-z_]])[EWI][0-9A-Z][0-9]{4}(?-u:\b)|C:\\bin"
    (rec,) = classify_lines(["错误 EZ9999：设备异常 ≫ EI0002"])  # codes next to non-ASCII text
    assert rec["codes"] == ["EZ9999", "EI0002"]  # a full-width colon after a code still ends its word
