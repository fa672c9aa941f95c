"""Log diagnosis on real excerpts of the TRAIN half of tests/fixtures/logs_wild (issue #16): one test per failure
class the rules were written for — which category the top root cause gets and which line leads its evidence.

Only train files are used (``bench.log_accuracy.half_of``): the held half measures how the rules generalize and is
never read to write them.  Each excerpt is ingested alone, as ``bench/log_accuracy.py`` and ``diag logs`` do.
"""

from __future__ import annotations

import pytest

from bench.log_accuracy import WILD, diagnose, half_of
from tests._wild import assert_top_cause

# (file, category of the top root cause, its severity, a substring of its lead evidence record's raw text)
CASES = [
    # the device's own report leads, not the API return code line above it (aclrtSynchronizeStream failed: 507035)
    (
        "w2_082_aivec_ub_out_of_bounds_507035_retcode_0x31_ptoas_372.log",
        "device_exception",
        "high",
        "there is an exception of aivec error, core id is 23",
    ),
    # a bare "E39999: Inner Error!" envelope hands the lead to the record it wraps
    (
        "w2_021_e39999_aicpu_errcode_21008_reshape_mindnlp_1752.log",
        "device_exception",
        "high",
        "an exception occurred during AICPU execution, stream_id:2, task_id:19016",
    ),
    # the runtime's reason ([aicore timeout]) decides over the generic "exception of aicore error" words beside it
    (
        "w2_050_aicore_error_line_but_timeout_retcode_0x25_ptoas_864.log",
        "task_timeout",
        "high",
        "Kernel task happen error, retCode=0x25, [aicore timeout].",
    ),
    # "The error from device(…), event wait timeout occurred during task execution" is a timeout, not an exception
    (
        "w1_048_event_wait_timeout_107020.log",
        "task_timeout",
        "high",
        "event wait timeout occurred during task execution",
    ),
    # the runtime's own record (the call that failed, reason=vector core timeout) leads torch_npu's fixed description
    # of the code ("[Error]: Vector core execution timed out.", the same text for every 507034); round 6, #16
    (
        "w1_036_vector_core_timeout_507034.log",
        "task_timeout",
        "high",
        "rtDeviceSynchronizeWithTimeout execution failed, reason=vector core timeout",
    ),
    # an inner-error code with its own words is an unknown error with those words, not an envelope
    (
        "w1_058_hccl_buffsize_too_small_moe_dispatch.log",
        "unclassified_error",
        "medium",
        "HCCL_BUFFSIZE is too SMALL, maxBs = 512, h = 2048, epWorldSize = 2",
    ),
    # EE1001 "The argument is invalid" alone places nothing: an honest unknown, led by the call that failed
    (
        "w2_038_aclrtsetdevice_507033_tsdopen_failed_ptoas_409.log",
        "unclassified_error",
        "medium",
        "aclrtSetDevice(deviceId) failed: 507033",
    ),
    # the exception line leads, not the traceback frame that quotes `raise FailOnRecompileLimitHit(`
    (
        "w1_024_fail_on_recompile_limit_one_graph.log",
        "recompile",
        "high",
        "torch._dynamo.exc.FailOnRecompileLimitHit: recompile_limit reached",
    ),
    # an elision line ("....." between two pastes) joins them: the limit warning leads, not the cut-off frame
    (
        "w2_009_failonrecompile_check_type_id_loop_pytorch_167504.log",
        "recompile",
        "high",
        "torch._dynamo hit config.recompile_limit (8)",
    ),
    # a progress bar glued before the first guard line (its \r lost) no longer hides that line's source
    (
        "w1_052_vllm_dynamo_recompiling_guard_failures.log",
        "recompile",
        "low",
        "Recompiling function forward in /data/youkaichao/vllm/vllm/model_executor",
    ),
    (
        "w1_001_no_memory_cache_blocks.log",
        "oom",
        "high",
        "ValueError: No available memory for the cache blocks",
    ),
    # a pasted excerpt with no logger prefix is still read (a .log name and words a rule knows)
    ("w1_008_negative_kv_cache.log", "oom", "high", "Available KV cache memory: -0.87 GiB"),
    (
        "w2_037_device_log_exception_task_aicpu_kernel_0x2a_pytorch_136302.log",
        "device_exception",
        "high",
        "stream phase=SCHEDULE, task id=4447, task type=aicpu kernel",
    ),
    (
        "w2_028_ez3003_atc_singleop_adddsl_310p_ascend_samples_11.log",
        "op_unsupported",
        "high",
        "EZ3003: No supported Ops kernel and engine are found for [AddDsl]",
    ),
    # phrase families
    (
        "w2_015_cpu_fallback_nms_isin_wrapped_lines_mineru_1941.log",
        "cpu_fallback",
        "medium",
        "CAUTION: The operator 'torchvision::nms' is not currently supported",
    ),
    (
        "w2_055_ez1001_repeat_interleave_dt_double_flux_diffusers_10428.log",
        "op_unsupported",
        "high",
        "self not implemented for DT_DOUBLE, should be in dtype support list",
    ),
    (
        "w1_045_310p_cannot_find_bin_prompt_flash_attention.log",
        "op_unsupported",
        "high",
        "Cannot find bin of op PromptFlashAttention, integral key",
    ),
    (
        "w2_071_mindspore_eager_alloc_100gb_over_total_somas_opensora_mindone_820.log",
        "oom",
        "high",
        "plus alloc size : 100555779072 is more than total mem size : 61079552000.",
    ),
    ("w1_016_op_cast_no_binary.log", "version_mismatch", "high", "Op Cast does not has any binary."),
    (
        "w1_051_ge_py_ssize_t_clean_python_cann.log",
        "version_mismatch",
        "high",
        "SystemError: PY_SSIZE_T_CLEAN macro must be defined for '#' formats",
    ),
    (
        "w2_033_aclnn_status_561002_causal_conv1d_a3_fla_npu_333.log",
        "unclassified_error",
        "medium",
        "aclnnCausalConv1dGetWorkspaceSize failed with aclnnStatus=561002.",
    ),
    # a crash alone is named, led by the interpreter's own line (cuda_fatal_python_signal), not the signal
    # handler's "*** SIGSEGV received" lines above it
    ("w1_070_sigsegv_cuda_graph_capture.log", "abort", "medium", "Fatal Python error: Segmentation fault"),
]


