"""What a decode step of a dense LLM (Qwen2-7B-like) launches on one tensor-parallel rank of an Ascend 910B.

Durations are per-call means in µs for 16 decode tokens at TP=2, set around the figures collected in
``shared/formats/llm_inference_reference.md`` (decode GEMMs are weight-bandwidth bound: ~1.6 TB/s of HBM;
FusedInferAttention/IncreFlashAttention 28-60 µs; AI_CPU ops tens to hundreds of µs).  Names follow the
aclnn convention ``aclnn<Api>_<KernelImpl>_<OpType>`` seen in real kernel_details.csv files; AI_CPU kernels
carry ``AiCpu`` in the name.  Matmul/attention durations scale with 2/world (the weight slice per rank).
"""

from __future__ import annotations

from dataclasses import dataclass

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, INTER, VOCAB = 3584, 28, 4, 128, 18944, 152064
MODEL_NAME = "Qwen2-7B-like dense decoder"
_SITE = "/usr/local/lib/python3.10/site-packages/"
_TAIL = (f"{_SITE}vllm_ascend/worker/model_runner.py(1423): execute_model",)


@dataclass(frozen=True)
class KernelSpec:
    key: str
    name: str  # kernel name (trace X name, kernel_details Name, Node@launch item_id)
    op_type: str
    core: str  # kernel_details "Accelerator Core" (GE task type)
    task_type: str  # trace "Task Type" (device SQE view: AI_VECTOR_CORE kernels show AI_CORE)
    bucket: str  # ground-truth class: matmul | vector | attention | ai_cpu
    stream: int
    dur_us: float
    block_dim: int
    mix_block_dim: int
    in_shapes: str
    in_dtypes: str
    in_formats: str
    out_shapes: str
    out_dtypes: str
    out_formats: str
    aten: str  # outer framework op (cpu_op with Input Dims / Call stack)
    api: str  # inner aclnn op = AscendCL API name = Dequeue@<api>
    input_dims: str
    input_types: str
    stack: str  # call stack, frames joined by ';\r\n'
    trans: bool = False  # Cast / TransData (format or dtype conversion)


@dataclass(frozen=True)
class CommSpec:
    key: str
    op_type: str  # hcom_allReduce_ | hcom_allGather_
    api: str  # HcclAllreduce | HcclAllgather
    aten: str
    count: int  # elements
    nbytes: int
    xfer_us: float  # transfer time once both ranks arrived
    input_dims: str
    stack: str


@dataclass(frozen=True)
class MemcpySpec:
    key: str
    direction: str  # "host to device" | "device to host"
    nbytes: int
    dur_us: float
    input_dims: str
    input_types: str
    stack: str

    @property
    def api(self) -> str:
        return (
            "acl_memcpy_host_to_device" if self.direction == "host to device" else "acl_memcpy_device_to_host"
        )


def _stack(*top: str) -> str:
    return ";\r\n".join((*top, *_TAIL))


def _kernel(
    key: str, name: str, op_type: str, core: str, bucket: str, dur: float, **kw: object
) -> KernelSpec:
    task_type = "AI_CORE" if core == "AI_VECTOR_CORE" else core
    defaults: dict[str, object] = {
        "stream": 3 if core == "AI_CPU" else 2,
        "block_dim": {"AI_CORE": 24, "AI_VECTOR_CORE": 40, "MIX_AIC": 24, "AI_CPU": 1}[core],
        "mix_block_dim": 48 if core == "MIX_AIC" else 0,
        "in_formats": "FORMAT_ND",
        "out_formats": "FORMAT_ND",
    }
    defaults.update(kw)
    return KernelSpec(key, name, op_type, core, task_type, bucket, dur_us=dur, **defaults)  # type: ignore[arg-type]


