"""Log rules written from failure families, round 5 (issue #16): each rule on a wording of its printer's source
and on the TRAIN excerpt of tests/fixtures/logs_wild that showed the class (held w4 files are never read here).

Families: "not supported" (an op / dtype / platform / graph-capture mode, and torch_npu's ERRss007 code), c10d
store and rendezvous timeouts (communication set-up, the platform-neutral hccl_timeout), torchrun's failure
summary (a wrapper: the exit signal leads), the c10d watchdog's WorkNCCL(… Timeout(ms)=N) ran for N ms.
"""

from __future__ import annotations

import pytest

from bench.log_accuracy import WILD, diagnose, half_of
from tests.test_cann_logs import classify_lines

# (train file, category of the top root cause, its severity, a substring of its lead evidence record)
EXCERPTS = [
    # aclnn tiling check: "this platform only support …" names the op and the platform → not supported
    (
        "w4_002_quant_matmul_weightnz_300iduo_transpose_vllm_ascend_1736.log",
        "op_unsupported",
        "high",
        "op[QuantBatchMatmulV3], this platform only support output transpose_x1 false and transpose_x2 true",
    ),
    # torch_npu graph-capture check: an aclop op cannot be captured
    (
        "w4_030_aclop_matmul_during_npu_graph_capture_err00007_ms_swift_6684.log",
        "op_unsupported",
        "high",
        "Cannot run aclop operators during NPU graph capture. Current working aclop is MatMul.",
    ),
    # torchrun summary: ChildFailedError is the envelope, the exit signal leads; no cause in the log → low
    (
        "w4_035_torchrun_rank0_sigkill_grpo_accelerate_cppo_6.log",
        "abort",
        "low",
        "traceback : Signal 9 (SIGKILL) received by PID 14750",
    ),
    # c10d TCPStore client connect timeout: the ranks never met (set-up), not an unknown error
    (
        "w4_052_c10d_tcpstore_client_socket_timeout_ray_multinode_vllm_13052.log",
        "hccl_timeout",
        "high",
        "[c10d] The client socket has timed out after 60000ms while trying to connect to (248.2.20.163, 29400).",
    ),
    # terminal-wrapped watchdog timeout: WorkNCCL(… Timeout(ms)=1800000) ran for … on its own line, over the
    # `terminate called` abort lines around it
    (
        "w4_023_nccl_broadcast_timeout_wrapped_terminate_interleaved_grpo_open_r1_620.log",
        "hccl_timeout",
        "high",
        "ctive operation timeout: WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112",
    ),
]


@pytest.mark.parametrize(("file", "category", "severity", "key"), EXCERPTS, ids=[e[0][:24] for e in EXCERPTS])
def test_train_excerpt_of_a_family(file: str, category: str, severity: str, key: str) -> None:
    assert half_of(file) == "train", f"{file} is in the held half: rules are written against train only"
    got_category, got_severity, raw = diagnose(WILD / file)
    assert (got_category, got_severity) == (category, severity)
    assert key in raw, raw


