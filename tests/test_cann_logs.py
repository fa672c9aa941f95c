"""CANN / torch_npu logs: parser (fixtures with exact figures, property test), one test per classification
rule, the root-cause analysis across ranks, ``diag logs``, the Logs page, and the real excerpts of
``../shared/corpus/cann_logs`` (each classified as its INDEX.md row says, with its key line found)."""

from __future__ import annotations

import csv
import re
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from diag.analyses import log_diagnosis as diagnosis
from diag.errors import BadInputError
from diag.store import Store
from parsers import Probe, cann_log, detect
from tests.conftest import FIXTURES, REAL_LEVEL2, ROOT, cli_json, ingest_into, run_cli

FX = FIXTURES / "cann_log"
COLS = ("record_no", "line_no", "line_count", "ts_ns", "level", "module", "pid", "tid", "process_name",
        "device_id", "rank", "source_loc", "code", "category", "rule_id", "severity", "message", "raw")  # fmt: skip


def ns(text: str) -> int:
    """'2025-06-25 10:45:23.123456' (local time, stored as if UTC) → int ns."""
    day, frac = (text.split(".") + ["0"])[:2]
    base = datetime.strptime(day, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    return int(base.timestamp()) * 1_000_000_000 + int(frac.ljust(9, "0"))


def ingest(db: Path, *paths: Path) -> tuple[Store, list]:
    store = Store(db)
    return store, ingest_into(store, paths).files


def records(store: Store) -> list[dict]:
    rows = (
        store.cursor()
        .execute(f"SELECT {', '.join(COLS)} FROM log_records ORDER BY file_id, record_no")
        .fetchall()
    )
    return [dict(zip(COLS, r, strict=True)) for r in rows]


def classify_lines(lines: list[str], plog_mode: bool = False) -> list[dict]:
    """The parser's whole pipeline but the insert, on lines in memory."""
    parsed = cann_log.mark_starts(cann_log.parse_lines(lines, 1), plog_mode)
    rec = cann_log.enrich(cann_log.group_records(parsed), None, None)
    return cann_log.classify(rec, cann_log.load_rules()).to_dicts()


# -- fixtures with exact figures -----------------------------------------------------------------------------
def test_gb18030_crlf_plog(tmp_path):
    store, files = ingest(tmp_path / "db.duckdb", FX / "ok_gb18030_crlf")
    assert [(f.status, f.parser, f.rows) for f in files] == [("ok", "cann_log", {"log_records": 4})]
    r = records(store)
    assert [x["line_no"] for x in r] == [1, 2, 3, 4]
    assert [x["ts_ns"] for x in r] == [
        ns("2025-06-25 10:45:23.123456"),
        ns("2025-06-25 10:45:23.123999"),
        ns("2025-06-25 10:45:24.000001"),  # TorchAir: a space between date and time
        ns("2025-06-25 10:45:25.500250"),
    ]
    assert [x["pid"] for x in r] == [4242] * 4
    assert [x["tid"] for x in r] == [4243, 4244, 4242, 4245]
    assert [x["process_name"] for x in r] == ["python3", None, "python3", "python3"]  # empty name: NULL
    assert [x["level"] for x in r] == ["ERROR", "WARNING", "INFO", "ERROR"]
    assert [x["module"] for x in r] == ["GE", "HCCL", "TORCHAIR", "RUNTIME"]
    assert r[0]["source_loc"] == "graph_builder.cc:88"
    assert r[0]["message"] == "BuildGraph:构建图失败, 图名称[图1]"  # GB18030 decoded, CR stripped
    assert r[1]["message"] == "[Init]通信域初始化慢, rank[3]" and r[1]["rank"] == 3
    # the GE ERROR no rule places is an honest unknown (#16)
    assert [x["category"] for x in r] == ["unclassified_error", None, "recompile", "device_exception"]
    assert not any("\r" in x["raw"] for x in r)


def test_device_log_glued_multiline_truncated(tmp_path):
    store, files = ingest(tmp_path / "db.duckdb", FX / "ok_device_glued_truncated")
    assert [(f.status, f.rows) for f in files] == [("ok", {"log_records": 6})]
    r = records(store)
    assert [(x["record_no"], x["line_no"], x["line_count"]) for x in r] == [
        (1, 1, 1), (2, 2, 1), (3, 3, 1), (4, 3, 1), (5, 4, 3), (6, 7, 1),
    ]  # fmt: skip
    assert {x["device_id"] for x in r} == {0}  # from the device-0 folder
    assert {x["pid"] for x in r} == {777}
    assert [x["tid"] for x in r] == [778, 778, 779, 779, 780, 780]
    assert r[0]["message"] == "[GetInputAndCheck]Shape must be at least rank [1] but is rank [0]"
    assert r[2]["raw"].endswith("ret[9]") and r[3]["raw"].startswith("[ERROR] HCCL(777,aicpu_scheduler)")
    assert r[3]["ts_ns"] == ns("2025-06-25 10:45:23.000400")
    multi = r[4]
    assert multi["code"] == "E39999" and multi["category"] == "device_exception"
    assert multi["raw"].count("\n") == 2 and "TraceBack (most recent call last):" in multi["message"]
    assert r[5]["message"] == "Trunca" and r[5]["level"] == "INFO"


def test_console_capture_behind_vllm_prefixes(tmp_path):
    store, _ = ingest(tmp_path / "db.duckdb", FX / "ok_console_vllm.log")
    r = records(store)
    assert [(x["line_no"], x["line_count"]) for x in r] == [
        (1, 1),
        (2, 1),
        (3, 3),
        (6, 1),
        (7, 1),
        (8, 2),
        (10, 5),
    ]
    assert {x["pid"] for x in r} == {5001} and {x["rank"] for x in r} == {1}
    assert [x["level"] for x in r] == ["INFO", "WARNING", "ERROR", "ERROR", "ERROR", "ERROR", "ERROR"]
    assert [x["code"] for x in r] == [None, None, None, "507048", "ERR00100", None, "EI0002"]
    assert [x["category"] for x in r] == [
        None, "cpu_fallback", "unclassified_error", "task_timeout", "error_wrapper", "task_timeout", "hccl_timeout",
    ]  # fmt: skip
    # vLLM's prefix has no year: it is that of the dated record of the same process (line 7), 23 s later
    assert r[0]["ts_ns"] == ns("2025-06-25 10:45:00")
    assert r[4]["ts_ns"] == ns("2025-06-25 10:45:23") and r[4]["device_id"] == 1
    assert r[6]["ts_ns"] == ns("2025-06-25 10:45:23.586187")
    assert r[6]["message"].startswith("The wait execution of the Notify register times out.")
    assert "Solution: Check the exception" in r[6]["message"]


@pytest.mark.parametrize("folder", ["ok_gb18030_crlf", "ok_device_glued_truncated", "two_ranks"])
def test_small_blocks_give_the_same_records(tmp_path, monkeypatch, folder):
    whole, _ = ingest(tmp_path / "whole.duckdb", FX / folder)
    monkeypatch.setattr(cann_log, "BLOCK_BYTES", 200)  # every block boundary inside a file
    cut, _ = ingest(tmp_path / "cut.duckdb", FX / folder)
    assert records(cut) == records(whole)


def test_bad_inputs_fail_with_one_line(tmp_path):
    store, files = ingest(tmp_path / "db.duckdb", FX / "bad_binary.log", FX / "bad_prose.txt")
    assert [f.status for f in files] == ["failed", "failed"]
    assert all("\n" not in f.message for f in files)
    assert "binary" in files[0].message
    ctx_path = FX / "bad_binary.log"  # the parser itself refuses it too, should it ever be asked
    with store.transaction() as con:
        ctx = cann_log.ParseContext(store, con, ctx_path, "bad_binary.log", None, 99, tmp_path)  # type: ignore[arg-type]
        with pytest.raises(BadInputError, match="binary"):
            cann_log.PARSER.parse(ctx)


def test_detect_claims_logs_only():
    for path in [FX / "ok_console_vllm.log", *FX.rglob("plog-*.log"), *FX.rglob("device-*.log")]:
        assert cann_log.PARSER.detect(Probe.of(path)), path
    for path in [
        FX / "bad_binary.log",
        FX / "bad_prose.txt",
        *REAL_LEVEL2.rglob("*.csv"),
        *REAL_LEVEL2.rglob("*.json"),
    ]:
        assert not cann_log.PARSER.detect(Probe.of(path)), path
        parser = detect(Probe.of(path))
        assert parser is None or parser.name != "cann_log", path


def test_same_log_twice_is_stored_once(tmp_path):
    db = tmp_path / "db.duckdb"
    code, first = cli_json("ingest", str(FX / "ok_console_vllm.log"), "--db", str(db))
    assert code == 0 and first["files"][0]["status"] == "ok" and first["files"][0]["run_id"] is None
    code, second = cli_json("ingest", str(FX / "ok_console_vllm.log"), "--db", str(db))
    assert second["files"][0]["status"] == "unchanged"


def test_log_in_a_run_folder_joins_the_run(tmp_path):
    run = tmp_path / "job" / REAL_LEVEL2.name
    shutil.copytree(REAL_LEVEL2, run)
    shutil.copytree(FX / "two_ranks" / "rank0" / "debug", run / "log" / "debug")
    db = tmp_path / "db.duckdb"
    code, payload = cli_json("ingest", str(tmp_path / "job"), "--db", str(db))
    assert code == 0
    log = next(f for f in payload["files"] if f["parser"] == "cann_log")
    assert log["status"] == "ok" and log["run_id"] is not None
    code, out = cli_json("logs", "--db", str(db), "--run", str(log["run_id"]))
    assert code == 0 and out["root_causes"][0]["category"] == "device_exception"
    store = Store(db, read_only=True)
    assert diagnosis.log_scopes(store) == [
        {"run_id": log["run_id"], "name": REAL_LEVEL2.name, "files": 1, "records": 4}
    ]
    store.close()


LEVELS = ("ERROR", "WARNING", "INFO", "DEBUG")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(LEVELS),
            st.sampled_from(("HCCL", "GE", "RUNTIME", "ASCENDCL")),
            st.integers(1, 4_000_000),
            st.integers(0, 86_399_999_999),  # µs into the day
            st.integers(0, 3),  # continuation lines
            st.booleans(),  # glued to the previous line
        ),
        min_size=1,
        max_size=40,
    ),
    st.sampled_from([150, 700, cann_log.BLOCK_BYTES]),  # small blocks: records cross block ends
)
def test_property_records_and_times(tmp_path, spec, block):
    lines, expect = [], []
    for i, (level, module, pid, us, conts, glued) in enumerate(spec):
        day = datetime(2025, 6, 25, tzinfo=UTC).timestamp()
        t = datetime.fromtimestamp(day + us / 1e6, tz=UTC)
        stamp = t.strftime("%Y-%m-%d-%H:%M:%S.") + f"{t.microsecond // 1000:03d}.{t.microsecond % 1000:03d}"
        head = f"[{level}] {module}({pid},python3):{stamp} [engine.cc:{i}] {pid + 1} Func:message {i}"
        if glued and lines and not expect[-1][2]:
            lines[-1] += head  # glued to a header line without continuations
        else:
            lines.append(head)
        lines += [f"        continuation {i}.{k}" for k in range(conts)]
        expect.append((pid, int(day * 1e6 + us) * 1000, conts))
    path = tmp_path / f"plog-{len(spec)}_20250625000000000.log"
    path.write_text("\n".join(lines) + "\n")
    default, cann_log.BLOCK_BYTES = cann_log.BLOCK_BYTES, block
    try:
        store, files = ingest(Path(tempfile.mkdtemp(dir=tmp_path)) / "db.duckdb", path)
    finally:
        cann_log.BLOCK_BYTES = default
    r = records(store)
    store.close()
    assert files[0].status == "ok"
    assert [(x["pid"], x["ts_ns"], x["message"].count("\n")) for x in r] == expect
    assert [x["record_no"] for x in r] == list(range(1, len(spec) + 1))


