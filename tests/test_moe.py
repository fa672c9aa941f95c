"""MoE / expert parallelism (#22): expert hotspot ingest, MoE op classes, imbalance figures, ``diag moe``."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import duckdb
import pytest

from diag.analyses.op_classes import classify, sql_case
from tests.conftest import cli_json, ingest_into, open_page, query, run_cli

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


# -- steps 3-5: the generated EP=8 job -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def moe_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    from sample_traces._moe import generate_moe

    tmp = tmp_path_factory.mktemp("moe_job")
    truth = generate_moe(tmp / "job", steps=2, seed=3)
    _ingest(tmp / "job", tmp / "moe.duckdb")
    return tmp / "moe.duckdb", truth


def test_diag_moe_json_names_the_hot_expert_its_rank_and_the_wait(moe_job):
    db, truth = moe_job
    code, out = cli_json("moe", "--db", str(db))
    assert code == 0
    hot = truth["hot"]
    layer = next(x for x in out["layers"] if x["layer"] == hot["layer"] and x["phase"] == "prefill")
    assert layer["experts"] == truth["experts"] == 64
    assert [(h["expert"], h["rank"], h["tokens"]) for h in layer["hot"]] == [
        (hot["expert"], hot["rank"], hot["tokens"])
    ]
    assert layer["max_over_mean"] == pytest.approx(hot["ratio"], rel=1e-9)
    assert [x for x in out["layers"] if x["layer"] != hot["layer"] and x["hot"]] == []
    (f,) = out["findings"]
    ev = f["evidence"]
    assert (ev["expert"], ev["layer"], ev["rank"], ev["owner"], f["category"]) == (
        hot["expert"], hot["layer"], hot["rank"], "config", "moe"
    )  # fmt: skip
    assert ev["peers_wait_ns_per_step"] == pytest.approx(truth["peers_median_wait_ns_per_step"], rel=0.05)
    assert ev["gain_ns_per_step"] == pytest.approx(truth["gain_ns_per_step"], rel=0.05)
    ranks = {r["rank"]: r for r in out["ranks"]}
    for r, want in enumerate(truth["alltoall_wait_ns_per_step"]):
        assert ranks[r]["alltoall_wait_ns"] == pytest.approx(want, abs=1)
        assert ranks[r]["grouped_matmul_ns"] == pytest.approx(truth["grouped_matmul_ns_per_step"][r], abs=1)
    wait_ms = truth["peers_median_wait_ns_per_step"] / 1e6
    assert f["title"] == (
        f"expert {hot['expert']} of layer {hot['layer']} takes {hot['ratio']:.1f}× the mean tokens in prefill; "
        f"rank {hot['rank']} holds it; ranks 0–4, 6–7 wait {wait_ms:.2f} ms per step in the all-to-all"
    )
    text = run_cli("moe", "--db", str(db)).stdout
    assert text.splitlines()[0] == f["title"]  # the answer first
    assert "dynamic_eplb" in text and "None" not in text


def _moe_json(db: Path, **scope: int) -> dict:
    """What ``diag moe --json`` prints, computed in-process (a CLI call costs seconds on a loaded machine)."""
    from diag.analyses.moe import moe_view
    from diag.store import Store

    with Store(db, read_only=True) as store:
        return json.loads(json.dumps(moe_view(store, **scope).to_json()))


def test_grouped_matmul_tokens_per_rank_as_msprof_analyze_counts_them(moe_job):
    """ep_load_balance: per GroupedMatmul, Σ first dims of all but the last two input tensors; summed per rank."""
    db, truth = moe_job
    out = _moe_json(db, job_id=1)
    root = Path(query(db, "SELECT source FROM jobs")[0][0])
    for r in out["ranks"]:
        path = next(
            root.glob(f"**/{truth['run_dirs'][str(r['rank'])]}/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
        )
        with open(path, newline="") as fh:
            shapes = [row["Input Shapes"] for row in csv.DictReader(fh) if row["Type"] == "GroupedMatmul"]
        want = sum(int(s.split(";")[0].split(",")[0]) for s in shapes) / truth["steps"]
        assert r["grouped_matmul_tokens"] == round(want)
        assert r["grouped_matmul_tokens"] == round(r["tokens"] / truth["steps"])  # the hotspot file agrees


def test_usage_errors_are_one_line_exit_2(moe_job, capsys):
    from diag.cli import main

    db, _ = moe_job
    assert main(["moe", "--db", str(db), "--job", "1", "--run", "1"]) == 2
    assert capsys.readouterr().err == "diag: error: give --job or --run, not both\n"
    assert main(["moe", "--db", str(db), "--job", "99"]) == 2
    assert capsys.readouterr().err == f"diag: error: no job 99 in {db} (see `diag runs` / `diag cluster`)\n"


def test_one_run_keeps_its_expert_load_but_makes_no_cross_rank_claim(moe_job):
    db, truth = moe_job
    hot_run = next(r for (r,) in query(db, "SELECT run_id FROM runs WHERE rank = ?", [truth["hot"]["rank"]]))
    out = _moe_json(db, run_id=hot_run)
    assert out["ranks"] == [] and out["findings"] == []
    layer = next(x for x in out["layers"] if x["layer"] == truth["hot"]["layer"])
    assert layer["experts"] == 8 and [h["expert"] for h in layer["hot"]] == [truth["hot"]["expert"]]


def test_runs_sharing_a_folder_but_not_grouped_get_no_cross_rank_finding(moe_job, tmp_path):
    """Ranks 0 and the hot rank, twice (one byte apart), overlap in time: ranks 0, 0, 5, 5 — which goes with which
    the data cannot say, so diag.grouping forms no job, and no rank is compared with another."""
    from diag.analyses.moe import moe_view
    from diag.store import Store

    db, truth = moe_job
    root = Path(query(db, "SELECT source FROM jobs")[0][0])
    for copy in ("a", "b"):
        for rank in (0, truth["hot"]["rank"]):
            name = truth["run_dirs"][str(rank)]
            shutil.copytree(root / name, tmp_path / copy / name)
            if copy == "b":
                info = tmp_path / copy / name / f"profiler_info_{rank}.json"
                info.write_text(info.read_text() + "\n")
    other = tmp_path / "x.duckdb"
    with Store(other) as store:
        ingest_into(store, [tmp_path / "a", tmp_path / "b"])
    jobs = [j for (j,) in query(other, "SELECT job_id FROM jobs ORDER BY job_id")]
    assert len(jobs) == 4
    with Store(other, read_only=True) as store:
        views = [moe_view(store, job_id=j) for j in jobs]
    assert [(v.multi_rank, v.ranks, v.findings) for v in views] == [(False, [], [])] * 4
    assert all(v.layers for v in views)  # each run still has its own load figures
    code, out = cli_json("moe", "--db", str(other))
    assert code == 0 and out["findings"] == [] and out["ranks"] == [] and out["layers"]


def test_gini_and_cv_against_an_independent_computation(moe_job):
    db, _ = moe_job
    out = _moe_json(db, job_id=1)
    rows = query(db, "SELECT layer, tokens FROM expert_load WHERE phase = 'prefill' ORDER BY layer, tokens")
    for layer in out["layers"]:
        xs = [t for lay, t in rows if lay == layer["layer"]]
        n, mean = len(xs), sum(xs) / len(xs)
        gini = sum(abs(a - b) for a in xs for b in xs) / (2 * n * n * mean)
        cv = (sum((x - mean) ** 2 for x in xs) / n) ** 0.5 / mean
        assert layer["gini"] == pytest.approx(gini, rel=1e-9) and layer["cv"] == pytest.approx(cv, rel=1e-9)


def test_default_generator_output_is_unchanged_by_the_moe_option(tmp_path):
    from sample_traces import generate_cluster

    assert (
        generate_cluster.main(
            [str(tmp_path / "c"), "--ranks", "16", "--tp", "4", "--steps", "1", "--slow-link", "4", "12"]
        )
        == 0
    )
    assert not list((tmp_path / "c").glob("rank*/prefill_*.csv"))
    assert not list((tmp_path / "c").glob("rank*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))


# -- the Cluster page's MoE section --------------------------------------------------------------------------
def test_cluster_page_has_the_moe_section(moe_job, monkeypatch):
    db, truth = moe_job
    at = open_page(monkeypatch, db, "app_pages/11_cluster.py")
    assert "MoE expert load" in [h.value for h in at.subheader]
    hot = truth["hot"]
    assert any(f"expert {hot['expert']} of layer {hot['layer']}" in m.value for m in at.markdown)
    assert at.radio(key="moe_phase").options == ["prefill"]
    frames = [d.value for d in at.dataframe if "GroupedMatmul / step (ms)" in d.value.columns]
    assert len(frames) == 1 and len(frames[0]) == 8
    assert frames[0].loc[
        frames[0]["rank"] == hot["rank"], "GroupedMatmul / step (ms)"
    ].item() == pytest.approx(truth["grouped_matmul_ns_per_step"][hot["rank"]] / 1e6)


@pytest.mark.browser
def test_cluster_page_moe_section_in_a_browser(moe_job, tmp_path):
    """The section drawn by a real Chromium: heading, finding, heatmap and bars; screenshot in $DIAG_SCREENSHOTS."""
    import os

    from tests.browser_app import launch, require_browser, serve_app

    require_browser()
    from playwright.sync_api import sync_playwright

    db, truth = moe_job
    shots = Path(os.environ.get("DIAG_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    served = tmp_path / "served.duckdb"  # a copy: an AppTest of this process may hold the module's file open
    shutil.copyfile(db, served)
    with serve_app(served, tmp_path / "uploads") as app, sync_playwright() as p:
        browser = launch(p)
        page = browser.new_page(viewport={"width": 1600, "height": 1200})
        page.goto(f"{app.url}/cluster")  # the page's URL path (st.Page of 11_cluster.py)
        section = page.get_by_role("heading", name="MoE expert load").first
        section.wait_for(timeout=120_000)
        page.wait_for_function(
            "() => document.querySelector('[data-testid=\"stApp\"]')?.dataset.testScriptState === 'notRunning'",
            timeout=120_000,
        )
        page.wait_for_timeout(2500)  # the charts draw after the script ends
        section.scroll_into_view_if_needed()
        height = int(page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight"))
        page.set_viewport_size({"width": 1600, "height": min(height + 40, 12_000)})
        page.wait_for_timeout(1500)
        page.screenshot(path=str(shots / "cluster_moe.png"), full_page=True)
        text = page.locator('[data-testid="stMain"]').first.inner_text()
        plots = page.locator('[data-testid="stPlotlyChart"]').count()
        browser.close()
    hot = truth["hot"]
    assert f"expert {hot['expert']} of layer {hot['layer']}" in text
    assert "Traceback" not in text and "Error" not in text
    assert "Tokens per expert (prefill)" in text or plots >= 2


def test_moe_collectives_are_their_own_class_in_compare_and_ops(moe_job):
    """An Ascend all-to-all task is of kind COMMUNICATION; the task kind no longer hides its MoE class."""
    from diag.analyses import ops
    from diag.analyses.compare import class_totals
    from diag.analyses.counts import unique_tasks_sql
    from diag.store import Store

    db, _ = moe_job
    with Store(str(db)) as store:  # the Cluster page's test may hold it open read-write in-process
        totals = class_totals(store, 1, "ascend")
        by_class = {r["name"]: r["calls"] for r in ops.op_table(store, 1, by="class")}
        alltoall = (
            store.cursor()
            .execute(
                f"SELECT count(*) FROM ({unique_tasks_sql()}) t WHERE t.kind = 'COMMUNICATION' "
                "AND regexp_matches(lower(t.name), '^hcom_all_?to_?all')",
                {"run": 1},
            )
            .fetchone()[0]
        )
    assert alltoall > 0
    assert totals["moe_alltoall"][0] == alltoall
    assert by_class["moe_alltoall"] == alltoall
