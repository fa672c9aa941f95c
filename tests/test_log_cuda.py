"""CUDA-side console logs (issue #16): the cudaError_t / ncclResult_t / cuBLAS / cuDNN catalogs, the CUDA code shapes
and the CUDA phrase rules (rules/log_patterns_cuda.toml).  Lines are real ones from the train half of
tests/fixtures/logs_wild (w3_*) or the printers' documented wordings."""

from __future__ import annotations

import csv
import json
import re
import tomllib
from pathlib import Path

import pytest

from bench.log_accuracy import WILD, diagnose, half_of
from diag.analyses import log_rule_files
from diag.analyses.error_codes import describe_code
from diag.analyses.log_diagnosis import log_rules
from diag.analyses.log_explain import explain, oom_advice
from tests.test_cann_logs import classify_lines

RULES = Path(__file__).resolve().parent.parent / "diag" / "rules"
CATALOGS = {"cuda": "CUDA:", "nccl": "NCCL:", "cublas": "CUBLAS:", "cudnn": "CUDNN:"}
GIB, MIB = 2**30, 2**20


def _rows(kind: str) -> list[dict[str, str]]:
    with open(RULES / f"error_codes_{kind}.csv", encoding="utf-8") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def _one(line: str) -> dict:
    (rec,) = classify_lines([line])
    return rec


# -- the catalogs -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(CATALOGS))
def test_catalog_rows_are_whole_and_sourced(kind):
    header = (RULES / f"error_codes_{kind}.csv").read_text(encoding="utf-8").split("\ncode,")[0]
    assert "Source" in header and "read 2026-12-01" in header
    rows = _rows(kind)
    categories = set(log_rules()["category"])
    assert all(r["code"] == CATALOGS[kind] + r["name"] for r in rows)
    assert len({r["number"] for r in rows}) == len(rows)  # one row per enum value
    assert {r["category"] for r in rows} - {""} <= categories


def test_cuda_catalog_figures():
    rows = {r["name"]: r for r in _rows("cuda")}
    assert len(rows) == 121
    assert (rows["cudaErrorIllegalAddress"]["number"], rows["cudaErrorIllegalAddress"]["message"]) == (
        "700",
        "an illegal memory access was encountered",
    )
    by_category = {
        "oom": ["cudaErrorMemoryAllocation"],
        "device_exception": ["cudaErrorIllegalAddress", "cudaErrorLaunchFailure", "cudaErrorIllegalInstruction",
                             "cudaErrorMisalignedAddress", "cudaErrorAssert"],
        "task_timeout": ["cudaErrorLaunchTimeout"],
        "version_mismatch": ["cudaErrorInsufficientDriver", "cudaErrorNoKernelImageForDevice",
                             "cudaErrorUnsupportedPtxVersion"],
        "": ["cudaErrorInvalidValue", "cudaErrorUnknown", "cudaErrorNotSupported"],
    }  # fmt: skip
    for category, names in by_category.items():
        assert [rows[n]["category"] for n in names] == [category] * len(names)


def test_nccl_cublas_cudnn_catalog_figures():
    nccl = {r["name"]: r for r in _rows("nccl")}
    assert [nccl[n]["number"] for n in ("ncclUnhandledCudaError", "ncclSystemError", "ncclRemoteError")] == [
        "1",
        "2",
        "6",
    ]
    assert (
        nccl["ncclUnhandledCudaError"]["message"]
        == "unhandled cuda error (run with NCCL_DEBUG=INFO for details)"
    )
    assert nccl["ncclRemoteError"]["category"] == "hccl_timeout"
    assert {r["name"]: r["number"] for r in _rows("cublas")}["CUBLAS_STATUS_NOT_SUPPORTED"] == "15"
    cudnn = {r["name"]: r for r in _rows("cudnn")}
    assert (
        cudnn["CUDNN_STATUS_ALLOC_FAILED"]["category"],
        cudnn["CUDNN_STATUS_NOT_INITIALIZED"]["category"],
    ) == (
        "oom",
        "",
    )


def test_describe_a_cuda_code():
    entry = describe_code("CUDA:cudaErrorIllegalAddress")
    assert (entry["component"], entry["meaning"]) == (
        "CUDA runtime (cudaError_t)",
        "an illegal memory access was encountered",
    )
    assert describe_code("NCCL:ncclSystemError")["component"] == "NCCL (ncclResult_t)"


