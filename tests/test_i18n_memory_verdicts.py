"""The OOM and KV-cache verdict sentences (diag/analyses/memory_verdicts.py) in Chinese, the English unchanged."""

import pytest

from diag.analyses.memory_verdicts import kv_verdict, oom_verdict
from diag.i18n import set_language

GIB = 1 << 30
FRAGMENTED = {"requested_bytes": 2 * GIB, "capacity_bytes": 64 * GIB, "allocated_bytes": 40 * GIB,
              "reserved_bytes": 56 * GIB, "free_bytes": GIB}  # fmt: skip


@pytest.fixture(autouse=True)
def _back_to_english():
    yield
    set_language("en")


def test_fragmentation_verdict_in_both_languages():
    set_language("en")
    assert oom_verdict(FRAGMENTED) == (
        "fragmentation",
        "Reserved 56.00 GiB vs allocated 40.00 GiB: 16.00 GiB (28.6% of reserved) is cached by the allocator "
        "but unused, more than the 2.00 GiB request.",
    )
    set_language("zh")
    assert oom_verdict(FRAGMENTED) == (
        "fragmentation",
        "已预留（reserved）56.00 GiB，已分配（allocated）40.00 GiB：其中 16.00 GiB（占 reserved 的 28.6%）"
        "被缓存分配器持有但未使用，大于本次申请的 2.00 GiB。",
    )


def test_unknown_and_kv_verdicts_name_the_figures_in_chinese():
    set_language("zh")
    assert oom_verdict({"requested_bytes": 2 * GIB})[1] == (
        "报错给出了 申请量 2.00 GiB；未给出 容量，预留量，空闲量，因此不知道内存被谁占用。"
    )
    assert kv_verdict({"kv_cache_bytes": -3 * GIB, "budget_bytes": 50 * GIB}) == (
        "negative",
        "KV cache 预算为 -3.00 GiB：权重和激活已超过 gpu_memory_utilization 允许的量（50.00 GiB）。",
    )
    assert kv_verdict({"kv_cache_tokens": 120_000, "max_model_len": 32_768}) == (
        "ok",
        "KV cache 可容纳 120,000 个 token。",
    )
