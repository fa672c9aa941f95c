"""Log rules of round 9 (issue #16): the classes behind the w9 / w10 TRAIN misses, each tested on wordings of its source
(cited in the rule's comment) and on the train excerpt it failed on:

* a CUDA call's error string after the call, as TensorRT-LLM's check() ("CUDA runtime error in cudaMemcpyAsync(…): an
  illegal memory access was encountered") and llama.cpp's ggml-cuda allocator ("cudaMalloc failed: out of memory")
  print it, is that CUDA code (and marks a log without a logger level);
* rocBLAS / hipBLASLt without a Tensile kernel library for this GPU's gfx target is a version mismatch (low: rocBLAS
  may fall back to its own kernels);
* oneCCL's transport layer (ATL / OFI providers) failing to come up is the communication set-up class;
* the runtime's DFX line of a failed kernel ("AI Core / Vector Core / AI CPU kernel execution failed, device_id=…") is a
  device exception; torch_npu's "ACL stream synchronize failed, error code:N" only echoes the code (generic evidence);
* glibc's dlopen error cut after "<lib>.so: cannot open" is still the library-load version mismatch;
* a kernel that names the GPU architecture it requires ("requires gfx950 …, got gfx942", "requires sm_90a") joins the
  not-supported family;
* argparse refusing a command line and Gaudi HCL / SynapseAI checks are honest unknowns with their message; vLLM V0's
  worker monitor ("Worker … pid N died, exit code: -15") is the worker-died consequence; a Python exception line behind
  a vLLM process prefix marks a log.

Only train files are read (``bench.log_accuracy.half_of``).
"""

from __future__ import annotations

from tests._wild import round_checks

# (train file, category of the top root cause, its severity, a substring of its lead evidence record's raw text)
TRAIN_CASES = [
    ("w9_003_gather_v3_vector_core_exception_eh9999_507035_v1_benchmark_vllm_ascend_1038.log", "device_exception",
     "high", "rtDeviceSynchronizeWithTimeout execute failed, reason=[vector core exception]"),
    ("w9_012_llama2_w8a8_keyerror_deq_scale_worker_died_minus15_vllm_ascend_3177.log", "unclassified_error", "medium",
     "KeyError: 'layers.0.mlp.gate_up_proj.deq_scale'"),
    ("w9_014_dsv4_flash_d_node_plog_aicore_kernel_failed_indexcheck_int64_vllm_ascend_15892.log", "device_exception",
     "high", "AI Core kernel execution failed, device_id=0, stream_id=47"),
    ("w9_015_vllm_serve_quantization_ascend_invalid_choice_v085rc1_vllm_ascend_902.log", "unclassified_error", "medium",
     "argument --quantization/-q: invalid choice: 'ascend'"),
    ("w9_024_import_torch_npu_libhccl_so_cannot_open_v071rc1_image_vllm_ascend_262.log", "version_mismatch", "high",
     "ImportError: libhccl.so: cannot open sh"),
    # labelled op_unsupported: the same hipBLASLt record class as w10_021's version_mismatch (see the round's report)
    ("w10_003_rocblaslt_tensilelibrary_gfx906_int8_therock_6175.log", "version_mismatch", "low",
     '"TensileLibrary_lazy_gfx906.dat"'),
    ("w10_010_oneccl_atl_ofi_no_network_provider_pvc_ipex_810.log", "hccl_timeout", "high",
     "atl_ofi_open_nw_provs: can not open network providers"),
    ("w10_015_llamacpp_cuda_cudamalloc_oom_144gib_20431.log", "oom", "high",
     "allocating 144817.04 MiB on device 0: cudaMalloc failed: out of memory"),
    ("w10_018_vllm_modelconfig_validation_error_minicpm_v_cookbook_51.log", "unclassified_error", "medium",
     "ValidationError: 1 validation error for ModelConfig"),
    ("w10_021_rocblaslt_gfx1101_hipblas_invalid_value_linear_therock_754.log", "version_mismatch", "low",
     '"TensileLibrary_lazy_gfx1101.dat"'),
    ("w10_023_gaudi_hccl_demo_syndeviceacquire_invalid_server_type_44.log", "unclassified_error", "medium",
     "Invalid server type (4[OCP1]) requested to generate controller."),
    ("w10_028_vllm_rocm_mla_gluon_requires_gfx950_mi308x_51964.log", "op_unsupported", "high",
     "AssertionError: mla_gluon requires gfx950 (CDNA4), got gfx942"),
    ("w10_032_trtllm_whisper_cudamemcpyasync_illegal_memory_access_2767.log", "device_exception", "high",
     "cudaMemcpyDefault, mStream->get()): an illegal memory access was encountered"),
]  # fmt: skip


