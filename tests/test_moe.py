"""MoE / expert parallelism (#22): expert hotspot ingest, MoE op classes, imbalance figures, ``diag moe``."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from diag.analyses.op_classes import classify, sql_case
from tests.conftest import ingest_into

FIXTURES = Path(__file__).parent / "fixtures" / "moe" / "msinsight"


def _ingest(src: Path, db: Path) -> None:
    from diag.store import Store

    with Store(db) as store:
        ingest_into(store, [src])


# -- step 1: the real expert hotspot / deployment files ------------------------------------------------------
def test_real_hotspot_files_parse_and_each_expert_equals_an_independent_sum(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "m")
    _ingest(tmp_path / "m", tmp_path / "x.duckdb")
    con = duckdb.connect(str(tmp_path / "x.duckdb"), read_only=True)
    for phase in ("prefill", "decode"):
        with open(FIXTURES / f"{phase}_0.csv", newline="") as fh:
            rows = [[int(c) for c in r] for r in csv.reader(fh) if r]
        want = {(layer, e): v for layer, r in enumerate(rows) for e, v in enumerate(r)}
        got = con.execute(
            "SELECT layer, expert, rank, tokens FROM expert_load WHERE phase = ? ORDER BY layer, expert",
            [phase],
        ).fetchall()
        assert {(r[0], r[1]): r[3] for r in got} == want
        assert {r[2] for r in got} == {0}  # decode_0 / prefill_0: rank 0 holds the columns
        assert len(got) == 58 * 4
    per_expert = dict(
        con.execute("SELECT expert, sum(tokens) FROM expert_load WHERE phase='prefill' GROUP BY 1").fetchall()
    )
    with open(FIXTURES / "prefill_0.csv", newline="") as fh:
        cols = list(zip(*[[int(c) for c in r] for r in csv.reader(fh) if r], strict=True))
    assert per_expert == {e: sum(c) for e, c in enumerate(cols)}


def test_real_deployment_file_gives_placement_with_redundant_copies(tmp_path):
    shutil.copytree(FIXTURES, tmp_path / "m")
    _ingest(tmp_path / "m", tmp_path / "x.duckdb")
    con = duckdb.connect(str(tmp_path / "x.duckdb"), read_only=True)
    doc = json.loads((FIXTURES / "prefill_global_deployment.json").read_text())
    want = sum(len(d["device_expert"]) for layer in doc["layer_list"] for d in layer["device_list"])
    n, ranks, copies = con.execute(
        "SELECT count(*), count(DISTINCT rank), count(*) FILTER (WHERE replica > 0) FROM expert_placement"
    ).fetchone()
    distinct = sum(
        len({e for d in layer["device_list"] for e in d["device_expert"]}) for layer in doc["layer_list"]
    )
    assert (n, ranks, copies) == (want, 64, want - distinct)


def test_a_headerless_integer_csv_of_another_name_is_not_an_expert_hotspot():
    from parsers import detect
    from parsers._base import Probe

    probe = Probe(Path("counts.csv"), 10, b"1,2,3\n4,5,6\n")
    assert detect(probe) is None or detect(probe).name != "moe_hotspot"
    assert detect(Probe(Path("decode_3.csv"), 10, b"1,2,3\n4,5,6\n")).name == "moe_hotspot"
    assert detect(Probe(Path("decode_3.csv"), 10, b"Name,Type\nx,y\n")) is None


# -- step 2: MoE op classes ----------------------------------------------------------------------------------
MOE_OPS = [
    ("MoeGatingTopKSoftmax", "ascend", "moe_routing"),
    ("aclnnMoeGatingTopK_MoeGatingTopK_MoeGatingTopK", "ascend", "moe_routing"),
    ("vllm::moe::topkGatingSoftmax<float, 8, 128>", "cuda", "moe_routing"),
    ("MoeInitRoutingV2", "ascend", "moe_permute"),
    ("MoeInitRoutingQuantV2", "ascend", "moe_permute"),
    ("MoeTokenPermute", "ascend", "moe_permute"),
    ("MoeTokenUnpermute", "ascend", "moe_permute"),
    ("MoeFinalizeRoutingV2", "ascend", "moe_permute"),
    ("void vllm::moe::moe_align_block_size_kernel<int>(int const*, int*)", "cuda", "moe_permute"),
    ("GroupedMatmul", "ascend", "moe_gemm"),
    ("aclnnGroupedMatmulV4_GroupedMatmul_GroupedMatmul", "ascend", "moe_gemm"),
    ("fused_moe_kernel", "cuda", "moe_gemm"),
    ("grouped_gemm_kernel<cutlass::bfloat16_t>", "cuda", "moe_gemm"),
    ("MoeDistributeDispatchV2", "ascend", "moe_dispatch_combine"),
    ("MoeDistributeCombine", "ascend", "moe_dispatch_combine"),
    ("void deep_ep::internode_ll::combine<(int)7168>(void *)", "cuda", "moe_dispatch_combine"),
    ("hcom_alltoallv__428_2_1", "ascend", "moe_alltoall"),
    ("hcom_alltoall__11_0_1", "ascend", "moe_alltoall"),
    ("AlltoAllV", "ascend", "moe_alltoall"),
    ("ncclDevKernel_AllToAll_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)", "cuda", "moe_alltoall"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)", "cuda", "communication"),  # not MoE
    ("hcom_allReduce__868_0_1", "ascend", "communication"),
    ("AlltoAllAllGatherBatchMatMul", "ascend", "communication"),  # the fused MC2 op stays communication
]


@pytest.mark.parametrize(("name", "platform", "expected"), MOE_OPS, ids=[m[0][:40] for m in MOE_OPS])
def test_moe_op_classes(name, platform, expected):
    assert classify(name, platform=platform) == expected
    assert duckdb.execute(f"SELECT {sql_case('$1', platform=platform)}", [name]).fetchall() == [(expected,)]
