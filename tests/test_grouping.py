"""Evidence-based job grouping (diag.grouping) and what needs a real job: cluster findings, failed-step
'missing' reasons, job postmortems, and the wait finding of a rank captured alone (issue #15)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from diag.analyses.findings import device_findings
from diag.analyses.postmortem import build_postmortem
from diag.grouping import RunFacts, rank_or_run, rules, why_apart
from diag.store import Store
from tests.conftest import FIXTURES, SAMPLES, cli_json, ingest_into, open_page, run_cli

TRAP = FIXTURES / "traps" / "unrelated_captures_one_folder"
TP2 = SAMPLES / "generated" / "llm_decode_tp2"
LEVEL2 = Path("ascend/msinsight/test/st/level2")
SUMMARY = ("profiler_info_*.json", "profiler_metadata.json", "ASCEND_PROFILER_OUTPUT/step_trace_time.csv",
           "ASCEND_PROFILER_OUTPUT/communication.json", "ASCEND_PROFILER_OUTPUT/communication_matrix.json")  # fmt: skip


def _ingest(db: Path, *batches: list[Path], jobs: int = 1) -> None:
    with Store(str(db)) as store:
        for paths in batches:
            summary = ingest_into(store, paths, jobs=jobs)
            assert summary.ok, [f.message for f in summary.files if f.status == "failed"]


def _jobs(db: Path) -> dict[int, tuple[frozenset[str], dict | None]]:
    """job id -> (its runs' names, its grouping record)."""
    with Store(str(db), read_only=True) as store:
        cur = store.cursor()
        have = cur.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_name = 'jobs' AND column_name = 'grouping'"
        ).fetchall()
        grouping = (
            "j.grouping::VARCHAR" if have else "NULL"
        )  # NULL: the base code, to see these tests fail there
        sql = f"SELECT j.job_id, list(r.name), {grouping} FROM jobs j JOIN runs r USING (job_id) GROUP BY ALL"
        rows = cur.execute(sql).fetchall()
    return {j: (frozenset(names), json.loads(g) if g else None) for j, names, g in rows}


def _level2_rank(corpus: Path, rank: int) -> list[Path]:
    run = corpus / LEVEL2 / f"rank_{rank}_ascend_pt"
    return sorted(p for pat in SUMMARY for p in run.glob(pat))


# -- the trap: unrelated captures in one folder -------------------------------------------------------------


def test_trap_unrelated_captures_one_folder_are_no_job(tmp_path: Path):
    db = tmp_path / "trap.duckdb"
    _ingest(db, [TRAP])
    jobs = _jobs(db)
    assert sorted(len(names) for names, _ in jobs.values()) == [1, 1, 1]  # base code: one job of 3 runs
    assert all(g is not None and not g["multi_rank"] for _, g in jobs.values())
    code, out = cli_json("cluster", "--db", str(db))
    assert code == 0 and out["jobs"] == []  # base code: "job 1 traps: 2 ranks" (two of them rank 0)
    assert "no multi-rank job" in run_cli("cluster", "--db", str(db)).stdout
    with Store(str(db), read_only=True) as store:
        for job_id in jobs:
            pm = build_postmortem(store, job_id=job_id)
            assert pm.failed_steps == []  # base code: "Failed step 553 on rank 0 (missing) … ranks [0] have"
        for run_id in (1, 2, 3):
            assert build_postmortem(store, run_id).failed_steps == []


def test_two_rank0_captures_are_apart_for_a_reason(tmp_path: Path):
    db = tmp_path / "trap.duckdb"
    _ingest(db, [TRAP])
    jobs = _jobs(db)
    why = {next(iter(names)): g["why_alone"] for names, g in jobs.values()}
    assert why["llama_rank0.pt.trace.json"] == (
        "no run of the same platform with a known rank and an overlapping capture window"
    )


