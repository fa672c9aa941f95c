"""Which framework op got slower (diag.analyses.framework_ops): each aten / torch_npu / custom op with the kernels it
launched on an Ascend run and its CUDA baseline — on the generated pair (the CUDA twin with ``--host-ops``, whose
ground truth holds every op's calls, kernels and time) and on a real pair of AlexNet captures from the corpus."""

from __future__ import annotations

import csv
import gzip
import json
from decimal import Decimal
from pathlib import Path

import pytest

from diag.analyses.framework_ops import framework_op_table, op_launches
from diag.store import Store
from sample_traces.generate_cuda import generate as cuda_twin
from tests.conftest import CORPUS, ingest_into, open_page
from tests.test_ops import ASCEND_RANK0, GENERATED, _diag

ALEXNET_NPU = CORPUS / "ascend/msinsight/test/data/pytorch/text/level1/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"
ALEXNET_GPU = CORPUS / "cuda/hta/critical_path__alexnet_trace.json.gz"


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The generated decode rank 0 (run 1, Ascend) and its CUDA twin with host ops (run 2): db and ground truth."""
    root = tmp_path_factory.mktemp("fw")
    truth = cuda_twin(GENERATED / "llm_decode_tp2", root / "cuda", host_ops=True)
    db = root / "pair.duckdb"
    with Store(str(db)) as store:
        assert ingest_into(store, [ASCEND_RANK0, root / "cuda" / "h100_decode_tp1.pt.trace.json"]).ok
        # run 3: the committed twin, without a host side (no framework op on any kernel)
        assert ingest_into(store, [GENERATED / "llm_decode_cuda" / "h100_decode_tp1.pt.trace.json"]).ok
    return db, truth


def _kernel_details(name: str) -> tuple[int, int]:
    """(rows, Σ duration ns) of the Ascend kernel_details rows of one kernel name, read with the csv module."""
    n = ns = 0
    with open(
        ASCEND_RANK0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", encoding="utf-8", newline=""
    ) as fh:
        for row in csv.DictReader(fh):
            if row["Name"] == name:
                n += 1
                ns += int((Decimal(row["Duration(us)"]) * 1000).to_integral_value())
    return n, ns


def test_every_cuda_op_has_its_ground_truth_and_mm_its_kernel_details_sum(pair: tuple[Path, dict]) -> None:
    db, truth = pair
    with Store(str(db), read_only=True) as store:
        cuda = op_launches(store, 2)
        table = framework_op_table(store, 1, 2, 4, 4)
    assert {op: {k: v[k] for k in ("calls", "kernels", "device_ns")} for op, v in cuda.items()} == truth[
        "framework_ops"
    ]
    mm = next(r for r in table["rows"] if r["op"] == "aten::mm")
    calls, ns = _kernel_details("aclnnMm_MatMulCommon_MatMulV2")
    assert (mm["calls_a"], mm["kernels_a"], mm["device_a_ns"]) == (calls, calls, ns) == (52, 52, 3_665_265)
    assert (mm["calls_b"], mm["kernels_per_call_b"], mm["device_b_ns"]) == (52, 1.0, 3_187_186)
    assert mm["ratio"] == pytest.approx(1.15, rel=1e-5)  # the twin's gemm factor
    assert mm["delta_per_step_ms"] == pytest.approx((3_665_265 - 3_187_186) / 4 / 1e6, rel=1e-12)
    assert (table["linked_pct_a"], table["linked_pct_b"]) == (100.0, 100.0)


def test_ops_on_one_side_only_are_listed_as_such(pair: tuple[Path, dict]) -> None:
    db, _ = pair
    with Store(str(db), read_only=True) as store:
        rows = {r["op"]: r for r in framework_op_table(store, 1, 2, 4, 4)["rows"]}
    assert (rows["npu::npu_rms_norm"]["only"], rows["npu::npu_rms_norm"]["calls_b"]) == ("a", None)
    assert (
        rows["_C::rms_norm"]["only"],
        rows["_C::rms_norm"]["calls_a"],
        rows["_C::rms_norm"]["calls_b"],
    ) == (
        "b",
        None,
        16,
    )
    assert rows["_C::rms_norm"]["delta_per_step_ms"] == pytest.approx(-70_539 / 4 / 1e6, rel=1e-12)
    assert rows["aten::mm"]["only"] is None and rows["c10d::allreduce_"]["ratio"] == pytest.approx(
        1.6, rel=1e-5
    )


def test_compare_text_and_json_carry_the_framework_ops(pair: tuple[Path, dict]) -> None:
    db, _ = pair
    code, out, _ = _diag("compare", "1", "2", "--db", str(db))
    assert code == 0
    assert (
        "framework ops: each op's kernels on A and B, per step, largest loss of A first (top 10 of 20)" in out
    )
    cells = [
        c.strip() for c in next(line for line in out.splitlines() if "aten::mm " in line).split("│")[1:-1]
    ]
    assert cells == ["aten::mm", "52", "52", "1.0", "1.0", "0.916", "0.797", "1.15×", "+0.120"]
    only = [
        c.strip() for c in next(line for line in out.splitlines() if "npu_rms_norm " in line).split("│")[1:-1]
    ]
    assert only == ["npu::npu_rms_norm", "16", "—", "1.0", "—", "0.019", "—", "A only", "+0.019"]
    code, out, _ = _diag("compare", "1", "2", "--db", str(db), "--json")
    doc = json.loads(out)["framework_ops"]
    assert [r["op"] for r in doc["rows"][:3]] == [
        "aten::argmax",
        "aten::index_put_",
        "npu::npu_incre_flash_attention",
    ]
    assert doc["per_step"] is True and len(doc["rows"]) == 20


def test_default_twin_has_no_host_ops(tmp_path: Path) -> None:
    """Without --host-ops the twin is what it always was (the committed sample): kernels only, no framework op."""
    truth = cuda_twin(GENERATED / "llm_decode_tp2", tmp_path / "cuda")
    written = (tmp_path / "cuda" / "h100_decode_tp1.pt.trace.json").read_bytes()
    assert written == (GENERATED / "llm_decode_cuda" / "h100_decode_tp1.pt.trace.json").read_bytes()
    assert "framework_ops" not in truth


def _alexnet_conv2d_oracle() -> tuple[int, int, int]:
    """(aten::conv2d calls, device tasks, Σ their µs) of the CUDA AlexNet trace by plain JSON: a kernel (or memset /
    memcpy: a conv launches a cudaMemsetAsync) is the conv's when the runtime call with its correlation id lies
    inside an aten::conv2d on the same thread."""
    events = json.loads(gzip.decompress(ALEXNET_GPU.read_bytes()))["traceEvents"]
    convs = [e for e in events if e.get("cat") == "cpu_op" and e.get("name") == "aten::conv2d"]
    launch = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in e["args"]
    }
    calls, n, us = set(), 0, 0
    for k in (e for e in events if e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")):
        rt = launch.get(k["args"].get("correlation"))
        owner = next((c for c in convs if rt and c["tid"] == rt["tid"] and c["ts"] <= rt["ts"] <= c["ts"] + c["dur"]), None)  # fmt: skip
        if owner is not None:
            calls.add(owner["ts"])
            n += 1
            us += k["dur"]
    return len(calls), n, us


def test_a_real_alexnet_pair(tmp_path: Path) -> None:
    """msinsight's Ascend AlexNet training step (torch_npu trace, async_npu flows) against HTA's CUDA AlexNet trace
    (Kineto correlation ids): the forward ops match by name; the NPU capture's backward and optimizer ops are on
    A only. Neither has ProfilerStep markers: the figures are totals."""
    if not ALEXNET_NPU.is_dir() or not ALEXNET_GPU.is_file():
        pytest.skip("../shared/corpus is not present")
    with Store(str(tmp_path / "alex.duckdb")) as store:
        assert ingest_into(store, [ALEXNET_NPU / "trace_view.json", ALEXNET_GPU]).ok
        table = framework_op_table(store, 1, 2, 0, 0)
    rows = {r["op"]: r for r in table["rows"]}
    both = sorted(op for op, r in rows.items() if r["only"] is None)
    assert both == ["aten::adaptive_avg_pool2d", "aten::conv2d", "aten::dropout", "aten::linear",
                    "aten::max_pool2d", "aten::relu_", "aten::to"]  # fmt: skip
    conv = rows["aten::conv2d"]
    calls, kernels, us = _alexnet_conv2d_oracle()
    assert (
        (conv["calls_b"], conv["kernels_b"], conv["device_b_ns"])
        == (calls, kernels, us * 1000)
        == (10, 41, 6_333_000)
    )
    assert (conv["calls_a"], conv["kernels_a"], conv["device_a_ns"]) == (5, 20, 1_116_441)
    assert table["per_step"] is False and conv["delta_per_step_ms"] is None
    assert conv["delta_ms"] == pytest.approx((1_116_441 - 6_333_000) / 1e6, rel=1e-12)
    assert round(table["linked_pct_a"], 2) == 99.99 and table["linked_pct_b"] == 100.0


def test_a_side_without_links_compares_nothing(pair: tuple[Path, dict]) -> None:
    """The committed CUDA twin (run 3) has no host side: its kernels have no framework op. The Ascend ops are then
    not "A only" losses (that would blame aten::mm for 0.92 ms/step): no op is compared, and the text says why."""
    db, _ = pair
    with Store(str(db), read_only=True) as store:
        table = framework_op_table(store, 1, 3, 4, 4)
    assert (table["rows"], table["unlinked"], table["linked_pct_a"], table["linked_pct_b"]) == (
        [],
        ["b"],
        100.0,
        0.0,
    )
    code, out, _ = _diag("compare", "1", "3", "--db", str(db))
    assert code == 0 and "B links no kernel to a framework op (no flows or correlation ids" in " ".join(
        out.split()
    )


def _nsys_conv2d_oracle(path: Path) -> tuple[int, int, int]:
    """(aten::conv2d calls, device tasks, Σ ns) of a pyprof-annotated nsys export by plain sqlite: a kernel / memcpy
    / memset belongs to the outermost ``aten::`` NVTX range around the CUDA runtime call with its correlation id."""
    import sqlite3

    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    ranges = con.execute(
        "SELECT start, \"end\", text, globalTid FROM NVTX_EVENTS WHERE text LIKE 'aten::%'"
    ).fetchall()
    calls = {c: (s, tid) for s, tid, c in con.execute("SELECT start, globalTid, correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME")}  # fmt: skip
    seen, n, ns = set(), 0, 0
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
        for corr, dur in con.execute(f'SELECT correlationId, "end" - start FROM {table}'):
            at, tid = calls.get(corr, (None, None))
            around = [r for r in ranges if r[3] == tid and at is not None and r[0] <= at <= r[1]]
            outer = min(around, key=lambda r: (r[0], -r[1]), default=None)
            if outer is not None and outer[2].split(",")[0] == "aten::conv2d":
                seen.add(outer[0])
                n += 1
                ns += dur
    con.close()
    return len(seen), n, ns


def test_nsys_nvtx_ranges_name_the_framework_ops(tmp_path: Path) -> None:
    """A real nsys export of a PyTorch run with pyprof NVTX ranges (``aten::addmm, seq = 18``) and CUPTI runtime
    correlation ids: the kernels belong to the aten ops around their launches."""
    path = CORPUS / "cuda/nsys-sqlite-dlprof/nsys_profile_nsys2022.1_pytorch_pyprof_nvtx.sqlite"
    if not path.is_file():
        pytest.skip("../shared/corpus is not present")
    with Store(str(tmp_path / "nsys.duckdb")) as store:
        assert ingest_into(store, [path]).ok
        ops = op_launches(store, 1)
    assert sorted(ops) == ["aten::conv2d", "aten::linear", "aten::max_pool2d", "aten::relu"]
    conv = ops["aten::conv2d"]
    assert (
        (conv["calls"], conv["kernels"], conv["device_ns"]) == _nsys_conv2d_oracle(path) == (2, 51, 550_682)
    )


# last in the file: the page keeps the app's cached connection to the database open (read-write)
def test_framework_ops_section_on_the_compare_page(
    monkeypatch: pytest.MonkeyPatch, pair: tuple[Path, dict]
) -> None:
    db, _ = pair
    at = open_page(monkeypatch, db)
    at.selectbox(key="runs_select").select(1).run()
    at.switch_page("app_pages/08_compare.py").run()
    assert not at.exception, at.exception
    assert "Framework ops: their kernels on A and B" in [h.value for h in at.subheader]
    table = next(d.value for d in at.dataframe if "framework op" in d.value.columns)
    assert list(table.columns) == ["framework op", "A calls", "B calls", "A kernels/call", "B kernels/call",
                                   "A ms/step", "B ms/step", "A/B", "lost ms/step"]  # fmt: skip
    mm = table[table["framework op"] == "aten::mm"].iloc[0]
    assert list(mm) == ["aten::mm", "52", "52", "1", "1", "0.9163", "0.7968", "1.15×", 0.1195]
    kernels = next(d.value for d in at.dataframe if "A top kernel" in d.value.columns)
    top = kernels[kernels["framework op"] == "aten::mm"].iloc[0]
    assert top["A top kernel"] == "aclnnMm_MatMulCommon_MatMulV2" and top["B top kernel"].startswith(
        "sm90_xmma_gemm"
    )
    assert table[table["framework op"] == "_C::rms_norm"].iloc[0]["A/B"] == "B only"
    assert any(c.value.startswith("Device time with a framework op: A 100.0%, B 100.0%.") for c in at.caption)


def test_the_same_database_gives_the_same_table_on_every_call(tmp_path: Path) -> None:
    """A real Kineto trace whose ops launch kernels of equal total time (aten::eq: two elementwise kernels, 30 µs
    each) and whose tasks are reached both by correlation id and by flow arrow: the table was drawn from DuckDB's
    arbitrary row choice (DISTINCT ON, arg_max on a tie) and differed between calls; now ties go by name."""
    trace = CORPUS / "cuda/hta/timeline_analysis__sampled_rank-0.json.gz"
    if not trace.is_file():
        pytest.skip("../shared/corpus is not here")
    db = tmp_path / "k.duckdb"
    with Store(str(db)) as store:
        assert ingest_into(store, [trace]).ok
    with Store(str(db), read_only=True) as store:
        tables = [op_launches(store, 1) for _ in range(12)]
    assert all(t == tables[0] for t in tables)
    eq = tables[0]["aten::eq"]
    assert (eq["calls"], eq["kernels"], eq["device_ns"]) == (20, 20, 60_000)
    # of the two kernels with 30 µs each, the name that sorts first
    assert eq["top_kernel"].startswith("void at::native::unrolled_elementwise_kernel<")
