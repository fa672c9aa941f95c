"""Log rules of round 8 (issue #16): the classes behind the w7 / w8 TRAIN misses, each tested on wordings of its source
(cited in the rule's comment) and on the train excerpt it failed on, and the round-7 families widened:

* a package installer that finds the package but no version meeting the requirement (pip's "Could not find a version
  … (from versions: <list>)", its Python-version refusals, uv's resolver) is a version mismatch; "(from versions:
  none)" is not;
* an extension built for another torch / CUDA (xFormers' own report, torchvision's CUDA check, cpp_extension's CUDA
  mismatch) is a version mismatch;
* the runtime's reason for a call that failed on a device task exception (reason=[task exception], trap exceptions,
  memory errors) is a device exception and leads the device's SDMA report; the SDMA report itself is a device
  exception (its FFTS+ form stays HCCL's);
* the runtime failing to count the devices through the driver is an honest unknown with its code (no version named);
* ATen's multinomial checks in all their spellings (with or without backticks, sum <= 0, negative / non-finite entry)
  are one honest unknown on every device; c10's CPU allocator asked for a petabyte is an impossible size;
* the op compiler's "get soc version failed" is the unknown-SoC version mismatch;
* HCCL's own stage tags of communicator set-up ([InitGroupStage] / [InitChannelStage] on an ERROR record) are the
  communication set-up class, whatever the words after them.

Only train files are read (``bench.log_accuracy.half_of``).
"""

from __future__ import annotations

from tests._wild import round_checks

# (train file, category of the top root cause, its severity, a substring of its lead evidence record's raw text)
TRAIN_CASES = [
    ("w7_005_pip_torch_npu_dev_pin_not_found_vllm_ascend_092rc1_1901.log", "version_mismatch", "high",
     "Could not find a version that satisfies the requirement torch-npu==2.5.1.post1.dev20250619 (from versions: 2.1"),
    ("w7_017_v023_310p3_rtgetdevicecount_507899_driver_internal_error_13399.log", "unclassified_error", "medium",
     "(EngineCore pid=118)         rtGetDeviceCount execution failed, reason=driver error:internal error"),
    ("w7_024_copy_d2d_sdma_error_memory_async_copy_failed_507001_116.log", "device_exception", "high",
     "[rank0]:         rtStreamSynchronizeWithTimeout execute failed, reason=[task exception]"),
    ("w8_001_xformers_built_for_torch29_have_210_ltx_desktop_23.log", "version_mismatch", "medium",
     "PyTorch 2.9.0+cu128 with CUDA 1208 (you have 2.10.0+cu128)"),
]  # fmt: skip