def test_duplicate_ranks_in_overlapping_captures_stay_ungrouped(tmp_path: Path):
    """Two copies of one 2-rank job (one byte apart, so two identities) overlap in time: ranks 0, 0, 1, 1 —
    which rank 0 goes with which rank 1 the data cannot say, so no job is formed."""
    for name in ("a", "b"):
        shutil.copytree(TP2, tmp_path / name / "tp2", ignore=shutil.ignore_patterns("ground_truth.json"))
    for info in (tmp_path / "b" / "tp2").glob("rank*/profiler_info_*.json"):
        info.write_text(info.read_text() + "\n")
    db = tmp_path / "dup.duckdb"
    _ingest(db, [tmp_path / "a", tmp_path / "b"])
    jobs = _jobs(db)
    assert len(jobs) == 4 and all(not g["multi_rank"] for _, g in jobs.values())
    assert all(
        g["why_alone"].startswith("ambiguous: 2 overlapping ascend captures of rank 0")
        for _, g in jobs.values()
    )
    code, out = cli_json("cluster", "--db", str(db))
    assert out["jobs"] == []


def test_rank_and_window_rules():
    r = rules()
    a = RunFacts(
        1,
        "a",
        None,
        "ascend",
        "x/rank0",
        0,
        "profiler_info",
        1_700_000_000_000_000_000,
        1_700_000_001_000_000_000,
    )
    b = RunFacts(
        2,
        "b",
        None,
        "ascend",
        "y/rank1",
        1,
        "profiler_info",
        1_700_000_000_400_000_000,
        1_700_000_001_200_000_000,
    )
    assert why_apart(a, b, r) is None  # 0.6 s of a 1.0 s and 0.8 s window: 75% of the shorter
    late = RunFacts(
        3,
        "c",
        None,
        "ascend",
        "z/rank1",
        1,
        "profiler_info",
        1_700_000_000_700_000_000,
        1_700_000_002_000_000_000,
    )
    assert (
        why_apart(a, late, r) == "capture windows overlap 40%"
    )  # (0.3 s + 0.1 s slack) of the shorter 1.0 s
    assert (
        why_apart(a, RunFacts(4, "d", None, "cuda", "", 1, "x", a.lo_ns, a.hi_ns), r) == "different platforms"
    )
    assert (
        why_apart(a, RunFacts(5, "e", None, "ascend", "", 0, "x", a.lo_ns, a.hi_ns), r) == "both are rank 0"
    )
    b.fields, a.fields = {"world_size": "2"}, {"world_size": "4"}
    assert why_apart(a, b, r) == "different world size (4 vs 2)"
    a.fields = {"world_size": "1"}
    b.fields = {}
    assert why_apart(a, b, r) == "rank 1 is outside world size 1"
    a.fields, a.groups, b.groups = {}, {"g0": [0, 1]}, {"g0": [1, 2]}
    assert why_apart(a, b, r) == "HCCL group g0 has different members"
    old = RunFacts(6, "f", None, "ascend", "", 1, "x", None, None)
    assert why_apart(a, old, r) == "no absolute capture time"
    assert rank_or_run(None, 5) == "run 5 (rank unknown)" and rank_or_run(3, 5) == "rank 3"


# -- genuine multi-rank data still groups ----------------------------------------------------------------------


def test_generated_tp2_is_one_job_with_its_evidence(tmp_path: Path):
    db = tmp_path / "tp2.duckdb"
    _ingest(db, [TP2])
    ((names, g),) = _jobs(db).values()
    assert len(names) == 2 and g["multi_rank"] and g["ranks"] == [0, 1] and g["guess"] is False
    assert g["basis"][0] == "rank ids from profiler_info (2 of 2 runs)"
    assert g["basis"][1] == "capture windows overlap 100% (least overlapping pair)"
    assert g["basis"][-1] == "HCCL group default_group (group_name_0) lists ranks [0, 1]"
    code, out = cli_json("cluster", "--db", str(db))
    (view,) = out["jobs"]
    assert view["grouping"] == g and [r["rank"] for r in view["ranks"]] == [0, 1]


