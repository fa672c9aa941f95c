"""Log rules of round 13 (issue #16, session 15), written from the train halves of w15 / w16 after their first
contact, by class, each tested on wordings of its source (cited in the rule's comment) and on the train excerpt it
failed on:

* the runtime's graph-capture return codes of CANN 8.x (107023 … 107036, 507903 in rules/error_codes_acl.csv, from a
  later rt_error_codes.h) are catalogued, without a category of their own (as their CUDA twins
  cudaErrorStreamCapture* have none); CANN's wording of a refused operation, "Not allow to synchronize captured
  stream", joins the "not supported" family's graph-capture class (op_unsupported);
* PyTorch's driver-API check ("CUDA driver error: <cuGetErrorString>", c10/cuda/driver_api.h) is read like its
  runtime check: "CUDA driver error: out of memory" is the OOM;
* Gloo's transport timeout ("Timed out waiting 1800000ms for recv operation to complete") is a collective timeout
  (hccl_timeout, the platform-neutral class).

Only train files are read (``bench.log_accuracy.half_of``).
"""

from __future__ import annotations

from tests._wild import round_checks

# (train file, category of the top root cause, its severity, a substring of its lead evidence record's raw text)
TRAIN_CASES = [
    ("w15_016_llamacpp_cann_glm46_acl_graph_not_allow_sync_captured_stream_107027_16586.log", "op_unsupported",
     "high", "Not allow to synchronize captured stream stream_id=2."),
    ("w16_001_vllm_enginecore_cuda_driver_oom_gptq_marlin_repack_club3090_60.log", "oom", "high",
     "RuntimeError: CUDA driver error: out of memory"),
    ("w16_014_torchtune_gloo_barrier_recv_timeout_save_checkpoint_2676.log", "hccl_timeout", "high",
     "Timed out waiting 1800000ms for recv operation to complete"),
]  # fmt: skip


# (line as its source prints it, rule id, category)
WORDINGS = [
    # CANN runtime api_error.cc StreamSynchronize under capture (ACL_ERROR_RT_STREAM_CAPTURED)
    ("EE9999: [PID: 881460] 2025-10-15-14:43:16.351.702 Not allow to synchronize captured stream stream_id=2."
     "[FUNC:StreamSynchronize][FILE:api_error.cc][LINE:884]", "op_unsupported_family", "op_unsupported"),
    # gloo/transport/tcp/unbound_buffer.cc, send and recv
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:133] Timed out waiting 600000ms for "
     "send operation to complete", "gloo_collective_timeout", "hccl_timeout"),
    ("[rank1]: torch.distributed.DistBackendError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81]"
     " Timed out waiting 1800000ms for recv operation to complete", "gloo_collective_timeout", "hccl_timeout"),
]  # fmt: skip

# lines that look alike and keep their own rule (None: no rule that names anything)
NEIGHBOURS = [
    # the runtime's reason line beside it is generic, not a second cause
    ("rtStreamSynchronize execute failed,  reason=[stream is captured][FUNC:FuncErrorReason]"
     "[FILE:error_message_manage.cc][LINE:53]", None),
    # a capture that was allowed and ended: nothing failed
    ("INFO 05-07 00:37:03 [gpu_model_runner.py:2000] Graph capturing finished in 12 secs, took 0.45 GiB", None),
]  # fmt: skip


# the tables above, checked (tests/_wild.round_checks)
(
    test_train_excerpt_top_cause_and_lead_line,
    test_documented_wording_gets_its_rule,
    test_neighbouring_lines_keep_their_rule,
) = round_checks(TRAIN_CASES, WORDINGS, NEIGHBOURS)