@pytest.mark.parametrize(
    ("line", "code", "pid", "ts"),
    [
        ("EZ9999: Inner Error!", "EZ9999", None, None),
        ("EI0006: 2024-08-05-18:15:21.270.506 Getting socket times out.", "EI0006", None, "2024-08-05 18:15:21.270506"),
        ("EZ9999: [PID: 838] 2025-09-04-09:50:11.954.378 The error from device(chipId:6, dieId:0)", "EZ9999", 838,
         "2025-09-04 09:50:11.954378"),
        ("EZ9999[PID: 244584] 2026-01-06-19:37:15.407.487 (EZ9999):  The error from device(chipId:4, dieId:1)",
         "EZ9999", 244584, "2026-01-06 19:37:15.407487"),
        ("[PID: 2103452] 2025-11-03-20:18:46.447.213 Resource_Error_Insufficient_Device_Memory(EI0011): Failed to",
         "EI0011", 2103452, "2025-11-03 20:18:46.447213"),
        ("[PID: 3448331] 2025-12-04-21:59:08.232.310 Execution Error ROCE CQE(EI0013): An error CQE occurred",
         "EI0013", 3448331, "2025-12-04 21:59:08.232310"),
        ("EH9999  [Init][Env]init env failed![FUNC:ReportInnerError][FILE:log_inner.cpp][LINE:145]", "EH9999", None, None),
        ("[ERROR] 2025-06-25-10:45:23 (PID:13075, Device:0, RankID:8) ERR00100 PTA call acl api failed", "ERR00100",
         13075, "2025-06-25 10:45:23"),
        ("[ERROR] aclrtSynchronizeStream(stream) failed: 507015 (/x/main.cpp:108)", "507015", None, None),
        ("[ERROR] RUNTIME(16243,msame):2022-09-22-11:27:01.794.510 [api_c.cc:661]16243 rtStreamSynchronize:"
         "[EXEC][DEFAULT]ErrCode=507018, desc=[aicpu exception]", "507018", 16243, "2022-09-22 11:27:01.794510"),
        ("RuntimeError: operator():build/CMakeFiles/torch_npu.dir/compiler_depend.ts:25 NPU function error: "
         "c10_npu::acl::AclrtSynchronizeStreamWithTimeout(copy_stream), error code is 507035", "507035", None, None),
        ("[W730 06:16:22.869118032 compiler_depend.ts:526] Warning: NPU warning, error code is 507048", "507048", None,
         None),
        ("[ERROR] RUNTIME(3813,python3):2025-01-10-17:53:52.846.403 [device_error_proc.cc:1409] 3813 "
         "ProcessStarsCoreErrorInfo:[INIT][DEFAULT]report error module_type=5, module_name=EZ9999", "EZ9999", 3813,
         "2025-01-10 17:53:52.846403"),
    ],
)  # fmt: skip
def test_error_code_forms(line, code, pid, ts):
    (rec,) = classify_lines([line])
    assert (rec["code"], rec["pid"], rec["ts_ns"]) == (code, pid, ns(ts) if ts else None)
    assert rec["level"] in ("ERROR", "WARNING")


