"""How close ops run to the hardware (diag.analyses.op_util): each formula of rules/op_cost.toml on its hand-computed
row, MFU of a matmul = 2·M·N·K ÷ duration ÷ the table's peak, attention prefill / decode rows, no MFU without a
device, the bound class against the PMU columns of real rows, the finding's title, ``diag ops --util`` and the
Utilization section of the Ops page."""

from __future__ import annotations

import csv
import json
import tomllib
from pathlib import Path

import duckdb
import pytest

from diag.analyses.op_util import cost_sql, op_cost_rules, op_utilization
from diag.devices import DEVICES_PATH
from diag.store import Store
from tests.conftest import CORPUS, ingest_into, open_page
from tests.test_ops import ASCEND_RANK0, _diag

HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
    "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats,Context ID"
)
BASE_US = 1_736_933_600_000_000
FA = next(e for e in op_cost_rules()["example"] if e["op"] == "FlashAttentionScore")
IFA = next(e for e in op_cost_rules()["example"] if e["op"] == "IncreFlashAttention" and "flops" in e)
ST_LEVEL2 = CORPUS / "ascend/msinsight/test/st/level2/rank_0_ascend_pt"


def _peak(key: str, field: str) -> float:
    with open(DEVICES_PATH, "rb") as fh:
        return next(d[field] for d in tomllib.load(fh)["device"] if d["key"] == key)


@pytest.mark.parametrize(
    "example", op_cost_rules()["example"], ids=lambda e: f"{e['op']}:{e['input_shapes']}"
)
def test_each_formula_gives_its_hand_computed_row(example: dict) -> None:
    con = duckdb.connect()
    cols = ("op", "input_shapes", "input_dtypes", "output_shapes", "output_dtypes")
    con.execute("CREATE TABLE t (name VARCHAR, " + ", ".join(f"{c} VARCHAR" for c in cols) + ")")
    con.execute("INSERT INTO t VALUES (?, ?, ?, ?, ?, ?)", [example["op"], *(example[c] for c in cols)])
    got = con.execute(f"SELECT cost_class, flops, bytes FROM ({cost_sql('SELECT * FROM t')})").fetchall()
    assert got == [(example["class"], example.get("flops"), example.get("bytes"))]