# Round 4 (issue #16): every file of w1–w3 is training data now (a fresh batch, w4, measures the rules), so these cases
# may come from either half.  One per mechanism, each failing before it was built.
ROUND4_CASES = [
    # a watchdog collective timeout alone (torch_npu WorkHCCL, the twin of c10d's WorkNCCL) is the HCCL timeout, not
    # an abort; the teardown lines after it ("Some HCCL operations have failed…") are consequences, not an unknown
    (
        "w1_004_hccl_watchdog_allreduce.log",
        "hccl_timeout",
        "high",
        "Watchdog caught collective operation timeout: WorkHCCL(SeqNum=196",
    ),
    # an episode of consequences only (the process died, the log does not say why) is answered at low severity,
    # led by the first to happen: the worker's death before the engine's fatal error
    (
        "w3_051_worker_proc_died_unexpectedly_enginecore_fatal_arc_llm_scaler_154.log",
        "abort",
        "low",
        "Worker proc VllmWorker-3 died unexpectedly, shutting down executor.",
    ),
    # the shell's job-control report of a killed child (SIGKILL) comes before vLLM's "Worker proc … died"
    ("w1_071_serve_killed_worker_died.log", "abort", "low", "start.sh: line 38: 14328 Killed vllm serve"),
    # vllm-ascend's KV budget clamped at 0 (INFO, no exception) is the OOM; the EngineCore traceback cut short
    # after it (another console source, an unknown error) does not hide it
    ("w1_007_kv_available_memory_zero.log", "oom", "high", "Available memory: 0, total memory: 65452113920"),
    # a console of several processes: the rank whose traceback the paste cut (unclassified) comes last, the
    # rank that names the failure is the answer
    (
        "w3_004_cuda_oom_warming_up_sampler_vllm_17939.log",
        "oom",
        "high",
        "CUDA out of memory occurred when warming up sampler with 256 dummy requests",
    ),
    # NCCL's "unhandled cuda error" wraps the CUDA error its CUDACHECK printed ("Cuda failure 'out of memory'"):
    # that code (cudaErrorMemoryAllocation) is the cause, not a collective failure
    (
        "w3_050_nccl_unhandled_cuda_error_cuda_failure_out_of_memory_qwen3_235b_vllm_18446.log",
        "oom",
        "high",
        "Cuda failure 'out of memory'",
    ),
    # a JIT header that lacks a CANN declaration: the compiler does not say why, so an honest unknown
    (
        "w1_041_triton_header_undeclared_aclopexecutor.log",
        "unclassified_error",
        "medium",
        "error: use of undeclared identifier 'aclOpExecutor'",
    ),
    # the compiler missing its own <built-in> header: a broken / mixed toolkit install
    (
        "w2_063_e40021_compile_op_clang_cce_header_missing_xpu_graph_304.log",
        "version_mismatch",
        "high",
        "fatal error: '__clang_cce_runtime_wrapper.h' file not found",
    ),
    # rtGetDevMsg failing after the context / device is gone says nothing about versions
    ("w1_035_npu_context_empty_107002.log", "unclassified_error", "medium", "[Error]: The context is empty."),
    # MindIE's service layout ("[ts] [pid] [tid] [llm] [ERROR] [logging.py-348] : …") is read with its level, and
    # its warm-up OOM in the engine's own words is an OOM
    (
        "w1_042_mindie_warmup_oom.log",
        "oom",
        "high",
        "Warmup failed, because of multimodal model inference out of memory",
    ),
    # a torchrun "[rank4]: " console holding only a traceback's exception line is a log: an honest unknown
    (
        "w3_057_mindspeed_fused_args_remaining_argv_valueerror_megatron_swift_ms_swift_8115.log",
        "unclassified_error",
        "medium",
        "ValueError: remaining_argv: ['--use_fused_rmsnorm', '--use_fused_rotary",
    ),
    # a record pasted as escaped JSON ('…\\nE30006: <ts> Failed to verify the OPP'): its codes are still read, and the
    # catalogued one (E30006, an incorrect operator package) places it over the ERR00100 envelope beside it
    (
        "w2_058_e30006_verify_opp_escaped_json_detail_mineru_vllm_ascend_4284.log",
        "version_mismatch",
        "high",
        "E30006: 2025-11-19-11:14:58.516.606 Failed to verify the OPP",
    ),
    # opapi cannot parse the op's kernel config for this SoC: a kernels package of another chip / CANN
    (
        "w2_079_parse_dynamic_kernel_config_arange_910c_with_910b_image_vllm_ascend_3046.log",
        "version_mismatch",
        "high",
        "ArangeAiCore ADD_TO_LAUNCHER_LIST_AICORE failed.",
    ),
    # a lost rank (heartbeat) is what the other ranks' notify waits follow from: it leads the HCCL timeout
    (
        "w2_089_ei0002_507048_cluster_exception_heartbeat_lost_torch_npu_docs_hccl_timeout.log",
        "hccl_timeout",
        "high",
        "ExceptionType:[Heartbeat Lost Occurred], Possible Reason:1. Process has exited",
    ),
    # a CANN error named as error_code.json prints it, pasted alone ("Communication_Error_Get_Socket(EI0006)"): the
    # file is read as a log and the code places it
    (
        "w3_035_ei0006_get_socket_fingerprint_hccl_connect_timeout_afd_plugin_229.log",
        "hccl_timeout",
        "high",
        "Communication_Error_Get_Socket(EI0006)",
    ),
]