# -- code extraction ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("line", "codes"),
    [
        # w3_026 (train): the string cudaGetErrorString prints
        ("2024-12-19 21:40:35 ERROR 56542 [async_llm_engine.py:64] RuntimeError: Error in model execution: CUDA "
         "error: an illegal memory access was encountered", ["CUDA:cudaErrorIllegalAddress"]),
        ("CUDA error 700 at kernel.cu:12", ["CUDA:cudaErrorIllegalAddress"]),
        ("CUDA error: unspecified launch failure in prior launch", ["CUDA:cudaErrorPriorLaunchFailure"]),  # longest
        ("checkCudaErrors: code=2(cudaErrorMemoryAllocation) \"cudaMalloc(&p, n)\"", ["CUDA:cudaErrorMemoryAllocation"]),
        ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
         "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5", ["NCCL:ncclSystemError"]),
        ("Last error: ncclRemoteError: remote process exited or there was a network error", ["NCCL:ncclRemoteError"]),
        # w3_031 (train)
        ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx( handle, opa, opb, m, n, "
         "k, &falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, ldc, CUDA_R_32F, "
         "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`", ["CUBLAS:CUBLAS_STATUS_NOT_SUPPORTED"]),
        ("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED", ["CUDNN:CUDNN_STATUS_NOT_INITIALIZED"]),
        ("exit code 700 of the job", None),  # a number is a CUDA code only after "CUDA error"
    ],
)  # fmt: skip
def test_cuda_code_shapes(line, codes):
    assert _one(line)["codes"] == codes


