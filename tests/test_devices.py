"""The device table (diag/rules/devices.toml) and diag.devices: rows complete, real spellings matched to the right
row, datasheet figures, and the device of stored corpus runs with where its name came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.devices import device, device_for_run, devices, dtype_key, find_devices, match_device
from diag.store import Store
from tests.conftest import CORPUS, ingest_into

REQUIRED = {
    "ascend-910b1", "ascend-910b2", "ascend-910b2c", "ascend-910b3", "ascend-910b4", "ascend-910a",
    "ascend-910c-die", "ascend-910c-package", "ascend-310p3",
    "nvidia-a100-sxm4-40gb", "nvidia-a100-pcie-40gb", "nvidia-a100-sxm4-80gb", "nvidia-a100-pcie-80gb",
    "nvidia-a800-pcie-40gb", "nvidia-a800-sxm4-80gb", "nvidia-a800-pcie-80gb", "nvidia-h100-sxm",
    "nvidia-h100-pcie", "nvidia-h800-sxm", "nvidia-h200", "nvidia-h20", "nvidia-l20", "nvidia-l40s", "nvidia-a10",
    "nvidia-rtx-4090", "nvidia-b200",
}  # fmt: skip


def test_every_device_row_has_memory_bandwidth_peak_and_source() -> None:
    rows = [d for d in devices() if not d.members]
    assert REQUIRED - {d.key for d in rows} == set()
    assert len({d.key for d in devices()}) == len(devices())  # keys are unique
    for d in rows:
        assert d.platform in ("ascend", "cuda"), d.key
        assert d.memory_bytes and d.memory_bytes > 10 * 2**30, d.key
        assert d.nominal_gib and d.memory_bytes <= d.nominal_gib * 2**30 * 1.001, d.key  # never above nominal
        assert d.hbm_gbps and d.hbm_gbps > 100, d.key
        assert d.tflops.get("fp16", 0) > 0 and d.tflops.get("int8", 0) >= d.tflops["fp16"], d.key
        assert len(d.source) > 20, d.key
    families = [d for d in devices() if d.members]
    assert all(device(k) is not None for f in families for k in f.members)


# (text as a file or a person writes it, the row it must match); where each spelling was seen:
SPELLINGS = [
    ("Ascend910B", "ascend-910b"),  # corpus msinsight db export, NPU_INFO.name
    ("Ascend910B1", "ascend-910b1"),  # torch_npu SocVersion enum / CANN platform_config SoC_version
    ("Ascend910B2", "ascend-910b2"),
    ("Ascend910B2C", "ascend-910b2c"),
    ("Ascend910B3", "ascend-910b3"),  # npu-smi / get_device_name (vllm-ascend test reports)
    ("Ascend910B4", "ascend-910b4"),
    ("Ascend910B4-1", "ascend-910b4"),  # platform_config/Ascend910B4-1.ini
    ("Ascend910_9392", "ascend-910c-die"),  # acl.get_soc_name() on a 910C (public AscendC build script)
    ("ascend910_9391", "ascend-910c-die"),  # SOC_VERSION in vllm-ascend A3 build docs
    ("Ascend910_9382", "ascend-910c-die"),
    ("Ascend910ProB", "ascend-910a"),  # torch_npu SocVersion (Ascend 910, 2019)
    ("Ascend310P3", "ascend-310p3"),  # platform_config / npu-smi "310P3"
    ("NVIDIA A100-PCIE-40GB", "nvidia-a100-pcie-40gb"),  # corpus nsys TARGET_INFO_GPU
    ("NVIDIA A100-SXM4-40GB", "nvidia-a100-sxm4-40gb"),  # torch get_device_name
    ("NVIDIA A100-PG509-200", "nvidia-a100-sxm4-40gb"),  # corpus HTA traces, deviceProperties
    ("NVIDIA A100-SXM4-80GB", "nvidia-a100-sxm4-80gb"),  # corpus HTA trace, deviceProperties
    ("NVIDIA A100 80GB PCIe", "nvidia-a100-pcie-80gb"),  # torch get_device_name
    ("NVIDIA A800-SXM4-80GB", "nvidia-a800-sxm4-80gb"),
    ("NVIDIA A800 80GB PCIe", "nvidia-a800-pcie-80gb"),
    ("NVIDIA H100 80GB HBM3", "nvidia-h100-sxm"),  # vLLM save-result JSON (tests/fixtures/serving)
    ("NVIDIA H100 PCIe", "nvidia-h100-pcie"),
    ("NVIDIA H800", "nvidia-h800-sxm"),
    ("nvidia_h800_pcie_bench.txt", "nvidia-h800-pcie"),
    ("NVIDIA H200", "nvidia-h200"),
    ("NVIDIA H200 NVL", "nvidia-h200-nvl"),
    ("NVIDIA H20", "nvidia-h20"),
    ("NVIDIA L20", "nvidia-l20"),
    ("NVIDIA L40S", "nvidia-l40s"),
    ("NVIDIA A10", "nvidia-a10"),
    ("NVIDIA GeForce RTX 4090", "nvidia-rtx-4090"),
    ("NVIDIA B200", "nvidia-b200"),
    ("NVIDIA A40", "nvidia-a40"),  # corpus nsys TARGET_INFO_GPU
    ("NVIDIA GeForce RTX 3090", "nvidia-rtx-3090"),  # corpus nsys TARGET_INFO_GPU
    # names in paths and prose (tests/fixtures/serving, the serving corpus)
    ("ascend_910b3_qwen2.5-omni-7b_vllm-bench-serve_conc20.txt", "ascend-910b3"),
    ("ascend_a3_hunyuan-a13b_aisbench_perf.txt", "ascend-910c-die"),
    ("ok_sglang_h100.txt", "nvidia-h100-h800"),
    ("nvidia_a100-80gb_qwen2-7b_benchmark-serving_n10.txt", "nvidia-a100-80gb"),
    ("8x A100", "nvidia-a100-a800"),
    # not in the table, and must not be taken for a neighbour
    ("Tesla V100-SXM2-32GB", None),  # corpus HTA trace
    ("NVIDIA RTX A5000", None),  # corpus nsys (not an A10 / A40)
    ("NVIDIA GeForce RTX 4060 Ti", None),  # corpus nsys
    ("NVIDIA GeForce RTX 4090 D", None),  # fewer SMs than the 4090
    ("NVIDIA GeForce RTX 3090 Ti", None),
    ("Ascend910", None),  # family word without its generation
]


@pytest.mark.parametrize(("text", "key"), SPELLINGS)
def test_real_spellings_match_their_row(text: str, key: str | None) -> None:
    found = match_device(text)
    assert (found.key if found else None) == key


def test_a_text_naming_two_devices_names_both_and_overlaps_resolve_to_the_longest() -> None:
    both = find_devices("nvidia_8xh200-or-h20_qwen3-coder-480b-fp8_vllm-bench-serve.txt")
    assert [d.name for d in both] == ["NVIDIA H200", "NVIDIA H20"]
    assert [d.key for d in find_devices("NVIDIA H200 NVL on node 3")] == ["nvidia-h200-nvl"]
    assert [d.key for d in find_devices("Ascend910B3 vs NVIDIA A800-SXM4-80GB")] == [
        "ascend-910b3",
        "nvidia-a800-sxm4-80gb",
    ]


def test_family_rows_keep_only_the_figures_their_members_share() -> None:
    b = device("ascend-910b")
    assert (b.memory_bytes, b.nominal_gib, b.hbm_gbps, b.tflops) == (None, None, None, {})  # B4 is 32 GB
    hopper = device("nvidia-h100-h800")
    assert (hopper.nominal_gib, hopper.memory_bytes, hopper.hbm_gbps, hopper.tflops) == (80, None, None, {})
    a100_40 = device("nvidia-a100-40gb")
    assert (a100_40.memory_bytes, a100_40.hbm_gbps, a100_40.tflops["bf16"]) == (42505273344, 1555.0, 312.0)
    ampere = device("nvidia-a100-a800")
    assert (ampere.memory_bytes, ampere.hbm_gbps, ampere.tflops["fp16"]) == (None, None, 312.0)


def test_figures_agree_with_their_datasheets() -> None:
    # H100 SXM datasheet: BF16 1,979 and FP8 3,958 TFLOPS "with sparsity" -> dense is half; 3.35 TB/s; 80 GB
    h100 = device("nvidia-h100-sxm")
    assert (h100.tflops["bf16"], h100.tflops["fp8"], h100.hbm_gbps, h100.nominal_gib) == (
        989.5,
        1979,
        3350,
        80,
    )
    # A100 80GB SXM datasheet: FP16/BF16 312, INT8 624, FP32 19.5, 2,039 GB/s; corpus deviceProperties memory
    a100 = device("nvidia-a100-sxm4-80gb")
    assert (a100.tflops["fp16"], a100.tflops["int8"], a100.tflops["fp32"], a100.hbm_gbps) == (
        312,
        624,
        19.5,
        2039,
    )
    assert a100.memory_bytes == 84990623744
    # 910B3: CANN platform_config ai_core_cnt=20, cube 16x16x16, cube_freq=1800 MHz -> 2 FLOP per MAC
    b3 = device("ascend-910b3")
    assert b3.tflops["fp16"] == round(20 * 16**3 * 2 * 1.8e9 / 1e12, 1) == 294.9
    assert (b3.tflops["int8"], b3.nominal_gib, b3.memory_bytes) == (589.8, 64, round(60.97 * 2**30))
    # 310P3 (Atlas 300I Pro datasheet: 70 TFLOPS FP16, 140 TOPS INT8): 8 cores x 1.06 GHz
    p3 = device("ascend-310p3")
    assert (p3.tflops["fp16"], p3.tflops["int8"], "bf16" in p3.tflops) == (69.5, 138.9, False)


@pytest.mark.parametrize(
    ("spelling", "key"),
    [
        ("DT_BF16", "bf16"),  # corpus kernel_details.csv "Input Data Types"
        ("FLOAT", "fp32"),  # corpus kernel_details.csv: CANN's FP32
        ("FLOAT16", "fp16"),
        ("INT8", "int8"),
        ("torch.float8_e4m3fn", "fp8"),
        ("c10::BFloat16", "bf16"),  # Kineto op args
        ("c10::Half", "fp16"),
        ("INT64", None),  # corpus: index inputs have no matrix peak
        ("DT_UNDEFINED", None),
        ("", None),
    ],
)
def test_dtype_spellings_map_to_their_peak(spelling: str, key: str | None) -> None:
    assert dtype_key(spelling) == key


def test_peak_and_capacity_lookups() -> None:
    b3, hopper, b = device("ascend-910b3"), device("nvidia-h100-h800"), device("ascend-910b")
    assert (b3.peak_tflops("DT_BF16"), b3.peak_tflops("FLOAT"), b3.peak_tflops("INT64")) == (
        294.9,
        None,
        None,
    )
    assert device("nvidia-h100-sxm").peak_tflops("torch.float8_e4m3fn") == 1979
    # capacity: the framework's figure, else the nominal one, else unknown
    assert (b3.capacity_bytes, hopper.capacity_bytes, b.capacity_bytes) == (65466039009, 80 * 2**30, None)


CORPUS_RUNS = {
    # path under ../shared/corpus: (device key, where the name came from)
    "ascend/msinsight/test/data/pytorch/db/level0/rank0_ascend_pt": (
        "ascend-910b",
        "device name 'Ascend910B' in the profiler database's NPU_INFO, which does not say the variant",
    ),
    "ascend/msinsight/test/data/pytorch/text/level0/rank0_ascend_pt": (None, "not recorded"),
    "cuda/nsys-sqlite-cutlass-benchmark/report1_nsys2023.2_cutlass_gemm.sqlite": (
        "nvidia-a100-pcie-40gb",
        "device name 'NVIDIA A100-PCIE-40GB' in the Nsight Systems report's TARGET_INFO_GPU",
    ),
    "cuda/nsys-sqlite-memfusion/report1_nsys2023.1_tensorrt_nvtx.sqlite": (
        "nvidia-rtx-3090",
        "device name 'NVIDIA GeForce RTX 3090' in the Nsight Systems report's TARGET_INFO_GPU",
    ),
    "cuda/hta/negative_queue_length_values_check__rank0.json.gz": (
        "nvidia-a100-sxm4-80gb",
        "device name 'NVIDIA A100-SXM4-80GB' in the PyTorch profiler trace's deviceProperties",
    ),
    "cuda/hta/ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz": (
        None,
        "device name 'Tesla V100-SXM2-32GB' in the PyTorch profiler trace's deviceProperties, "
        "not in the device table",
    ),
}


@pytest.mark.corpus
def test_device_for_run_on_real_corpus_runs(tmp_path: Path) -> None:
    if not (CORPUS / "ascend").is_dir():
        pytest.skip("../shared/corpus is not present")
    with Store(tmp_path / "devices.duckdb") as store:
        ingest_into(store, [CORPUS / p for p in CORPUS_RUNS])
        runs = store.con.execute("SELECT source, run_id FROM runs").fetchall()
        got = {}
        for source, run_id in runs:
            dev, where = device_for_run(store, run_id)
            got[next(p for p in CORPUS_RUNS if str(source).endswith(p))] = (dev.key if dev else None, where)
    assert got == CORPUS_RUNS


def test_device_for_run_of_a_run_without_a_name_or_with_an_unknown_one(tmp_path: Path) -> None:
    with Store(tmp_path / "d.duckdb") as store:
        bare = store.ensure_run("k1", name="r1", platform="ascend", source="r1", job_id=None)
        odd = store.ensure_run("k2", name="r2", platform="cuda", source="r2", job_id=None)
        store.update_run(odd, device_name="NVIDIA GeForce GTX 1080")
        assert device_for_run(store, bare) == (None, "not recorded")
        assert device_for_run(store, 99) == (None, "not recorded")
        assert device_for_run(store, odd) == (
            None,
            "device name 'NVIDIA GeForce GTX 1080' in the run's profile, not in the device table",
        )


@pytest.mark.parametrize(
    ("file", "linked_name", "expected"),
    [
        # a device the old serving table did not have
        ("runs/nvidia_l20_qwen3-8b_conc8.txt", None, ("cuda", "NVIDIA L20", 48, "path")),
        # the family name alone: 64 GB B1–B3 or 32 GB B4, so the capacity stays unknown (it was 64)
        ("runs/ascend_910b_qwen3-8b_conc8.txt", None, ("ascend", "Ascend 910B", None, None)),
        # a linked profile's stored device name decides when the file and its path say nothing
        ("runs/bench.txt", "Ascend910B4", ("ascend", "Ascend 910B4", 32, "profile")),
    ],
)
def test_serving_reads_hardware_and_capacity_from_the_device_table(
    file: str, linked_name: str | None, expected: tuple
) -> None:
    from diag.analyses import serving

    row: dict = {"file": file}
    linked = [{"device_name": linked_name, "platform": "ascend"}] if linked_name else []
    serving._resolve_hardware(row, linked, serving.load_thresholds())
    assert (row["platform"], row["hardware"], row["capacity_gib"], row["capacity_from"]) == expected