# -- one test per rule ---------------------------------------------------------------------------------------
RULE_EXAMPLES = {
    "noise_cuda_import_on_ascend": "WARNING 11-26 11:43:04 [_custom_ops.py:21] Failed to import from vllm._C with ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')",
    "noise_backend_fallback": "WARNING 11-26 11:43:04 [arg_utils.py:1700] Falling back to V0 engine.",
    "noise_torch_npu_dtype_notice": "[W compiler_depend.ts:51] Warning: Device do not support double dtype now, dtype cast repalce with float. (function operator())",
    "noise_weights_loaded": "INFO 11-26 11:43:04 [default_loader.py:262] Loading weights took 12.34 seconds",
    "noise_hccl_entry": "[INFO] HCCL(3015875,python):2025-03-07-11:43:32.305.623 [hccl_opbase_atrace_info.cc:56][3017221]Entry-HcclAllReduce: tag[AllReduce_1], count[1024]",
    "noise_err_to_warn": "[WARNING] HCCL(26056,python):2025-12-30-15:08:28.046.802 [aicpu_kfc_utils.cc:387] [26068]ErrToWarn: ********* msgArea 0x12c15b400000 start print **********",
    "noise_aicpu_scheduler_warning": "[WARNING] HCCL(26056,aicpu_scheduler):2025-12-30-15:08:28.046.768 [aicpu_kfc_rpc_server.cc:335] [26068][AicpuKfcRpcServer][ReadAddrMsg] ReadValidMsg[1] timeout 80s",
    "noise_never_timeout": "[rank7]:[W609 06:57:47.819535026 compiler_depend.ts:877] Warning: The HCCL execution timeout was set to never timeout, so it is bigger than watchdog timeout 1800000ms (function ProcessGroupHCCL)",
    "noise_event_trace": "[EVENT] PROFILING(1234,python):2025-01-01-00:00:00.000.001 [msprof_callback.cc:10] >>> (tid:1235) profiling started",
    "noise_hccl_gather": "/usr/lib/python3.10/site-packages/torch_npu/distributed/distributed_c10d.py:93: UserWarning: HCCL doesn't support gather at the moment. Implemented with allgather instead.",
    "noise_legacy_dispatch": "[W LegacyTypeDispatch.h:74] Warning: AutoNonVariableTypeMode is deprecated and will be removed in 1.10 release.",
    "op_unsupported_backend": "NotImplementedError: Could not run 'aten::_fused_rms_norm' with arguments from the 'PrivateUse1' backend. This could be because the operator doesn't exist for this backend",
    "op_unsupported_soc": "EZ9903: [PID: 4122] 2026-02-03-10:01:12.338.100 support for Ascend310P3 is not implemented",
    "op_unsupported_no_operator_for_inputs": "NotImplementedError: No operator found for `memory_efficient_attention_backward` with inputs:",
    "torchrun_agent_death_signal": "WARNING:torch.distributed.elastic.agent.server.api:Received 15 death signal, shutting down workers",
    "unclassified_forked_device_init": "RuntimeError: Cannot re-initialize NPU in forked subprocess. To use NPU with multiprocessing, you must use the 'spawn' start method",
    "hccl_sdma_error": "[PID: 3480365] 2025-12-24-14:10:31.094.189 Execution_Error_SDMA(EI0012): SDMA memory copy task exception occurred. Remote rank: [4800].",
    "hccl_roce_cqe": "[ERROR] ROCE(2040034,alltoall_test):2025-09-15-08:38:12.776.612 [hns_roce_lite.c:630]hns_roce_lite_handle_error_cqe(630) : error cqe status: 0x15",
    "hccl_fftsplus_timeout": "EI9999: 2024-10-21-10:42:00.358.410  The error from device(chipId:3, dieId:0), serial number is 9, hccl fftsplus task timeout occurred during task execution, stream_id:5, sq_id:5, task_id:38827, stuck notify num:1, timeout:30min(default).",
    "device_aicpu_exception": "[ERROR] RUNTIME(16243,msame):2022-09-22-11:27:01.794.510 [api_c.cc:661]16243 rtStreamSynchronize:[EXEC][DEFAULT]ErrCode=507018, desc=[aicpu exception], InnerCode=0x715002a",
    "device_aicore_exception": "EZ9999: [PID: 838] 2025-09-04-09:50:11.954.378 The error from device(chipId:6, dieId:0), serial number is 8, there is an exception of aivec error, core id is 40, error code = 0",
    "oom_torch_npu": "RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB (NPU 0; 60.97 GiB total capacity; 10.24 GiB already allocated; 10.24 GiB current active; 19.52 MiB free; 10.65 GiB reserved in total by PyTorch)",
    "oom_implausible_size": "RuntimeError: NPU out of memory. Tried to allocate more than 1EB memory.",
    "sampling_probability_invalid": "RuntimeError: invalid multinomial distribution (sum of probabilities <= 0)",
    "unclassified_cli_argument": "vllm serve: error: argument --quantization/-q: invalid choice: 'ascend' (choose from 'awq', 'fp8')",
    "unclassified_habana_verify": "/hcl/src/platform/gaudi_common/hcl_device_control_factory.cpp::71(initDevice): The condition [ false ] failed. Invalid server type (4[OCP1]) requested to generate controller.",
    "device_task_exception_reason": "        rtStreamSynchronizeWithTimeout execute failed, reason=[task exception][FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:53]",
    "device_sdma_error": "The error from device(chipId:0, dieId:0), serial number is 9. there is a sdma error, sdma channel is 2, sdmaBlkFsmState=0x7, irqStatus=0x220000, cqeStatus=0x3",
    "version_package_not_found": "ERROR: Could not find a version that satisfies the requirement torch-npu==2.5.1.post1.dev20250619 (from versions: 2.4.0, 2.5.1, 2.6.0rc1)",
    "hccl_setup_stage": "[ERROR] HCCL(3626636,all_reduce_test):2025-11-21-13:18:47.639.882 [op_base.cc:1071] [3626636][InitGroupStage][RanktableDetect]HcclGetRootInfo failed, ret[7]",
    "unclassified_driver_device_count": "        rtGetDeviceCount execution failed, reason=driver error:internal error[FUNC:FuncErrorReason][FILE:error_message_manage.cc][LINE:65]",
    "oom_kv_cache": "(EngineCore_DP0 pid=30023) ERROR 11-26 11:43:04 [core.py:708] ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    "oom_cann": "[PID: 1613532] 2026-03-24-12:14:45.885.234 Memory_Allocation_Failure(EL0004): Failed to allocate memory.",
    "hccl_notify_timeout": "EI0002: [PID: 13075] 2025-06-25-10:45:23.586.187 The wait execution of the Notify register times out. Reason: The Notify register has not received the Notify record from remote rank: [unknown].",
    "hccl_task_run_failed": "[ERROR] HCCL(2111667,all_reduce_test):2025-10-24-11:18:29.597.044 [task_exception_handler.cc:908] [2111667][TaskExecStage][Timeout][Host]Task run failed, base information is streamID:[2], taskID[21]",
    "hccl_heartbeat": "[ERROR]HCCL(835695,all_reduce_test):2025-10-23-17:28:06.049.385[task_exception_handler.cc:610][835695][TaskExecStage][HeartbeatAbnormal]Cluster Exception Location[IP/ID]:[127.10.0.1/1], ExceptionType:[Heartbeat Lost Occurred]",
    "hccl_link_setup": "[ERROR] HCCL(2717288,python3):2025-07-23-03:49:57.177.194 [hccl_socket_manager.cc:778] [2734049][Wait][LinkEstablish]wait socket establish timeout, role[1] rank[12] timeout[120]",
    "hccl_init_failed": "[ERROR] HCCL(36035,mindie_llm_backend_connector):2025-05-13-02:25:58.068.817 [op_base.cc:974][36818][Init][CommRootInfoConfig]errNo[0x0000000005000002]HcclCommInitRootInfo failed.",
    "task_timeout": "[Error]: The execution of the internal task times out.",
    "op_unsupported_engine": "EZ3002: [PID: 141730] 2025-05-14-07:42:33.234.136 Optype [TransData] of Ops kernel [AIcoreEngine] is unsupported. Reason: [tbe-custom]:op type TransData is not found in this op store.",
    "op_not_found_aclnn": "RuntimeError: aclnnPromptFlashAttentionV3 or aclnnPromptFlashAttentionV3GetWorkspaceSize not in libopapi.so, or libopapi.sonot found.",
    "cpu_fallback_failed": "ERROR 2026-01-07 21:14:05.207 [gpu_worker.py:226] Error executing RPC: Could not run 'aten::_scaled_dot_product_efficient_attention' with arguments from the 'CPU' backend.",
    "cpu_fallback": "[W compiler_depend.ts:51] Warning: CAUTION: The operator 'torchvision::nms' is not currently supported on the NPU backend and will fall back to run on the CPU. This may have performance implications. (function npu_cpu_fallback)",
    "aicpu_fallback": "[PID: 11127] 2025-11-15-10:47:10.434.860 Operator_Missing_High-Priority_Performance(W11001): Op [node_select_scatter_1] does not hit the high-priority operator information library, which might result in compromised performance.",
    "recompile_limit_fail": "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached with fullgraph=True. Excessive recompilations can degrade performance due to the compilation overhead of each recompilation.",
    "recompile_limit": "[rank3]:W1101 02:43:40.706000 140 site-packages/torch/_dynamo/convert_frame.py:896] [1/64] torch._dynamo hit config.cache_size_limit (64)",
    "recompile_identity_guard": "[__recompiles] triggered by the following guard failure(s): - 0/0: ___check_type_id(L['self'], 9429344)",
    "recompile_guard": "[2023-11-06 14:54:08,549] torch._dynamo.guards.__recompiles: [DEBUG] Recompiling function forward in /x/resnet.py:284",
    "recompile_torchair": "[INFO] TORCHAIR(1632429,python):2025-11-07 15:37:54.655.141 [npu_fx_compiler.py:451]1632429 compiler inputs",
    "version_symbol": "ImportError: /x/torch_npu/lib/libtorch_npu.so: undefined symbol: _ZN3atb15CreateOperation",
    "version_soc": "RuntimeError: Unsupported soc version: Ascend950PR 9579",
    "version_cann_mismatch": "[W  5/ 9 20:23:15.461 .../src/driver/huawei_ascend_npu/utility.cc:57 InitializeAscendCL] CANN version mismatch. The build version is 5.1.0, but the current environment version is 5.1.2.",
    "version_init_failed": "Call aclInit(nullptr) failed : 507008 at file /work/PaddleCustomDevice/backends/npu/runtime/runtime.cc line 403",
    "version_precision_mode": "[ERROR] GE(1234,python):2025-01-01-00:00:00.000.001 [ge_api.cc:10]1234 SetPrecisionMode failed, ret = 500001",
    "jit_header_compile_error": "/tmp/x/launcher.cpp:12:5: error: use of undeclared identifier 'aclOpExecutor'",
    "code_task_timeout": "[PID: 360] 2025-12-29-13:22:34.447.110 AclNN_Runtime_Error(EZ9903): rtKernelLaunchWithHandleV2 failed: 507014",
    "code_device_exception": "NPU function error: call aclnnMatmul failed, error code is 507053",
    "code_oom": "NPU function error: call aclmdlLoadFromMem failed, error code is 245000",
    "code_hccl": "NPU function error: call aclnnAllGather failed, error code is 507056",
    "code_version_mismatch": "NPU function error: call aclrtSetDevice failed, error code is 207004",
    "code_op_unsupported": "NPU function error: call aclopCompileAndExecute failed, error code is 100024",
    "abort_watchdog": "Aborted (core dumped)",
    "vllm_worker_died": "(EngineCore_DP0 pid=1) ERROR 11-26 11:43:04 [multiproc_executor.py:149] Worker proc VllmWorker-0 died unexpectedly, shutting down executor.",
    "wrapper_pta": "[ERROR] 2025-06-25-10:45:23 (PID:13075, Device:0, RankID:8) ERR00100 PTA call acl api failed",
    "wrapper_inner_error": "EH9999: Inner Error!",
    "wrapper_code": "[ERROR] RUNTIME(16243,msame):2022-09-22-11:27:01.794.400 [error_message_manage.cc:49]16243 module_name=EE8888 reason report",
    "unclassified_error": "ERROR 11-26 11:43:04 [scheduler.py:512] Grammar compilation backend returned an invalid bitmask",
    "gloo_collective_timeout": "[rank2]: RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms for recv operation to complete",
    "unclassified_traceback_cut": "ERROR 11-08 11:01:30 [core.py:502] Traceback (most recent call last):",
    "oom_kv_pool_profiled_nonpositive": "[2025-05-12 09:13:01 TP0] max_total_tokens=20480 is larger than the profiled value -1022. Use the profiled value instead.",
    # issue #16, from the train half of tests/fixtures/logs_wild (w1_060, w1_048, w1_070, w1_058)
    "unclassified_error_words": "mooncake: transfer engine could not register the buffer at 0x7f3a00000000",
    "noise_etcd_key_not_found": "E20251114 15:03:20.951929 57571 etcd_client.cpp:104] etcd get XLLM:SERVICE:MASTER failed: etcd-cpp-apiv3: key not found",
    "noise_vllm_ascend_c_import": "ERROR 04-28 16:10:09 camem.py:69] Failed to import vllm_ascend_C:No module named 'vllm_ascend.vllm_ascend_C'",
    "task_timeout_reason": "EE9999[PID: 818] 2026-08-13-15:31:21.888.208 (EE9999):  The error from device(chipId:5, dieId:0), serial number is 1, event wait timeout occurred during task execution, stream_id:44",
    "inner_error_message": "EZ9999[PID: 17833] 2025-12-23-07:36:19.237.396 (EZ9999):  HCCL_BUFFSIZE is too SMALL, maxBs = 512, h = 2048, epWorldSize = 2",
    "abort_signal_handler": "[2024-02-27 16:09:19,106 E 19394 19394] logging.cc:361: *** SIGSEGV received at time=1709021359 on cpu 44 ***",
    "unclassified_exception_code": "[Question]: RuntimeError: aclnnCausalConv1dGetWorkspaceSize failed with aclnnStatus=561002.",
    "version_missing_module": "ModuleNotFoundError: No module named 'tbe'",
    "hccl_watchdog_timeout": "[rank1]:[E324 13:00:25.428029551 compiler_depend.ts:574] [Rank 1] Watchdog caught collective operation timeout: WorkHCCL(SeqNum=196, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800079 milliseconds before timing out.",
    "abort_process_group_teardown": "[rank1]:[E324 13:00:25.428107952 compiler_depend.ts:634] To avoid data inconsistency, we are taking the entire process down.",
    "version_compiler_builtin_header": "Exception: An error occurred during compile phases of CompileStage.PRECOMPILE, msg is <built-in>:1:10: fatal error: '__clang_cce_runtime_wrapper.h' file not found",
    "op_unsupported_dtype": "[PID: 235311] 2026-08-03-15:41:28.117.010 AclNN_Parameter_Error(EZ1001): Tensor self not implemented for DT_UINT64, should be in dtype support list [DT_FLOAT,DT_INT32].",
    "oom_engine_phrase": "[2025-11-25 17:23:11,888] [249] [281471718846752] [llm] [ERROR] [logging.py-348] : Warmup failed, because of multimodal model inference out of memory when `maxInputTokenLen` set to 8192.",
    "version_kernel_binary": "EZ9999: [PID: 5625] 2025-09-19-14:34:08.166.059 Parse dynamic kernel config fail.",
    "version_package_mismatch_warning": "/vllm-workspace/vllm-omni/vllm_omni/version.py:55: RuntimeWarning: vLLM and vLLM-Omni appear to have mismatched major/minor versions:",
    "abort_shell_killed": "start.sh: line 38: 14328 Killed vllm serve /home/data3/weights/MiniMax-M2.7-w8a8-quarot --tensor-parallel-size 8",
    # round 5 (#16): the families of tests/test_log_families.py
    "op_unsupported_family": "RuntimeError: FlashAttention only supports Ampere GPUs or newer.",
    "c10d_store_retry": "[W210 09:54:57.125243957 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host 10.0.0.1:29400 - retrying (try=0, timeout=60000ms, delay=15196ms)",
    "c10d_store_timeout": "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
    "c10d_heartbeat_monitor": "[PG ID 0 PG GUID 0(default_pg) Rank 3] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=1",
    "torchrun_child_failed": "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
    "torchrun_worker_exit": "E0521 15:43:03.000000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 14750) of binary: /usr/bin/python3",
    # round 6 (#16): more in tests/test_log_rules_round6.py
    "hccl_notify_wait_device": "The error from device(chipId:4, dieId:0), serial number is 1, notify wait timeout occurred during task execution, stream_id:142, sq_id:146, task_id:46645, notify_id=155, timeout=204s.",
    "device_error_envelope": "The error from device(chipId:0, dieId:0), serial number is 3,",
    "unclassified_dcmi_code": "dcmi module initialize failed. ret is -8005",
    # round 11 (#16): more in tests/test_log_rules_round11.py
    "abort_engine_process_died": "ERROR 01-04 21:58:22 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting down client.",
    "abort_child_killed": "RuntimeError: DataLoader worker (pid 28123) is killed by signal: Killed.",
    "abort_glibc_heap_check": "double free or corruption (!prev)",
    "abort_shell_signal_localized": "已放弃 (核心已转储)",
    # round 14 (#16): more in tests/test_log_rules_round14.py
    "oom_startup_free_memory": "ValueError: Free memory on device cuda:1 (19.77/22.05 GiB) on startup is less than desired GPU memory utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    "abort_host_oom_killed": "[1234567.891011] Out of memory: Killed process 3453 (python3) total-vm:230840864kB, anon-rss:200812880kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:400000kB oom_score_adj:0",
    "abort_exit_status_signal": "vllm-1 exited with code 137",
    "abort_dataloader_shm_bus_error": "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
    "abort_native_check_failed": "(TaskRunner pid=2915798) [2025-07-06 07:14:27,052 C 2915798 2915798] task_receiver.cc:219:  Check failed: objects_valid ",
    "task_timeout_python": "(EngineCore_DP0 pid=32080) ERROR 03-08 17:31:28 [core.py:1102] TimeoutError",
    "unclassified_glog_status": "E20260106 06:43:02.966156  5793 ascend_direct_transport.cpp:820] Failed to connect to target: 172.17.0.16:25482, status: 103900",
}