# (line as its source prints it, rule id, category)
WORDINGS = [
    # pip/_internal/resolution/resolvelib/factory.py, and UnsupportedPythonVersion
    ("ERROR: Could not find a version that satisfies the requirement torch-npu==2.5.1.post1.dev20250619 (from "
     "versions: 2.1.0.post8, 2.5.1, 2.7.1rc1)", "version_package_not_found", "version_mismatch"),
    ("ERROR: Ignored the following versions that require a different python version: 2.6.0 Requires-Python >=3.10",
     "version_package_not_found", "version_mismatch"),
    ("ERROR: Package 'vllm-ascend' requires a different Python: 3.8.10 not in '>=3.9'", "version_package_not_found",
     "version_mismatch"),
    # uv's resolver (no level on its lines)
    ("  ╰─▶ Because there is no version of torch-npu==2.5.1.post1.dev20250619 and you require "
     "torch-npu==2.5.1.post1.dev20250619, we can conclude that your requirements are unsatisfiable.",
     "version_package_not_found", "version_mismatch"),
    ("  ╰─▶ Because the current Python version (3.8.20) does not satisfy Python>=3.9 and pandas==2.2.3 depends on "
     "Python>=3.9, we can conclude that pandas==2.2.3 cannot be used.", "version_package_not_found",
     "version_mismatch"),
    ("  cause: Because pydantic-core==2.46.5 has no wheels with a matching platform tag (e.g., `win_amd64`) and you "
     "require pydantic-core==2.46.5, we can conclude that your requirements are unsatisfiable.",
     "version_package_not_found", "version_mismatch"),
    # torchvision/extension.py, torch/utils/cpp_extension.py (the message wraps after "to compile")
    ("RuntimeError: Detected that PyTorch and torchvision were compiled with different CUDA major versions. PyTorch "
     "has CUDA Version=13.0 and torchvision has CUDA Version=12.8.", "cuda_extension_cuda_mismatch",
     "version_mismatch"),
    ("      The detected CUDA version (11.8) mismatches the version that was used to compile",
     "cuda_extension_cuda_mismatch", "version_mismatch"),
    # xformers/_cpp_lib.py: the head line, and a paste that starts at the version line
    ("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for:",
     "cuda_xformers_built_for_other_torch", "version_mismatch"),
    ("    PyTorch 2.1.1+cu121 with CUDA 1201 (you have 2.1.1+rocm5.6)", "cuda_xformers_built_for_other_torch",
     "version_mismatch"),
    # hicann/runtime FuncErrorReason with the errcode_manage.cc texts of device-exception codes
    ("        rtStreamSynchronize execution failed, reason=[task trap exception][FUNC:FuncErrorReason]"
     "[FILE:error_message_manage.cc][LINE:65]", "device_task_exception_reason", "device_exception"),
    ("        rtDeviceSynchronizeWithTimeout execute failed, reason=[aicore trap exception][FUNC:FuncErrorReason]",
     "device_task_exception_reason", "device_exception"),
    ("        rtStreamSynchronize execution failed, reason=hbm Multi-bit ECC error[FUNC:FuncErrorReason]",
     "device_task_exception_reason", "device_exception"),
    ("[ERROR] RUNTIME(16243,python):2022-09-22-11:27:01.794.510 [api_c.cc:661]16243 rtStreamSynchronize:[EXEC][DEFAULT]"
     "ErrCode=507001, desc=[task exception], InnerCode=0x7150050", "device_task_exception_reason", "device_exception"),
    # device_error_proc.cc's SDMA report, plog form (the printing function before the message)
    ("[ERROR] RUNTIME(1162,python):2025-02-20-02:16:03.427.001 [device_error_proc.cc:1521]1200 "
     "ProcessStarsSdmaErrorInfo:The error from device(chipId:0, dieId:0), serial number is 9. there is a sdma error, "
     "sdma channel is 2, sdmaBlkFsmState=0x7", "device_sdma_error", "device_exception"),
    # the driver does not answer the device count: runtime.cc, api_error.cc, FuncErrorReason
    ("[ERROR] RUNTIME(118,python):2026-01-05-10:00:00.000.000 [runtime.cc:653]118 Init:[drv api] drvGetDevNum failed: "
     "drvRetCode=87.", "unclassified_driver_device_count", "unclassified_error"),
    ("        Get device info failed, get device count failed, retCode=0x7020010[FUNC:GetDeviceInfo][FILE:api_error.cc]",
     "unclassified_driver_device_count", "unclassified_error"),
    # HCCL's stage tags of communicator set-up (hicann/hccl docs/zh/user_guide/fault_diagnosis)
    ("[ERROR] HCCL(7988,all_reduce_test):2025-03-19-04:16:13.978.979 [topoinfo_exchange_agent.cc:190] [7988]"
     "[InitGroupStage][RanktableDetect]topo exchange agent get socket timeout", "hccl_setup_stage", "hccl_timeout"),
    ("[ERROR] HCCL(925892,alltoall_test):2025-10-28-16:34:59.634.432 [sal.cc:501] [925892][InitGroupStage][EnvConfig]"
     "set ifname to [abc] by HCCL_SOCKET_IFNAME, but not found in", "hccl_setup_stage", "hccl_timeout"),
    ("[ERROR] HCCL(3743927,all_reduce_test):2025-10-25-16:11:16.831.640 [rank_consistentcy_checker.cc:429] [3743951]"
     "[InitChannelStage][ParameterConflict]CMD information tag check fail", "hccl_setup_stage", "hccl_timeout"),
    # ATen's multinomial checks, any device, backticks dropped by an issue page
    ("RuntimeError: probability tensor contains either inf, nan or element < 0", "sampling_probability_invalid",
     "unclassified_error"),
    ("RuntimeError: probability tensor contains either `inf`, `nan` or element < 0", "sampling_probability_invalid",
     "unclassified_error"),
    ("RuntimeError: invalid multinomial distribution (sum of probabilities <= 0)", "sampling_probability_invalid",
     "unclassified_error"),
    ("RuntimeError: invalid multinomial distribution (encountering probability entry < 0)",
     "sampling_probability_invalid", "unclassified_error"),
    ("RuntimeError: invalid multinomial distribution (encountering probability entry = infinity or NaN)",
     "sampling_probability_invalid", "unclassified_error"),
    # c10/core/impl/alloc_cpu.cpp, both forms, 20 digits of bytes
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you tried to "
     "allocate 73786976294838206464 bytes.", "oom_implausible_size", "unclassified_error"),
    ("RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 18446744073709551600 bytes. "
     "Error code 12 (Cannot allocate memory)", "oom_implausible_size", "unclassified_error"),
    # hicann/ge op_compile_processor.cpp SetOption
    ("[ERROR] ASCENDCL(3180,python):2026-01-05-10:00:00.000.000 [op_compile_processor.cpp:70]3180 SetOption: "
     "[Get][SocVersion]get soc version failed, runtime result = 500002", "version_soc", "version_mismatch"),
]  # fmt: skip


