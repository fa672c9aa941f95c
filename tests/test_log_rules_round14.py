"""Log rules of round 14 (issue #16, session 16), written from the train halves of w17 / w18 after their first
contact, by class, each tested on wordings of its source (cited in the rule's comment) and on the train excerpt it
failed on:

* nnopbase's call into HCCL for an MC2 op's communication resources ("Nnopbase fails to invoke the
  HcclAllocComResourceByTiling function of the hccl module. ret = N") is an HCCL set-up failure (hccl_init_failed);
* Python's TimeoutError as the exception a traceback ends on (vLLM's shm_broadcast acquire_read, RPCs, futures) is
  a task timeout at medium — its message, not an OS socket error ("[Errno 110]") or the "raise TimeoutError" frame;
* a native library's fatal assertion (glog / absl CHECK, Ray's RAY_CHECK "Check failed: …") is an abort, at low:
  a device, memory or collective record beside it leads;
* the "not supported" family (op_unsupported_family) knows the platform by its chip and board names (Ascend310P3,
  910B, 300I DUO, Atlas A2, "this device", "current hardware"), the dtype by its name (bfloat16, fp8, torch.float64)
  and the mode by its own (aclgraph / ACL graph mode, NPU / CUDA graphs, torchair) — the class, not a train file
  (held: op_unsupported 16 → 17 of 25, no new false positive);
* from their sources, not from a wild file: vLLM's start-up free-memory check is an OOM; a process killed for host
  memory (the kernel's OOM killer, Kubernetes' OOMKilled) is an abort whose reason is known (the oom category is the
  device's memory; a host allocation refused in-process stays unclassified, round 8); signal exit statuses (docker
  compose, an IDE, Python's subprocess) and the DataLoader's shared-memory bus error are stops.

and, as a format, MindIE Service 1.0's mindservice.log layout ("yyyy-mm-dd hh:mm:ss.uuuuuu threadid loglevel msg", as
the log's own header states it) is read with its time, thread and level (parsers/_log_grammar.py ``mindie_tid``),
and so are SGLang's own "[yyyy-mm-dd hh:mm:ss( DPn)( TPn)] msg", Python logging's "ts - LEVEL - name - msg" and
"ts(+zone) - name - LEVEL - msg" without milliseconds, and "ts [Error] msg" (16 digested files store their times,
levels and prefix-free messages now: tests/fixtures/log_speed_digests.json, every changed column checked to be one
of those).

Tried and dropped after the held-half measurement (``--half held --figures-only``): a missing *submodule* ("No module
named 'pkg.sub'") as a version mismatch (it turned one more held file into a false positive), and reading only a
work / watchdog that timed out in the NCCL watchdog rule (the teardown line "Some NCCL operations have failed or timed
out" is the only collective record of some captures: one held file lost its category).

Only train files are read (``bench.log_accuracy.half_of``).
"""

from __future__ import annotations

from pathlib import Path

from tests._wild import round_checks
from tests.test_cann_logs import ingest

# (train file, category of the top root cause, its severity, a substring of its lead evidence record's raw text)
TRAIN_CASES = [
    ("w17_007_vllm_ascend_dsv31_two_node_moe_dispatch_v4_hccl_alloc_com_resource_8568.log", "hccl_timeout", "high",
     "fails to invoke the HcclAllocComResourceByTiling function of the hccl module"),
    ("w18_016_vllm_ray_data_enginecore_shm_broadcast_acquire_read_timeout_37250.log", "task_timeout", "medium",
     "ERROR 03-08 17:31:28 [core.py:1102] TimeoutError"),
    ("w18_019_verl_ray_taskrunner_task_receiver_check_failed_objects_valid_2380.log", "abort", "low",
     "task_receiver.cc:219:  Check failed: objects_valid"),
    ("w19_011_mindie_mindservice_log_engine_init_config_manager_failed_forum.log", "unclassified_error", "medium",
     "error infer_engine_inner.cc:257] Engine init config manager falied."),
]  # fmt: skip