# (line as its source prints it, rule id, category)
WORDINGS = [
    # op_unsupported_family: flash-attn's check (flash_api.cpp "FlashAttention only supports Ampere GPUs or newer.")
    (
        "RuntimeError: FlashAttention only supports Ampere GPUs or newer.",
        "op_unsupported_family",
        "op_unsupported",
    ),
    # a kernel that lacks a dtype (the "does not support dtype" wording of custom-op checks)
    (
        "RuntimeError: rms_norm_kernel does not support dtype torch.float64",
        "op_unsupported_family",
        "op_unsupported",
    ),
    # the CUDA runtime under stream capture (cudaErrorStreamCaptureUnsupported's message, cudaGetErrorString)
    (
        "RuntimeError: CUDA error: operation not permitted when stream is capturing",
        "op_unsupported_family",
        "op_unsupported",
    ),
    # torch_npu's code family: ERRss007 = ErrCode::NOT_SUPPORT for every sub-module (NPUException.h)
    (
        "[ERROR] 2025-06-25-10:45:23 (PID:13075, Device:0, RankID:8) ERR00007 PTA feature not supported",
        "code_op_unsupported",
        "op_unsupported",
    ),
    (
        "[ERROR] 2025-06-25-10:45:23 (PID:13075, Device:0, RankID:8) ERR03007 GRAPH feature not supported",
        "code_op_unsupported",
        "op_unsupported",
    ),
    # c10d_store_timeout: socket.cpp throwTimeoutError, TCPStore waitForWorkers, TCPStore doWait
    (
        "torch.distributed.DistNetworkError: The client socket has timed out after 1800000ms while trying to "
        "connect to (10.0.0.1, 29500).",
        "c10d_store_timeout",
        "hccl_timeout",
    ),
    (
        "torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
        "c10d_store_timeout",
        "hccl_timeout",
    ),
    (
        "torch.distributed.DistStoreError: wait timeout after 1800000ms, keys: /default_pg//cuda//0",
        "c10d_store_timeout",
        "hccl_timeout",
    ),
    # c10d_heartbeat_monitor: ProcessGroupNCCL's heartbeat monitor; a line whose prefix names ProcessGroupNCCL and
    # says "timed out" meets the CUDA watchdog rule first (the same category)
    (
        "[PG ID 0 PG GUID 0(default_pg) Rank 3] ProcessGroupNCCL's watchdog got stuck for 480 seconds without "
        "making progress in monitoring enqueued collectives.",
        "c10d_heartbeat_monitor",
        "hccl_timeout",
    ),
    (
        "[rank3]:[E1011 10:00:00.000000000 ProcessGroupNCCL.cpp:1378] Heartbeat monitor timed out! Process will be "
        "terminated after dumping debug info. workMetaList_.size()=1",
        "cuda_nccl_watchdog_timeout",
        "hccl_timeout",
    ),
    (
        "[PG ID 0 PG GUID 0(default_pg) Rank 3] Heartbeat monitor timed out! Process will be terminated after dumping "
        "debug info. workMetaList_.size()=1",
        "c10d_heartbeat_monitor",
        "hccl_timeout",
    ),
    # torchrun_child_failed: torch.distributed.elastic's envelope
    (
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "torchrun_child_failed",
        "abort",
    ),
    # torchrun_worker_exit: elastic's report of a worker's own error exit (a positive exit code)
    (
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 2345) of "
        "binary: /usr/bin/python",
        "torchrun_worker_exit",
        "abort",
    ),
    # hccl_watchdog_timeout: torch_npu's WorkHCCL prints Timeout(ms)=N inside its parentheses too
    (
        "ctive operation timeout: WorkHCCL(SeqNum=196, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800079 "
        "milliseconds before timing out.",
        "hccl_watchdog_timeout",
        "hccl_timeout",
    ),
]


@pytest.mark.parametrize(("line", "rule_id", "category"), WORDINGS, ids=[w[1] + str(i) for i, w in enumerate(WORDINGS)])  # fmt: skip
def test_family_wording_gets_its_rule(line: str, rule_id: str, category: str) -> None:
    (rec,) = classify_lines([line])
    assert (rec["rule_id"], rec["category"]) == (rule_id, category), rec


@pytest.mark.parametrize(
    "line",
    [
        # a model architecture the engine lacks names no op, dtype or platform: an honest unknown (train w2_065)
        "[2025-04-15 16:40:05.552024] [17310] [281473799454720] [llm] [ERROR] [model_deploy_config.cpp:159] "
        "unsupported model type: falcon_mamba",
        # the same words at WARNING are a notice (train w2_074's driver-version warning)
        "[W1204 11:16:49.963124850 compiler_depend.ts:117] Warning: Driver Version: 23.0 is invalid or not "
        "supported yet. (function operator())",
    ],
)
def test_not_supported_words_without_an_op_or_at_warning_are_not_the_family(line: str) -> None:
    (rec,) = classify_lines([line])
    assert rec["category"] != "op_unsupported", rec


def test_store_retry_warning_alone_flags_nothing() -> None:
    """TCPStore's retry warning is an info symptom: it joins a store timeout, never leads or flags one alone."""
    (rec,) = classify_lines(
        [
            "[W210 09:54:57.125243957 TCPStore.cpp:358] [c10d] TCP client failed to connect/validate to host "
            "10.0.0.1:29400 - retrying (try=0, timeout=60000ms, delay=15196ms): The client socket has timed out "
            "after 60000ms while trying to connect to (10.0.0.1, 29400)."
        ]
    )
    assert (rec["rule_id"], rec["severity"]) == ("c10d_store_retry", "info")


def test_torchrun_error_exit_alone_is_a_low_stop(tmp_path) -> None:  # noqa: ANN001
    """A torchrun summary of a worker that exited 1, with no traceback in the log: a stop at low severity led by
    the exit record, never an unclassified medium error."""
    from diag.analyses.log_diagnosis import log_scope
    from diag.store import Store
    from tests.conftest import ingest_into

    log = tmp_path / "torchrun.log"
    log.write_text(
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
        "============================================================\n"
        "train.py FAILED\n"
        "------------------------------------------------------------\n"
        "Root Cause (first observed failure):\n"
        "[0]:\n"
        "  time      : 2025-05-21_15:43:03\n"
        "  rank      : 0 (local_rank: 0)\n"
        "  exitcode  : 1 (pid: 14750)\n"
        "  error_file: <N/A>\n"
        "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html\n"
    )
    with Store(tmp_path / "db.duckdb") as store:
        ingest_into(store, [log])
        top = log_scope(store).causes[0]
    assert (top.category, top.severity, top.evidence[0].rule_id) == ("abort", "low", "torchrun_worker_exit")