# -- the phrase and code rules -------------------------------------------------------------------------------------
RULE_LINES = {
    # w3_002 (train)
    "cuda_oom_torch": "(EngineCore pid=112) ERROR 05-01 14:39:06 [core.py:1131] torch.OutOfMemoryError: CUDA out of "
    "memory. Tried to allocate 50.00 MiB. GPU 0 has a total capacity of 23.56 GiB of which 21.75 MiB is free.",
    "cuda_code_device_exception": "RuntimeError: CUDA error: device-side assert triggered",
    "cuda_code_oom": "RuntimeError: CUDA error: out of memory",
    "cuda_code_task_timeout": "cudaErrorLaunchTimeout: the launch timed out and was terminated",
    "cuda_code_version_mismatch": "CUDA error 35 at main.cu:10",
    "cuda_code_nccl": "ERROR torch.distributed: ncclRemoteError: remote process exited or there was a network error",
    # w3_007 (train)
    "cuda_nccl_watchdog_timeout": "  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: "
    "[Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, "
    "NumelIn=19008, NumelOut=152064, Timeout(ms)=600000) ran for 600020 milliseconds before timing out.",
    "cuda_nccl_aborted": "RuntimeError: NCCL communicator was aborted on rank 1.  Original reason for failure was: "
    "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, "
    "NumelOut=1, Timeout(ms)=600000) ran for 600046 milliseconds before timing out.",
    "cuda_nccl_error": "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
    "ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5",
    # w3_047 (train)
    "cuda_nvml_mismatch": "Failed to initialize NVML: Driver/library version mismatch",
    "cuda_driver_too_old": "/usr/lib/python3/dist-packages/torch/cuda/__init__.py:118: UserWarning: CUDA "
    "initialization: The NVIDIA driver on your system is too old (found version 11040).",
    "cuda_torch_without_cuda": "AssertionError: Torch not compiled with CUDA enabled",
    # w3_031 (train)
    "cuda_unclassified_error": "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx( "
    "handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, ldc, "
    "CUDA_R_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`",
    "cuda_xid": "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=2345, GPU has fallen off the bus.",
    "cuda_oom_implausible_size": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1073741824.00 GiB.",
    "cuda_extension_cuda_mismatch": "RuntimeError: Detected that PyTorch and torchvision were compiled with different "
    "CUDA major versions. PyTorch has CUDA Version=13.0 and torchvision has CUDA Version=12.8.",
    "cuda_xformers_built_for_other_torch": "WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was "
    "built for:",
    "cuda_sampling_probability_assert": "/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:110: "
    "_assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] Assertion `probability tensor contains either `inf`, "
    "`nan` or element < 0` failed.",
    "cuda_exit_sigsegv": "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -11) local_rank: 0 "
    "(pid: 4126) of binary: /usr/bin/python3",
    "cuda_exit_sigkill": "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 "
    "(pid: 4129) of binary: /usr/bin/python3",
    "cuda_exit_sigabrt": "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: exitcode  : -6 (pid: 77)",
    "cuda_exit_sigbus": "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: exitcode  : -7 (pid: 78)",
    "cuda_exit_sigterm": "WARNING:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -15) local_rank: 1",
    # w1_070 (train)
    "cuda_fatal_python_signal": "Fatal Python error: Segmentation fault",
    # w3_038 (train)
    "cuda_noise_nccl_info": "babel-12-29:256515:256515 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>",
    "cuda_noise_nccl_library": "INFO 12-11 22:03:15 utils.py:961] Found nccl from library libnccl.so.2",
    "cuda_noise_torch_nccl_env": "[W Utils.hpp:133] Warning: Environment variable NCCL_BLOCKING_WAIT is deprecated; "
    "use TORCH_NCCL_BLOCKING_WAIT instead (function getCvarBool)",
    "cuda_noise_torchvision_image": "/usr/lib/python3/dist-packages/torchvision/io/image.py:13: UserWarning: Failed "
    "to load image Python extension: '/usr/lib/python3/dist-packages/torchvision/image.so: undefined symbol: _ZN3c10'",
    "cuda_noise_python_warning": "ERROR 06-01 10:00:00 [x.py:1] /opt/x.py:3: FutureWarning: "
    "`torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.",
    # ROCm / XPU (tests/test_log_codes_rocm_xpu.py: the printers' formats)
    "rocm_code_device_exception": "RuntimeError: HIP error: an illegal memory access was encountered",
    "rocm_code_oom": "ROCm error: out of memory",
    "rocm_code_task_timeout": "hipErrorLaunchTimeOut: the launch timed out and was terminated",
    "rocm_code_version_mismatch": "RuntimeError: HIP error: invalid device function",
    "rocm_oom_torch": "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 63.98 GiB of which 1.20 GiB is free.",
    "xpu_code_device_exception": "RuntimeError: Native API failed. Native API returns: 20 (UR_RESULT_ERROR_DEVICE_LOST)",
    "xpu_code_oom": "RuntimeError: Native API failed. Native API returns: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
    "xpu_code_op_unsupported": "RuntimeError: Native API failed. Native API returns: 44 (UR_RESULT_ERROR_UNSUPPORTED_FEATURE)",
    # w10_021 / w10_010 (train; tests/test_log_rules_round9.py)
    "rocm_blas_no_tensile_library": 'rocblaslt error: Could not load "TensileLibrary_lazy_gfx1101.dat"',
    "xpu_ccl_transport_setup": "2025:05:23-19:04:20:(168955) |CCL_ERROR| atl_ofi_helper.cpp:1635 atl_ofi_open_nw_provs: "
    "can not open network providers",
}
EXPECTED = {  # rule → (category, severity)
    "cuda_oom_torch": ("oom", "high"), "cuda_code_device_exception": ("device_exception", "high"),
    "cuda_code_oom": ("oom", "high"), "cuda_code_task_timeout": ("task_timeout", "high"),
    "cuda_code_version_mismatch": ("version_mismatch", "high"), "cuda_code_nccl": ("hccl_timeout", "high"),
    "cuda_nccl_watchdog_timeout": ("hccl_timeout", "high"), "cuda_nccl_aborted": ("hccl_timeout", "high"),
    "cuda_nccl_error": ("hccl_timeout", "high"), "cuda_nvml_mismatch": ("version_mismatch", "high"),
    "cuda_driver_too_old": ("version_mismatch", "high"), "cuda_exit_sigsegv": ("abort", "info"),
    "cuda_exit_sigkill": ("abort", "info"), "cuda_exit_sigabrt": ("abort", "info"),
    "cuda_exit_sigbus": ("abort", "info"), "cuda_exit_sigterm": ("abort", "info"),
    "cuda_fatal_python_signal": ("abort", "medium"),
    "cuda_torch_without_cuda": ("version_mismatch", "high"),
    "cuda_unclassified_error": ("unclassified_error", "medium"),
    "cuda_xid": ("device_exception", "high"), "cuda_noise_nccl_info": ("info_noise", "none"),
    "cuda_sampling_probability_assert": ("unclassified_error", "medium"),
    "cuda_extension_cuda_mismatch": ("version_mismatch", "high"),
    "cuda_xformers_built_for_other_torch": ("version_mismatch", "medium"),
    "cuda_oom_implausible_size": ("unclassified_error", "medium"),
    "cuda_noise_nccl_library": ("info_noise", "none"), "cuda_noise_torch_nccl_env": ("info_noise", "none"),
    "cuda_noise_torchvision_image": ("info_noise", "none"), "cuda_noise_python_warning": ("info_noise", "none"),
    "rocm_code_device_exception": ("device_exception", "high"), "rocm_code_oom": ("oom", "high"),
    "rocm_code_task_timeout": ("task_timeout", "high"), "rocm_code_version_mismatch": ("version_mismatch", "high"),
    "rocm_oom_torch": ("oom", "high"), "xpu_code_device_exception": ("device_exception", "high"),
    "xpu_code_oom": ("oom", "high"), "xpu_code_op_unsupported": ("op_unsupported", "high"),
    "rocm_blas_no_tensile_library": ("version_mismatch", "low"), "xpu_ccl_transport_setup": ("hccl_timeout", "high"),
}  # fmt: skip


