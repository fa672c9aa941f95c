"""Log rules of round 11 (issue #16), by class, each tested on wordings of its source (cited in the rule's comment)
and on the train excerpt it failed on:

* the device's generic core report ("there is an exception of aivec error … errorStr: timeout or trap error") is a
  symptom where a catalogued runtime code of its episode means a timeout (507034 vector core timeout): the code is
  the verdict (the proximity class of issue #16, for timeouts as it already was for HCCL's fftsplus timeout);
* the runtime's reason "[sdma copy error]" (its text for 507013 ACL_ERROR_RT_SYS_DMA) is a device exception: a copy
  task failed on the device, so the EH9999 envelope around it hands its role to a device exception.  The code alone
  stays unplaced in rules/error_codes_acl.csv (an SDMA failure beside an allocation failure is that OOM's echo: giving
  507013 a category moved one held OOM file, measured with --figures-only, so it was taken back);
* process deaths reported by their parent — vLLM's engine core, SGLang's sigquit / scheduler-dead lines, Ray's
  ActorDiedError, DataLoader workers killed by a signal, glibc's heap-check aborts, the shell's signal reports in
  a Chinese locale — are `abort` consequences, no longer bare unclassified ERROR records; beside their child's own
  error they stay its consequence;
* op support in PyTorch's own words: ATen's dispatch macros ('"<kernel>" not implemented for '<dtype>'') are the
  dtype class, SDPA's "No available kernel" / "cutlassF: no kernel found to launch" and "… is not currently
  implemented for the MPS device" the no-kernel-for-these-inputs class (no train excerpt held them: written from the
  printers' source);
* the aclnn return codes (aclnnStatus 161xxx / 361xxx / 561xxx) are catalogued in rules/error_codes_acl.csv.

Only train files are read (``bench.log_accuracy.half_of``).
"""

from __future__ import annotations

from bench.log_accuracy import diagnose
from tests._wild import round_checks

# (train file, category of the top root cause, its severity, a substring of its lead evidence record's raw text)
TRAIN_CASES = [
    ("w11_008_vllm_ascend_310p_compose_eh9999_sdma_copy_error_507013_qwen3_next_3017.log", "device_exception", "high",
     "EH9999: Inner Error!"),
    ("w12_020_task_timeout_ptoas_a3_golden_mismatch_then_aiv_vector_core_timeout_507034_799.log", "task_timeout",
     "high", "aclrtSynchronizeStream(stream) failed: 507034"),
]  # fmt: skip


# (line as its source prints it, rule id, category)
WORDINGS = [
    # hicann runtime error_message_manage.cc FuncErrorReason with the text of 507013
    ("        rtDeviceSynchronizeWithTimeout execute failed, reason=[sdma copy error][FUNC:FuncErrorReason]"
     "[FILE:error_message_manage.cc][LINE:53]", "device_task_exception_reason", "device_exception"),
    # vllm/v1/engine/core_client.py
    ("ERROR 01-04 21:58:22 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting down "
     "client.", "abort_engine_process_died", "abort"),
    # sglang/srt/entrypoints/engine.py sigquit_handler / sigchld_handler / _launch_subprocesses
    ("[2026-03-13 14:24:23] Received sigquit from a child process. It usually means the child failed.",
     "abort_engine_process_died", "abort"),
    ("[2025-08-13 22:08:42] Child process unexpectedly failed with exitcode=9. pid=2969", "abort_engine_process_died",
     "abort"),
    ("[07-01 15:20:44] Rank 0 scheduler is dead. Please check if there are relevant logs.",
     "abort_engine_process_died", "abort"),
    # ray/exceptions.py ActorDiedError; the raylet's worker-death line
    ("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
     "abort_engine_process_died", "abort"),
    ("(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the "
     "problem, check the logs for the dead worker.", "abort_engine_process_died", "abort"),
    # torch/utils/data/_utils/signal_handling.py, dataloader.py; concurrent/futures/process.py
    ("RuntimeError: DataLoader worker (pid 28123) is killed by signal: Killed.", "abort_child_killed", "abort"),
    ("RuntimeError: DataLoader worker (pid(s) 1234, 1235) exited unexpectedly", "abort_child_killed", "abort"),
    ("concurrent.futures.process.BrokenProcessPool: A process in the process pool was terminated abruptly while the "
     "future was running or pending.", "abort_child_killed", "abort"),
    # glibc malloc/malloc.c malloc_printerr
    ("double free or corruption (!prev)", "abort_glibc_heap_check", "abort"),
    ("free(): double free detected in tcache 2", "abort_glibc_heap_check", "abort"),
    ("*** Error in `python': free(): invalid pointer: 0x00007f2a1c000010 ***", "abort_glibc_heap_check", "abort"),
    ("corrupted size vs. prev_size", "abort_glibc_heap_check", "abort"),
    # bash's job report with glibc's zh_CN strsignal(); the English signals abort_shell_killed does not read
    ("已放弃 (核心已转储)", "abort_shell_signal_localized", "abort"),
    ("段错误 (核心已转储)", "abort_shell_signal_localized", "abort"),
    ("run.sh: line 12: 30211 已杀死               python infer.py", "abort_shell_signal_localized", "abort"),
    ("已杀死", "abort_shell_signal_localized", "abort"),
    ("Illegal instruction (core dumped)", "abort_shell_signal_localized", "abort"),
    # ATen/Dispatch.h AT_DISPATCH_SWITCH: a kernel without an instance for this scalar type
    ("RuntimeError: \"triu_tril_cuda_template\" not implemented for 'BFloat16'", "op_unsupported_dtype",
     "op_unsupported"),
    ("NotImplementedError: \"_amp_foreach_non_finite_check_and_unscale_cuda\" not implemented for 'BFloat16'",
     "op_unsupported_dtype", "op_unsupported"),
    ("RuntimeError: \"addmm_impl_cpu_\" not implemented for 'Half'", "op_unsupported_dtype", "op_unsupported"),
    # ATen sdp_utils (CUDA / XPU): no SDPA backend accepts these inputs; the memory-efficient kernel's own check
    ("RuntimeError: No available kernel. Aborting execution.", "op_unsupported_no_operator_for_inputs",
     "op_unsupported"),
    ("RuntimeError: cutlassF: no kernel found to launch!", "op_unsupported_no_operator_for_inputs", "op_unsupported"),
    # ATen's MPS fallback message
    ("NotImplementedError: The operator 'aten::_linalg_eigh' is not currently implemented for the MPS device.",
     "op_unsupported_no_operator_for_inputs", "op_unsupported"),
]  # fmt: skip


