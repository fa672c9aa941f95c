"""Memory from logs (diag/analyses/memory_logs.py, issue #19): the OOM events' figures and verdicts, the vLLM /
vLLM-Ascend start-up KV-cache budget and the memory settings a log prints, over the real excerpts of
tests/fixtures/memory_logs/ (INDEX.csv: the expected figures and verdict, with each excerpt's public source).

Train rows must be exactly right; held rows (shapes were not written from them) may say less — a null figure,
``unknown`` or nothing — but never a wrong figure or a wrong verdict.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bench.log_accuracy import half_of
from bench.memory_log_accuracy import FOLDER, index_rows, judge
from diag.analyses import memory_logs as ml
from diag.store import Store
from tests.conftest import SAMPLES, ingest_into, run_cli

GIB = 1 << 30
MIB = 1 << 20
ROWS = index_rows()
SAYS_LESS = ("unknown", "nothing", None)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """Every excerpt ingested once, as logs of no profile."""
    path = tmp_path_factory.mktemp("memory_logs") / "m.duckdb"
    with Store(path) as s:
        ingest_into(s, sorted(FOLDER.glob("*.log")))
        yield s


def test_the_index_holds_at_least_16_real_excerpts_split_by_name():
    files = {r["file"] for r in ROWS}
    assert len(files) == 34 and all((FOLDER / f).is_file() for f in files)
    assert all(r["source_url"].startswith("https://github.com/") for r in ROWS)
    assert sum(half_of(f) == "held" for f in files) == 16


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['file']}:{r['what']}" for r in ROWS])
def test_fixture(store: Store, row: dict[str, str]) -> None:
    result = judge(store, row)
    if result["half"] == "train":
        assert (result["got"], result["wrong"]) == (result["expected"], {})
        return
    assert result["got"] == result["expected"] or result["got"] in SAYS_LESS, result
    assert all(got is None for _, got in result["wrong"].values()), result["wrong"]  # missing, never wrong


def test_three_verdicts_each_from_a_real_message(store: Store) -> None:
    (frag,) = ml.oom_events(store, log_file="i_cuda_oom_fragmentation_mask2dit_4.log")
    assert (frag["verdict"], frag["kind"], frag["platform"]) == ("fragmentation", "torch_cuda", "cuda")
    assert frag["verdict_reason"] == (
        "Reserved 52.66 GiB vs allocated 11.97 GiB: 40.69 GiB (77.3% of reserved) is cached by the allocator but "
        "unused, more than the 35.60 GiB request."
    )
    (other,) = ml.oom_events(store, log_file="c006_torch_npu_oom_vllm_ascend_19.log")
    assert (other["verdict"], other["platform"], other["device"]) == ("other_process", "ascend", 0)
    assert other["verdict_reason"] == (
        "50.30 GiB of the 60.97 GiB device is neither free (19.52 MiB) nor reserved by this process's allocator "
        "(10.65 GiB): another process, HCCL buffers or non-PyTorch allocations hold it."
    )
    (full,) = ml.oom_events(store, log_file="c007_torch_npu_oom_ray_vllm_ascend_1127.log")
    assert (full["verdict"], full["device"], full["requested_bytes"]) == ("out_of_memory", 3, 30 * MIB)
    assert full["verdict_reason"] == (
        "60.60 GiB of 60.96 GiB reserved (60.34 GiB allocated), 14.24 MiB free: the device is full; the 266.24 MiB "
        "cached but unused (0.4% of reserved) is too small a share to call fragmentation for the 30.00 MiB request."
    )


def test_figures_that_do_not_explain_the_failure_say_so(store: Store) -> None:
    (event,) = ml.oom_events(store, log_file="i_cuda_oom_request_below_free_taggui_188.log")
    assert event["verdict"] == "unknown"
    assert event["verdict_reason"] == (
        "The 20.00 MiB request is smaller than the 2.35 GiB free: the figures do not explain the failure (a "
        "per-process limit or another allocator may apply)."
    )
    (pool,) = ml.oom_events(store, log_file="c015_el0004_memory_pool_init_ptoas_341.log")
    assert (pool["kind"], pool["verdict"], pool["line"]) == ("cann_memory_pool", "unknown", 2)
    assert pool["verdict_reason"] == (
        "The message states no memory figure; requested, capacity, reserved, free not stated, so what holds the "
        "memory is not known."
    )


def _log(tmp_path: Path, name: str, *lines: str) -> Store:
    (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = Store(tmp_path / "one.duckdb")
    ingest_into(store, [tmp_path / name])
    return store


def test_a_negative_kv_budget(tmp_path: Path) -> None:
    """vLLM V1 gpu_worker.py's line and the ValueError after it (tests/fixtures/traps/oom_figures)."""
    with _log(
        tmp_path, "vllm.log",
        "(EngineCore_DP0 pid=30023) INFO 11-26 11:43:04 [gpu_worker.py:440] Available KV cache memory: -23.55 GiB",
        "(EngineCore_DP0 pid=30023) ERROR 11-26 11:43:04 [core.py:708] ValueError: No available memory for the "
        "cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.",
    ) as store:  # fmt: skip
        kv = ml.kv_cache(store, log_file="vllm.log")
        events = ml.oom_events(store, log_file="vllm.log")
    assert kv is not None and (kv["kv_cache_bytes"], kv["verdict"], kv["line"]) == (
        round(-23.55 * GIB),
        "negative",
        1,
    )
    assert kv["verdict_reason"] == (
        "The KV-cache budget is -23.55 GiB: the weights and activations already exceed what gpu_memory_utilization "
        "allows."
    )
    assert [(e["kind"], e["verdict"], e["line"]) for e in events] == [
        ("vllm_kv_cache", "out_of_memory", 1), ("vllm_kv_cache", "out_of_memory", 2),
    ]  # fmt: skip