def _cuda_rule_ids() -> list[str]:
    with open(RULES / "log_patterns_cuda.toml", "rb") as fh:
        return [r["id"] for r in tomllib.load(fh)["rule"]]


def test_every_cuda_rule_has_a_line():
    assert sorted(_cuda_rule_ids()) == sorted(RULE_LINES) == sorted(EXPECTED)


@pytest.mark.parametrize("rule_id", list(RULE_LINES))
def test_cuda_rule(rule_id):
    rec = _one(RULE_LINES[rule_id])
    assert (rec["rule_id"], rec["category"], rec["severity"]) == (rule_id, *EXPECTED[rule_id])


def test_cublas_not_supported_is_not_placed():
    """w3_031 (train): CUBLAS_STATUS_NOT_SUPPORTED alone does not say why (a dtype, the GPU, the library)."""
    rec = _one(RULE_LINES["cuda_code_device_exception"].replace("device-side assert triggered", "CUBLAS_STATUS_"
                                                                "NOT_SUPPORTED when calling `cublasGemmEx(…)`"))  # fmt: skip
    assert (rec["codes"], rec["category"]) == (["CUBLAS:CUBLAS_STATUS_NOT_SUPPORTED"], "unclassified_error")


def test_nccl_watchdog_explained_with_its_figures():
    said = explain(
        "cuda_nccl_watchdog_timeout", "hccl_timeout", [RULE_LINES["cuda_nccl_watchdog_timeout"]], {}
    )
    assert said.title == "NCCL collective timeout (c10d watchdog): _ALLGATHER_BASE"
    assert said.explanation.startswith(
        "The PyTorch c10d watchdog of ProcessGroupNCCL found a collective that had not finished in time: "
        "_ALLGATHER_BASE, SeqNum 9141, timeout 600000 ms, on rank 5."
    )


def test_cuda_texts_name_no_ascend_thing():
    with open(RULES / "advice.toml", "rb") as fh:
        ascend_only = [re.compile(t, re.I) for t in tomllib.load(fh)["terms"]["ascend_only"]]
    rules = log_rules()["rule"]
    for rule_id in _cuda_rule_ids():
        text = " ".join(rules[rule_id].get(k, "") for k in ("title", "explanation", "fix"))
        assert not [t.pattern for t in ascend_only if t.search(text)], rule_id
    # the collective-timeout category keeps its name; on CUDA its texts say NCCL
    assert "NCCL" in rules["cuda_nccl_watchdog_timeout"]["explanation"]


