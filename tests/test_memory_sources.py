"""The memory diagnosis over real and CUDA inputs: every real Ascend export's peak per component against an
independent reading of its files (csv module, sqlite3), CUDA sources (rows inserted here, and s6-memcuda's Kineto
rows of the CUDA generator), an OOM log alone and beside its profile."""

from __future__ import annotations

import csv
import shutil
import sqlite3
from pathlib import Path

import pytest

from diag.analyses.memory import memory_summary
from diag.cli import main
from diag.devices import match_device
from diag.store import Store
from sample_traces.generate import generate
from tests.conftest import CORPUS, ingest_into

MB = 1 << 20


def _cuda_store(path: Path) -> Store:
    """A CUDA run with Kineto [memory] totals (and one host row), as s6-memcuda stores them; nsys optional."""
    store = Store(path)
    cur = store.cursor()
    cur.execute(
        "INSERT INTO runs (run_id, run_key, platform, start_ns, end_ns) VALUES (1, 'k', 'cuda', 0, 100)"
    )
    rows = [  # source, component, ts, allocated MB, reserved MB, device
        ("kineto", "PyTorch", 10, 1000, 2048, "cuda:0"),
        ("kineto", "PyTorch", 20, 1800, 2048, "cuda:0"),
        ("kineto", "PyTorch", 30, 1200, 4096, "cuda:0"),
        ("kineto", "PyTorch", 40, 2000, 4096, "cuda:0"),
        ("kineto", "PyTorch", 50, 900000, 900000, "CPU"),  # host memory: never the device's peak
    ]
    for src, comp, ts, a, r, dev in rows:
        cur.execute(
            "INSERT INTO memory (run_id, file_id, source, component, ts_ns, allocated_bytes, reserved_bytes, device) "
            "VALUES (1, 1, ?, ?, ?, ?, ?, ?)",
            [src, comp, ts, a * MB, r * MB, dev],
        )
    return store


def test_cuda_sources_are_generic(tmp_path: Path) -> None:
    with _cuda_store(tmp_path / "cuda.duckdb") as store:
        s = memory_summary(store, 1)
        assert (s["platform"], s["reserved_series"], s["allocator_series"]) == (
            "cuda",
            "kineto:PyTorch",
            "kineto:PyTorch",
        )
        assert (s["peak_reserved_bytes"], s["peak_ts_ns"], s["peak_allocated_bytes"]) == (
            4096 * MB,
            30,
            2000 * MB,
        )
        assert (s["slack_at_peak_bytes"], s["slack_peak_bytes"]) == (2096 * MB, 2896 * MB)
        assert [f["evidence"]["kind"] for f in s["findings"]] == ["fragmentation"]  # 51.2% and 2.0 GiB
        assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in s["findings"][0]["suggestion"]
        assert "NPU" not in s["findings"][0]["suggestion"]
        cur = store.cursor()  # nsys: what the process holds through the CUDA API (its allocated total)
        cur.execute(
            "INSERT INTO memory (run_id, file_id, source, component, ts_ns, allocated_bytes, device) "
            "VALUES (1, 2, 'nsys', 'CUDA', 35, ?, 'cuda:0'), (1, 2, 'nsys', 'CUDA', 36, ?, 'cuda:1')",
            [5000 * MB, 100 * MB],
        )
        s = memory_summary(store, 1)
    assert (s["reserved_series"], s["peak_reserved_bytes"], s["peak_ts_ns"]) == ("nsys:CUDA", 5000 * MB, 35)
    assert (s["allocator_series"], s["device"]) == ("kineto:PyTorch", "cuda:0")  # cuda:1 holds less


def test_nsys_memory_of_a_multi_gpu_capture(tmp_path: Path) -> None:
    """s6-memcuda's nsys rows (running totals per GPU): the GPU holding the most is reported, alone."""
    from tests.test_cuda_memory import _usage_tables
    from tests.test_cuda_parsers import build_nsys

    export = build_nsys(tmp_path / "report1.sqlite")
    with sqlite3.connect(export) as con:
        _usage_tables(con)
    with Store(tmp_path / "nsys.duckdb") as store:
        ingest_into(store, [export])
        s = memory_summary(store)
    assert (s["platform"], s["device"], s["reserved_series"]) == ("cuda", "cuda:1", "nsys:CUDA")
    assert (s["peak_reserved_bytes"], s["allocator_series"], s["top_allocators"][0]["name"]) == (
        4 * MB,
        None,
        "cudaMalloc",
    )


def _corpus_exports(kind: str) -> list[Path]:
    top = CORPUS / "ascend"
    if not top.is_dir():
        pytest.skip("../shared/corpus is not present (a user's clone has none)")
    pattern = "memory_record.csv" if kind == "text" else "ascend_pytorch_profiler_*.db"
    return sorted(top.rglob(pattern))