# (line as its source prints it, rule id, category)
WORDINGS = [
    # hicann/opbase nnopbase: the MC2 op's HCCL resources (aclnnMoeDistributeDispatch / Combine)
    ("[PID: 316198] 2025-09-28-07:22:29.827.496 AclNN_Inner_Error(EZ9999):  Nnopbase fails to invoke the "
     "HcclAllocComResourceByTiling function of the hccl module. ret = 2, comm = 0xaaab1048cc60.", "hccl_init_failed",
     "hccl_timeout"),
    # vLLM v1 shm_broadcast / collective_rpc; asyncio's and concurrent.futures' qualified names
    ("TimeoutError: RPC call to sample_tokens timed out.", "task_timeout_python", "task_timeout"),
    ("asyncio.exceptions.TimeoutError", "task_timeout_python", "task_timeout"),
    ("[rank0]: concurrent.futures._base.TimeoutError", "task_timeout_python", "task_timeout"),
    # glog CHECK (F = fatal, then its own stack trace banner), Ray's RAY_CHECK
    ("F0706 07:14:27.052000 12345 node_manager.cc:45] Check failed: x == y", "abort_native_check_failed", "abort"),
    ("*** Check failure stack trace: ***", "abort_native_check_failed", "abort"),
    ("[2025-07-06 07:14:27,052 C 2915798 2915798] task_receiver.cc:219:  Check failed: objects_valid",
     "abort_native_check_failed", "abort"),
    # vllm/v1/worker/gpu_worker.py; mm/oom_kill.c (5.x and older, a cgroup); kubectl describe
    ("ValueError: Free memory on device cuda:1 (19.77/22.05 GiB) on startup is less than desired GPU memory "
     "utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
     "oom_startup_free_memory", "oom"),
    ("[1234567.891011] Out of memory: Killed process 3453 (python3) total-vm:230840864kB, anon-rss:200812880kB",
     "abort_host_oom_killed", "abort"),
    ("[ 1234.5] Out of memory: Kill process 123 (python) score 900 or sacrifice child", "abort_host_oom_killed",
     "abort"),
    ("Memory cgroup out of memory: Killed process 4242 (python) total-vm:100kB", "abort_host_oom_killed", "abort"),
    ("      Reason:       OOMKilled", "abort_host_oom_killed", "abort"),
    # docker compose, an IDE, subprocess.CalledProcessError, vLLM's worker; torch/csrc/DataLoader.cpp
    ("vllm-1 exited with code 137", "abort_exit_status_signal", "abort"),
    ("Process finished with exit code 139 (interrupted by signal 11: SIGSEGV)", "abort_exit_status_signal", "abort"),
    ("subprocess.CalledProcessError: Command '['python', 'x.py']' died with <Signals.SIGKILL: 9>.",
     "abort_exit_status_signal", "abort"),
    ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).",
     "abort_dataloader_shm_bus_error", "abort"),
    # the family's platform, dtype and mode vocabulary (the forms of the class)
    ("RuntimeError: npu_moe_gating_top_k is not supported on Ascend310P3", "op_unsupported_family", "op_unsupported"),
    ("NotImplementedError: MLA is not supported on 310P", "op_unsupported_family", "op_unsupported"),
    ("AssertionError: Only support Atlas A2 and A3 series", "op_unsupported_family", "op_unsupported"),
    ("ValueError: fp8 quantization is not supported on this device.", "op_unsupported_family", "op_unsupported"),
    ("RuntimeError: npu_grouped_matmul does not support bfloat16 on 300I DUO", "op_unsupported_family",
     "op_unsupported"),
    ("RuntimeError: aclgraph mode is not supported with this model", "op_unsupported_family", "op_unsupported"),
]  # fmt: skip

# lines that look alike and keep their own rule (None: no rule that names anything)
NEIGHBOURS = [
    # a clean exit, and vLLM's start-up report of the free memory when it suffices
    ("sglang-1 exited with code 0", None),
    ("INFO 01-01 00:00:00 [gpu_worker.py:1] Free memory on device (60.86/61.27 GiB) on startup. Desired GPU memory "
     "utilization is (0.9, 55.14 GiB).", None),
    # the same words at WARNING are a fallback or a notice, never the op_unsupported cause
    ("WARNING 01-01 00:00:00 [platform.py:12] fp8 is not supported on this device, falling back to bf16", None),
    # a model type names no op, dtype or platform: an honest unknown
    ("ValueError: Model type qwen3_next is not supported", "unclassified_error"),
    # the traceback's frame that raises it is not the exception line
    ("    raise TimeoutError", None),
    # an OS socket error stays an unclassified error (a network timeout, not a wait on a worker)
    ("TimeoutError: [Errno 110] Connection timed out", "unclassified_error"),
    # the NCCL teardown line keeps its own rule's reading (a collective failed or timed out)
    ("[rank38]:[E809 14:59:30.411347985 ProcessGroupNCCL.cpp:681] [Rank 38] Some NCCL operations have failed or timed "
     "out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete "
     "data.", "cuda_nccl_watchdog_timeout"),
]  # fmt: skip


