"""Log rules of round 6 (issue #16): the mechanisms behind the w4 / w5 TRAIN misses, each tested on a documented
wording (its source in the rule's comment) and on the train excerpt it failed on.

* the device's "The error from device(…)" envelope places nothing on its own: its description does (an HCCL FFTS+
  task timeout wrapped over lines is no AI Core exception by proximity); a notify wait timeout is HCCL's;
* vLLM's "# GPU blocks: 0" is the KV-cache OOM even when the traceback after it is cut;
* a DCMI (npu-smi) return code is an unclassified error with its code and meaning, never nothing;
* a glog ERROR line that names a status code is an unclassified error;
* c10d's "Some NCCL operations have failed or timed out" notice only echoes the watchdog record that names the op, and
  torch_npu's fixed "[Error]: <text of the code>" block only echoes the runtime's reason record;
* the blank line NCCL prints before each WARN line does not cut the console into two pasted captures, nor do the
  blank lines around Python's "The above exception was the direct cause of the following exception:".

Only train files of w4 / w5 are read (``bench.log_accuracy.half_of``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.log_accuracy import WILD, diagnose, half_of
from diag.analyses import log_diagnosis
from diag.analyses.error_codes import describe_code
from diag.store import Store
from tests._wild import assert_line_gets_rule, assert_top_cause
from tests.conftest import ingest_into
from tests.test_cann_logs import classify_lines

# (train file, category of the top root cause, its severity, a substring of its lead evidence record's raw text)
TRAIN_CASES = [
    # "The error from device(…)," alone on its line, the HCCL description on the next: the description decides
    (
        "w5_001_glm52_hccl_fftsplus_task_timeout_vllm_ascend_16652.log",
        "hccl_timeout",
        "high",
        "hccl fftsplus task timeout occurred during task execution,",
    ),
    # a Notify Wait task of the device expired: the collective-timeout class, not a compute task timeout
    (
        "w5_050_pd_decode_notify_wait_timeout_204s_dsv4_flash_a3_vllm_ascend_12487.log",
        "hccl_timeout",
        "high",
        "notify wait timeout occurred during task execution, stream_id:142",
    ),
    # 0 KV-cache blocks, the ValueError cut off after "Traceback"
    (
        "w5_027_gpu_blocks_zero_before_traceback_qanything_302.log",
        "oom",
        "high",
        "# GPU blocks: 0, # CPU blocks: 256",
    ),
    # npu-smi's DCMI failures: an error with a code
    (
        "w5_028_npu_smi_dcmi_init_failed_8005_in_container_vllm_ascend_2698.log",
        "unclassified_error",
        "medium",
        "dcmi module initialize failed. ret is -8005",
    ),
    (
        "w5_029_npu_smi_dcmi_device_is_used_8020_cann_image_46.log",
        "unclassified_error",
        "medium",
        "dcmi model initialized failed, because the device is used. ret is -8020",
    ),
    # the watchdog record that names the collective leads, not c10d's generic notice before it
    (
        "w5_002_nccl_watchdog_allreduce_save_model_openrlhf_1126.log",
        "hccl_timeout",
        "high",
        "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=460631",
    ),
    # the runtime's reason record leads torch_npu's fixed "[Error]: The aicore execution times out." text for 507014
    (
        "w4_020_npu_sync_device_507014_aicore_timeout_worker_died_dsv31_vllm_ascend_5509.log",
        "task_timeout",
        "high",
        "rtDeviceSynchronizeWithTimeout execute failed, reason=[aicore timeout]",
    ),
    # the first NCCL WARN (the connect that failed) leads: NCCL's blank lines keep the console one episode
    (
        "w5_012_nccl_socket_connect_abort_proxy_connect_nccl_tests_166.log",
        "hccl_timeout",
        "high",
        "NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed",
    ),
]


@pytest.mark.parametrize(
    ("file", "category", "severity", "key"), TRAIN_CASES, ids=[c[0][:6] for c in TRAIN_CASES]
)
def test_train_excerpt_top_cause_and_lead_line(file: str, category: str, severity: str, key: str) -> None:
    assert_top_cause(file, category, severity, key)


# (line as its source prints it, rule id, category); sources in the rules' comments
WORDINGS = [
    # device_error_proc.cc: the envelope without its description (a report wrapped over lines)
    (
        "The error from device(chipId:0, dieId:0), serial number is 3,",
        "device_error_envelope",
        "unclassified_error",
    ),
    # ... with a core exception description: still an AI Core / AI Vector exception (shared/formats/cann_logs.md §4.3)
    (
        "The error from device(chipId:6, dieId:0), serial number is 8, there is an exception of aivec error, core id "
        "is 40, error code = 0, dump info: pc start: 0x1244, current: 0x1248.[FUNC:ProcessStarsCoreErrorInfo]"
        "[FILE:device_error_core_proc.cc][LINE:303]",
        "device_aicore_exception",
        "device_exception",
    ),
    # ... with an HCCL FFTS+ timeout / a notify wait / an event wait description
    (
        "EI9999  The error from device(chipId:5, dieId:0), serial number is 3, hccl fftsplus task timeout occurred "
        "during task execution, stream_id:7, sq_id:7, task_id:5990, stuck notify num:1, timeout:1836.",
        "hccl_fftsplus_timeout",
        "hccl_timeout",
    ),
    (
        "The error from device(chipId:4, dieId:0), serial number is 1, notify wait timeout occurred during task "
        "execution, stream_id:142, sq_id:146, task_id:46645, notify_id=155, timeout=204s."
        "[FUNC:ProcessStarsWaitTimeoutErrorInfo][FILE:device_error_proc.cc][LINE:1587]",
        "hccl_notify_wait_device",
        "hccl_timeout",
    ),
    (
        "The error from device(chipId:5, dieId:0), serial number is 1, event wait timeout occurred during task "
        "execution, stream_id:44, sq_id:5, task_id:61293, event_id=55, timeout=1868.",
        "task_timeout_reason",
        "task_timeout",
    ),
    # a core report wrapped over lines: its continuation names the kind by its own fields / the FUNC that printed it
    (
        "aicore error, core id is 18, error code = 0, dump info: pc start: 0x124000000388, current: 0x1240",
        "device_aicore_exception",
        "device_exception",
    ),
    (
        "stream_id:2, task_id:19016, errcode:21008, msg:inner error.[FUNC:ProcessStarsAicpuErrorInfo]"
        "[FILE:device_error_proc.cc][LINE:1232]",
        "device_aicpu_exception",
        "device_exception",
    ),
    # the plog form names the printing function before the message (cann_logs.md §4.2): its kind, even when the
    # description is cut off or paraphrased
    (
        "[ERROR] RUNTIME(216,):2026-07-24-02:51:31.964.908 [device_error_proc.cc:1644]273 ProcessStarsAicpuErrorInfo:"
        "The error from device(chipId:0, dieId:0), serial number is 6,",
        "device_aicpu_exception",
        "device_exception",
    ),
    (
        "11:05:31.653  ProcessStarsAicpuErrorInfo: error from device(chipId:0,dieId:0), exception during AICPU execution",
        "device_aicpu_exception",
        "device_exception",
    ),
    # vLLM executors' "# %s blocks: %d, # CPU blocks: %d" with 0 device blocks, GPU and NPU forks
    ("INFO 04-27 10:13:05 llm_engine.py:275] # GPU blocks: 0, # CPU blocks: 256", "oom_kv_cache", "oom"),
    ("INFO 01-02 03:04:05 [executor_base.py:113] # npu blocks: 0, # CPU blocks: 1024", "oom_kv_cache", "oom"),
    # npu-smi / DCMI return codes
    ("dcmi module initialize failed. ret is -8005", "unclassified_dcmi_code", "unclassified_error"),
    # glog ERROR line of a native component with a status code
    (
        "E20260106 06:43:02.966156  5793 ascend_direct_transport.cpp:820] Failed to connect to target: "
        "172.17.0.16:25482, status: 103900",
        "unclassified_glog_status",
        "unclassified_error",
    ),
]


@pytest.mark.parametrize(
    ("line", "rule_id", "category"), WORDINGS, ids=[w[1] + str(i) for i, w in enumerate(WORDINGS)]
)
def test_documented_wording_gets_its_rule(line: str, rule_id: str, category: str) -> None:
    assert_line_gets_rule(line, rule_id, category)


@pytest.mark.parametrize(
    "line",
    [
        "INFO 04-27 10:13:05 llm_engine.py:275] # GPU blocks: 2048, # CPU blocks: 512",  # a budget, not a failure
        "I20260106 06:43:02.966156  5793 transfer_engine.cpp:120] Transfer status: 0",  # glog INFO
        "npu-smi 24.1.rc2                 Version: 24.1.rc2",  # npu-smi banner, no dcmi code
    ],
)
def test_lines_that_only_look_alike_are_not_flagged(line: str) -> None:
    (rec,) = classify_lines([line])
    assert rec["severity"] in (None, "none", "info"), rec["rule_id"]


def test_dcmi_codes_are_read_and_described() -> None:
    (rec,) = classify_lines(["dcmi model initialized failed, because the device is used. ret is -8020"])
    assert (rec["code"], rec["codes"]) == ("DCMI:-8020", ["DCMI:-8020"])
    entry = describe_code("DCMI:-8020")
    assert (entry["name"], entry["meaning"]) == ("DCMI_ERR_CODE_RESOURCE_OCCUPIED", "resource occupied")
    (pid,) = classify_lines(["Process 8020 exited, ret is -8020 in a line that names no management library"])
    assert pid["codes"] is None


def test_nccl_watchdog_notice_is_generic_evidence() -> None:
    generic = re.compile(log_diagnosis.log_rules()["settings"]["generic_evidence"])
    notice = (
        "[rank6]:[E901 05:20:04.905604457 ProcessGroupNCCL.cpp:684] [Rank 6] Some NCCL operations have failed or "
        "timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted"
    )
    watchdog = (
        "[Rank 6] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=460631, OpType=ALLREDUCE)"
    )
    assert generic.search(notice) and not generic.search(watchdog)


NCCL_CONSOLE = [
    "host:1:2 [0] misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed : abort",
    "host:1:2 [0] NCCL INFO misc/socket.cc:564 -> 2",
    "",
    "host:1:3 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer node1<57557>",
]


def _episode_count(tmp_path: Path, lines: list[str]) -> int:
    log = tmp_path / "console.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with Store(tmp_path / "db.duckdb") as store:
        ingest_into(store, [log])
        return len(log_diagnosis.episodes(store))


def test_the_blank_line_nccl_prints_before_a_warn_keeps_one_episode(tmp_path: Path) -> None:
    assert _episode_count(tmp_path, NCCL_CONSOLE) == 1


def test_two_blank_lines_before_a_warn_still_cut_the_paste(tmp_path: Path) -> None:
    assert _episode_count(tmp_path, [*NCCL_CONSOLE[:3], "", NCCL_CONSOLE[3]]) == 2


CHAINED_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/app/worker.py", line 10, in load',
    "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total capacity; 1.20 GiB free)",
    "",
    "The above exception was the direct cause of the following exception:",
    "",
    "Traceback (most recent call last):",
    '  File "/app/main.py", line 5, in <module>',
    "torch.distributed.DistBackendError: HCCL function error: HcclAllReduce(x), error code is 9",
]


def test_a_chained_traceback_is_one_episode_led_by_the_cause(tmp_path: Path) -> None:
    """traceback.py prints the blank lines around "The above exception was the direct cause …" itself: the two
    exceptions are one untimed episode, and the OOM Python names as the cause leads (not the last exception)."""
    log = tmp_path / "console.log"
    log.write_text("\n".join(CHAINED_TRACEBACK) + "\n", encoding="utf-8")
    with Store(tmp_path / "db.duckdb") as store:
        ingest_into(store, [log])
        assert len(log_diagnosis.episodes(store)) == 1
        top = log_diagnosis.log_scope(store).causes[0]
    assert (top.category, top.evidence[0].line_no) == ("oom", 3)


def test_torch_npu_code_description_is_generic_evidence() -> None:
    """torch_npu prints one fixed text per code after "error code is N" (507014, 507034, 507015 alike): it echoes the
    code; the runtime's FuncErrorReason record names the call that failed and why."""
    generic = re.compile(log_diagnosis.log_rules()["settings"]["generic_evidence"])
    for text in (
        "The aicore execution times out.",
        "Vector core execution timed out.",
        "The aicore execution is abnormal.",
    ):
        block = (
            f"[Error]: {text}\n        Rectify the fault based on the error information in the ascend log."
        )
        assert generic.search(block), text
    reason = (
        "EH9999: Inner Error!\n        rtDeviceSynchronizeWithTimeout execute failed, reason=[aicore timeout]"
    )
    assert not generic.search(reason)


