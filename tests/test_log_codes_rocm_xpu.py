"""Code-first classification for AMD ROCm (hipError_t, rocblas_status, hipblasStatus_t) and Intel XPU (Unified Runtime
ur_result_t, Level Zero ze_result_t, SYCL PI pi_result): the catalogs are whole against the headers they come from
(rules/error_codes_{hip,rocblas,hipblas,ur,ze,pi}.csv, sourced in their headers), and a line as these stacks print it
gets its code and the code's category through the same path as the CUDA codes (rules/log_codes.toml shapes →
``codes`` → the code-first rules of rules/log_patterns_cuda.toml).  The lines are written from the printers' formats
(PyTorch's C10_HIP_CHECK / cuBLAS check on ROCm, llama.cpp's ggml_cuda_error in its HIP build, clr's messages, SYCL's
__SYCL_OCL_ERROR_REPORT + codeToString), not taken from any log set."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pytest

from diag.analyses.error_codes import catalog_of, describe_code, error_codes
from diag.i18n import set_language
from parsers._log_codes import load_code_shapes
from parsers._log_rules import catalog_codes
from tests.test_cann_logs import classify_lines

RULES = Path(__file__).resolve().parent.parent / "diag" / "rules"
CATALOGS = {
    "hip": "HIP:",
    "rocblas": "ROCBLAS:",
    "hipblas": "HIPBLAS:",
    "ur": "UR:",
    "ze": "ZE:",
    "pi": "PI:",
}
# the row count each header states ("84 rows"): the enum as read, deprecated aliases included
ROWS = {"hip": 84, "rocblas": 16, "hipblas": 12, "ur": 83, "ze": 62, "pi": 95}


def _rows(kind: str) -> list[dict[str, str]]:
    with open(RULES / f"error_codes_{kind}.csv", encoding="utf-8") as fh:
        return list(csv.DictReader(line for line in fh if not line.startswith("#")))


def _by_name(kind: str) -> dict[str, dict[str, str]]:
    return {r["name"]: r for r in _rows(kind)}


def _one(line: str) -> dict:
    (rec,) = classify_lines([line])
    return rec


# -- the catalogs -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(CATALOGS))
def test_catalog_is_whole_and_sourced(kind):
    header = (RULES / f"error_codes_{kind}.csv").read_text(encoding="utf-8").split("\ncode,")[0]
    assert "Source" in header and "read 2026-12-02" in header and "commit " in header
    (stated,) = re.findall(r"(\d+) rows", header)
    rows = _rows(kind)
    assert len(rows) == int(stated) == ROWS[kind]
    assert all(r["code"] == CATALOGS[kind] + r["name"] for r in rows)
    assert len({r["code"] for r in rows}) == len(rows)
    assert {r["category"] for r in rows} <= {"", "oom", "device_exception", "task_timeout", "version_mismatch",
                                             "op_unsupported"}  # fmt: skip
    assert all(r["typical_fix"] for r in rows)


def test_hip_catalog_figures():
    rows = _by_name("hip")
    numbers = {r["name"]: int(r["number"]) for r in rows.values()}
    assert [numbers[n] for n in ("hipSuccess", "hipErrorOutOfMemory", "hipErrorInvalidDeviceFunction",
                                 "hipErrorNoBinaryForGpu", "hipErrorIllegalAddress", "hipErrorLaunchFailure",
                                 "hipErrorUnknown", "hipErrorRuntimeOther", "hipErrorTbd")] == [
        0, 2, 98, 209, 700, 719, 999, 1053, 1055]  # fmt: skip
    assert len(set(numbers.values())) == 80  # 84 names: 4 deprecated aliases share a value
    deprecated = {"hipErrorMemoryAllocation": 2, "hipErrorInitializationError": 3,
                  "hipErrorMapBufferObjectFailed": 205, "hipErrorInvalidResourceHandle": 400}  # fmt: skip
    assert {n: numbers[n] for n in deprecated} == deprecated
    assert rows["hipErrorIllegalAddress"]["message"] == "an illegal memory access was encountered"
    assert rows["hipErrorNoDevice"]["message"] == "no ROCm-capable device is detected"
    assert rows["hipErrorStreamDetached"]["message"] == ""  # no case in hipGetErrorString: "unknown error"
    by_category = {
        "oom": ["hipErrorOutOfMemory", "hipErrorMemoryAllocation"],
        "device_exception": ["hipErrorIllegalAddress", "hipErrorLaunchFailure", "hipErrorAssert",
                             "hipErrorECCNotCorrectable", "hipErrorPriorLaunchFailure"],
        "task_timeout": ["hipErrorLaunchTimeOut"],
        "version_mismatch": ["hipErrorInsufficientDriver", "hipErrorInvalidDeviceFunction", "hipErrorNoBinaryForGpu"],
        "": ["hipErrorInvalidValue", "hipErrorUnknown", "hipErrorNotSupported", "hipErrorRuntimeMemory"],
    }  # fmt: skip
    for category, names in by_category.items():
        assert [rows[n]["category"] for n in names] == [category] * len(names)
    assert sum(r["category"] != "" for r in rows.values()) == 11


def test_rocm_blas_catalog_figures():
    rocblas, hipblas = _by_name("rocblas"), _by_name("hipblas")
    assert [int(r["number"]) for r in rocblas.values()] == list(range(16))
    assert [int(r["number"]) for r in hipblas.values()] == list(range(12))
    assert rocblas["rocblas_status_arch_mismatch"]["number"] == "15"
    assert hipblas["HIPBLAS_STATUS_NOT_SUPPORTED"]["number"] == "7"
    assert {n: r["category"] for n, r in (rocblas | hipblas).items() if r["category"]} == {
        "rocblas_status_arch_mismatch": "version_mismatch",
        "HIPBLAS_STATUS_ALLOC_FAILED": "oom",
        "HIPBLAS_STATUS_ARCH_MISMATCH": "version_mismatch",
    }


def test_xpu_catalog_figures():
    ur, ze, pi = _by_name("ur"), _by_name("ze"), _by_name("pi")
    # ur_result_t is dense 0..77, then the command-buffer block 0x1000.. and UNKNOWN 0x7ffffffe
    assert sorted(int(r["number"]) for r in ur.values()) == [*range(78), 4096, 4097, 4098, 4099, 0x7FFFFFFE]
    assert (
        ur["UR_RESULT_ERROR_DEVICE_LOST"]["number"],
        ur["UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"]["number"],
    ) == (
        "20",
        "39",
    )
    assert [ze[n]["number"] for n in ("ZE_RESULT_SUCCESS", "ZE_RESULT_ERROR_DEVICE_LOST",
                                      "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE",
                                      "ZE_RESULT_ERROR_UNKNOWN")] == [
        "0", "0x70000001", "0x70000003", "0x78000003", "0x7ffffffe"]  # fmt: skip
    # pi_result: OpenCL's 0, -1..-19, -30..-68 and extensions, then PI's own -995..-999
    numbers = {int(r["number"]) for r in pi.values()}
    assert {0, *range(-19, 0), *range(-68, -29), *range(-999, -994)} <= numbers
    assert (pi["PI_ERROR_OUT_OF_RESOURCES"]["number"], pi["PI_ERROR_UNKNOWN"]["message"]) == (
        "-5",
        "Unknown PI error",
    )
    categorized = {
        "ur": {"UR_RESULT_ERROR_DEVICE_LOST": "device_exception", "UR_RESULT_ERROR_DEVICE_REQUIRES_RESET": "device_exception",
               "UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY": "oom", "UR_RESULT_ERROR_MEM_OBJECT_ALLOCATION_FAILURE": "oom",
               "UR_RESULT_ERROR_UNSUPPORTED_FEATURE": "op_unsupported"},
        "ze": {"ZE_RESULT_ERROR_DEVICE_LOST": "device_exception", "ZE_RESULT_ERROR_DEVICE_REQUIRES_RESET": "device_exception",
               "ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY": "oom", "ZE_RESULT_ERROR_UNSUPPORTED_FEATURE": "op_unsupported"},
        "pi": {"PI_ERROR_MEM_OBJECT_ALLOCATION_FAILURE": "oom", "PI_ERROR_OUT_OF_RESOURCES": "oom",
               "PI_ERROR_UNSUPPORTED_FEATURE": "op_unsupported"},
    }  # fmt: skip
    for kind, expected in categorized.items():
        assert {n: r["category"] for n, r in _by_name(kind).items() if r["category"]} == expected
    # host memory is not the device's: no category on its own
    assert (
        ur["UR_RESULT_ERROR_OUT_OF_HOST_MEMORY"]["category"]
        == ze["ZE_RESULT_ERROR_OUT_OF_HOST_MEMORY"]["category"]
        == ""
    )


def test_catalogs_feed_the_code_catalog_and_the_rules():
    catalog, by_category = error_codes(), catalog_codes()
    for kind, prefix in CATALOGS.items():
        rows = _rows(kind)
        assert all(catalog[r["code"]]["name"] == r["name"] for r in rows)
        assert all(r["code"] in by_category[r["category"]] for r in rows if r["category"])
        assert catalog_of(prefix + rows[0]["name"]) == kind
    assert (
        describe_code("HIP:hipErrorIllegalAddress")["meaning"] == "an illegal memory access was encountered"
    )
    assert describe_code("UR:UR_RESULT_ERROR_DEVICE_LOST")["meaning"].startswith("Device hung, reset")
    set_language("zh")
    try:
        assert describe_code("HIP:hipErrorIllegalAddress")["meaning"] == "遇到非法内存访问"
        assert describe_code("ZE:ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY")["meaning"].startswith(
            "[Core] 设备内存"
        )
    finally:
        set_language("en")


def test_shapes_alias_numbers_and_messages():
    aliases = load_code_shapes().aliases
    illegal = aliases["HIP:an illegal memory access was encountered"]
    assert aliases["HIP:700"] == illegal == "HIP:hipErrorIllegalAddress"
    # the current name, not the deprecated hipErrorMemoryAllocation
    assert aliases["HIP:2"] == "HIP:hipErrorOutOfMemory"
    assert aliases["HIP:device kernel image is invalid"] == "HIP:hipErrorInvalidImage"  # 200 and 300 print it
    assert aliases["PI:Unknown PI error"] == "PI:PI_ERROR_UNKNOWN"


# -- lines as the stacks print them → code(s), rule, category ------------------------------------------------------
LINES = [
    # PyTorch on ROCm, C10_HIP_CHECK: "HIP error: <hipGetErrorString>" and its debugging hint
    ("RuntimeError: HIP error: an illegal memory access was encountered\nHIP kernel errors might be asynchronously "
     "reported at some other API call, so the stacktrace below might be incorrect.\nFor debugging consider passing "
     "AMD_SERIALIZE_KERNEL=3\nCompile with `TORCH_USE_HIP_DSA` to enable device-side assertions.",
     ["HIP:hipErrorIllegalAddress"], "rocm_code_device_exception", "device_exception"),
    ("RuntimeError: HIP error: invalid device function",
     ["HIP:hipErrorInvalidDeviceFunction"], "rocm_code_version_mismatch", "version_mismatch"),
    ("RuntimeError: HIP error: device-side assert triggered",
     ["HIP:hipErrorAssert"], "rocm_code_device_exception", "device_exception"),
    # before cuda_driver_too_old: a ROCm build mismatch, in ROCm's words
    ("RuntimeError: HIP error: no kernel image is available for execution on the device",
     ["HIP:hipErrorNoBinaryForGpu"], "rocm_code_version_mismatch", "version_mismatch"),
    # vLLM on ROCm: the worker's prefix before the same torch error
    ("(VllmWorkerProcess pid=2211) ERROR 03-04 10:11:12 [multiproc_worker_utils.py:233] RuntimeError: HIP error: "
     "unspecified launch failure", ["HIP:hipErrorLaunchFailure"], "rocm_code_device_exception", "device_exception"),
    # clr's own message when no code object fits this gfx target
    ("hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
     ["HIP:hipErrorNoBinaryForGpu"], "rocm_code_version_mismatch", "version_mismatch"),
    # llama.cpp's ggml_cuda_error in the HIP build (GGML_CUDA_NAME "ROCm"), with its two follow-up lines
    ("ROCm error: out of memory\n  current device: 0, in function ggml_backend_cuda_buffer_type_alloc_buffer at "
     "/src/llama.cpp/ggml/src/ggml-cuda/ggml-cuda.cu:512\n  hipMalloc(&dev_ptr, size)",
     ["HIP:hipErrorOutOfMemory"], "rocm_code_oom", "oom"),
    # HIP_CHECK-style macros: "error: 'hipErrorIllegalAddress'(700) at file:line", and by number
    ("error: 'hipErrorLaunchTimeOut'(702) at /work/kernels/attn.hip:88",
     ["HIP:hipErrorLaunchTimeOut"], "rocm_code_task_timeout", "task_timeout"),
    ("HIP error 700 at /work/kernels/attn.hip:91", ["HIP:hipErrorIllegalAddress"], "rocm_code_device_exception",
     "device_exception"),
    # PyTorch's cuBLAS check on ROCm names the hipBLAS status; rocBLAS prints rocblas_status_to_string's name
    ("RuntimeError: CUDA error: HIPBLAS_STATUS_ALLOC_FAILED when calling `hipblasCreate(handle)`",
     ["HIPBLAS:HIPBLAS_STATUS_ALLOC_FAILED"], "rocm_code_oom", "oom"),
    ("rocblas_gemm_ex failed: rocblas_status_arch_mismatch (rocblas_status_to_string)",
     ["ROCBLAS:rocblas_status_arch_mismatch"], "rocm_code_version_mismatch", "version_mismatch"),
    # torch's ROCm OOM: the base OOM rule knew the words; this rule gives ROCm's text and advice
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 63.98 GiB "
     "of which 1.20 GiB is free.", None, "rocm_oom_torch", "oom"),
    # RCCL prints NCCL's names and strings: the NCCL shapes and rules take them
    ("[E ProcessGroupNCCL.cpp:1316] torch.distributed.DistBackendError: NCCL error in: "
     "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, remote process exited or there was a network error, "
     "NCCL version 2.20.5\nncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
     "prematurely.", ["NCCL:ncclRemoteError"], "cuda_code_nccl", "hccl_timeout"),
    ("gpu-node-3:4021:4090 [0] NCCL WARN Call to ibv_reg_mr failed : ncclSystemError (RCCL 2.18.3+hip6.1)",
     ["NCCL:ncclSystemError"], "cuda_nccl_error", "hccl_timeout"),
    # SYCL (DPC++ with Unified Runtime): "Native API failed. Native API returns: <n> (<UR name>)"
    ("terminate called after throwing an instance of 'sycl::_V1::exception'\n  what():  Native API failed. Native API "
     "returns: 20 (UR_RESULT_ERROR_DEVICE_LOST)", ["UR:UR_RESULT_ERROR_DEVICE_LOST"], "xpu_code_device_exception",
     "device_exception"),
    ("RuntimeError: Native API failed. Native API returns: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)",
     ["UR:UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"], "xpu_code_oom", "oom"),
    ("RuntimeError: Native API failed. Native API returns: 44 (UR_RESULT_ERROR_UNSUPPORTED_FEATURE)",
     ["UR:UR_RESULT_ERROR_UNSUPPORTED_FEATURE"], "xpu_code_op_unsupported", "op_unsupported"),
    # older DPC++ (PI): the name twice, or a PI-specific code's message
    ("RuntimeError: Native API failed. Native API returns: -5 (PI_ERROR_OUT_OF_RESOURCES) -5 (PI_ERROR_OUT_OF_RESOURCES)",
     ["PI:PI_ERROR_OUT_OF_RESOURCES"], "xpu_code_oom", "oom"),
    ("RuntimeError: Native API failed. Native API returns: -995 (The plugin or device does not support the called "
     "function) -995 (The plugin or device does not support the called function)",
     ["PI:PI_ERROR_UNSUPPORTED_FEATURE"], "xpu_code_op_unsupported", "op_unsupported"),
    # Level Zero by name (loader / validation layer / UR's Level Zero adapter)
    ("ERROR: zeCommandQueueSynchronize(ZeCommandQueue, UINT64_MAX) returned ZE_RESULT_ERROR_DEVICE_LOST",
     ["ZE:ZE_RESULT_ERROR_DEVICE_LOST"], "xpu_code_device_exception", "device_exception"),
    ("ERROR: zeMemAllocDevice failed: ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY", ["ZE:ZE_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"],
     "xpu_code_oom", "oom"),
    # a code that places nothing on its own: the record stays an honest unknown
    ("RuntimeError: Native API failed. Native API returns: -997 (Command failed to enqueue/execute)",
     ["PI:PI_ERROR_COMMAND_EXECUTION_FAILURE"], "unclassified_error", "unclassified_error"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("line", "codes", "rule_id", "category"), LINES, ids=[f"line{i}" for i in range(len(LINES))]
)
def test_line_gets_its_code_and_category(line, codes, rule_id, category):
    rec = _one(line)
    assert (rec["codes"], rec["rule_id"], rec["category"]) == (codes, rule_id, category)
    if codes:
        assert rec["code"] == codes[0]


def test_printed_words_that_are_no_code():
    lines = [
        "rocblas_status_to_string returned a name",  # a function, not a status
        "HIP_R_16BF HIPBLAS_GEMM_DEFAULT HIPBLAS_OP_N HIPBLAS_COMPUTE_32F",  # hipBLAS types and enums, no status
    ]
    assert [r["codes"] for r in classify_lines(lines)] == [None, None]


def test_cuda_records_keep_their_rules():
    """The ROCm / XPU code rules come first among the CUDA rules but take only HIP: / UR: / ZE: / PI: codes."""
    lines = [
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    ]
    assert [(r["codes"], r["rule_id"]) for r in classify_lines(lines)] == [
        (["CUDA:cudaErrorIllegalAddress"], "cuda_code_device_exception"),
        (["CUDA:cudaErrorNoKernelImageForDevice"], "cuda_driver_too_old"),
    ]


def test_rocm_oom_figures_and_advice():
    """PyTorch on ROCm prints the CUDA allocator's message with HIP: its figures are read and the advice names
    ROCm's allocator setting, not torch_npu's (log_patterns.toml oom_torch_npu knew the words, not the platform)."""
    import json

    from diag.analyses.log_explain import explain

    line = (
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 63.98 GiB "
        "of which 1.20 GiB is free. Of the allocated memory 40.00 GiB is allocated by PyTorch, and 20.00 GiB is "
        "reserved by PyTorch but unallocated."
    )
    rec = _one(line)
    figures = json.loads(rec["figures"])
    assert (rec["rule_id"], figures["requested_bytes"], figures["reserved_unallocated_bytes"]) == (
        "rocm_oom_torch",
        2 * 2**30,
        20 * 2**30,
    )
    advice = explain("rocm_oom_torch", "oom", [line], figures).advice
    assert advice[-1].endswith("fragmentation likely (try PYTORCH_HIP_ALLOC_CONF=expandable_segments:True).")