def test_a_tiny_kv_budget(tmp_path: Path) -> None:
    with _log(
        tmp_path, "vllm.log",
        "(EngineCore_DP0 pid=30023) ERROR 11-26 11:43:05 [core.py:708] ValueError: To serve at least one request "
        "with the models's max seq len (32000), (1.1 GiB KV cache is needed, which is larger than the available KV "
        "cache memory (0.59 GiB). Based on the available memory, the estimated maximum model length is 17000.",
    ) as store:  # fmt: skip
        kv = ml.kv_cache(store)
    assert kv is not None and (kv["verdict"], kv["max_model_len"]) == ("tiny", 32000)
    assert (
        kv["verdict_reason"]
        == "One request of max_model_len 32000 needs 1.10 GiB of KV cache; 604.16 MiB is available."
    )


def test_the_v1_start_up_profile(store: Store) -> None:
    kv = ml.kv_cache(store, log_file="i_vllm_v1_kv_tokens_concurrency_vllm_17122.log")
    assert kv is not None
    assert (kv["weights_bytes"], kv["kv_cache_tokens"], kv["max_model_len"], kv["max_concurrency"]) == (
        round(14.9889 * GIB), 158656, 32768, 4.84,
    )  # fmt: skip
    assert (kv["verdict"], kv["verdict_reason"]) == (
        "ok",
        "The KV cache holds 158,656 tokens, 4.84× max_model_len 32,768.",
    )


def test_memory_settings_a_log_prints(store: Store) -> None:
    lines = ml.memory_log_lines(store, log_file="i_sglang_npu_oom_alloc_conf_hccl_buffsize_15453.log")
    assert [(x["setting"], x["value"], x["bytes"], x["line"]) for x in lines] == [
        ("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True", None, 4),
        ("HCCL_BUFFSIZE", "200", 200 * MIB, 8),
    ]