# the tables above, checked (tests/_wild.round_checks)
(
    test_train_excerpt_top_cause_and_lead_line,
    test_documented_wording_gets_its_rule,
    test_neighbouring_lines_keep_their_rule,
) = round_checks(TRAIN_CASES, WORDINGS, NEIGHBOURS)


MINDSERVICE_LOG = """\
2024-07-01 10:59:22.531964 460279 Log started at [trace] level
2024-07-01 10:59:22.531970 460279 Log default format: yyyy-mm-dd hh:mm:ss.uuuuuu threadid loglevel msg
2024-06-29 11:54:26.152984 449875 warning infer_tokenizer.cc:446] begin start tokenizer sub process 2, pid = 457140
2024-07-01 10:59:22.535626 460279 error infer_engine_inner.cc:257] Engine init config manager falied.
"""


def test_mindie_service_log_layout_is_read_with_time_thread_and_level(tmp_path: Path) -> None:
    log = tmp_path / "mindservice.log"
    log.write_text(MINDSERVICE_LOG, encoding="utf-8")
    store, ingested = ingest(tmp_path / "db.duckdb", log)
    assert [f.status for f in ingested] == ["ok"]
    cols = ("message", "level", "tid", "source_loc", "ts_ns", "rule_id", "severity")
    rows = store.cursor().execute(f"SELECT {', '.join(cols)} FROM log_records ORDER BY record_no").fetchall()
    store.close()
    by_message = {r[0]: dict(zip(cols, r, strict=True)) for r in rows}
    failed = by_message["Engine init config manager falied."]
    assert (failed["level"], failed["tid"], failed["source_loc"]) == (
        "ERROR",
        460279,
        "infer_engine_inner.cc:257",
    )
    assert failed["ts_ns"] == 1719831562535626000  # 2024-07-01 10:59:22.535626, local time as if UTC
    assert by_message["begin start tokenizer sub process 2, pid = 457140"]["level"] == "WARNING"
    assert (failed["rule_id"], failed["severity"]) == ("unclassified_error", "medium")


CONSOLE_LAYOUTS = """\
[2025-07-02 07:41:58 DP0 TP0] Load weight end. type=DeepseekV3ForCausalLM, avail mem=21.73 GB
[2025-11-07 12:20:13] WARNING server_args.py:1082: At this moment Ascend attention backend only supports a page_size of 128
2025-03-26 11:48:53 - INFO - vllm_ascend.worker.model_runner - Loading model weights took 5.7560 GB
2025-07-18 09:55:21.916582+00:00 - gpustack.worker.backends.base - INFO - Preparing model files...
2026-05-08 11:47:02.257 [Error] (Process) torch.OutOfMemoryError: HIP out of memory. Tried to allocate 12.95 GiB.
"""


def test_sglang_and_python_logging_layouts_are_timed(tmp_path: Path) -> None:
    log = tmp_path / "console.log"
    log.write_text(CONSOLE_LAYOUTS, encoding="utf-8")
    store, ingested = ingest(tmp_path / "db.duckdb", log)
    assert [f.status for f in ingested] == ["ok"]
    rows = (
        store.cursor().execute("SELECT ts_ns, level, message FROM log_records ORDER BY record_no").fetchall()
    )
    store.close()
    got = [(ts is not None, level, message[:24]) for ts, level, message in rows]
    assert got == [
        (True, None, "Load weight end. type=De"),  # SGLang prints no level: none is made up
        (True, "WARNING", "At this moment Ascend at"),
        (True, "INFO", "Loading model weights to"),
        (True, "INFO", "Preparing model files..."),
        (True, "ERROR", "(Process) torch.OutOfMem"),
    ]