def test_ranks_from_folder_names_only_are_a_guess(tmp_path: Path):
    job = tmp_path / "tp2"
    shutil.copytree(TP2, job, ignore=shutil.ignore_patterns("ground_truth.json"))
    for info in job.glob("rank*/profiler_info_*.json"):
        data = json.loads(info.read_text())
        data.pop("rank_id")
        (info.parent / "profiler_info.json").write_text(json.dumps(data))
        info.unlink()
    for meta in job.glob("rank*/profiler_metadata.json"):
        data = json.loads(meta.read_text())
        data.get("distributed_args", {}).pop("rank", None)
        meta.write_text(json.dumps(data))
    db = tmp_path / "guess.duckdb"
    _ingest(db, [job])
    ((names, g),) = _jobs(db).values()
    assert len(names) == 2 and g["multi_rank"] and g["guess"] is True
    assert g["basis"][0] == "rank ids from folder or file name (2 of 2 runs)"
    code, out = cli_json("cluster", "--db", str(db))
    assert out["jobs"][0]["grouping"]["guess"] is True
    assert "grouping: a GUESS (ranks from folder or file names)" in run_cli("cluster", "--db", str(db)).stdout
    with Store(str(db), read_only=True) as store:
        pm = build_postmortem(store, job_id=next(iter(_jobs(db))))
    assert pm.scope.endswith("— grouping is a guess: ranks from folder or file names")
    assert pm.contributing[0].text.startswith("Caveat: these runs were grouped as one job on weak evidence")


def test_corpus_job_is_the_same_whatever_the_ingest_order(corpus: Path, tmp_path: Path):
    """msinsight st/level2: 4 ranks, ingested all at once, in reverse order one by one, in two halves (the
    job id of the first half kept), and with 2 workers: the same job of 4 ranks each time."""
    ranks = [_level2_rank(corpus, r) for r in range(4)]
    at_once, reverse, halves, parallel = (tmp_path / f"{n}.duckdb" for n in ("once", "rev", "half", "par"))
    _ingest(at_once, [p for r in ranks for p in r])
    _ingest(reverse, *reversed(ranks))
    _ingest(parallel, [p for r in reversed(ranks) for p in r], jobs=2)
    _ingest(halves, ranks[0] + ranks[1])
    (first,) = _jobs(halves)
    _ingest(halves, ranks[2] + ranks[3])
    want = frozenset(f"rank_{r}_ascend_pt" for r in range(4))
    for db in (at_once, reverse, halves, parallel):
        ((names, g),) = _jobs(db).values()
        assert names == want and g["ranks"] == [0, 1, 2, 3] and g["multi_rank"] and not g["guess"], db.name
    assert list(_jobs(halves)) == [first]  # a group that only gains members keeps its job id
    code, out = cli_json("cluster", "--db", str(reverse))
    assert [f["category"] for f in out["jobs"][0]["findings"]] == ["imbalance"]


def test_hta_corpus_folder_is_no_job_and_no_slow_rank(corpus: Path, tmp_path: Path):
    """HTA's example traces (alexnet, NCCL, Triton …) share a folder; base code: 'Slow rank …: +5843.9%'."""
    db = tmp_path / "hta.duckdb"
    _ingest(db, [corpus / "cuda" / "hta"])
    jobs = _jobs(db)
    assert len(jobs) == 8 and all(len(names) == 1 and not g["multi_rank"] for names, g in jobs.values())
    code, out = cli_json("cluster", "--db", str(db))
    assert code == 0 and out["jobs"] == []