@pytest.mark.parametrize(
    ("file", "category", "severity", "key"), ROUND4_CASES, ids=[c[0][:28] for c in ROUND4_CASES]
)
def test_round4_excerpt_top_cause_and_lead_line(file: str, category: str, severity: str, key: str) -> None:
    # round 4 was written against all of w1–w3
    assert_top_cause(file, category, severity, key, train_only=False)


@pytest.mark.parametrize(("file", "category", "severity", "key"), CASES, ids=[c[0][:28] for c in CASES])
def test_train_excerpt_top_cause_and_lead_line(file: str, category: str, severity: str, key: str) -> None:
    assert_top_cause(file, category, severity, key)


def test_vllm_ascend_optional_extension_import_is_noise() -> None:
    """vllm-ascend's camem.py logs `Failed to import vllm_ascend_C` at ERROR and runs on: nothing flagged."""
    file = "w1_060_vllm_ascend_c_import_error_benign.log"
    assert half_of(file) == "train"
    category, severity, _ = diagnose(WILD / file)
    assert severity not in ("high", "medium"), (category, severity)


# Phrase families written from the public wordings (a train line, or the message as its source prints it)
WORDINGS = [
    # torch's caching-allocator OOM, as every device backend prints it
    ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)", "oom"),
    # vLLM V0 worker.raise_if_cache_size_invalid
    (
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored "
        "in KV cache (17440). Try increasing `gpu_memory_utilization` or decreasing `max_model_len`",
        "oom",
    ),
    # torch_npu ProcessGroupHCCL watchdog (train w1_006) and vLLM V1 EngineDeadError: consequences, not causes
    (
        "[rank7]:[E1212 12:10:10.131512730 compiler_depend.ts:1675] [Rank 7] HCCL watchdog thread terminated with exception:",
        "abort",
    ),
    (
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above)",
        "abort",
    ),
    # torch_npu's closing line after an inner error: an envelope that points at the records above it
    (
        "ERROR 03-04 12:57:08 [engine.py:409] RuntimeError: The Inner error is reported as above. The process exits "
        "for this inner error, and the current working operator name is RepeatInterleave.",
        "error_wrapper",
    ),
]