def test_an_invalid_argument_with_its_reason_is_not_generic() -> None:
    generic = re.compile(log_diagnosis.log_rules()["settings"]["generic_evidence"])
    bare = "[PID: 1] 2026-01-26-03:28:29.625.369 Invalid_Argument(EE1001): The argument is invalid."
    assert generic.search(bare) and generic.search(bare + "\n        Solution: check the arguments.")
    assert not generic.search(bare + "Reason: Memory async failed, src loc type=0, dst loc type=1")
    # the reason is only that the error message could not be fetched (rtGetDevMsg, behind aclGetRecentErrMsg)
    assert generic.search(bare + "Reason: rtGetDevMsg execution failed, the context is a null pointer.")
    assert generic.search(
        "EE1001: The argument is invalid.Reason: rtGetDevMsg execute failed, reason=[context pointer null]"
    )


UNPLACED_TRACEBACK = [  # vLLM's logger before each line of a traceback: every line an ERROR record no rule places
    "ERROR 06-18 14:02:47 [core.py:1362]     return self._op(*args, **kwargs)",
    "ERROR 06-18 14:02:47 [core.py:1362] [PID: 830] 2026-06-18-14:02:47.972.231 AclNN_Parameter_Error(EZ1001): "
    "FlashAttentionScore launch kernel failed.",
]


def test_an_unclassified_error_is_led_by_a_record_with_its_code(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_text("\n".join(UNPLACED_TRACEBACK) + "\n", encoding="utf-8")
    with Store(tmp_path / "db.duckdb") as store:
        ingest_into(store, [log])
        top = log_diagnosis.log_scope(store).causes[0]
    assert (top.category, top.evidence[0].line_no, top.evidence[0].code) == (
        "unclassified_error",
        2,
        "EZ1001",
    )


def test_train_unclassified_excerpt_is_led_by_the_record_with_the_reason() -> None:
    file = "w3_056_ee1001_set_visible_device_invalid_device_6_mindie_gpustack_3225.log"
    assert half_of(file) == "train"
    category, severity, raw = diagnose(WILD / file)
    assert (category, severity) == ("unclassified_error", "medium")
    assert "The argument is invalid.Reason: Set visible device failed, invalid device=6" in raw, raw