def _peaks(db: Path, sources: list[Path]) -> dict[Path, dict[tuple[str, str], int]]:
    """Ingest ``sources`` (with npu_module_mem.csv beside a memory_record.csv) and return memory_summary's peak
    reserved per (source, component) of each file's run."""
    modules = [p.with_name("npu_module_mem.csv") for p in sources if p.name == "memory_record.csv"]
    with Store(db) as store:
        ingest_into(store, sources + [m for m in modules if m.is_file()])
        out = {}
        for path in sources:
            run = (
                store.cursor()
                .execute("SELECT run_id FROM files WHERE source = ?", [str(path)])
                .fetchall()[0][0]
            )
            comps = memory_summary(store, run)["components"]
            out[path] = {(c["source"], c["component"]): c["peak_reserved_bytes"] for c in comps}
    return out


def test_every_text_export_peak_per_component_equals_the_csv(tmp_path: Path) -> None:
    files = _corpus_exports("text")
    assert len(files) == 7
    got = _peaks(tmp_path / "text.duckdb", files)
    for path in files:
        expected: dict[str, float] = {}
        with open(path, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                mb = float(row["Total Reserved(MB)"])
                expected[row["Component"]] = max(expected.get(row["Component"], mb), mb)
        ours = {comp: b for (src, comp), b in got[path].items() if src == "memory_record"}
        assert ours == {c: round(mb * MB) for c, mb in expected.items() if mb > 0}, path
        modules: dict[str, float] = {}
        with open(path.with_name("npu_module_mem.csv"), newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                mb = float(row["Total Reserved(MB)"])
                modules[row["Component"]] = max(modules.get(row["Component"], mb), mb)
        ours = {comp: b for (src, comp), b in got[path].items() if src == "npu_module_mem"}
        assert ours == {c: round(mb * MB) for c, mb in modules.items() if mb > 0}, path


def test_every_db_export_peak_per_component_equals_sqlite(tmp_path: Path) -> None:
    files = _corpus_exports("db")
    assert len(files) == 3
    got = _peaks(tmp_path / "db.duckdb", files)
    for path in files:
        with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as con:
            expected = dict(
                con.execute(
                    "SELECT s.value, max(m.totalReserved) FROM MEMORY_RECORD m JOIN STRING_IDS s ON s.id = m.component "
                    "GROUP BY 1"
                ).fetchall()
            )
            app = con.execute(
                "SELECT max(n.ddr + n.hbm) FROM NPU_MEM n JOIN STRING_IDS s ON s.id = n.type WHERE lower(s.value) = 'app'"
            ).fetchone()[0]
            modules = dict(
                con.execute(
                    "SELECT e.name, max(n.totalReserved) FROM NPU_MODULE_MEM n JOIN ENUM_MODULE e ON e.id = n.moduleId "
                    "GROUP BY 1"
                ).fetchall()
            )
        expected["APP"] = app
        ours = {comp: b for (src, comp), b in got[path].items() if src == "memory_record"}
        assert ours == {c: b for c, b in expected.items() if b > 0}, path
        ours = {comp: b for (src, comp), b in got[path].items() if src == "npu_module_mem"}
        assert ours == {c: b for c, b in modules.items() if b > 0}, path


def test_oom_log_alone_gives_figures_and_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = CORPUS / "cann_logs" / "008_oom_torch_outofmemoryerror_sglang_29838.log"
    if not log.is_file():
        pytest.skip("../shared/corpus is not present (a user's clone has none)")
    with Store(tmp_path / "log.duckdb") as store:
        ingest_into(store, [log])
        s = memory_summary(store)
    assert s["run_id"] is None and s["peak_reserved_bytes"] is None
    assert [o["verdict"] for o in s["oom"]] == ["out_of_memory"]
    assert s["oom"][0]["requested_bytes"] == 72 * MB
    assert s["capacity_from"] == "log" and s["headroom_pct"] is None  # no peak to hold against it
    assert [f["title"] for f in s["findings"]] == ["OOM: the device was full (asked for 72.0 MiB)"]
    assert main(["memory", "--db", str(tmp_path / "log.duckdb")]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "1 OOM in the logs: out_of_memory (asked for 72.0 MiB of 61.3 GiB)"
    )


def test_an_oom_log_beside_its_profile_is_joined_to_the_run(tmp_path: Path) -> None:
    """The log's stated capacity stands in for the unknown device: the profile's peak gets a headroom from it."""
    log = CORPUS / "cann_logs" / "008_oom_torch_outofmemoryerror_sglang_29838.log"
    if not log.is_file():
        pytest.skip("../shared/corpus is not present (a user's clone has none)")
    truth = generate(tmp_path / "gen", steps=3, layers=1, ranks=1, seed=4, files=("trace_view", "memory"))
    run_dir = tmp_path / "gen" / truth["ranks"]["0"]["run_dir"]
    shutil.copy(log, run_dir / "plog-oom.log")
    with Store(tmp_path / "joined.duckdb") as store:
        ingest_into(store, [tmp_path / "gen"])
        run_id = (
            store.cursor().execute("SELECT run_id FROM runs WHERE name = ?", [run_dir.name]).fetchall()[0][0]
        )
        s = memory_summary(store, run_id)
        by_log = memory_summary(store, log_file="plog-oom.log")
    oom = s["oom"][0]
    assert (oom["run_id"], oom["verdict"], s["capacity_from"]) == (run_id, "out_of_memory", "log")
    assert s["peak_reserved_bytes"] == truth["ranks"]["0"]["memory"]["peak_reserved_bytes"]
    assert s["headroom_pct"] == pytest.approx(100 - 100 * s["peak_reserved_bytes"] / oom["capacity_bytes"])
    assert by_log["run_id"] == run_id and by_log["peak_reserved_bytes"] == s["peak_reserved_bytes"]
    assert [f["evidence"]["kind"] for f in s["findings"]][:1] == ["headroom"]


def test_kineto_memory_events_of_the_cuda_generator(tmp_path: Path) -> None:
    """s6-memcuda's Kineto [memory] rows: peaks equal the generator's truth, host rows ignored, allocators named
    after their CPU op, capacity from the trace's H100 80GB."""
    from sample_traces.generate_cuda import generate as generate_cuda

    generate(tmp_path / "npu", steps=3, layers=1, ranks=1, seed=2, files=("kernel_details",))
    gt = generate_cuda(tmp_path / "npu", tmp_path / "gpu", memory=True)["memory"]
    with Store(tmp_path / "cuda.duckdb") as store:
        ingest_into(store, [tmp_path / "gpu"])
        s = memory_summary(store)
    assert (s["platform"], s["sources"], s["reserved_series"], s["allocator_series"]) == (
        "cuda",
        ["kineto"],
        "kineto:PyTorch",
        "kineto:PyTorch",
    )
    assert (s["peak_reserved_bytes"], s["peak_allocated_bytes"]) == (
        gt["peak_reserved_bytes"],
        gt["peak_allocated_bytes"],
    )
    assert {a["name"]: a["bytes"] for a in s["top_allocators"]} == gt["bytes_by_op"]
    assert s["capacity_from"] == "device_table" and s["device_name"] == match_device("H100 80GB HBM3").name
    assert all("NPU" not in f["suggestion"] for f in s["findings"])


@pytest.mark.parametrize(
    ("lines", "title", "kind"),
    [
        (
            [
                "(EngineCore_DP0 pid=30023) INFO 11-26 11:43:04 [gpu_worker.py:440] Available KV cache memory: -23.55 GiB",
            ],
            "No room for the KV cache — The KV-cache budget is -23.55 GiB: the weights and activations already exceed "
            "what gpu_memory_utilization allows.",
            "kv_negative",
        ),
        (
            [
                "(EngineCore_DP0 pid=30023) ERROR 11-26 11:43:05 [core.py:708] ValueError: To serve at least one "
                "request with the models's max seq len (32000), (1.1 GiB KV cache is needed, which is larger than the "
                "available KV cache memory (0.59 GiB). Based on the available memory, the estimated maximum model "
                "length is 17000.",
            ],
            "KV cache too small — One request of max_model_len 32000 needs 1.10 GiB of KV cache; 604.16 MiB is "
            "available.",
            "kv_tiny",
        ),
    ],
)
def test_kv_cache_budget_findings(tmp_path: Path, lines: list[str], title: str, kind: str) -> None:
    """vLLM's start-up lines (as tests/test_memory_logs.py reads them): the KV verdict becomes a memory finding."""
    (tmp_path / "vllm.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with Store(tmp_path / "kv.duckdb") as store:
        ingest_into(store, [tmp_path / "vllm.log"])
        s = memory_summary(store, log_file="vllm.log")
    kv = [f for f in s["findings"] if f["evidence"]["kind"] == kind]
    assert [f["title"] for f in kv] == [title]
    assert kv[0]["evidence"]["owner"] == "config"


def test_memory_settings_the_logs_state(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = (
        Path(__file__).parent
        / "fixtures"
        / "memory_logs"
        / "i_sglang_npu_oom_alloc_conf_hccl_buffsize_15453.log"
    )
    db = tmp_path / "settings.duckdb"
    with Store(db) as store:
        ingest_into(store, [log])
        s = memory_summary(store)
    assert [(x["setting"], x["value"], x["line"]) for x in s["log_settings"]] == [
        ("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True", 4),
        ("HCCL_BUFFSIZE", "200", 8),
    ]
    assert main(["memory", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert f"│ HCCL_BUFFSIZE          │ 200                      │ {log.name}:8 │" in out
