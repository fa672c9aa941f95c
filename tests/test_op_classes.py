"""Op classes as data (diag/rules/op_classes.csv): one test per rule, Python and DuckDB agree, corpus coverage."""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb
import pytest

from diag.analyses.op_classes import CLASSES, OTHER, classify, rules, sql_case, sql_case_by_platform


def _platform(rule_platform: str) -> str:
    return "ascend" if rule_platform == "ascend" else "cuda"


@pytest.mark.parametrize("rule", rules(), ids=lambda r: f"{r.priority}-{r.op_class}-{r.platform}")
def test_each_rule_classifies_its_real_example(rule):
    platform = _platform(rule.platform)
    assert classify(rule.example, platform=platform) == rule.op_class
    sql = sql_case("$1", platform=platform)
    assert duckdb.execute(f"SELECT {sql}", [rule.example]).fetchall() == [(rule.op_class,)]


def test_every_class_but_other_has_a_rule_on_each_side():
    for platform in ("cuda", "ascend"):
        covered = {r.op_class for r in rules() if r.applies_to(platform)}
        assert covered == set(CLASSES) - {OTHER}, platform


@pytest.mark.parametrize(
    ("name", "op_type", "platform", "expected"),
    [
        ("aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "ascend", "gemm"),
        ("aclnnInplaceCopy_TensorMove", None, "ascend", "memcpy"),  # no type: the name decides
        ("anything", "MoeInitRoutingV2", "ascend", "moe_permute"),  # token permute, not the router (#22)
        ("hcom_allReduce__868_0_1", "hcom_allReduce_", "ascend", "communication"),
        ("FusedInferAttentionScore", "FusedInferAttentionScore", "ascend", "attention_prefill"),
        ("AddRmsNorm", "AddRmsNorm", "ascend", "norm"),  # not elementwise 'Add'
        ("QuantBatchMatmulV3", "QuantBatchMatmulV3", "ascend", "gemm"),  # not quantisation
        (
            "void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, float const*)",
            None,
            "cuda",
            "other",
        ),  # fmt: skip
        ("", None, "cuda", "other"),
        (None, None, "ascend", "other"),
    ],
)
def test_op_type_first_then_name_and_other_is_never_hidden(name, op_type, platform, expected):
    assert classify(name, op_type, platform) == expected
    got = duckdb.execute(f"SELECT {sql_case('$1', '$2', platform)}", [name, op_type]).fetchall()
    assert got == [(expected,)]


def test_per_row_platform_case():
    sql = sql_case_by_platform("n", "p", "t")
    rows = duckdb.execute(
        f"SELECT {sql} FROM (VALUES ('MatMulV2', 'ascend', 'MatMulV2'), ('ncclKernel_SendRecv', 'cuda', NULL),"
        " ('x', 'other', NULL)) v(n, p, t)"
    ).fetchall()
    assert rows == [("gemm",), ("communication",), ("other",)]


def test_unknown_platform_is_an_error():
    with pytest.raises(ValueError):
        classify("x", platform="rocm")


@pytest.mark.corpus
def test_corpus_kernels_python_and_duckdb_agree_and_classify_most_time(corpus: Path):
    names: dict[str, int] = {}
    for path in sorted((corpus / "cuda" / "llm-perf-opt").glob("nsys_cuda_gpu_kern_sum_*.csv")):
        for row in csv.DictReader(path.open(encoding="utf-8")):
            names[row["Name"]] = names.get(row["Name"], 0) + int(row["Total Time (ns)"])
    assert len(names) > 100
    con = duckdb.connect()
    con.execute("CREATE TABLE n (name VARCHAR)")
    con.executemany("INSERT INTO n VALUES (?)", [[n] for n in names])
    in_sql = dict(con.execute(f"SELECT name, {sql_case('name')} FROM n").fetchall())
    assert in_sql == {n: classify(n) for n in names}
    # the DeepSeek-OCR LLM run: every kernel in a class (the format notes measured 100 %)
    assert sum(t for n, t in names.items() if classify(n) == OTHER) == 0
    by_class: dict[str, int] = {}
    for n, t in names.items():
        by_class[classify(n)] = by_class.get(classify(n), 0) + t
    assert max(by_class, key=lambda c: by_class[c]) == "gemm"