# (line as its source prints it, rule id, category)
WORDINGS = [
    # llama.cpp ggml/src/ggml-cuda/ggml-cuda.cu (its HIP build prints the same literal); TensorRT-LLM cudaUtils.h check()
    ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 144817.04 MiB on device 0: cudaMalloc failed: out of "
     "memory", "cuda_code_oom", "oom"),
    ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 2048.00 MiB on device 1: cudaMalloc failed: an illegal "
     "memory access was encountered", "cuda_code_device_exception", "device_exception"),
    ("[TensorRT-LLM][ERROR] CUDA runtime error in cudaMemcpyAsync(dst, src.data(), src.getSizeInBytes(), "
     "cudaMemcpyDefault, mStream->get()): an illegal memory access was encountered "
     "(/src/tensorrt_llm/runtime/bufferManager.cpp:156)", "cuda_code_device_exception", "device_exception"),
    ("[TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync(ptr, n, mCudaStream->get()): out of memory "
     "(/src/tensorrt_llm/runtime/tllmBuffers.h:125)", "cuda_code_oom", "oom"),
    # rocBLAS library/src/tensile_host.cpp TensileHost::initialize; hipBLASLt's tensilelite host (rocblaslt_cerr)
    ("rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or directory for GPU "
     "arch : gfx1036", "rocm_blas_no_tensile_library", "version_mismatch"),
    ("rocBLAS error: Could not load /opt/rocm/lib/rocblas/library/TensileLibrary_lazy_gfx1103.dat",
     "rocm_blas_no_tensile_library", "version_mismatch"),
    ('rocblaslt error: Cannot read "TensileLibrary_lazy_gfx906.dat" (or .zlib variant): No such file or directory',
     "rocm_blas_no_tensile_library", "version_mismatch"),
    (r"rocblaslt error: Could not load C:\rocm\bin\/hipblaslt/library/TensileLibrary_lazy_gfx1201.dat",
     "rocm_blas_no_tensile_library", "version_mismatch"),
    ("hipModuleLoad failed: Kernels.so-000-gfx906-xnack-.hsaco", "rocm_blas_no_tensile_library", "version_mismatch"),
    # oneCCL src/atl/ofi/atl_ofi_helper.cpp, atl_ofi.cpp (LOG_ERROR: "|CCL_ERROR| <file>:<line> <func>: <message>")
    ("2025:05:23-19:04:20:(168955) |CCL_ERROR| atl_ofi_helper.cpp:1635 atl_ofi_open_nw_provs: can not open network "
     "providers", "xpu_ccl_transport_setup", "hccl_timeout"),
    ("2025:05:23-19:04:20:(168955) |CCL_ERROR| atl_ofi.cpp:237 init: can't find suitable provider",
     "xpu_ccl_transport_setup", "hccl_timeout"),
    ("2024:11:02-08:15:40:(2210) |CCL_ERROR| atl_ofi_helper.cpp:1242 atl_ofi_prov_init: can't init provider "
     "psm3:autoselect_one:mlx5_0", "xpu_ccl_transport_setup", "hccl_timeout"),
    # hicann/runtime davinci_kernel_task.cc PrintErrorInfoForDavinciTask (AI Core / Vector Core) and the AI CPU form
    ("[ERROR] RUNTIME(29387,):2026-09-05-07:55:03.039.807 [davinci_kernel_task.cc:1210]30290 PrintErrorInfoForDavinciTask:"
     "[DFX_INFO]AI Core kernel execution failed, device_id=0, stream_id=47, report_stream_id=47, task_id=62945, "
     "fault kernel_name=IndexCheck_int64_high_performance_0", "device_aicore_exception", "device_exception"),
    ("       Vector Core kernel execution failed, retCode=0x31.[FUNC:GetError][FILE:stream.cc][LINE:1875]",
     "device_aicore_exception", "device_exception"),
    ("AI CPU kernel execution failed, device_id=5, stream_id=61, task_pos=352, soName=libcpu_kernels.so, "
     "funcName=RunCpuKernel, kernelName=QuantFlashAttnMetadata, errorCode=0x2a", "device_aicpu_exception",
     "device_exception"),
    # glibc dlerror "<file>: cannot open shared object file: …", cut mid-line
    ("ImportError: libhccl.so: cannot open sh", "version_symbol", "version_mismatch"),
    ("OSError: libascend_hal.so: cannot open sha", "version_symbol", "version_mismatch"),
    # a kernel's own architecture requirement (aiter arch checks; CUDA kernels), at ERROR
    ("(Worker_TP7 pid=205643) ERROR 08-12 14:58:20 [multiproc_executor.py:1018] AssertionError: mla_gluon requires "
     "gfx950 (CDNA4), got gfx942", "op_unsupported_family", "op_unsupported"),
    ("ERROR 03-11 10:02:03 [core.py:700] RuntimeError: FlashMLA requires sm_90a", "op_unsupported_family",
     "op_unsupported"),
    ("ERROR 03-11 10:02:03 [core.py:700] ValueError: this fp8 kernel requires compute capability >= 8.9",
     "op_unsupported_family", "op_unsupported"),
    # CPython Lib/argparse.py ArgumentParser.error and its messages
    ("vllm serve: error: argument --quantization/-q: invalid choice: 'ascend' (choose from 'aqlm', 'awq', 'fp8')",
     "unclassified_cli_argument", "unclassified_error"),
    ("api_server.py: error: argument --tensor-parallel-size/-tp: invalid int value: 'auto'",
     "unclassified_cli_argument", "unclassified_error"),
    ("torchrun: error: the following arguments are required: training_script, training_script_args",
     "unclassified_cli_argument", "unclassified_error"),
    ("vllm: error: unrecognized arguments: --enable-foo", "unclassified_cli_argument", "unclassified_error"),
    # habanalabs HCL hcl_utils.h VERIFY (std::cerr form and LOG_CRITICAL form); the caller's synStatus
    ("/qigeng/HCL/hcl/src/platform/gaudi_common/hcl_device_control_factory.cpp::71(initDevice): The condition [ false ] "
     "failed. Invalid server type (4[OCP1]) requested to generate controller.", "unclassified_habana_verify",
     "unclassified_error"),
    ("initDevice: The condition [ false ] failed. Invalid server type (4[OCP1]) requested to generate controller.",
     "unclassified_habana_verify", "unclassified_error"),
    ("HCCL demo error: In function initDevice(): synDeviceAcquire(&resources.deviceHandle, nullptr) failed with synapse "
     "error: 20", "unclassified_habana_verify", "unclassified_error"),
    # vllm/executor/multiproc_worker_utils.py WorkerMonitor.run
    ("ERROR 09-25 02:23:35 multiproc_worker_utils.py:124] Worker VllmWorkerProcess pid 7246 died, exit code: -15",
     "vllm_worker_died", "abort"),
    ("ERROR 11-02 08:00:01 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 311 died, exit code: 1",
     "vllm_worker_died", "abort"),
]  # fmt: skip