def test_sample_real_captures_are_two_jobs_and_no_run_id_is_a_rank(tmp_path: Path):
    """sample_traces/real: a msinsight rank 0 and an msprof-analyze trace without rank, in one folder.  Base
    code: 'failed step 1 on rank 0 (missing) … which ranks ['run 2'] have'."""
    db = tmp_path / "real.duckdb"
    _ingest(db, [SAMPLES / "real"])
    jobs = _jobs(db)
    assert sorted(len(n) for n, _ in jobs.values()) == [1, 1]
    with Store(str(db), read_only=True) as store:
        unranked = store.cursor().execute("SELECT run_id FROM runs WHERE rank IS NULL").fetchall()[0][0]
        pms = [build_postmortem(store, run_id) for run_id in (1, 2)]
        pms += [build_postmortem(store, job_id=j) for j in jobs]
    for pm in pms:
        assert pm.failed_steps == []
        texts = json.dumps([s.text for s in pm.what_happened + pm.impact] + [pm.to_json()["impact"]])
        assert f"'run {unranked}'" not in texts and "on rank None" not in texts
    job_pm = next(pm for pm in pms if pm.job_id is not None and "?" in pm.scope)
    assert any(f"run {unranked} (rank unknown)" in s.text for s in job_pm.what_happened)


# -- a rank captured alone that waited for its peers ----------------------------------------------------------


def _wait_findings(db: Path, run_id: int = 1) -> list:
    with Store(str(db), read_only=True) as store:
        return [f for f in device_findings(store, run_id) if " of its collective time " in f.title]


def test_rank_captured_alone_that_waited_gets_a_finding(corpus: Path, tmp_path: Path):
    db = tmp_path / "r0.duckdb"
    _ingest(db, _level2_rank(corpus, 0))
    (f,) = _wait_findings(db)  # base code: no finding
    assert f.category == "communication" and f.severity == "high" and f.impact_ns == 164_143_540
    assert f.title == ("Rank 0 waited 100% of its collective time (164.1 ms, 20.3% of its step time): the slow "
                       "party is another rank — capture ranks 1, 2, 3 too")  # fmt: skip
    ev = f.evidence
    assert (ev["wait_ns"], ev["transit_ns"], ev["own_time_ns"], ev["collectives"]) == (
        164_143_540,
        0,
        810_022_360,
        15,
    )
    assert ev["peers_captured"] is False and round(ev["wait_share_pct"], 2) == 20.26


def test_slow_rank_captured_alone_gets_no_wait_finding(corpus: Path, tmp_path: Path):
    """Rank 3 is on the slow pipeline stage: its ratio is 98% (transit ≈ 0) but it waited 0.8 ms of 810 ms."""
    db = tmp_path / "r3.duckdb"
    _ingest(db, _level2_rank(corpus, 3))
    assert _wait_findings(db) == []


def test_no_single_rank_wait_finding_when_the_peers_are_captured(corpus: Path, tmp_path: Path):
    db = tmp_path / "all.duckdb"
    _ingest(db, [p for r in range(4) for p in _level2_rank(corpus, r)])
    with Store(str(db), read_only=True) as store:
        rank0 = store.cursor().execute("SELECT run_id FROM runs WHERE rank = 0").fetchall()[0][0]
    assert _wait_findings(db, rank0) == []


def test_cluster_page_has_no_job_for_unrelated_captures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    db = tmp_path / "trap.duckdb"
    _ingest(db, [TRAP])
    at = open_page(monkeypatch, db, "app_pages/11_cluster.py", uploads=tmp_path / "uploads")
    assert at.info[0].value.startswith(
        "No multi-rank job: no stored runs that the data says are ranks of one job"
    )


def test_trap_rank_waits_for_uncaptured_peers(tmp_path: Path):
    db = tmp_path / "wait.duckdb"
    _ingest(db, [FIXTURES / "traps" / "rank_waits_for_uncaptured_peers"])
    (f,) = _wait_findings(db)  # base code: no finding at all (the run has no device data)
    assert f.title == ("Rank 0 waited 100% of its collective time (162.4 ms, 20.1% of its step time): the slow "
                       "party is another rank — capture ranks 1, 2, 3 too")  # fmt: skip
    assert (f.category, f.severity, f.impact_ns) == ("communication", "high", 162_425_040)
    assert (f.evidence["collectives"], f.evidence["transit_ns"], f.evidence["own_time_ns"]) == (
        4,
        0,
        810_022_360,  # computing + not overlapped + free
    )
    code, out = cli_json("findings", "--db", str(db), "--run", "1")
    assert [x["title"] for x in out["findings"]] == [f.title]


