"""Log rules of round 7 (issue #16): the classes behind the w6 TRAIN misses, each tested on a documented wording
(its source in the rule's comment) and on the train excerpt it failed on.

* a KV-cache budget under 0.1 GiB (not only a negative one) is the KV-cache OOM, also when the paste stops there;
* "X is only supported on GPUs with compute capability …" is the not-supported family (a dtype on an old GPU);
* an Ascend package (vllm_ascend, torchair …) that lacks an attribute its caller wants is a version mismatch, as
  torch_npu's was;
* aclInit's "[Init][Version]init soc version failed." TraceBack line is the SoC the runtime does not know, and its
  record leads over the bare "aclInit(nullptr) failed: 500000" return-code line;
* an allocation request beyond any device ("more than 1EB") is an honest unknown, not an OOM;
* ATen's sampling assert on inf / NaN probabilities is an honest unknown (numerical), not a device fault.

Only train files are read (``bench.log_accuracy.half_of``).
"""

from __future__ import annotations

from bench.log_accuracy import WILD, diagnose, half_of
from tests._wild import round_checks
from tests.test_cann_logs import classify_lines

# (train file, category of the top root cause, its severity, a substring of its lead evidence record's raw text)
TRAIN_CASES = [
    ("w6_007_310p_kv_cache_halved_tiny_budget_vllm_ascend_14274.log", "oom", "high",
     "Available KV cache memory: 0.09 GiB (halved f"),
    ("w6_023_xinference_bf16_t4_address_prefix_compute_capability_75_3486.log", "op_unsupported", "high",
     "Bfloat16 is only supported on GPUs with compute capability of at least 8.0"),
    ("w6_039_failed_to_load_plugin_ascend_no_attribute_register_vllm_ascend_3403.log", "version_mismatch", "high",
     "AttributeError: module 'vllm_ascend' has no attribute 'register'"),
    ("w6_020_a5_aclinit_500000_ee1001_get_dev_msg_not_supported_ptoas_836.log", "version_mismatch", "high",
     "[Init][Version]init soc version failed."),
    ("w6_021_npu_oom_more_than_1eb_corrupted_labels_fla_npu_149.log", "unclassified_error", "medium",
     "NPU out of memory. Tried to allocate more than 1EB memory"),
    ("w6_048_ktransformers_chat_output_glued_to_probability_assert_465.log", "unclassified_error", "medium",
     "probability tensor contains either `inf`, `nan` or element < 0` failed."),
]  # fmt: skip


# (line as its source prints it, rule id, category)
WORDINGS = [
    # vLLM V1 gpu_worker.py: logger.info("Available KV cache memory: %.2f GiB", …)
    ("INFO 03-01 10:00:00 [gpu_worker.py:241] Available KV cache memory: 0.04 GiB", "oom_kv_cache", "oom"),
    ("INFO 03-01 10:00:00 [gpu_worker.py:241] Available KV cache memory: -1.20 GiB", "oom_kv_cache", "oom"),
    # vllm/platforms/cuda.py check_if_supports_dtype (P40: compute capability 6.1)
    ("ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla P40 GPU "
     "has compute capability 6.1. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for "
     "example: --dtype=half.", "op_unsupported_family", "op_unsupported"),
    # torchair / vllm_ascend of another release than their caller
    ("AttributeError: module 'torchair' has no attribute 'patch_for_hcom'", "version_symbol", "version_mismatch"),
    ("AttributeError: module 'vllm_ascend.ops' has no attribute 'rotary_embedding'", "version_symbol",
     "version_mismatch"),
    ("        [Init][Version]init soc version failed.[FUNC:ReportInnerError][FILE:log_inner.cpp][LINE:132]",
     "version_soc", "version_mismatch"),
    # torch_npu / c10 size formats past the exbibyte range, and PiB sizes
    ("NPU out of memory. Tried to allocate more than 1EB memory.", "oom_implausible_size", "unclassified_error"),
    ("torch.OutOfMemoryError: NPU out of memory. Tried to allocate 8.00 PiB (NPU 0; 60.96 GiB total capacity)",
     "oom_implausible_size", "unclassified_error"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1073741824.00 GiB. GPU 0 has a total capacity "
     "of 79.14 GiB of which 70.12 GiB is free.", "cuda_oom_implausible_size", "unclassified_error"),
    ("../aten/src/ATen/native/cuda/TensorCompare.cu:110: _assert_async_cuda_kernel: block: [0,0,0], thread: "
     "[0,0,0] Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed.",
     "cuda_sampling_probability_assert", "unclassified_error"),
]  # fmt: skip