def test_cuda_oom_figures_and_advice():
    """w3_002 (train): PyTorch 2.4+ message with CUDA-graph private pools: reserved = allocated + reserved but
    unallocated, so the advice can weigh fragmentation (here: 1.2 % of reserved, not fragmentation)."""
    line = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 MiB. GPU 0 has a total capacity of "
        "23.56 GiB of which 21.75 MiB is free. Including non-PyTorch memory, this process has 23.50 GiB memory in "
        "use. Of the allocated memory 22.88 GiB is allocated by PyTorch, with 24.00 MiB allocated in private pools "
        "(e.g., CUDA Graphs), and 275.38 MiB is reserved by PyTorch but unallocated."
    )
    figures = json.loads(_one(line)["figures"])
    assert figures == {
        "requested_bytes": 50 * MIB, "device": 0, "capacity_bytes": round(23.56 * GIB), "free_bytes": round(21.75 * MIB),
        "process_in_use_bytes": round(23.5 * GIB), "allocated_bytes": round(22.88 * GIB),
        "private_pool_bytes": 24 * MIB, "reserved_unallocated_bytes": round(275.38 * MIB),
    }  # fmt: skip
    said = explain("cuda_oom_torch", "oom", [line], figures)
    assert said.advice == [
        "Requested 50.00 MiB with 21.75 MiB free of 23.56 GiB.",
        "Reserved 23.15 GiB vs allocated 22.88 GiB: 275.38 MiB held by the caching allocator (1.2% of reserved): "
        "most of it is in use by tensors.",
    ]


def test_oom_advice_names_the_platform_tools():
    figures = {
        "capacity_bytes": 64 * GIB,
        "allocated_bytes": 2 * GIB,
        "reserved_bytes": 10 * GIB,
        "free_bytes": 4 * GIB,
    }
    cuda, ascend = oom_advice(figures, "cuda"), oom_advice(figures)
    assert cuda[0].endswith("— fragmentation likely (try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True).")
    assert ascend[0].endswith("— fragmentation likely (try PYTORCH_NPU_ALLOC_CONF=expandable_segments:True).")
    assert cuda[-1].endswith("non-PyTorch allocation holds it (check nvidia-smi).")
    assert ascend[-1].endswith("non-PyTorch allocation holds it (check npu-smi info).")


def test_ascend_records_keep_their_rules():
    """The CUDA rules come first but never take an Ascend record (a CUDA code rule takes CUDA: codes only)."""
    lines = [
        "[ERROR] RUNTIME(1,python):2025-01-01-00:00:00.000.001 [stream.cc:1] rtStreamSynchronize failed, "
        "runtime result = 507015",
        "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.97 GiB total capacity; 49.47 GiB "
        "already allocated; 51.12 GiB current active; 1.20 GiB free; 57.55 GiB reserved in total by PyTorch)",
    ]
    assert [r["rule_id"] for r in classify_lines(lines)] == ["device_aicore_exception", "oom_torch_npu"]


def test_merge_places_rules_and_refuses_an_unknown_anchor(tmp_path):
    ids = [r["id"] for r in log_rule_files.merged_rule_data()["rule"]]
    assert ids[0] == "cuda_noise_nccl_info"
    assert ids.index("cuda_fatal_python_signal") == ids.index("abort_watchdog") - 1
    assert ids.index("cuda_unclassified_error") == ids.index("unclassified_error") - 1
    extra = tmp_path / "extra.toml"
    extra.write_text('[[rule]]\nid = "x"\nbefore = "no_such_rule"\n', encoding="utf-8")
    with pytest.raises(ValueError, match="no_such_rule"):
        log_rule_files.merged_rule_data(log_rule_files.PATTERNS, extra)


@pytest.mark.parametrize(
    ("name", "category"),
    [
        ("w3_007_nccl_watchdog_terminate_allgather_sglang_1693.log", "hccl_timeout"),
        ("w3_026_cuda_illegal_memory_access_crlf_caret_m_vllm_11366.log", "device_exception"),
        ("w3_047_nvml_driver_library_version_mismatch_580_truenas_19.log", "version_mismatch"),
    ],
)
def test_train_consoles_end_to_end(name, category):
    assert half_of(name) == "train"  # never a held file
    got, severity, _ = diagnose(WILD / name)
    assert (got, severity) == (category, "high")


def test_launcher_exit_signal_never_hides_the_workers_cause(tmp_path):
    """torchrun prints the signal in its own source after the worker's records: the worker's OOM stays the answer."""
    log = tmp_path / "torchrun.log"
    log.write_text(
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
        "of 79.15 GiB of which 1.06 GiB is free.\n"
        "E1201 10:00:05.000000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -9) "
        "local_rank: 0 (pid: 4126) of binary: /usr/bin/python3\n",
        encoding="utf-8",
    )
    got, severity, raw = diagnose(log)
    assert (got, severity) == ("oom", "high")
    assert raw.startswith("[rank0]: torch.OutOfMemoryError: CUDA out of memory.")