# (line, the rule it must still get: the new alternatives do not swallow their neighbours)
NEIGHBOURS = [
    # rocBLAS announcing its fallback is not the missing-library record
    ("rocBLAS warning: hipBlasLT failed, falling back to tensile. ", None),
    # a oneCCL warning, or an error outside its transport layer, is not the transport set-up class
    ("2025:05:23-19:04:20:(168955) |CCL_WARN| could not get local_idx/count from environment variables, trying to get "
     "them from ATL", None),
    # an architecture requirement at WARNING is a notice (a fallback follows), not a failure
    ("WARNING 03-11 10:02:03 [cuda.py:200] Cutlass MLA requires sm_100; falling back to Triton MLA", None),
    # the plain dlopen message keeps its rule; a torch_npu return-code line still names its code's category
    ("OSError: libascendcl.so: cannot open shared object file: No such file or directory", "version_symbol"),
    # argparse's usage line alone is not an error
    ("usage: vllm serve [model_tag] [options]", None),
]  # fmt: skip


# the tables above, checked (tests/_wild.round_checks)
(test_train_excerpt_top_cause_and_lead_line, test_documented_wording_gets_its_rule,
 test_neighbouring_lines_keep_their_rule) = round_checks(TRAIN_CASES, WORDINGS, NEIGHBOURS)
