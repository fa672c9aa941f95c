"""Multi-rank jobs: a generated 64-rank job with an injected slow rank and slow link, the real 4-rank corpus job,
``diag cluster --json`` and the Cluster page."""

from __future__ import annotations

import csv
import json
import statistics
import time
from decimal import Decimal
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from diag.analyses.cluster import cluster_view
from diag.store import Store
from sample_traces.generate_cluster import generate
from tests.conftest import ROOT, cli_json, ingest_into

LEVEL2 = Path("ascend/msinsight/test/st/level2")
SUMMARY_FILES = ("profiler_info_*.json", "profiler_metadata.json", "ASCEND_PROFILER_OUTPUT/step_trace_time.csv",
                 "ASCEND_PROFILER_OUTPUT/communication.json", "ASCEND_PROFILER_OUTPUT/communication_matrix.json")  # fmt: skip


def _ingest(db: Path, paths: list[Path]) -> None:
    with Store(str(db)) as store:
        summary = ingest_into(store, paths, jobs=2)
    failed = [f for f in summary.files if f.status == "failed"]
    assert not failed, failed


@pytest.fixture(scope="module")
def job64(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("cluster")
    t0 = time.perf_counter()
    truth = generate(root / "job", ranks=64, steps=8, seed=7)
    assert time.perf_counter() - t0 < 10  # a few seconds on this machine (about 1 s)
    db = root / "job.duckdb"
    _ingest(db, [root / "job"])
    return db, truth


def test_generated_job_has_the_real_shapes(job64):
    db, truth = job64
    job = db.parent / "job"
    dirs = sorted(p.name for p in job.iterdir() if p.is_dir())
    assert len(dirs) == 64 and all(d.startswith("rank") and d.endswith("_ascend_pt") for d in dirs)
    run = job / truth["run_dirs"]["5"]
    assert (run / "profiler_info_5.json").is_file()
    meta = json.loads((run / "profiler_metadata.json").read_text())
    groups = meta["parallel_group_info"]
    assert sorted(g["group_name"] for g in groups.values()) == ["default_group", "ep", "tp"]
    tp = next(g for g in groups.values() if g["group_name"] == "tp")
    assert tp["global_ranks"] == list(range(8)) and tp["group_rank"] == 5
    comm = json.loads((run / "ASCEND_PROFILER_OUTPUT" / "communication.json").read_text())
    op = next(iter(comm["step1"]["collective"]))
    assert op.split("@")[1] in groups  # op names carry the group ids of parallel_group_info
    matrix = json.loads((run / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").read_text())
    keys = {k.split("@")[0] for k in matrix["step1"]["collective"]}
    assert {"allreduce-top1", "allreduce-total", "alltoallv-total"} <= keys


def test_generated_slow_rank_and_link_are_the_top_findings(job64):
    db, truth = job64
    code, out = cli_json("cluster", "--db", str(db))
    assert code == 0
    (view,) = out["jobs"]
    assert len(view["ranks"]) == 64 and len(view["steps"]) == 64 * 8 and view["step_source"] == "step_trace"
    sr, sl = truth["slow_rank"], truth["slow_link"]
    first, second, *rest = view["findings"]
    assert rest == []  # nothing else stands out
    assert (first["category"], first["rank"]) == ("slow_rank", sr["rank"])
    ev = first["evidence"]
    assert abs(ev["excess_ns"] - sr["excess_ns"]) <= 1
    assert ev["rank_ns"] == sr["computing_ns"]
    assert abs(ev["excess_pct"] - 15.0) < 1.0  # injected ×1.15
    assert ev["peers_median_wait_ns"] == sr["peers_median_wait_ns"] and ev["rank_wait_ns"] == sr["wait_ns"]
    assert ev["peers_wait_for_it"] and ev["peers_median_wait_ns"] - ev["rank_wait_ns"] > 0.9 * sr["excess_ns"]
    assert (second["category"], second["rank"]) == ("slow_link", sl["src_rank"])
    link = second["evidence"]
    assert (link["src_rank"], link["dst_rank"], link["transport"], link["group"]) == (
        sl["src_rank"], sl["dst_rank"], "RDMA", sl["group"])  # fmt: skip
    assert (link["size_bytes"], link["transit_ns"]) == (sl["size_bytes"], sl["transit_ns"])
    assert link["bandwidth_gbps"] == pytest.approx(sl["bandwidth_gbps"], rel=1e-12)
    assert link["median_gbps"] == pytest.approx(sl["median_rdma_gbps_of_group"], rel=0.01)
    assert [x["src_rank"] for x in view["links"] if x["slow"]] == [sl["src_rank"]]
    assert view["open_next"]["rank"] == sr["rank"]
    for r in view["ranks"]:
        assert r["computing_ns"] == truth["per_rank_totals"][str(r["rank"])]["computing_ns"]
        assert r["wait_ns"] == truth["per_rank_totals"][str(r["rank"])]["wait_ns"]
    labels = {g["label"] for g in view["groups"]}
    assert labels == {"tp", "ep"}


def test_cluster_view_is_fast(job64):
    db, _ = job64
    with Store(str(db), read_only=True) as store:
        t0 = time.perf_counter()
        view = cluster_view(store, 1)
        secs = time.perf_counter() - t0
    assert len(view.links) == 64 * 7 * 2 and secs < 3.0


def _ns(text: str) -> int:
    return int((Decimal(text) * 1000).to_integral_value())


def test_corpus_four_rank_job(corpus: Path, tmp_path: Path):
    """msinsight's st/level2: 4 ranks, pp=2 × dp=2.  Stage 1 (ranks 2, 3) computes 73% more than stage 0."""
    job = corpus / LEVEL2
    files = sorted(p for run in job.glob("rank_*_ascend_pt") for pat in SUMMARY_FILES for p in run.glob(pat))
    db = tmp_path / "l2.duckdb"
    _ingest(db, files)
    expected = {}
    for rank in range(4):
        with open(
            job / f"rank_{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv", newline=""
        ) as fh:
            (row,) = list(csv.DictReader(fh))
        c, n, f = (_ns(row[k]) for k in ("Computing", "Communication(Not Overlapped)", "Free"))
        expected[rank] = {"step": int(row["Step"]), "computing_ns": c, "comm_not_overlapped_ns": n, "free_ns": f,
                          "step_ns": c + n + f, "preparing_ns": _ns(row["Preparing"])}  # fmt: skip
    with Store(str(db), read_only=True) as store:
        view = cluster_view(store, 1)
    got = {r["rank"]: r for r in view.ranks}
    assert sorted(got) == [0, 1, 2, 3]
    for rank, exp in expected.items():
        assert {k: got[rank][k] for k in exp if k != "step"} == {k: v for k, v in exp.items() if k != "step"}
        assert [s["step"] for s in view.steps if s["rank"] == rank] == [exp["step"]] == [13]
    assert got[2]["computing_ns"] == 400_448_260 and got[0]["computing_ns"] == 231_290_100

    # No single slow rank (2 against 2), but an imbalance: pipeline stage 1 computes more, stage 0 waits.
    assert [f.category for f in view.findings] == ["imbalance"]
    imb = view.findings[0]
    median = statistics.median(e["computing_ns"] for e in expected.values())
    assert imb.impact_ns == round(expected[3]["computing_ns"] - median) == 85_262_520
    assert (
        imb.evidence["ranks"] == [2, 3] and imb.evidence["others"] == [0, 1] and imb.evidence["pp_stage"] == 1
    )
    assert imb.evidence["ratio"] == pytest.approx(1.734, abs=0.001)
    assert all(got[r]["wait_ns"] > 150e6 for r in (0, 1)) and all(got[r]["wait_ns"] < 15e6 for r in (2, 3))
    assert (view.open_next.rank, view.open_next.run_id) == (3, got[3]["run_id"])

    # Links: in-group numbers mapped to global ranks; every HCCS link that moved data runs at ~19-21 GB/s.
    big = [x for x in view.links if x["compared_ok"]]
    assert {x["transport"] for x in big} == {"HCCS"} and not any(x["slow"] for x in view.links)
    assert all(18.9 < x["bandwidth_gbps"] < 21.0 for x in big)
    pp = [
        (x["src_rank"], x["dst_rank"])
        for x in big
        if x["label"].startswith("pp") and x["size_bytes"] == 16_777_216
    ]
    assert sorted(pp) == [(0, 2), (1, 3), (2, 0), (3, 1)]  # batchSendRecv between the stages
    labels = {tuple(g["members"]): g["label"] for g in view.groups}
    assert (
        labels[(0, 1)] == "dp_cp" and labels[(2, 3)] == "dp (= dp_cp)" and labels[(0, 2)] == "pp (= mp, embd)"
    )


def test_cluster_page(job64, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    db, truth = job64
    monkeypatch.setenv("DIAG_DB", str(db))
    monkeypatch.setenv("DIAG_UPLOAD_DIR", str(tmp_path / "uploads"))
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=60)
    at.run()
    at.switch_page("app_pages/11_cluster.py").run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Cluster"
    slow = truth["slow_rank"]["rank"]
    text = " ".join(m.value for m in at.markdown)
    assert f"Open rank {slow} next" in text and "Slow link" in text
    at.radio(key="cluster_metric").set_value("computing").run()
    assert not at.exception, at.exception
    at.button(key="cluster_open_next").click().run()
    assert not at.exception, at.exception
    from app import data  # the app's own store: DuckDB allows one configuration of a file per process

    run_id = (
        data._store(str(db))[0]
        .cursor()
        .execute("SELECT run_id FROM runs WHERE rank = ?", [slow])
        .fetchall()[0][0]
    )
    assert at.session_state["run_id"] == run_id
    assert any(f"Rank {slow} (run {run_id}) is selected" in s.value for s in at.success)