# (line, the rule it must still get: the new alternatives do not swallow their neighbours)
NEIGHBOURS = [
    # a usual budget: context, not a failure
    ("INFO 03-01 10:00:00 [gpu_worker.py:241] Available KV cache memory: 0.52 GiB", None),
    ("INFO 03-01 10:00:00 [gpu_worker.py:241] Available KV cache memory: 30.12 GiB", None),
    # a real request size stays an OOM
    ("NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity; 58.10 GiB already allocated)",
     "oom_torch_npu"),
    ("torch.OutOfMemoryError: NPU out of memory. Tried to allocate 1024.00 GiB", "oom_torch_npu"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of "
     "79.14 GiB", "cuda_oom_torch"),
    # an ATen index assert is still not the sampling one
    ("/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1422: indexSelectLargeIndex: block: [0,0,0], thread: [0,0,0] "
     "Assertion `srcIndex < srcSelectDimSize` failed.", None),
]  # fmt: skip




# TORCH_LOGS=recompiles (torch/_logging/_internal.py TorchLogsFormatter) repeats the header on every line of one message
_HEAD = "V0721 23:40:59.397000 2159156 torch/_dynamo/guards.py:3006] [1/37] [__recompiles]"


def test_torch_logs_message_over_lines_is_one_record() -> None:
    lines = [
        f"{_HEAD} Recompiling function forward in /src/transformer_flux.py:381",
        f"{_HEAD}     triggered by the following guard failure(s):",
        f"{_HEAD}     - 1/36: ___check_obj_id(self._modules['attn'].processor, 140462015041104)",
        "V0721 23:41:02.113000 2159156 torch/_dynamo/guards.py:3006] [1/38] [__recompiles] Recompiling function "
        "forward in /src/transformer_flux.py:381",
    ]
    recs = classify_lines(lines)
    assert [r["line_no"] for r in recs] == [1, 4]
    assert (recs[0]["rule_id"], recs[0]["category"]) == ("recompile_identity_guard", "recompile")
    assert "Recompiling function forward" in recs[0]["raw"] and "___check_obj_id" in recs[0]["raw"]


def test_same_header_without_indent_or_another_stamp_starts_a_record() -> None:
    lines = [
        f"{_HEAD} Recompiling function forward in /src/a.py:1",
        f"{_HEAD} Recompiling function forward in /src/b.py:2",  # the same call site twice, not indented
        "V0721 23:40:59.397001 2159156 torch/_dynamo/guards.py:3006] [1/37] [__recompiles]     - 1/36: x == 1",
    ]
    assert [r["line_no"] for r in classify_lines(lines)] == [1, 2, 3]


def test_glog_line_with_the_year_has_its_level_and_time() -> None:
    # glog ≥ 0.7 (Mooncake's transfer engine): "Lyyyymmdd hh:mm:ss.uuuuuu tid file:line] msg"
    line = (
        "E20260106 06:43:02.966156  5793 ascend_direct_transport.cpp:820] Failed to connect to target: "
        "172.17.0.16:25482, status: 103900"
    )
    (rec,) = classify_lines([line])
    assert (rec["level"], rec["tid"], rec["src"]) == ("ERROR", 5793, "ascend_direct_transport.cpp:820")
    assert rec["ts_ns"] == 1767681782966156000  # 2026-01-06 06:43:02.966156 as if UTC
    assert (rec["rule_id"], rec["category"]) == ("unclassified_glog_status", "unclassified_error")


def test_glog_year_line_leads_the_engine_records_that_echo_it() -> None:
    file = "w5_052_mooncake_ascend_direct_connect_103900_transfer_failed_vllm_ascend_5635.log"
    assert half_of(file) == "train"
    category, severity, raw = diagnose(WILD / file)
    assert (category, severity) == ("unclassified_error", "medium")
    assert "Failed to connect to target: 172.17.0.16:25482, status: 103900" in raw


# the tables above, checked (tests/_wild.round_checks)
(test_train_excerpt_top_cause_and_lead_line, test_documented_wording_gets_its_rule,
 test_neighbouring_lines_keep_their_rule) = round_checks(TRAIN_CASES, WORDINGS, NEIGHBOURS)