# Round 4: phrase families from the printers' sources (all of w1–w3 is training data now)
WORDINGS += [
    # op-plugin TORCH_NPU_WARN_ONCE("Warning: kernel [isneginf] is not supported by NPU currently. Now this kernel is
    # running on CPU.") (w3_041)
    (
        "[W1030 19:11:34.575606316 compiler_depend.ts:35] Warning: Warning: kernel [isneginf.out] is not supported by "
        "NPU currently. Now this kernel is running on CPU. (function operator())",
        "cpu_fallback",
    ),
    # torchdynamo (2022) "torchdynamo hit recompilation cache limit ({cache_size_limit}) for function …" (w2_084)
    (
        "> torchdynamo hit recompilation cache limit (2) for function 'model' (warn.py:39), due to the following "
        "guard failures: [['___check_tensors(input)'], ['___check_tensors(input)']]",
        "recompile",
    ),
    # a custom-op package built for another SoC (w1_068)
    (
        "[ERROR] the socversion Ascend910B1 of bin package does not match the current device socverison Ascend310P3.",
        "version_mismatch",
    ),
    # the device task scheduler's own timeout report (w2_029)
    (
        "[ERROR] TSCH(-1,null):2020-06-04-10:51:09.520.395 28 (cpuid:0) ai_core_dispatcher.c:1012 "
        "bs_done_exception_proc_timeout: slot_id=1,TS_ctrl=0x4,exception_core_list=0x0",
        "task_timeout",
    ),
    # EE1002 "Stream synchronize timeout" (rules/error_codes.csv) with the runtime's reason (w2_052)
    (
        "EE1002: 2024-09-26-16:06:40.565.510 Stream synchronize timeout. rtDeviceSynchronize execute failed, "
        "reason=[stream sync timeout]",
        "task_timeout",
    ),
    # vLLM / SGLang pynccl_wrapper NCCL_CHECK: RuntimeError(f"NCCL error: {error_str}") (w3_049)
    (
        "(VllmWorkerProcess pid=232) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226] Exception in worker "
        "VllmWorkerProcess while processing method init_device: NCCL error: unhandled system error (run with "
        "NCCL_DEBUG=INFO for details), Traceback (most recent call last):",
        "hccl_timeout",
    ),
    # torch_npu's own dtype check ("scalar_type:UInt64is not surpported", its spelling) and aclnn's (w2_054, w3_039)
    ("RuntimeError: self scalar_type:UInt64is not surpported.", "op_unsupported"),
    (
        "AclNN_Parameter_Error(EZ1001): Io input dtype or format is not supported, get io input info is "
        "x(DT_BFLOAT16, ND) gamma(DT_BFLOAT16, ND) but supported list is:",
        "op_unsupported",
    ),
]


@pytest.mark.parametrize(("line", "category"), WORDINGS, ids=[w[1] + str(i) for i, w in enumerate(WORDINGS)])
def test_documented_wording_gets_its_category(line: str, category: str) -> None:
    from tests.test_cann_logs import classify_lines

    (rec,) = classify_lines([line])
    assert rec["category"] == category, rec


def test_a_cause_is_named_by_its_real_code_not_the_envelope_code(tmp_path) -> None:  # noqa: ANN001
    """w2_050: the lead record names only EZ9999 (an envelope); the title names the runtime code 507014 of the
    record beside it, the one that says "aicore timeout"."""
    from diag.analyses.log_diagnosis import log_scope
    from diag.store import Store
    from tests.conftest import ingest_into

    file = "w2_050_aicore_error_line_but_timeout_retcode_0x25_ptoas_864.log"
    assert half_of(file) == "train"
    with Store(tmp_path / "db.duckdb") as store:
        ingest_into(store, [WILD / file])
        top = log_scope(store).causes[0]
    assert top.title == "Device task timeout: 507014"
    assert top.key_line.startswith("Kernel task happen error, retCode=0x25, [aicore timeout].")