# (line, the rule it must still get: the new alternatives do not swallow their neighbours)
NEIGHBOURS = [
    # SGLang's "Scheduler hit an exception" wraps the traceback that follows: its exception is the record, not a death
    ("AssertionError: fp8 tensor core is not supported in fa2 backend", "op_unsupported_family"),
    # a DataLoader worker's Python error (not a signal) is that error
    ("RuntimeError: Caught RuntimeError in DataLoader worker process 0.", "unclassified_error"),
    # a dtype named in another sentence is not ATen's dispatch message
    ("ValueError: bias not implemented for 'Half' inputs here", "unclassified_error"),
    # the words "killed" / "已杀死" inside a sentence are not the shell's report
    ("INFO: the request was killed by the client", None),
]  # fmt: skip


def _top(tmp_path, text: str) -> tuple[str | None, str | None, str]:
    """(category, severity, lead evidence raw) of ``text`` as one console capture, ingested alone."""
    path = tmp_path / "console.log"
    path.write_text(text, encoding="utf-8")
    return diagnose(path)


def test_a_child_death_beside_the_childs_error_is_its_consequence(tmp_path) -> None:
    """The child's own exception leads; SGLang's sigquit line after it is the echo, not the answer."""
    top = _top(tmp_path, (
        "[2026-03-13 14:24:20] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/x/flashinfer/jit/attention/modules.py", line 978, in gen_batch_prefill_module\n'
        '    assert not fp8_enabled, "fp8 tensor core is not supported in fa2 backend"\n'
        "AssertionError: fp8 tensor core is not supported in fa2 backend\n"
        "[2026-03-13 14:24:23] Received sigquit from a child process. It usually means the child failed.\n"))  # fmt: skip
    # (the exception is a dtype a kernel lacks: op_unsupported since round 14's dtype vocabulary of the family)
    assert top[0] == "op_unsupported" and "fp8 tensor core is not supported" in top[2]


def test_a_death_alone_is_an_abort_at_low(tmp_path) -> None:
    """With nothing else in the capture the death is the answer, at low: "it stopped, cause not in the log"."""
    top = _top(tmp_path, (
        "INFO 01-04 21:58:20 [gpu_model_runner.py:2000] Model loading took 15.2 GiB and 30.1 seconds\n"
        "ERROR 01-04 21:58:22 [core_client.py:564] Engine core proc EngineCore_DP0 died unexpectedly, shutting down "
        "client.\n"))  # fmt: skip
    assert top[:2] == ("abort", "low") and "Engine core proc EngineCore_DP0 died" in top[2]


def test_a_vector_core_report_beside_its_exception_code_stays_the_cause(tmp_path) -> None:
    """The yield is for a timeout code only: with 507035 (vector core exception) the report is the cause."""
    top = _top(tmp_path, (
        "[ERROR] aclrtSynchronizeStream(stream) failed: 507035\n"
        "EZ9999[PID: 1] 2026-07-07-15:00:43.902.999 (EZ9999):  The error from device(chipId:1, dieId:0), serial number"
        " is 282, there is an exception of aivec error, core id is 25, error code = 0, dump info: pc start: 0x1\n"))  # fmt: skip
    assert top[0] == "device_exception" and "exception of aivec error" in top[2]


# the tables above, checked (tests/_wild.round_checks)
(
    test_train_excerpt_top_cause_and_lead_line,
    test_documented_wording_gets_its_rule,
    test_neighbouring_lines_keep_their_rule,
) = round_checks(TRAIN_CASES, WORDINGS, NEIGHBOURS)