def test_every_rule_has_an_example_and_compiles_everywhere():
    rules = cann_log.load_rules()
    # the CUDA / ROCm / XPU rules' (rules/log_patterns_cuda.toml) examples are in tests/test_log_cuda.py
    elsewhere = ("cuda_", "rocm_", "xpu_")
    assert [r.id for r in rules if r.id not in RULE_EXAMPLES and not r.id.startswith(elsewhere)] == []
    assert len({r.id for r in rules}) == len(rules)
    for r in rules:
        if r.pattern:
            re.compile(r.pattern)  # Python re (tests, docs) and Rust regex (Polars, below) both accept it
        assert r.severity in {"high", "medium", "low", "info", "none"}, r.id
        assert r.role in {"cause", "symptom", "consequence", "wrapper", "noise"}, r.id
        assert r.explanation and r.fix, r.id
    categories = diagnosis.log_rules()["category"]
    assert {r.category for r in rules} <= set(categories)


@pytest.mark.parametrize("rule_id", list(RULE_EXAMPLES))
def test_rule(rule_id):
    rec = classify_lines([RULE_EXAMPLES[rule_id]])
    assert len(rec) == 1
    assert rec[0]["rule_id"] == rule_id, rec[0]


def test_noise_is_never_flagged():
    lines = [RULE_EXAMPLES[k] for k in RULE_EXAMPLES if k.startswith("noise_")]
    for rec in classify_lines(lines):
        assert rec["severity"] == "none" and rec["category"] == "info_noise", rec