def _write_run(folder: Path, rows: list[tuple[str, str, str, str, str, str, str]]) -> Path:
    """kernel_details.csv of one step: (type, core, duration µs, input shapes, input dtypes, output shapes,
    output dtypes) per row, 100 µs apart."""
    out = folder / "rank0_1_20250115093320983_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    lines = [HEADER]
    for i, (op, core, dur, ins, in_dt, outs, out_dt) in enumerate(rows):
        start = f"{BASE_US + 5000 * i:.3f}\t"
        lines.append(",".join(["1", "4294967295", str(i), "2", f"aclnn{op}_{op}", op, "dynamic", core, start, dur,
                               "0", "24", "0", "NO", f'"{ins}"', in_dt, "ND", f'"{outs}"', out_dt, "ND", "N/A"]))  # fmt: skip
    (out / "kernel_details.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def attention_store(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """A prefill FlashAttentionScore of 1 ms and a contiguous-cache decode IncreFlashAttention of 50 µs."""
    root = tmp_path_factory.mktemp("att")
    rows = [
        ("FlashAttentionScore", "MIX_AIC", "1000", FA["input_shapes"], FA["input_dtypes"], FA["output_shapes"],
         FA["output_dtypes"]),
        ("IncreFlashAttention", "MIX_AIC", "50", IFA["input_shapes"], IFA["input_dtypes"], IFA["output_shapes"],
         IFA["output_dtypes"]),
    ]  # fmt: skip
    _write_run(root / "run", rows)
    store = Store(str(root / "att.duckdb"))
    assert ingest_into(store, [root / "run"]).ok
    yield store
    store.close()


def _rows(store: Store, device: str | None) -> dict[str, dict]:
    store.cursor().execute("UPDATE runs SET device_name = ?", [device])
    run_id = store.cursor().execute("SELECT min(run_id) FROM runs").fetchall()[0][0]
    return {r["name"]: r for r in op_utilization(store, run_id)}


def test_attention_prefill_and_decode_rows(attention_store: Store) -> None:
    rows = _rows(attention_store, "Ascend910B3")
    fa, ifa = rows["FlashAttentionScore"], rows["IncreFlashAttention"]
    peak, hbm = _peak("ascend-910b3", "tflops_bf16"), _peak("ascend-910b3", "hbm_gbps")
    assert fa["achieved_tflops"] == pytest.approx(68.719476736, rel=1e-12)  # causal 2^36 FLOP in 1 ms
    assert fa["mfu_pct"] == pytest.approx(100 * 68.719476736 / peak, rel=1e-12)
    assert (fa["cost_class"], fa["bound"]) == ("attention_prefill", "compute")  # 1365 FLOP/B ≫ ridge 184
    assert ifa["achieved_gbps"] == pytest.approx(67223552 / 50_000, rel=1e-12)  # 1344.5 GB/s
    assert ifa["bw_pct"] == pytest.approx(100 * 67223552 / 50_000 / hbm, rel=1e-12)
    assert (ifa["cost_class"], ifa["bound"]) == ("attention_decode", "memory")  # 7 FLOP/B
    assert ifa["arithmetic_intensity"] == pytest.approx(469762048 / 67223552, rel=1e-12)


def test_device_unknown_gives_figures_but_no_mfu(attention_store: Store) -> None:
    fa = _rows(attention_store, None)["FlashAttentionScore"]
    assert fa["achieved_tflops"] == pytest.approx(68.719476736, rel=1e-12)
    assert (fa["mfu_pct"], fa["bw_pct"], fa["bound"], fa["ridge_flops_per_byte"]) == (None, None, None, None)
    assert fa["peak_from"] == "device not known (not recorded)"


@pytest.fixture(scope="module")
def decode_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated decode rank 0 (sample_traces/generated) on an Ascend 910B3."""
    db = tmp_path_factory.mktemp("util") / "decode.duckdb"
    with Store(str(db)) as store:
        assert ingest_into(store, [ASCEND_RANK0]).ok
        store.cursor().execute("UPDATE runs SET device_name = 'Ascend910B3'")
    return db


def _csv_matmul(path: Path) -> tuple[int, int]:
    """(Σ 2·M·N·K, Σ duration ns) over the MatMulV2 rows, read with the csv module: x1 the first 2-D input
    (a bias may come first), K the dim x1 shares with x2, (M, N) the output."""
    flops = ns = 0
    with open(path, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if row["Type"] != "MatMulV2":
                continue
            shapes = row["Input Shapes"].strip('"')  # the export quotes the cell twice
            ins = [tuple(map(int, t.split(","))) for t in shapes.split(";") if "," in t]
            m, n = map(int, row["Output Shapes"].strip('"').split(","))
            k = ins[0][0] * ins[0][1] // m
            flops += 2 * m * n * k
            ns += round(float(row["Duration(us)"]) * 1000)
    return flops, ns


def test_matmul_mfu_is_2mnk_over_duration_over_peak(decode_db: Path) -> None:
    flops, ns = _csv_matmul(ASCEND_RANK0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    with Store(str(decode_db), read_only=True) as store:
        mm = next(r for r in op_utilization(store, 1) if r["name"] == "MatMulV2")
    assert (mm["flops"], mm["costed_calls"], mm["m_min"], mm["m_max"]) == (flops, 68, 16, 16)
    assert mm["mfu_pct"] == pytest.approx(
        100 * flops / ns / 1e3 / _peak("ascend-910b3", "tflops_bf16"), rel=1e-12
    )
    assert round(mm["mfu_pct"], 2) == 8.26 and mm["bound"] == "memory"
    assert mm["peak_from"] == "Ascend 910B3 (ascend-910b3), bf16 294.9 TFLOPS, HBM 1600 GB/s"


def test_decode_sized_matmul_finding_title(decode_db: Path) -> None:
    from diag.analyses.findings import device_findings

    with Store(str(decode_db), read_only=True) as store:
        found = [f for f in device_findings(store, 1) if f.category == "utilization"]
    assert [(f.severity, f.title) for f in found] == [
        ("high", "MatMulV2 at 8 % of peak bf16 TFLOPS with M = 16: decode-sized (50 % of kernel time)")
    ]
    assert found[0].suggestion.startswith("A matmul with few rows (M = tokens per step)")


def test_no_device_says_less(tmp_path: Path) -> None:
    from diag.analyses.findings import device_findings

    with Store(str(tmp_path / "x.duckdb")) as store:
        assert ingest_into(store, [ASCEND_RANK0]).ok
        found = [f for f in device_findings(store, 1) if f.category == "utilization"]
    assert found == []  # no peak to judge against: say nothing rather than a line on every unnamed run


def test_ops_util_cli(decode_db: Path) -> None:
    code, out, _ = _diag("ops", "--db", str(decode_db), "--util", "--json")
    assert code == 0
    doc = json.loads(out)
    first = doc["rows"][0]
    assert (first["name"], first["calls"], first["bound"], round(first["bw_pct"], 1)) == (
        "MatMulV2",
        68,
        "memory",
        95.7,
    )
    assert first["op_class"] == "gemm"  # the op table's keys stay, the util keys are added
    assert doc["peaks"] == [
        "Ascend 910B3 (ascend-910b3), bf16 294.9 TFLOPS, HBM 1600 GB/s",
        "Ascend 910B3 (ascend-910b3), vector bf16 9.22 TFLOPS, HBM 1600 GB/s",  # the vector-core ops' roof
    ]
    code, out, _ = _diag("ops", "--db", str(decode_db), "--util", "--top", "1")
    assert code == 0
    line = next(x for x in out.splitlines() if "MatMulV2" in x)
    assert [c.strip() for c in line.strip("│ ").split("│")] == [
        "MatMulV2", "matmul", "68", "3.882", "50.2%", "24.4", "8.3%", "1,531", "95.7%", "15.9", "memory", "memory"
    ]  # fmt: skip
    code, _, err = _diag("ops", "--db", str(decode_db), "--util", "--by", "class")
    assert (code, err.strip().splitlines()[-1]) == (
        2,
        "diag: error: --util is per op type or kernel: use --by op or --by kernel",
    )


def test_roofline_bound_agrees_with_the_pmu_on_real_rows(tmp_path: Path) -> None:
    """The Level2 capture (msinsight st/level2 rank 0, PipeUtilization PMU): per kernel name, the roofline class
    (each op against the roof of the unit it ran on) and the PMU pipes' class agree on 23 of the 29 kernels that
    have both. The fp32 vector ops (Sin, Cos, Mul…) have a ridge only against the vector unit's peak, hence 29
    rows rather than the 20 a cube-only roofline could class. The 6 others, and why:
    - RmsNorm, SwiGlu, Sin, Cos: vector pipe busy (aiv_vec_ratio 0.70–0.77) at ≤ 1 FLOP/B. The formulas count
      FLOPs (4 per element for a norm, 1 for an activation); the vector unit also spends whole-width
      instructions on bf16↔fp32 casts, reductions and the polynomial of a sin/cos, so it saturates below the
      vector ridge (5.8 FLOP/B) — vector-instruction-bound, which no FLOP roofline sees;
    - TensorMove (a copy: 0 FLOP/B, so memory on the roofline): its move pipes are under half busy (0.40 / 0.37);
    - Mul (16 µs, 0.25 FLOP/B): no pipe above 0.07 — it waits (few blocks, scalar set-up), far under either roof.
    """
    if not ST_LEVEL2.is_dir():
        pytest.skip("../shared/corpus is not present")
    with Store(str(tmp_path / "c.duckdb")) as store:
        assert ingest_into(store, [ST_LEVEL2]).ok
        store.cursor().execute("UPDATE runs SET device_name = 'Ascend910B3'")
        rows = [r for r in op_utilization(store, 1, "kernel") if r["bound"] and r["pmu_bound"]]
    differ = sorted(
        (r["name"], r["unit"], r["bound"], r["pmu_bound"]) for r in rows if r["bound"] != r["pmu_bound"]
    )
    assert (len(rows) - len(differ), len(rows)) == (23, 29)
    assert differ == [
        ("RmsNorm", "vector", "memory", "compute"),
        ("SwiGlu", "vector", "memory", "compute"),
        ("aclnnCat_TensorMoveAiCore_TensorMove", "vector", "memory", "latency"),
        ("aclnnCos_CosAiCore_Cos", "vector", "memory", "compute"),
        ("aclnnMul_MulAiCore_Mul", "vector", "memory", "latency"),
        ("aclnnSin_SinAiCore_Sin", "vector", "memory", "compute"),
    ]


VECTOR_ROWS = [  # a 2^20-element softmax of 50 µs on each core type, and an fp32 one on the vector cores
    ("SoftmaxV2", "AI_VECTOR_CORE", "50", "1024,1024", "FLOAT16", "1024,1024", "FLOAT16"),
    ("SoftmaxV2", "MIX_AIV", "50", "1024,1024", "FLOAT16", "1024,1024", "FLOAT16"),
    ("SoftmaxV2", "AI_CORE", "50", "1024,1024", "FLOAT16", "1024,1024", "FLOAT16"),
    ("SoftmaxV2", "AI_VECTOR_CORE", "50", "1024,1024", "FLOAT", "1024,1024", "FLOAT"),
]


@pytest.mark.parametrize(("row", "unit", "peak_field"), [
    (VECTOR_ROWS[0], "vector", "vector_tflops_fp16"),
    (VECTOR_ROWS[1], "vector", "vector_tflops_fp16"),
    (VECTOR_ROWS[2], "cube", "tflops_fp16"),
    (VECTOR_ROWS[3], "vector", "vector_tflops_fp32"),
], ids=["aiv", "mix_aiv", "ai_core", "aiv_fp32"])  # fmt: skip
def test_a_vector_core_op_is_judged_against_the_vector_peak(tmp_path: Path, row: tuple, unit: str,
                                                            peak_field: str) -> None:  # fmt: skip
    """MFU = 5 FLOP × 2^20 ÷ 50 µs ÷ the peak of the unit the row's core type names; the ridge is that unit's
    peak ÷ HBM. An fp32 vector op has no cube peak at all: before the vector table it got no ridge, no bound."""
    _write_run(tmp_path / "run", [row])
    with Store(str(tmp_path / "v.duckdb")) as store:
        assert ingest_into(store, [tmp_path / "run"]).ok
        sm = _rows(store, "Ascend910B3")["SoftmaxV2"]
    peak, hbm = _peak("ascend-910b3", peak_field), _peak("ascend-910b3", "hbm_gbps")
    elem_bytes = 4 if row[4] == "FLOAT" else 2
    assert (sm["unit"], sm["cost_class"], sm["flops"], sm["bytes"]) == (
        unit,
        "softmax",
        5 << 20,
        2 * elem_bytes << 20,
    )
    assert sm["mfu_pct"] == pytest.approx(100 * (5 << 20) / 50_000 / 1e3 / peak, rel=1e-12)
    assert sm["ridge_flops_per_byte"] == pytest.approx(peak * 1e3 / hbm, rel=1e-12)
    assert sm["bound"] == "memory"  # 1.25 (fp16) or 0.625 (fp32) FLOP/B, under either unit's ridge
    assert sm["peak_from"] == (
        f"Ascend 910B3 (ascend-910b3), {'vector ' if unit == 'vector' else ''}"
        f"{'fp32' if row[4] == 'FLOAT' else 'fp16'} {peak:g} TFLOPS, HBM 1600 GB/s"
    )


def test_vector_peaks_are_the_platform_config_formula() -> None:
    """vector_tflops_fp16 = vector_core_cnt × 128 lanes × 2 (FMA) × cube_freq (CANN platform_config ini);
    fp32 and bf16 half of it. The 910B family row keeps no vector peak: its members differ."""
    from diag.devices import device

    ini = {"ascend-910b1": (48, 1850), "ascend-910b2": (48, 1800), "ascend-910b2c": (48, 1800),
           "ascend-910b3": (40, 1800), "ascend-910b4": (40, 1500), "ascend-910c-die": (48, 1850)}  # fmt: skip
    for key, (cores, mhz) in ini.items():
        dev = device(key)
        assert dev is not None and dev.vector_source.startswith("CANN 8.1.RC1 platform_config"), key
        fp16 = cores * 128 * 2 * mhz / 1e6
        assert dev.vector_tflops == pytest.approx(
            {"fp16": fp16, "bf16": fp16 / 2, "fp32": fp16 / 2}, abs=0.006
        )
    assert device("ascend-910b").vector_tflops == {}
    assert device("ascend-910a").vector_tflops == {} and device("nvidia-h100-sxm").vector_tflops == {}


def test_utilization_section_on_the_ops_page(monkeypatch: pytest.MonkeyPatch, decode_db: Path) -> None:
    at = open_page(monkeypatch, decode_db)
    at.session_state["run_id"] = 1
    at.switch_page("app_pages/14_ops.py").run()
    assert not at.exception, at.exception
    assert "Utilization" in [h.value for h in at.subheader]
    caption = next(c.value for c in at.caption if c.value.startswith("Peaks: "))
    assert caption.startswith(
        "Peaks: Ascend 910B3 (ascend-910b3), bf16 294.9 TFLOPS, HBM 1600 GB/s; "
        "Ascend 910B3 (ascend-910b3), vector bf16 9.22 TFLOPS, HBM 1600 GB/s."
    )
    frame = next(d.value for d in at.dataframe if "MFU %" in d.value.columns)
    first = frame.iloc[0]
    assert (first["op type"], first["MFU %"], first["BW %"], first["bound"]) == (
        "MatMulV2",
        8.3,
        95.7,
        "memory",
    )
    units = dict(zip(frame["op type"], frame["unit"], strict=True))
    assert (units["MatMulV2"], units["RmsNorm"], units["SwiGlu"]) == ("cube", "vector", "vector")
    roofline = json.loads(next(c.proto.spec for c in at.get("plotly_chart") if "ops_roofline" in c.proto.id))
    roofs = [(tr["name"], tr["y"][1]) for tr in roofline["data"] if tr["name"].startswith("roof")]
    assert roofs == [("roof (cube)", 294.9), ("roof (vector)", 9.22)]  # each flat at its unit's bf16 peak


def test_ncu_speed_of_light_bound_on_a_real_capture(tmp_path: Path) -> None:
    """A real ncu SpeedOfLight export (llm-perf-opt, a cuBLAS bf16 gemv on one launch): SM 9.15 %, memory
    19.66 % of peak — both under 60 %: latency-bound, as the file's own SOLBottleneck rule says (a grid of 0.7
    waves)."""
    from diag.analyses.op_util import ncu_bounds

    path = CORPUS / "cuda/llm-perf-opt/ncu_kernel0001_gemvx_section_SpeedOfLight.csv"
    if not path.is_file():
        pytest.skip("../shared/corpus is not present")
    with Store(str(tmp_path / "n.duckdb")) as store:
        assert ingest_into(store, [path]).ok
        got = ncu_bounds(store, 1)
    assert [(r["launches"], r["sm_pct"], r["memory_pct"], r["ncu_bound"]) for r in got] == [
        (1, 9.15, 19.66, "latency")
    ]
    assert "cublasGemvParamsEx" in got[0]["name"]