def catalog(batch: int, world: int) -> dict[str, KernelSpec | CommSpec | MemcpySpec]:
    """Every op a step can launch, keyed by role; shapes are those of one rank of ``world``."""
    b, h = batch, HIDDEN
    q_heads, kv_heads = HEADS // world, max(1, KV_HEADS // world)
    qkv = (q_heads + 2 * kv_heads) * HEAD_DIM
    q_dim, inter, vocab = q_heads * HEAD_DIM, INTER // world, VOCAB // world
    tp = 2.0 / world  # weight slice relative to TP=2
    lin = f"{_SITE}vllm/model_executor/layers/linear.py(1208): forward"
    norm = f"{_SITE}vllm_ascend/ops/layernorm.py(41): forward_oot"
    bf = "c10::BFloat16"
    ops: list[KernelSpec | CommSpec | MemcpySpec] = [
        MemcpySpec(
            "h2d_input_ids",
            "host to device",
            8 * b,
            2.6,
            f"{b};\r\n{b};\r\n",
            "long int;\r\nlong int;\r\nScalar",
            _stack(f"{_SITE}vllm_ascend/worker/model_runner.py(1102): _prepare_model_input"),
        ),
        MemcpySpec(
            "h2d_positions",
            "host to device",
            8 * b,
            2.4,
            f"{b};\r\n{b};\r\n",
            "long int;\r\nlong int;\r\nScalar",
            _stack(f"{_SITE}vllm_ascend/worker/model_runner.py(1109): _prepare_model_input"),
        ),
        MemcpySpec(
            "h2d_block_tables",
            "host to device",
            4 * b * 128,
            3.4,
            f"{b},128;\r\n{b},128;\r\n",
            "int;\r\nint;\r\nScalar",
            _stack(f"{_SITE}vllm_ascend/attention/attention_v1.py(212): build"),
        ),
        MemcpySpec(
            "d2h_next_tokens",
            "device to host",
            8 * b,
            3.1,
            f"{b},1;\r\n{b},1;\r\n",
            "long int;\r\nlong int;\r\nScalar",
            _stack(f"{_SITE}vllm/model_executor/layers/sampler.py(862): _get_next_prompt_tokens"),
        ),
        MemcpySpec(
            "d2h_finished",
            "device to host",
            8,
            2.2,
            ";\r\n;\r\n",
            "bool;\r\nbool;\r\nScalar",
            _stack(f"{_SITE}vllm_ascend/worker/model_runner.py(1468): _check_finished"),
        ),
        _kernel(
            "cast_positions",
            "aclnnCast_CastAiCore_Cast",
            "Cast",
            "AI_VECTOR_CORE",
            "vector",
            1.5,
            in_shapes=f"{b}",
            in_dtypes="INT64",
            out_shapes=f"{b}",
            out_dtypes="INT32",
            aten="aten::to",
            api="aclnnCast",
            input_dims=f"{b};\r\n;\r\n;\r\n;\r\n",
            input_types="long int;\r\nScalar;\r\nScalar;\r\nScalar;\r\nNone",
            stack=_stack(f"{_SITE}vllm_ascend/ops/rotary_embedding.py(58): rope_forward_oot"),
            trans=True,
        ),
        _kernel(
            "index_put",
            "aclnnIndexPutImpl_IndexPutAiCpu_IndexPut",
            "IndexPut",
            "AI_CPU",
            "ai_cpu",
            165.0,
            in_shapes=f"{b},{VOCAB};{b};{b}",
            in_dtypes="DOUBLE;INT64;DOUBLE",
            in_formats="FORMAT_ND;FORMAT_ND;FORMAT_ND",
            out_shapes=f"{b},{VOCAB}",
            out_dtypes="DOUBLE",
            aten="aten::index_put_",
            api="aclnnIndexPutImpl",
            input_dims=f"{b},{VOCAB};\r\n;\r\n{b};\r\n",
            input_types="double;\r\nTensorList;\r\ndouble;\r\nScalar",
            stack=_stack(f"{_SITE}vllm/model_executor/layers/sampler.py(291): _apply_penalties"),
        ),
        _kernel(
            "embedding",
            "aclnnEmbedding_GatherV2AiCore_GatherV2",
            "GatherV2",
            "AI_VECTOR_CORE",
            "vector",
            6.2,
            in_shapes=f"{vocab},{h};{b}",
            in_dtypes="DT_BF16;INT64",
            in_formats="FORMAT_ND;FORMAT_ND",
            out_shapes=f"{b},{h}",
            out_dtypes="DT_BF16",
            aten="aten::embedding",
            api="aclnnEmbedding",
            input_dims=f"{vocab},{h};\r\n{b};\r\n;\r\n;\r\n",
            input_types=f"{bf};\r\nlong int;\r\nScalar;\r\nScalar;\r\nScalar",
            stack=_stack(f"{_SITE}vllm/model_executor/layers/vocab_parallel_embedding.py(406): forward"),
        ),
        _kernel(
            "input_norm",
            "aclnnRmsNorm_RmsNorm_RmsNorm",
            "RmsNorm",
            "AI_VECTOR_CORE",
            "vector",
            4.8,
            in_shapes=f"{b},{h};{h}",
            in_dtypes="DT_BF16;DT_BF16",
            in_formats="FORMAT_ND;FORMAT_ND",
            out_shapes=f"{b},{h};{b},1",
            out_dtypes="DT_BF16;FLOAT",
            out_formats="FORMAT_ND;FORMAT_ND",
            aten="npu::npu_rms_norm",
            api="aclnnRmsNorm",
            input_dims=f"{b},{h};\r\n{h};\r\n",
            input_types=f"{bf};\r\n{bf};\r\nScalar",
            stack=_stack(norm),
        ),
        _kernel(
            "qkv_proj",
            "aclnnAddmm_MatMulCommon_MatMulV2",
            "MatMulV2",
            "AI_CORE",
            "matmul",
            13.5 * tp,
            in_shapes=f"{qkv};{b},{h};{h},{qkv}",
            in_dtypes="DT_BF16;DT_BF16;DT_BF16",
            in_formats="FORMAT_ND;FORMAT_ND;FORMAT_ND",
            out_shapes=f"{b},{qkv}",
            out_dtypes="DT_BF16",
            aten="aten::addmm",
            api="aclnnAddmm",
            input_dims=f"{qkv};\r\n{b},{h};\r\n{h},{qkv};\r\n;\r\n",
            input_types=f"{bf};\r\n{bf};\r\n{bf};\r\nScalar;\r\nScalar",
            stack=_stack(lin, f"{_SITE}vllm/model_executor/models/qwen2.py(165): forward"),
        ),
        _kernel(
            "rope",
            "aclnnRotaryPositionEmbedding_RotaryPositionEmbedding_RotaryPositionEmbedding",
            "RotaryPositionEmbedding",
            "AI_VECTOR_CORE",
            "vector",
            3.6,
            in_shapes=f"{b},1,{q_heads},{HEAD_DIM};{b},1,1,{HEAD_DIM};{b},1,1,{HEAD_DIM}",
            in_dtypes="DT_BF16;DT_BF16;DT_BF16",
            in_formats="FORMAT_ND;FORMAT_ND;FORMAT_ND",
            out_shapes=f"{b},1,{q_heads},{HEAD_DIM}",
            out_dtypes="DT_BF16",
            aten="npu::npu_rotary_position_embedding",
            api="aclnnRotaryPositionEmbedding",
            input_dims=f"{b},1,{q_heads},{HEAD_DIM};\r\n{b},1,1,{HEAD_DIM};\r\n{b},1,1,{HEAD_DIM};\r\n",
            input_types=f"{bf};\r\n{bf};\r\n{bf};\r\nScalar",
            stack=_stack(f"{_SITE}vllm_ascend/ops/rotary_embedding.py(71): rope_forward_oot"),
        ),
        _kernel(
            "reshape_cache",
            "ReshapeAndCacheNdKernel",
            "ReshapeAndCacheNdKernel",
            "AI_VECTOR_CORE",
            "vector",
            3.2,
            in_shapes=f"{b},{kv_heads},{HEAD_DIM};{b},{kv_heads},{HEAD_DIM};4096,128,{kv_heads},{HEAD_DIM};4096,128,{kv_heads},{HEAD_DIM};{b}",
            in_dtypes="DT_BF16;DT_BF16;DT_BF16;DT_BF16;INT32",
            in_formats="FORMAT_ND;FORMAT_ND;FORMAT_ND;FORMAT_ND;FORMAT_ND",
            out_shapes=f"4096,128,{kv_heads},{HEAD_DIM};4096,128,{kv_heads},{HEAD_DIM}",
            out_dtypes="DT_BF16;DT_BF16",
            out_formats="FORMAT_ND;FORMAT_ND",
            aten="atb::_npu_reshape_and_cache",
            api="ReshapeAndCacheOperation",
            input_dims=f"{b},{kv_heads},{HEAD_DIM};\r\n{b},{kv_heads},{HEAD_DIM};\r\n4096,128,{kv_heads},{HEAD_DIM};\r\n4096,128,{kv_heads},{HEAD_DIM};\r\n{b}",
            input_types=f"{bf};\r\n{bf};\r\n{bf};\r\n{bf};\r\nint",
            stack=_stack(f"{_SITE}vllm_ascend/attention/attention_v1.py(301): forward"),
        ),
        _kernel(
            "attention",
            "aclnnIncreFlashAttentionV4_IncreFlashAttention_IncreFlashAttention",
            "IncreFlashAttention",
            "MIX_AIC",
            "attention",
            31.0 * tp,
            in_shapes=f"{b},1,{q_dim};4096,128,{kv_heads * HEAD_DIM};4096,128,{kv_heads * HEAD_DIM};;{b};{b},64",
            in_dtypes="DT_BF16;DT_BF16;DT_BF16;BOOL;INT64;INT32",
            in_formats="FORMAT_ND;FORMAT_ND;FORMAT_ND;FORMAT_ND;FORMAT_ND;FORMAT_ND",
            out_shapes=f"{b},1,{q_dim}",
            out_dtypes="DT_BF16",
            aten="npu::npu_incre_flash_attention",
            api="aclnnIncreFlashAttentionV4",
            input_dims=f"{b},1,{q_dim};\r\n4096,128,{kv_heads * HEAD_DIM};\r\n4096,128,{kv_heads * HEAD_DIM};\r\n;\r\n{b};\r\n{b},64",
            input_types=f"{bf};\r\nTensorList;\r\nTensorList;\r\nNone;\r\nlong int;\r\nint",
            stack=_stack(f"{_SITE}vllm_ascend/attention/attention_v1.py(344): forward"),
        ),
        _kernel(
            "transdata",
            "trans_TransData_0",
            "TransData",
            "AI_VECTOR_CORE",
            "vector",
            6.5,
            in_shapes=f"{b},{q_dim}",
            in_dtypes="DT_BF16",
            out_shapes=f"{q_dim // 16},1,16,16",
            out_dtypes="DT_BF16",
            out_formats="FRACTAL_NZ",
            aten="npu::npu_format_cast",
            api="TransData",
            input_dims=f"{b},{q_dim};\r\n",
            input_types=f"{bf};\r\nScalar",
            stack=_stack(f"{_SITE}vllm_ascend/ops/linear.py(118): forward"),
            trans=True,
        ),
        _kernel(
            "o_proj",
            "aclnnMm_MatMulCommon_MatMulV2",
            "MatMulV2",
            "AI_CORE",
            "matmul",
            9.2 * tp,
            in_shapes=f"{b},{q_dim};{q_dim},{h}",
            in_dtypes="DT_BF16;DT_BF16",
            in_formats="FRACTAL_NZ;FORMAT_ND",
            out_shapes=f"{b},{h}",
            out_dtypes="DT_BF16",
            aten="aten::mm",
            api="aclnnMm",
            input_dims=f"{b},{q_dim};\r\n{q_dim},{h}",
            input_types=f"{bf};\r\n{bf}",
            stack=_stack(lin),
        ),
        _kernel(
            "post_norm",
            "aclnnAddRmsNorm_AddRmsNorm_AddRmsNorm",
            "AddRmsNorm",
            "AI_VECTOR_CORE",
            "vector",
            5.6,
            in_shapes=f"{b},{h};{b},{h};{h}",
            in_dtypes="DT_BF16;DT_BF16;DT_BF16",
            in_formats="FORMAT_ND;FORMAT_ND;FORMAT_ND",
            out_shapes=f"{b},{h};{b},1;{b},{h}",
            out_dtypes="DT_BF16;FLOAT;DT_BF16",
            out_formats="FORMAT_ND;FORMAT_ND;FORMAT_ND",
            aten="npu::npu_add_rms_norm",
            api="aclnnAddRmsNorm",
            input_dims=f"{b},{h};\r\n{b},{h};\r\n{h};\r\n",
            input_types=f"{bf};\r\n{bf};\r\n{bf};\r\nScalar",
            stack=_stack(norm),
        ),
        _kernel(
            "gate_up",
            "aclnnMm_MatMulCommon_MatMulV2",
            "MatMulV2",
            "AI_CORE",
            "matmul",
            88.0 * tp,
            in_shapes=f"{b},{h};{h},{2 * inter}",
            in_dtypes="DT_BF16;DT_BF16",
            in_formats="FORMAT_ND;FORMAT_ND",
            out_shapes=f"{b},{2 * inter}",
            out_dtypes="DT_BF16",
            aten="aten::mm",
            api="aclnnMm",
            input_dims=f"{b},{h};\r\n{h},{2 * inter}",
            input_types=f"{bf};\r\n{bf}",
            stack=_stack(lin, f"{_SITE}vllm/model_executor/models/qwen2.py(96): forward"),
        ),
        _kernel(
            "swiglu",
            "aclnnSwiGlu_SwiGlu_SwiGlu",
            "SwiGlu",
            "AI_VECTOR_CORE",
            "vector",
            4.1,
            in_shapes=f"{b},{2 * inter}",
            in_dtypes="DT_BF16",
            out_shapes=f"{b},{inter}",
            out_dtypes="DT_BF16",
            aten="npu::npu_swiglu",
            api="aclnnSwiGlu",
            input_dims=f"{b},{2 * inter};\r\n",
            input_types=f"{bf};\r\nScalar",
            stack=_stack(f"{_SITE}vllm_ascend/ops/activation.py(33): forward_oot"),
        ),
        _kernel(
            "down_proj",
            "aclnnMm_MatMulCommon_MatMulV2",
            "MatMulV2",
            "AI_CORE",
            "matmul",
            46.0 * tp,
            in_shapes=f"{b},{inter};{inter},{h}",
            in_dtypes="DT_BF16;DT_BF16",
            in_formats="FORMAT_ND;FORMAT_ND",
            out_shapes=f"{b},{h}",
            out_dtypes="DT_BF16",
            aten="aten::mm",
            api="aclnnMm",
            input_dims=f"{b},{inter};\r\n{inter},{h}",
            input_types=f"{bf};\r\n{bf}",
            stack=_stack(lin, f"{_SITE}vllm/model_executor/models/qwen2.py(98): forward"),
        ),
        _kernel(
            "lm_head",
            "aclnnMm_MatMulCommon_MatMulV2",
            "MatMulV2",
            "AI_CORE",
            "matmul",
            335.0 * tp,
            in_shapes=f"{b},{h};{h},{vocab}",
            in_dtypes="DT_BF16;DT_BF16",
            in_formats="FORMAT_ND;FORMAT_ND",
            out_shapes=f"{b},{vocab}",
            out_dtypes="DT_BF16",
            aten="aten::mm",
            api="aclnnMm",
            input_dims=f"{b},{h};\r\n{h},{vocab}",
            input_types=f"{bf};\r\n{bf}",
            stack=_stack(f"{_SITE}vllm/model_executor/layers/logits_processor.py(84): _get_logits"),
        ),
        _kernel(
            "cast_logits",
            "aclnnCast_CastAiCore_Cast",
            "Cast",
            "AI_VECTOR_CORE",
            "vector",
            7.8,
            in_shapes=f"{b},{VOCAB}",
            in_dtypes="DT_BF16",
            out_shapes=f"{b},{VOCAB}",
            out_dtypes="FLOAT",
            aten="aten::to",
            api="aclnnCast",
            input_dims=f"{b},{VOCAB};\r\n;\r\n;\r\n;\r\n",
            input_types=f"{bf};\r\nScalar;\r\nScalar;\r\nScalar;\r\nNone",
            stack=_stack(f"{_SITE}vllm/model_executor/layers/logits_processor.py(71): forward"),
            trans=True,
        ),
        _kernel(
            "argmax",
            "aclnnArgMax_ArgMaxV2AiCpu_ArgMaxV2",
            "ArgMaxV2",
            "AI_CPU",
            "ai_cpu",
            235.0,
            in_shapes=f"{b},{VOCAB};",
            in_dtypes="FLOAT;INT64",
            in_formats="FORMAT_ND;FORMAT_ND",
            out_shapes=f"{b}",
            out_dtypes="INT64",
            aten="aten::argmax",
            api="aclnnArgMax",
            input_dims=f"{b},{VOCAB};\r\n;\r\n",
            input_types="float;\r\nScalar;\r\nScalar",
            stack=_stack(f"{_SITE}vllm/model_executor/layers/sampler.py(745): _greedy_sample"),
        ),
        CommSpec(
            "allreduce",
            "hcom_allReduce_",
            "HcclAllreduce",
            "c10d::allreduce_",
            b * h,
            2 * b * h,
            13.0,
            f"{b},{h}",
            _stack(f"{_SITE}vllm/distributed/communication_op.py(14): tensor_model_parallel_all_reduce"),
        ),
        CommSpec(
            "allgather",
            "hcom_allGather_",
            "HcclAllgather",
            "c10d::_allgather_base_",
            b * vocab,
            2 * b * vocab,
            46.0,
            f"{b * world},{vocab};\r\n{b},{vocab}",
            _stack(f"{_SITE}vllm/distributed/communication_op.py(21): tensor_model_parallel_all_gather"),
        ),
    ]
    return {op.key: op for op in ops}


def layer_ops(layer: int) -> tuple[str, ...]:
    """One decoder layer: attention block, TP all-reduce, MLP block, TP all-reduce.

    The first layer also converts the attention output to FRACTAL_NZ for o_proj (an injected TransData).
    """
    return (
        "input_norm",
        "qkv_proj",
        "rope",
        "attention",
        *(("transdata",) if layer == 0 else ()),
        "o_proj",
        "allreduce",
        "post_norm",
        "gate_up",
        "swiglu",
        "down_proj",
        "allreduce",
    )