def test_error_codes_table_covers_rule_codes():
    with open(ROOT / "diag" / "rules" / "error_codes.csv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(line for line in fh if not line.startswith("#")))
    assert all(r["code"] and r["component"] and r["meaning"] and r["typical_fix"] for r in rows)
    codes = {r["code"] for r in rows}
    assert len(codes) == len(rows)
    assert {c for r in cann_log.load_rules() for c in r.codes} <= codes | set(diagnosis.error_codes())


# -- root causes ---------------------------------------------------------------------------------------------
def test_root_cause_across_two_ranks(tmp_path):
    store, files = ingest(tmp_path / "db.duckdb", FX / "two_ranks")
    assert [f.status for f in files] == ["ok", "ok"]
    causes = diagnosis.root_causes(store)
    first, second = causes[0], causes[1]
    assert (first.rank, first.category, first.role, first.ranks, first.echo_of) == (
        1, "device_exception", "cause", [0], None,
    )  # fmt: skip
    assert first.first_ns == ns("2025-06-25 10:45:00.100200")
    assert first.evidence[0].line_no == 2 and "module_name=EZ9999" in first.evidence[0].raw
    assert {c["code"] for c in first.codes} == {"EZ9999", "507035"}
    assert (second.category, second.role, second.ranks, second.echo_of) == ("hccl_timeout", "symptom", [1], 1)
    assert second.episode == first.episode  # 1836 s apart: the same failure
    assert "EI0002" in {c["code"] for c in second.codes}
    findings = diagnosis.log_findings(store)
    assert [f.category for f in findings] == ["log:device_exception", "log:hccl_timeout"]
    assert findings[0].severity == "high" and findings[0].suggestion and "echo of #1" in findings[1].title


def test_wrapper_names_the_code_beneath(tmp_path):
    store, _ = ingest(tmp_path / "db.duckdb", FX / "ok_console_vllm.log")
    causes = diagnosis.root_causes(store)
    assert causes[0].category == "hccl_timeout"  # EI0002 explains the 507048 task timeout next to it
    wrapper = next(c for c in causes if c.category == "error_wrapper")
    assert wrapper.evidence[0].code == "ERR00100" and wrapper.evidence[0].wraps == "EI0002"


def test_log_evidence_for_fallback_ops(tmp_path):
    store, _ = ingest(tmp_path / "db.duckdb", FX / "ok_console_vllm.log")
    found = diagnosis.log_evidence_for_ops(store, None, ["IsIn", "MatMul"])
    assert found["MatMul"] == []
    assert [diagnosis.split_ref(r) for r in found["IsIn"]] == [(1, 2)]


# -- command line and page -----------------------------------------------------------------------------------
def test_cli_logs_json_and_table(tmp_path):
    db = tmp_path / "db.duckdb"
    code, _ = cli_json("ingest", str(FX / "two_ranks"), "--db", str(db))
    assert code == 0
    code, out = cli_json("logs", "--db", str(db))
    assert code == 0 and set(out) >= {
        "db",
        "run",
        "root_causes",
        "records",
        "records_shown",
    }  # keys are only added
    top = out["root_causes"][0]
    assert top["category"] == "device_exception" and top["rank"] == 1 and top["evidence"][0]["line_no"] == 2
    assert set(top) >= {
        "episode",
        "severity",
        "role",
        "echo_of",
        "codes",
        "ranks",
        "files",
        "explanation",
        "fix",
    }
    assert out["records"][0]["severity"] == "high" and out["records_shown"] == len(out["records"])
    proc = run_cli("logs", "--db", str(db))
    assert (
        proc.returncode == 0
        and "device_exception" in proc.stdout
        and "[TaskExecStage][Timeout][Host]" in proc.stdout
    )
    proc = run_cli("logs", "--db", str(db), "--run", "999")
    assert proc.returncode == 1 and "no run 999" in proc.stderr


def test_logs_page(tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    db = tmp_path / "app.duckdb"
    code, _ = cli_json("ingest", str(FX / "two_ranks"), str(FX / "ok_console_vllm.log"), "--db", str(db))
    assert code == 0
    monkeypatch.setenv("DIAG_DB", str(db))
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=60)
    at.run()
    at.switch_page("app_pages/07_logs.py").run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Logs"
    heads = [m.value for m in at.markdown if m.value.startswith("**#")]
    assert "**#1**" in heads[0] and "Device exception" in heads[0]
    at.multiselect(key="logs_category").select("hccl_timeout").run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    assert set(table["category"]) == {"hccl_timeout"} and len(table) == 3
    assert "▶" in at.code[-1].value


# -- the real excerpts ---------------------------------------------------------------------------------------
KEY_LINES = {
    "001_aivec_ez9999_vllm_ascend_2763.log": "there is an exception of aivec error",
    "002_aivec_ez9999_llama4_vllm_ascend_1972.log": "there is an aivec error exception",
    "003_fftsplus_aivector_507015_vllm_ascend_5661.log": "exception of fftsplus aivector error",
    "004_aicore_extend_info_mindspore_mindone_269.log": "there is an aicore error",
    "005_aclrt_sync_recenterrmsg_ez9999_ptoas_482.log": "aclrtSynchronizeStream(stream) failed: 507015",
    "006_oom_vllm_ascend_19.log": "NPU out of memory. Tried to allocate 22.00 MiB",
    "007_oom_ray_hccl_watchdog_err99999_vllm_ascend_1127.log": "Tried to allocate 30.00 MiB (NPU 3",
    "008_oom_torch_outofmemoryerror_sglang_29838.log": "torch.OutOfMemoryError: NPU out of memory",
    "009_oom_sdpa_cogvideo_63.log": "Tried to allocate 35.31 GiB",
    "010_cpu_fallback_nms_isin_mineru_1695.log": "The operator 'torchvision::nms' is not currently supported",
    "011_cpu_fallback_then_fail_sdpa_vllm_omni_755.log": "The operator 'aten::_scaled_dot_product_efficient_attention'",
    "012_cpu_fallback_transformer_encoder_ascend_pytorch_51.log": "aten::_transformer_encoder_layer_fwd",
    "013_op_unsupported_transdata_310p_vllm_ascend_811.log": "Optype [TransData] of Ops kernel [AIcoreEngine] is unsupported",
    "014_hccl_ei0002_notify_timeout_507048_vllm_ascend_1443.log": "The wait execution of the Notify register times out",
    "015_el0004_memory_pool_init_ptoas_341.log": "Memory_Allocation_Failure(EL0004)",
    "016_eh9999_aicpu_exception_507018_vllm_ascend_2105.log": "reason=[aicpu exception]",
    "017_hccl_plog_socket_listen_establish_timeout_vllm_ascend_1955.log": "wait socket establish timeout, role[1] rank[12]",
    "018_hccl_ei0006_allreduce_err01100_vllm_ascend_486.log": "EI0006: [PID: 1292363]",
    "019_hccl_commrootinfo_failed_mindie_gpustack_2021.log": "HcclCommInitRootInfo failed",
    "020_hccl_connect_timeout_detect_transport_init_vllm_ascend_10591.log": "Transport init error!",
    "021_hccp_rdma_init_port_down_ej0002_vllm_ascend_1815.log": "rdma init fail",
    "022_hccl_ei0006_old_format_fallback_llamafactory_5071.log": "EI0006: 2024-08-05-18:15:21.270.506 Getting socket times out",
    "023_hccl_links_establish_empty_pname_vllm_ascend_9872.log": "[LinksEstablishCompleted] is failed. ret[9].",
    "024_vector_core_abnormal_507035_ascend_pytorch_66.log": "error code is 507035",
    "025_recompile_limit_size_mismatch_ranks_pytorch_139474.log": "hit config.cache_size_limit (64)",
    "026_recompiling_function_guard_failures_pytorch_110325.log": "Recompiling function forward",
    "027_torchair_compile_symbolic_shapes_info.log": "1632429 compiler inputs",
    "028_version_atb_undefined_symbol_cann850_ascend_pytorch_99.log": "undefined symbol: _ZN3Mki",
    "029_version_torch_npu_undefined_symbol_atb_vllm_ascend_117.log": "undefined symbol: _ZN3atb",
    "030_eh9999_init_env_failed_500001_ascend_pytorch_7.log": "init env failed",
    "031_warning_hccl_aicpu_kfc_driver241_vllm_ascend_5468.log": "ErrToWarn:",
    "032_version_cann_mismatch_paddle_lite_10514.log": "CANN version mismatch",
    "033_version_unsupported_soc_ascend950_rlinf_1577.log": "Unsupported soc version: Ascend950PR",
    "034_aicpu_hostcpu_w11001_pid_format_ofdm_npu.log": "Op [node_select_scatter_1] does not hit the high-priority",
    "035_hccl_task_exception_timeout_plog_hicann_hccl.log": "Task run failed, base information is streamID:[2]",
    "036_info_hccl_entry_comminit_runplog_grep_hicann_hccl.log": "Entry-HcclCommInitRootInfoInner",
    "037_hccl_ei0012_sdma_fftsplus_runtime_hicann_hccl.log": "Execution_Error_SDMA(EI0012)",
    "038_hccl_ei0013_roce_cqe_hicann_hccl.log": "Execution Error ROCE CQE(EI0013)",
    "039_hccl_heartbeat_cluster_exception_nospace_hicann_hccl.log": "ExceptionType:[Heartbeat Lost Occurred]",
    "040_info_hccl_entry_allreduce_hicann_hccl.log": "Entry-HcclAllReduce",
    "041_hccl_ei0006_link_establish_full_plog_hicann_hccl.log": "wait socket establish timeout, role[1] rank[1] timeout[120 s]",
    "042_oom_ei0011_qp_device_memory_hicann_hccl.log": "Resource_Error_Insufficient_Device_Memory(EI0011)",
    "043_aiv_hccl_kernel_failed_runtime_hicann_hccl.log": "fault kernel_name=aiv_all_reduce",
    "044_version_geinit_compiler_init_failed_vllm_ascend_564.log": "GEInitialize failed",
    "045_driver_aclinit_507008_ee1001_paddle_72458.log": "Call aclInit(nullptr) failed : 507008",
    "046_op_not_found_aclnn_libopapi_lightning_indexer_vllm_ascend_5056.log": "aclnnLightningIndexerGetWorkspaceSize not in libopapi.so",
    "047_op_not_found_aclnn_pfa_v3_vllm_8054.log": "aclnnPromptFlashAttentionV3 or",
    "048_err99999_attribute_error_fla_npu_321.log": "module 'torch_npu' has no attribute 'ops'",
    "049_aicore_timeout_trap_plog_ez9999_hiascend.log": "there is an aivector error exception",
    "050_aicore_kernel_failed_args_realdiv_plog_hiascend.log": "fault kernel_name=RealDiv_",
    "051_aicpu_exception_e39999_host_and_device_log_hiascend.log": "retCode=0x2a, [aicpu exception]",
    "052_info_warning_noise_hccl_gather_typedstorage_ascend_pytorch_54.log": "HCCL doesn't support gather",
    "053_info_warning_noise_legacy_dispatch_fastchat_2422.log": "AutoNonVariableTypeMode is deprecated",
}


@pytest.fixture
def cann_corpus(corpus: Path) -> Path:
    folder = corpus / "cann_logs"
    if not (folder / "INDEX.md").is_file():
        pytest.skip("../shared/corpus/cann_logs is not present")
    return folder


def index_categories(folder: Path) -> dict[str, str]:
    rows = re.findall(r"^\| `([^`]+\.log)` \| [^|]+\| `(\w+)` \|", (folder / "INDEX.md").read_text(), re.M)
    return dict(rows)


@pytest.mark.corpus
def test_corpus_index_and_key_lines_agree(cann_corpus):
    categories = index_categories(cann_corpus)
    assert len(categories) == 53 and set(categories) == set(KEY_LINES)
    assert {p.name for p in cann_corpus.glob("*.log")} == set(KEY_LINES)


@pytest.mark.corpus
@pytest.mark.parametrize("name", sorted(KEY_LINES))
def test_corpus_file(cann_corpus, tmp_path, name):
    expected = index_categories(cann_corpus)[name]
    store, files = ingest(tmp_path / "db.duckdb", cann_corpus / name)
    assert [(f.status, f.parser) for f in files] == [("ok", "cann_log")], files[0].message
    rows = records(store)
    key = [r for r in rows if KEY_LINES[name] in r["raw"]]
    assert key, f"key line {KEY_LINES[name]!r} not in any record"
    assert expected in {r["category"] for r in key}, [(r["category"], r["raw"][:80]) for r in key]
    causes = diagnosis.root_causes(store)
    if expected == "info_noise":
        assert not [c for c in causes if c.severity in ("high", "medium")], causes
        assert not [f for f in diagnosis.log_findings(store) if f.severity in ("high", "medium")]
    else:
        assert causes and causes[0].category == expected, [(c.category, c.role) for c in causes]
    known = diagnosis.error_codes()
    assert {r["code"] for r in rows if r["code"]} <= set(known)
    store.close()


@pytest.mark.parametrize(
    ("code", "component", "meaning"),
    [
        ("EZ9999", "operators / host API", "Inner error"),  # in the catalog: its own words
        ("EL0099", "driver", "error (from the code's spelling"),  # no registry defines EL0099
        ("EB9999", "TBE pass compiler", "inner error (from"),
        ("W41001", "TEFUSION / TBE front end", "warning (from"),
        ("ERR01011", "torch_npu OPS", "timeout (from"),
        ("ERR02200", "torch_npu DIST", "DIST call hccl api failed"),
        ("507099", "runtime / ACL return code", "unknown (from"),
        ("XYZ", "", ""),
    ],
)
def test_codes_outside_the_catalog_are_described_by_their_spelling(code, component, meaning):
    entry = diagnosis.describe_code(code)
    assert entry["code"] == code and entry["component"] == component
    assert entry["meaning"].startswith(meaning)


@pytest.mark.parametrize(
    ("line", "category"),
    [
        # a code named in the middle of a line (not where the code extractor looks) still classifies it
        ("[ERROR] DRV(1234,python):2026-03-24-12:14:45.885.234 [devmm.c:88]5678 halMemAlloc failed EL0004: Failed to allocate memory.", "oom"),
        ("RuntimeError: create stream failed, EI0011 Insufficient device memory", "oom"),
        ("[ERROR] RUNTIME(9,python):2025-01-02-03:04:05.006.007 [stream.cc:1]9 fftsplus task execute failed, device_id=0", "device_exception"),
        ("RuntimeError: rank 3 reported EI0008 while initialising the communicator", "version_mismatch"),
        # rtGetDevMsg fails once the context / device is gone (w1_035, w1_049): an unknown, not a version issue
        ("EE1001: [PID: 77] 2025-02-03-04:05:06.007.008 The argument is invalid.Reason: rtGetDevMsg failed", "unclassified_error"),
        # a pid or size that happens to spell a runtime code is not one
        ("[ERROR] GE(507048,python):2025-01-02-03:04:05.006.007 [graph.cc:1]507048 build graph done", "unclassified_error"),  # a pid, not a code; an unplaced ERROR (#16)
    ],
)  # fmt: skip
def test_codes_mentioned_mid_line(line, category):
    rec = classify_lines([line])
    assert len(rec) == 1 and rec[0]["category"] == category, rec[0]


def test_a_progress_bar_glued_before_a_log_line_is_cut_off():
    """A tqdm bar whose carriage return was lost in a copy is dropped; the log line glued to it is read (#16)."""
    from parsers._log_grammar import split_lines

    glued = (
        "Processed prompts:   0%|          | 0/4 [00:00<?, ?it/s, est. speed input: 0.00 toks/s, output: 0.00 toks/s]"
        "[rank0]:V0925 13:34:27.040958 139966991710016 torch/_dynamo/guards.py:2609] [0/7] Recompiling function forward"
    )
    alone = "Processed prompts: 100%|██████████| 4/4 [00:01<00:00,  3.10it/s]"
    assert split_lines(f"{glued}\n{alone}\n") == [
        "[rank0]:V0925 13:34:27.040958 139966991710016 torch/_dynamo/guards.py:2609] [0/7] Recompiling function forward",
        alone,  # a bar with nothing glued to it stays as it is
    ]
