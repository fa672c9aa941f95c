"""Shapes of an op (diag.analyses.ops_shapes): one test per rule of diag/rules/op_shape_axes.csv, the varying
dimension on a generated prefill run at growing sequence lengths, shapes per step, and PMU / L2 per op."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from diag.analyses import ops_shapes
from diag.analyses.ops_pmu import op_pmu, pmu_metrics
from diag.analyses.ops_shapes import (
    axis_rule,
    axis_rules,
    op_shapes,
    parse_shapes,
    shapes_by_step,
    varying_axes,
)
from diag.store import Store
from tests.conftest import REAL_LEVEL2, ingest_into

HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
    "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats,Context ID"
)
LENGTHS = (512, 1024, 2048, 4096)  # one prefill per step, the sequence doubling from step to step
BASE_US = 1_736_933_600_000_000


@pytest.mark.parametrize(
    "rule", axis_rules(), ids=lambda r: f"{r.priority}_{r.example_op}_{r.input}_{r.axis}"
)
def test_each_rule_names_its_example_axis(rule: ops_shapes.AxisRule) -> None:
    assert axis_rule(rule.example_op, rule.input, rule.rank, rule.axis) == rule  # the first rule to match
    tensor = parse_shapes(rule.example_shapes)[rule.input]
    assert tensor is not None and len(tensor) == rule.rank
    assert tensor[rule.axis] == rule.example_value


def test_parse_shapes_keeps_tensors_apart() -> None:
    assert parse_shapes("16,3584;3584") == [(16, 3584), (3584,)]
    assert parse_shapes("16,N/A;;8") == [None, None, (8,)]
    assert parse_shapes(None) == [] and parse_shapes("") == []


def _row(step: int, start_us: float, name: str, op: str, core: str, dur_us: str, shapes: str) -> list[str]:
    return [str(step), "4294967295", "1", "2", name, op, "dynamic", core, f"{start_us:.3f}\t", dur_us, "0", "24",
            "0", "NO", f'"{shapes}"', "DT_BF16", "FORMAT_ND", f'"{shapes.split(";")[0]}"', "DT_BF16", "FORMAT_ND",
            "N/A"]  # fmt: skip


def write_prefill_run(folder: Path) -> Path:
    """kernel_details.csv of a prefill at LENGTHS: per step a PromptFlashAttention (B=1, S=L, BSH), two MatMulV2
    call sites (QKV 3584→4608, up 3584→18944) and a TransData whose shape no rule names."""
    out = folder / "rank0_1_20250115093320983_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    rows, t = [], float(BASE_US)
    for step, n in enumerate(LENGTHS, start=1):
        ops = [
            ("aclnnPromptFlashAttention_PFA_PromptFlashAttention", "PromptFlashAttention", "MIX_AIC",
             f"{n * n / 4096:.3f}", f"1,{n},3584;1,{n},512;1,{n},512"),
            ("aclnnMatmul_MatMulV2_MatMulV2", "MatMulV2", "AI_CORE", f"{n / 64:.3f}", f"{n},3584;3584,4608"),
            ("aclnnMatmul_MatMulV2_MatMulV2", "MatMulV2", "AI_CORE", f"{n / 16:.3f}", f"{n},3584;3584,18944"),
            ("trans_TransData_1", "TransData", "AI_VECTOR_CORE", "5.000", f"{n},3584"),
        ]  # fmt: skip
        for name, op, core, dur, shapes in ops:
            rows.append(_row(step, t, name, op, core, dur, shapes))
            t += 2000.0
    path = out / "kernel_details.csv"
    path.write_text(HEADER + "\n" + "\n".join(",".join(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def prefill_store(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    root = tmp_path_factory.mktemp("prefill")
    write_prefill_run(root)
    store = Store(str(root / "prefill.duckdb"))
    assert ingest_into(store, [root]).ok
    yield store
    store.close()


def _run(store: Store) -> int:
    return store.cursor().execute("SELECT min(run_id) FROM runs").fetchall()[0][0]


def test_attention_shapes_name_the_growing_sequence(prefill_store: Store) -> None:
    shapes = op_shapes(prefill_store, _run(prefill_store), "PromptFlashAttention")
    assert [(s["input_shapes"], s["calls"], s["total_ns"], s["steps"]) for s in shapes] == [
        ("1,4096,3584;1,4096,512;1,4096,512", 1, 4_096_000, 1),
        ("1,2048,3584;1,2048,512;1,2048,512", 1, 1_024_000, 1),
        ("1,1024,3584;1,1024,512;1,1024,512", 1, 256_000, 1),
        ("1,512,3584;1,512,512;1,512,512", 1, 64_000, 1),
    ]
    assert shapes[0]["varying"] == [
        {"dim": "query_seq", "label": "query sequence (S1 of BSH; heads in TND)", "value": 4096},
        {"dim": "kv_len", "label": "KV length (S2 of BSH; KV heads in TND)", "value": 4096},
    ]  # key and value both say 4096: named once
    assert shapes[0]["op_state"] == "dynamic"


def test_matmul_call_sites_vary_in_tokens_not_in_their_weights(prefill_store: Store) -> None:
    run = _run(prefill_store)
    shapes = op_shapes(prefill_store, run, "MatMulV2")
    assert len(shapes) == 8  # 4 lengths × 2 call sites
    assert {s["input_shapes"]: [v["value"] for v in s["varying"]] for s in shapes}[
        "2048,3584;3584,18944"
    ] == [2048]
    assert all([v["label"] for v in s["varying"]] == ["tokens (M)"] for s in shapes)
    summary = varying_axes([s["input_shapes"] for s in shapes], "MatMulV2")
    assert summary == [{"dim": "tokens", "label": "tokens (M)", "sizes": list(LENGTHS)}]
    assert shapes_by_step(prefill_store, run, "MatMulV2") == [
        {"step": i, "calls": 2, "shapes": 2, "total_ns": round(n / 64 * 1000) + round(n / 16 * 1000)}
        for i, n in enumerate(LENGTHS, start=1)
    ]


def test_an_op_without_a_rule_gets_no_named_dimension(prefill_store: Store) -> None:
    shapes = op_shapes(prefill_store, _run(prefill_store), "TransData")
    assert len(shapes) == 4 and all(s["varying"] == [] for s in shapes)  # says less: no guess at axis 0


def test_op_table_counts_shape_churn(prefill_store: Store) -> None:
    from diag.analyses.ops import op_table

    rows = {r["name"]: r for r in op_table(prefill_store, _run(prefill_store))}
    assert (rows["MatMulV2"]["shapes"], rows["MatMulV2"]["max_shapes_per_step"]) == (8, 2)
    assert (rows["PromptFlashAttention"]["shapes"], rows["PromptFlashAttention"]["op_class"]) == (
        4, "attention_prefill",
    )  # fmt: skip


def _weighted(path: Path, op: str, metric: str) -> float:
    """Duration-weighted mean of one PMU column over the rows of one op type, straight from the csv."""
    num, den = Decimal(0), Decimal(0)
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if row["Type"] == op and row[metric] not in ("N/A", ""):
                d = Decimal(row["Duration(us)"].strip())
                num, den = num + Decimal(row[metric]) * d, den + d
    return float(num / den)


def test_pmu_and_l2_per_op_on_the_real_level2_export(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "l2.duckdb"))
    try:
        assert ingest_into(store, [REAL_LEVEL2]).ok
        run = _run(store)
        assert "aic_mac_ratio" in pmu_metrics(store, run) and "cube_utilization(%)" in pmu_metrics(store, run)
        listed = op_pmu(store, run)
        rows = {r["name"]: r for r in listed}
        from diag.analyses.ops import op_table

        by_time = [r["name"] for r in op_table(store, run) if r["name"] in rows]
        assert [r["name"] for r in listed] == by_time  # the op table's order: largest total first
        kd = REAL_LEVEL2 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
        for op, metric in (
            ("Conv2D", "aic_mac_ratio"),
            ("Conv2D", "aic_mte2_ratio"),
            ("TransData", "aiv_vec_ratio"),
        ):
            assert rows[op][metric] == pytest.approx(_weighted(kd, op, metric), rel=1e-9)
        victims: dict[str, list[float]] = defaultdict(list)
        names = {}
        with open(kd, encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                names[(row["Stream ID"], row["Task ID"], row["Name"])] = row["Type"]
        with open(
            REAL_LEVEL2 / "ASCEND_PROFILER_OUTPUT" / "l2_cache.csv", encoding="utf-8", newline=""
        ) as fh:
            for row in csv.DictReader(fh):
                op = names.get((row["Stream Id"], row["Task Id"], row["Op Name"]))
                if op and row["Victim Rate"] != "N/A":
                    victims[op].append(float(row["Victim Rate"]))
        assert rows["Conv2D"]["l2_victim_rate"] == pytest.approx(
            sum(victims["Conv2D"]) / len(victims["Conv2D"])
        )
        assert rows["Conv2D"]["l2_hit_rate"] is None  # the file writes N/A: no figure, not 0
    finally:
        store.close()


def test_diag_ops_shapes_json_and_table(tmp_path: Path) -> None:
    from tests.test_ops import _diag

    write_prefill_run(tmp_path / "in")
    db = tmp_path / "prefill.duckdb"
    with Store(str(db)) as store:
        assert ingest_into(store, [tmp_path / "in"]).ok
    code, out, err = _diag("ops", "--db", str(db), "--shapes", "MatMulV2", "--json")
    assert code == 0, err
    got = json.loads(out)
    assert got["varying"] == [{"dim": "tokens", "label": "tokens (M)", "sizes": list(LENGTHS)}]
    assert [(s["input_shapes"], s["total_ns"]) for s in got["shapes"][:2]] == [
        ("4096,3584;3584,18944", 256_000),
        ("2048,3584;3584,18944", 128_000),
    ]
    code, out, _ = _diag("ops", "--db", str(db), "--shapes", "MatMulV2")
    line = next(x for x in out.splitlines() if "4096,3584;3584,18944" in x)
    assert [c.strip() for c in line.strip("│ ").split("│")] == [
        "4096,3584;3584,18944", "tokens (M) = 4,096", "1", "0.256", "256.0", "256.0", "256.0", "1", "dynamic",
    ]  # fmt: skip
    code, _, err = _diag("ops", "--db", str(db), "--shapes", "MatMul")
    assert (code, err) == (1, "diag: error: no op type 'MatMul' in run 1\n")