def test_a_job_that_gains_a_rank_keeps_its_id(tmp_path: Path):
    """The trap's folder, then a rank 1 of the Llama capture lands beside it: the Llama run's job gains it and keeps
    its id, though the new file first sits in its folder's job (the ResNet run's)."""
    folder = tmp_path / "captures"
    shutil.copytree(TRAP, folder)
    db = tmp_path / "gain.duckdb"
    _ingest(db, [folder])
    before = {next(iter(n)): j for j, (n, _) in _jobs(db).items()}
    trace = json.loads((folder / "llama_rank0.pt.trace.json").read_text())
    trace["traceName"] = "llama_rank1.pt.trace.json"
    (folder / "llama_rank1.pt.trace.json").write_text(json.dumps(trace))
    _ingest(db, [folder])
    after = _jobs(db)
    llama = after[before["llama_rank0.pt.trace.json"]]
    assert llama[0] == {"llama_rank0.pt.trace.json", "llama_rank1.pt.trace.json"}
    assert llama[1]["multi_rank"] and llama[1]["ranks"] == [0, 1] and llama[1]["guess"] is True
    assert after[before["resnet_rank0.pt.trace.json"]][0] == {"resnet_rank0.pt.trace.json"}
    assert after[before["bert_rank1.pt.trace.json"]][0] == {"bert_rank1.pt.trace.json"}


@pytest.mark.parametrize(
    ("field", "a", "b"),
    [
        ("profiler_level", "Level1", "Level2"),
        ("aic_metrics", "ACL_AICORE_NONE", "ACL_AICORE_PIPE_UTILIZATION"),
    ],
)
def test_compatible_fields_rule(field: str, a: str, b: str):
    """Every [compatible] field of rules/grouping.toml keeps two otherwise matching runs apart when it differs."""
    r = rules()
    assert field in r["compatible"]["fields"]
    lo, hi = 1_700_000_000_000_000_000, 1_700_000_001_000_000_000
    x = RunFacts(1, "a", None, "ascend", "", 0, "profiler_info", lo, hi, {field: a})
    y = RunFacts(2, "b", None, "ascend", "", 1, "profiler_info", lo, hi, {field: b})
    assert why_apart(x, y, r) == f"different {field.replace('_', ' ')} ({a} vs {b})"
    y.fields = {field: a}
    assert why_apart(x, y, r) is None


def test_min_epoch_rule_a_trace_without_absolute_time_has_no_window(tmp_path: Path):
    """An old Kineto trace counts µs from its own start (no baseTimeNanoseconds): no capture window, no peer."""
    folder = tmp_path / "relative"
    folder.mkdir()
    for name in ("llama_rank0.pt.trace.json", "bert_rank1.pt.trace.json"):
        trace = json.loads((TRAP / name).read_text())
        t0 = min(e["ts"] for e in trace["traceEvents"] if "ts" in e)
        for e in trace["traceEvents"]:
            if "ts" in e:
                e["ts"] -= t0  # both now start at 0: 'overlapping' by their numbers, unrelated in fact
        (folder / name).write_text(json.dumps(trace))
    db = tmp_path / "rel.duckdb"
    _ingest(db, [folder])
    jobs = _jobs(db)
    assert len(jobs) == 2
    assert {g["why_alone"] for _, g in jobs.values()} == {"no absolute capture time to match peers on"}


def test_wait_ratio_rule_a_rank_that_mostly_transferred_gets_no_wait_finding(tmp_path: Path):
    """[cluster] wait_ratio: the trap's rank with transit made 5× its wait (ratio 1/6 < 0.2) gets no finding."""
    db = tmp_path / "wait.duckdb"
    _ingest(db, [FIXTURES / "traps" / "rank_waits_for_uncaptured_peers"])
    with Store(str(db)) as store:
        store.cursor().execute("UPDATE comm_ops SET transit_ns = 5 * wait_ns")
    assert _wait_findings(db) == []