def test_a_log_alone_through_diag_ingest(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(FOLDER / "c008_torch_npu_oom_outofmemoryerror_sglang_29838.log", logs / "worker.log")
    db = tmp_path / "d.duckdb"
    run_cli("ingest", str(logs), "--db", str(db), check=True)
    with Store(db, read_only=True) as store:
        (event,) = ml.oom_events(store, log_file="logs/worker.log")
        with pytest.raises(ValueError, match="no log file 'other.log' in the store"):
            ml.oom_events(store, log_file="other.log")
    assert (event["run_id"], event["verdict"], event["file"]) == (
        None,
        "out_of_memory",
        str(logs / "worker.log"),
    )
    assert (event["requested_bytes"], event["reserved_bytes"]) == (72 * MIB, round(58.39 * GIB))


def test_a_log_with_its_profile_is_found_by_run(tmp_path: Path) -> None:
    incident = SAMPLES / "incident" / "rank0_1716292_20250115093320983_ascend_pt"
    if not incident.is_dir():
        pytest.skip("sample_traces/ is not bundled")
    run = tmp_path / incident.name
    shutil.copytree(incident, run)
    shutil.copy(FOLDER / "w3_029_npu_oom_11_5gib_execute_model_qwen3_235b_vllm_ascend_3357.log",
                run / "log" / "worker.log")  # fmt: skip
    with Store(tmp_path / "r.duckdb") as store:
        ingest_into(store, [run])
        (run_id,) = store.cursor().execute("SELECT run_id FROM runs").fetchone()
        events = ml.oom_events(store, run_id=run_id)
        assert ml.oom_events(store, run_id=run_id + 1) == []
    assert [(e["run_id"], e["verdict"], e["requested_bytes"]) for e in events] == [
        (run_id, "out_of_memory", round(11.5 * GIB))
    ]


def test_one_rule_for_the_verdict_and_the_advice() -> None:
    """log_explain's advice calls memory_logs' predicates: fragmentation there is fragmentation here."""
    from diag.analyses.log_explain import oom_advice

    figures = {
        "requested_bytes": round(5.03 * GIB),
        "capacity_bytes": round(60.96 * GIB),
        "allocated_bytes": round(49.47 * GIB),
        "free_bytes": round(1.32 * GIB),
        "reserved_bytes": round(57.55 * GIB),
    }  # fmt: skip  (w2_027, held)
    assert ml.oom_verdict(figures, "torch_npu")[0] == "fragmentation"
    assert "fragmentation likely" in oom_advice(figures)[1]


def test_memory_held_before_vllm_started(store: Store) -> None:
    """vLLM's start-up check (pytorch/pytorch#175666): less free than gpu_memory_utilization asks."""
    (event,) = ml.oom_events(store, log_file="i_vllm_startup_free_less_than_desired_pytorch_175666.log")
    assert (event["kind"], event["verdict"], event["free_bytes"]) == (
        "vllm_startup_free",
        "other_process",
        round(19.77 * GIB),
    )
    assert event["verdict_reason"] == (
        "Only 19.77 GiB of 22.05 GiB was free at start-up, less than the 19.84 GiB gpu_memory_utilization asks: "
        "another process (or an earlier engine) holds the device."
    )
    kv = ml.kv_cache(store, log_file="i_vllm_v0_gpu_blocks_only_vllm_5248.log")
    assert kv is not None and (kv["num_blocks"], kv["verdict"]) == (507, None)
    assert kv["verdict_reason"] == "The log states no KV-cache size to judge."


def test_an_oom_message_is_not_part_of_the_start_up_profile(tmp_path: Path) -> None:
    with _log(
        tmp_path, "serve.log",
        "INFO 04-24 16:33:13 [kv_cache_utils.py:634] GPU KV cache size: 158,656 tokens",
        "ERROR 04-24 17:00:00 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 MiB. "
        "GPU 0 has a total capacity of 23.56 GiB of which 21.75 MiB is free.",
    ) as store:  # fmt: skip
        kv = ml.kv_cache(store)
        (event,) = ml.oom_events(store)
    assert kv is not None and (kv["kv_cache_tokens"], kv["capacity_bytes"], kv["line"]) == (158656, None, 1)
    assert (event["capacity_bytes"], event["verdict"], event["line"]) == (round(23.56 * GIB), "unknown", 2)


# -- rules/memory_logs.toml: one real example per kind and setting (DuckDB's RE2, as the queries run them) -------
KIND_EXAMPLES = {
    "torch_npu": "RuntimeError: NPU out of memory. Tried to allocate 22.00 MiB (NPU 0; 60.97 GiB total capacity;",
    "torch_cuda": "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 MiB. GPU 0 has a total capacity",
    "vllm_startup_free": "ValueError: Free memory on device cuda:1 (19.77/22.05 GiB) on startup is less than desired "
    "GPU memory utilization (0.9, 19.84 GiB).",
    "vllm_kv_cache": "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
    "hccl_alloc": "Failed to allocate resource[DeviceMemory] with info [size:2147483648]. Reason: Memory resources",
    "cann_memory_pool": "Fail to init MemoryPoolManager, retCode=0x711000e.[FUNC:Init][FILE:raw_device.cc][LINE:670]",
    "acl_malloc": "[ERROR] RUNTIME(1,python):2026-01-01-00:00:00.000.001 [mem.cc:9]1 rtMalloc failed, size=1073741824",
    "mindspore_alloc": "plus alloc size : 100555779072 is more than total mem size : 61079552000.",
}  # fmt: skip
SETTING_EXAMPLES = {
    "hccl_buffsize": ("export HCCL_BUFFSIZE=200 ", "200"),
    "mindie_npu_mem_size": ('"npuMemSize" : -1,', "-1"),
    "npu_alloc_conf": ("INFO 07-07 12:55:01 [platform.py:759] Set PYTORCH_NPU_ALLOC_CONF=expandable_segments:True",
                       "expandable_segments:True"),
    "cuda_alloc_conf": ("PYTORCH_CUDA_ALLOC_CONF='max_split_size_mb:128,garbage_collection_threshold:0.6'",
                        "max_split_size_mb:128,garbage_collection_threshold:0.6"),
    "memory_pool_init_failed": ("Fail to init MemoryPoolManager, retCode=0x711000e.[FUNC:Init]", "0x711000e"),
}  # fmt: skip


def test_every_kind_and_setting_has_an_example_that_it_takes_first():
    import duckdb

    rules = ml.memory_rules()
    kinds, settings = rules["oom_kind"], {s["id"]: s for s in rules["setting"]}
    assert [k["id"] for k in kinds] == list(KIND_EXAMPLES) and list(settings) == list(SETTING_EXAMPLES)
    con = duckdb.connect()
    for kind_id, text in KIND_EXAMPLES.items():
        first = next(
            k["id"]
            for k in kinds
            if con.execute("SELECT regexp_matches(?, ?)", [text, k["pattern"]]).fetchone()[0]
        )
        assert first == kind_id
    for setting_id, (text, value) in SETTING_EXAMPLES.items():
        got = con.execute(
            "SELECT regexp_extract(?, ?, 1)", [text, settings[setting_id]["pattern"]]
        ).fetchone()[0]
        assert got == value, setting_id
