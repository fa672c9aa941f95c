"""Log rules of round 10 (issue #16): the classes behind the w11 / w12 TRAIN misses (their first-contact figures are in
README #16), each tested on wordings of its source (cited in the rule's comment) and on the train excerpt it failed on:

* PyTorch's dispatcher "Could not run 'aten::x' with arguments from the 'Y' backend" is a CPU fallback only for a CPU
  dispatch key; for a device key (PrivateUse1 = torch_npu's "npu", AutogradPrivateUse1, XLA, CUDA …) the op is not
  implemented for that device: op_unsupported;
* CANN's "support for <SoC> is not implemented" (EZ9903) is an op without an implementation for this chip;
* xFormers' "No operator found for `…` with inputs" is an op without a kernel for these inputs;
* vLLM-Ascend's "Unsupported soc_version" (underscore) is the unknown-SoC version mismatch;
* torchrun's agent receiving a death signal is the job stopped from outside (abort, low);
* "Cannot re-initialize CUDA / NPU in forked subprocess" is an honest unknown with its own fix, and in a capture of
  several processes (untimed) the process whose unknown a rule names leads over one with a bare ERROR record.

Only train files are read (``bench.log_accuracy.half_of``).
"""

from __future__ import annotations

from tests._wild import round_checks

# (train file, category of the top root cause, its severity, a substring of its lead evidence record's raw text)
TRAIN_CASES = [
    ("w11_009_verl_taskrunner_vllm_ascend_0140_unsupported_soc_version_950_a5_13086.log", "version_mismatch", "high",
     'raise ValueError(f"Unsupported soc_version: {soc_version}")'),
    ("w11_012_torch_npu_privateuse1_autograd_to_dtype_not_implemented_95207.log", "op_unsupported", "high",
     "Could not run 'aten::to.dtype' with arguments from the 'AutogradPrivateUse1' backend"),
    ("w11_024_xformers_no_operator_memory_efficient_attention_attn_bias_stride_sm89_1263.log", "op_unsupported",
     "high", "No operator found for `memory_efficient_attention_forward` with inputs:"),
    ("w11_026_torchrun_agent_death_signal_sighup_tqdm_qwen7b_lora_ddp_ms_swift_64.log", "abort", "low",
     "Received 1 death signal, shutting down workers"),
    ("w11_028_vllm_v0_workers_cannot_reinitialize_cuda_forked_subprocess_11560.log", "unclassified_error", "medium",
     "RuntimeError: Cannot re-initialize CUDA in forked subprocess"),
    ("w12_021_op_llamacpp_cann_ez9903_support_for_ascend910_not_implemented_18133.log", "op_unsupported", "high",
     "support for Ascend910 is not implemented"),
]  # fmt: skip


# (line as its source prints it, rule id, category)
WORDINGS = [
    # c10/core/DispatchKey / aten dispatcher: "Could not run '%s' with arguments from the '%s' backend."
    ("NotImplementedError: Could not run 'aten::_fused_rms_norm' with arguments from the 'PrivateUse1' backend.",
     "op_unsupported_backend", "op_unsupported"),
    ("NotImplementedError: Could not run 'torchvision::nms' with arguments from the 'XLA' backend.",
     "op_unsupported_backend", "op_unsupported"),
    ("NotImplementedError: Could not run 'aten::empty_strided' with arguments from the 'CUDA' backend. This could be "
     "because the operator doesn't exist for this backend, or was omitted during the selective/custom build process",
     "op_unsupported_backend", "op_unsupported"),
    ("NotImplementedError: Could not run 'aten::_scaled_dot_product_efficient_attention' with arguments from the "
     "'CPU' backend.", "cpu_fallback_failed", "cpu_fallback"),
    ("NotImplementedError: Could not run 'quantized::linear_dynamic' with arguments from the 'QuantizedCPU' backend.",
     "cpu_fallback_failed", "cpu_fallback"),
    # CANN EZ9903 (op framework) with the SoC it lacks an implementation for
    ("EZ9903: [PID: 71888] 2025-12-17-18:13:01.238.630 support for Ascend910 is not implemented", "op_unsupported_soc",
     "op_unsupported"),
    ("[ERROR] 2026-01-10 support for Ascend310P3 is not implemented", "op_unsupported_soc", "op_unsupported"),
    # xformers/ops/fmha/dispatch.py _run_priority_list
    ("NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:",
     "op_unsupported_no_operator_for_inputs", "op_unsupported"),
    # vllm_ascend ascend_forward_context / utils: the SoC check in both spellings
    ('ValueError: Unsupported soc_version: SocVersion.UNDEFINED', "version_soc", "version_mismatch"),
    ("RuntimeError: Unsupported soc version: Ascend950PR 9579", "version_soc", "version_mismatch"),
    # torch/distributed/elastic/agent/server/api.py (glued behind a tqdm bar as consoles capture it)
    ("WARNING:torch.distributed.elastic.agent.server.api:Received 1 death signal, shutting down workers",
     "torchrun_agent_death_signal", "abort"),
    (" 12%|█▏        | 2905/25120 [2:12:37<17:37:09,  2.86s/it]WARNING:torch.distributed.elastic.agent.server.api:"
     "Received 15 death signal, shutting down workers", "torchrun_agent_death_signal", "abort"),
    ("[2025-03-01 10:00:00,000] torch.distributed.elastic.agent.server.api: [WARNING] Received Signals.SIGTERM death "
     "signal, shutting down workers", "torchrun_agent_death_signal", "abort"),
    # torch/cuda/__init__.py _lazy_init; torch_npu's npu/__init__.py
    ("RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the "
     "'spawn' start method", "unclassified_forked_device_init", "unclassified_error"),
    ("RuntimeError: Cannot re-initialize NPU in forked subprocess. To use NPU with multiprocessing, you must use the "
     "'spawn' start method", "unclassified_forked_device_init", "unclassified_error"),
]  # fmt: skip


# (line, the rule it must still get: the new alternatives do not swallow their neighbours)
NEIGHBOURS = [
    # "not implemented" about something other than a chip is not the SoC class: an unknown ERROR record
    ("NotImplementedError: support for sliding window attention is not implemented", "unclassified_error"),
    # the workers' closing signal alone (sent by the agent) is not the agent's own signal
    ("WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 2919043 closing signal SIGHUP", None),
    # CUDA's initialization error (its code, no fork words) keeps the CUDA unknown, not the fork class
    ("RuntimeError: CUDA error: initialization error", "cuda_unclassified_error"),
]  # fmt: skip


# the tables above, checked (tests/_wild.round_checks)
(test_train_excerpt_top_cause_and_lead_line, test_documented_wording_gets_its_rule,
 test_neighbouring_lines_keep_their_rule) = round_checks(TRAIN_CASES, WORDINGS, NEIGHBOURS)
