"""Comparison traps (issue #15): one vocabulary on both platforms, one count per thing.

Each test feeds a real-shaped input that misled the comparison and asserts the right figures: rule order
(BroadcastTo is not communication), symmetric buckets (CUDA elementwise work is vector), the biggest loss over
every bucket, an ``nsys stats`` kernel summary as a baseline, warnings in every report, headlines both ways, and
duplicate kernel rows counted once and reported.
"""

from __future__ import annotations

import duckdb
import pytest

from diag.analyses.op_classes import classify, first_rule, rules, sql_case

# -- 1. rule order: the most specific rule first ----------------------------------------------------------------


def _platform(rule_platform: str) -> str:
    return "ascend" if rule_platform == "ascend" else "cuda"


@pytest.mark.parametrize("rule", rules(), ids=lambda r: f"{r.priority}-{r.op_class}-{r.platform}")
def test_each_rule_is_the_first_to_match_its_own_example(rule):
    """No broader rule shadows a narrower one: each rule's example is classified by that very rule."""
    got = first_rule(rule.example, platform=_platform(rule.platform))
    assert got is not None and got.priority == rule.priority, (rule.priority, got)


COLLISIONS = [
    # BroadcastTo (an AI Vector op) against HCCL / NCCL broadcast
    ("BroadcastTo", "BroadcastTo", "ascend", "layout_cast"),
    ("aclnnBroadcastTo_BroadcastToAiCore_BroadcastTo", None, "ascend", "layout_cast"),
    ("hcom_broadcast__868_0_1", None, "ascend", "communication"),
    ("HcomBroadcast", "HcomBroadcast", "ascend", "communication"),
    ("ncclDevKernel_Broadcast_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)", None, "cuda", "communication"),
    # Cast against Scatter; an aclnn name without a Type column still names its op type last
    ("Cast", "Cast", "ascend", "layout_cast"),
    ("aclnnCast_CastAiCore_Cast", None, "ascend", "layout_cast"),
    ("ScatterElements", "ScatterElements", "ascend", "embedding"),
    ("aclnnScatter_ScatterAiCore_Scatter", None, "ascend", "embedding"),
    # Transpose against TransData against TransposeBatchMatMul
    ("TransposeD", "TransposeD", "ascend", "layout_cast"),
    ("trans_TransData_0", "TransData", "ascend", "layout_cast"),
    ("TransposeBatchMatMul", "TransposeBatchMatMul", "ascend", "gemm"),
    ("UpsampleNearest2d", "UpsampleNearest2d", "ascend", "layout_cast"),  # not 'sample' (sampling)
    ("TopKTopPSample", "TopKTopPSample", "ascend", "sampling"),
    # elementwise_kernel wraps copies, activations, index ops and plain arithmetic
    ("void at::native::elementwise_kernel<(int)128, (int)2, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]>>(int, T3)", None, "cuda", "layout_cast"),
    ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char *, (unsigned long)3>>(int, T2, T3)", None, "cuda", "elementwise"),
    ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::<unnamed>::silu_kernel(at::TensorIteratorBase &)::[lambda() (instance 1)]>(int, T2, T3)", None, "cuda", "activation"),
    ("void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_put_kernel_impl<at::native::OpaqueType<2> >>>(long)", None, "cuda", "embedding"),
    # reduce_kernel: argmax is sampling, mean is a reduction; a fused persistent reduction with a cast is a reduction
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4> >(at::native::ReduceOp<float, at::native::ArgMaxOps<float>, unsigned int, long, 4>)", None, "cuda", "sampling"),
    ("void at::native::reduce_kernel<(int)128, (int)4, at::native::ReduceOp<c10::BFloat16, at::native::MeanOps<c10::BFloat16, float, float, c10::BFloat16>, unsigned int, c10::BFloat16, (int)4, (int)8>>(T3)", None, "cuda", "reduce"),
    ("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_0", None, "cuda", "reduce"),
    ("triton_red_fused__softmax_0", None, "cuda", "softmax"),
    # cutlass / xmma: gemm unless it is an attention kernel templated on cutlass types
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_256x128_32x3_tn_align8>(T1::Params)", None, "cuda", "gemm"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel", None, "cuda", "gemm"),
    ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, false, false>(flash::Flash_fwd_params)", None, "cuda", "attention_prefill"),
    ("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::bfloat16_t>, false>(flash::Flash_fwd_params)", None, "cuda", "attention_decode"),
    # Inductor's triton_ kernels: the prefix says pointwise / reduction / template
    ("triton_poi_fused__to_copy_0", None, "cuda", "layout_cast"),
    ("triton_poi_fused_cat_clone_0", None, "cuda", "layout_cast"),
    ("triton_poi_fused_cat_add_0", None, "cuda", "elementwise"),
    ("triton_poi_fused_add_cos_sin_0", None, "cuda", "elementwise"),
    ("triton_poi_fused_mul_silu_0", None, "cuda", "activation"),
    ("triton_tem_fused_addmm_0", None, "cuda", "gemm"),
    ("void at::native::<unnamed>::upsample_bilinear2d_out_frame<float, float>(int, T2, T2, bool, T1 *, T1 *)", None, "cuda", "layout_cast"),
]  # fmt: skip


@pytest.mark.parametrize(("name", "op_type", "platform", "expected"), COLLISIONS, ids=lambda v: str(v)[:40])
def test_known_collisions_go_to_the_most_specific_class(name, op_type, platform, expected):
    assert classify(name, op_type, platform) == expected
    got = duckdb.execute(f"SELECT {sql_case('$1', '$2', platform)}", [name, op_type]).fetchall()
    assert got == [(expected,)]