# (line, the rule it must still get: the new alternatives do not swallow their neighbours)
NEIGHBOURS = [
    # nothing found at all names no version: the honest unknown of an ERROR line, or nothing
    ("ERROR: Could not find a version that satisfies the requirement opencv (from versions: none)",
     "unclassified_error"),
    ("  ╰─▶ Because notexists was not found in the package registry and you require notexists, we can conclude that "
     "your requirements are unsatisfiable.", None),
    # cpp_extension's minor-version notice says it is most likely no problem
    ("UserWarning: The detected CUDA version (12.1) has a minor version mismatch with the version that was used to "
     "compile PyTorch (12.4). Most likely this shouldn't be a problem.", "cuda_noise_python_warning"),
    # the plain core-exception reasons stay with the core rule, which reads the device's report of the same kind
    ("        rtDeviceSynchronizeWithTimeout execute failed, reason=[aicore exception][FUNC:FuncErrorReason]",
     "device_aicore_exception"),
    # a collective's FFTS+ SDMA error stays HCCL's
    ("The error from device(chipId:1, dieId:0), serial number is 4. there is a fftsplus sdma error, sdma channel is 3",
     "hccl_sdma_error"),
    # the kernel's device-side assert keeps the CUDA rule; without replacement too few categories is a caller's bug
    ("/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:110: _assert_async_cuda_kernel: block: [0,0,0], thread: "
     "[0,0,0] Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed.",
     "cuda_sampling_probability_assert"),
    ("RuntimeError: invalid multinomial distribution (with replacement=False, not enough non-negative category to "
     "sample)", "unclassified_error"),
    # a stage tag at INFO is progress, not a failure; a link set-up record keeps its more specific rule
    ("[INFO] HCCL(686,python):2025-10-23-07:52:59.191.363 [op_base.cc:1292] [8970][InitGroupStage][RanktableDetect]"
     "start root network", None),
    ("[ERROR] HCCL(3215542,all_reduce_test):2025-11-20-18:18:03.114.306 [transport_manager.cc:886] [3215599]"
     "[InitChannelStage][Timeout]Transport init error! createLink para:rank[1]", "hccl_link_setup"),
    # a real host allocation (6 GB) is not an impossible size
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:114] data. DefaultCPUAllocator: not enough memory: you tried to "
     "allocate 6383992832 bytes.", "unclassified_error"),
]  # fmt: skip


# the tables above, checked (tests/_wild.round_checks)
(test_train_excerpt_top_cause_and_lead_line, test_documented_wording_gets_its_rule,
 test_neighbouring_lines_keep_their_rule) = round_checks(TRAIN_CASES, WORDINGS, NEIGHBOURS)
