"""`diag ingest --jobs N`: several runs at once give exactly what one at a time gives."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from sample_traces.generate import generate
from tests.conftest import FIXTURES, SAMPLES, cli_json, query

# What a reader of the store sees of each run: identity, placement and the figures analyses use.
SNAPSHOT = """
SELECT r.run_id, r.job_id, r.name, r.platform, r.rank, r.device, j.name AS job, r.start_ns, r.end_ns,
       (SELECT count(*) FROM device_tasks d WHERE d.run_id = r.run_id) AS tasks,
       (SELECT coalesce(sum(dur_ns), 0) FROM device_tasks d WHERE d.run_id = r.run_id) AS task_ns,
       (SELECT count(*) FROM kernels k WHERE k.run_id = r.run_id) AS kernels,
       (SELECT count(*) FROM host_ops h WHERE h.run_id = r.run_id) AS host_ops,
       (SELECT count(*) FROM step_trace s WHERE s.run_id = r.run_id) AS step_rows,
       (SELECT count(*) FROM files f WHERE f.run_id = r.run_id AND f.status <> 'failed') AS files
FROM runs r LEFT JOIN jobs j USING (job_id)
ORDER BY ALL
"""


@pytest.fixture(scope="module")
def four_rank_job(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("job4")
    truth = generate(out / "tp4_job", ranks=4, steps=3, layers=2, seed=7)
    return out / "tp4_job", truth


def _inputs(job: Path, tmp: Path) -> list[str]:
    bad = tmp / "bad_rank_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    bad.mkdir(parents=True)
    shutil.copy(FIXTURES / "ascend_trace_view" / "bad_binary.json", bad / "trace_view.json")
    failing = tmp / "failing" / "failing_rank_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    failing.mkdir(parents=True)  # recognised as kernel_details by its header, refused: no Duration column
    (failing / "kernel_details.csv").write_text("Name,Type,Start Time(us)\nMatMul,MatMul,1.000\n")
    return [str(job), str(SAMPLES / "real"), str(bad.parent), str(failing.parent)]


def test_jobs_2_stores_what_jobs_1_stores(tmp_path, four_rank_job):
    job, truth = four_rank_job
    inputs = _inputs(job, tmp_path)
    rc1, serial = cli_json("ingest", *inputs, "--db", str(tmp_path / "serial.duckdb"))
    rc2, parallel = cli_json("ingest", *inputs, "--db", str(tmp_path / "parallel.duckdb"), "--jobs", "2")
    assert rc1 == rc2 == 1  # the binary "trace" fails in both
    # outcomes come back in input order whatever order the workers finished in
    assert [(f["path"], f["status"], f["rows"]) for f in serial["files"]] == [
        (f["path"], f["status"], f["rows"]) for f in parallel["files"]
    ]
    assert serial["summary"]["rows"] == parallel["summary"]["rows"]
    a = query(tmp_path / "serial.duckdb", SNAPSHOT)
    b = query(tmp_path / "parallel.duckdb", SNAPSHOT)
    assert a == b
    ranks = [row for row in b if row[6] == "tp4_job"]
    assert [r[4] for r in ranks] == [0, 1, 2, 3]  # numbered in input order, as a serial ingest numbers them
    for row in ranks:
        rank_truth = truth["ranks"][str(row[4])]
        assert row[9] == rank_truth["trace"]["device_tasks"]
        assert row[11] == rank_truth["kernel_details"]["rows"]
    # the folder whose only file is recognised but fails: its run id was reserved, no run row ever made
    assert not [r for r in b if r[2] == "failing_rank_ascend_pt"]
    failed = query(
        tmp_path / "parallel.duckdb", "SELECT run_id, status FROM files WHERE source LIKE '%failing_rank%'"
    )
    assert failed == [(None, "failed")]
    import duckdb

    from tests.reliability_checks import half_stored

    with duckdb.connect(str(tmp_path / "parallel.duckdb"), read_only=True) as con:
        assert half_stored(con) == []  # no run without a stored file, no row without its file
    # a job exists only where a run was stored: the failed folder's job was created up front, then dropped
    jobs = query(tmp_path / "parallel.duckdb", "SELECT name FROM jobs ORDER BY name")
    assert jobs == query(tmp_path / "serial.duckdb", "SELECT name FROM jobs ORDER BY name")
    orphan = query(
        tmp_path / "parallel.duckdb",
        "SELECT count(*) FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM runs r WHERE r.job_id = j.job_id)",
    )
    assert orphan == [(0,)]


def test_jobs_2_is_idempotent(tmp_path, four_rank_job):
    job, _ = four_rank_job
    db = tmp_path / "p.duckdb"
    rc, first = cli_json("ingest", str(job), "--db", str(db), "-j", "2")
    assert rc == 0 and first["summary"]["ok"] == len(first["files"]) - first["summary"]["skipped"]
    before = query(db, SNAPSHOT)
    rc, again = cli_json("ingest", str(job), "--db", str(db), "-j", "0")
    assert rc == 0
    assert {f["status"] for f in again["files"]} <= {"unchanged", "skipped"}
    assert query(db, SNAPSHOT) == before
    assert query(db, "SELECT count(*) FROM jobs") == [(1,)]


def test_serving_results_ingested_at_once_get_distinct_ids(tmp_path):
    fixtures = FIXTURES / "serving"
    for i, name in enumerate(
        ("ok_vllm_newest_crlf.txt", "ok_sglang_h100.txt", "ok_vllm_sweep_ascend_910b3.txt")
    ):
        (tmp_path / f"bench{i}").mkdir()
        shutil.copy(fixtures / name, tmp_path / f"bench{i}" / name)
    db = tmp_path / "s.duckdb"
    rc, out = cli_json("ingest", *(str(tmp_path / f"bench{i}") for i in range(3)), "--db", str(db), "-j", "2")
    assert rc == 0
    ids = query(db, "SELECT serving_id FROM serving_runs ORDER BY serving_id")
    assert len(ids) == out["summary"]["rows"]["serving_runs"] and len({i for (i,) in ids}) == len(ids)


def test_an_older_database_continues_serving_ids_after_its_highest(tmp_path):
    import duckdb

    from diag.store import Store

    db = tmp_path / "old.duckdb"
    Store(db).close()
    with duckdb.connect(str(db)) as con:  # as an older diag left it: ids by max()+1, no sequence
        con.execute("INSERT INTO serving_runs (run_id, file_id, serving_id) VALUES (0, 0, 7)").fetchall()
        con.execute("DROP SEQUENCE seq_serving").fetchall()
    with Store(db) as store:
        assert store.con.execute("SELECT nextval('seq_serving')").fetchall() == [(8,)]


def test_workers_cutting_same_named_traces_keep_their_own_parts(tmp_path, four_rank_job, monkeypatch):
    """Every rank's trace is 'trace_view.json': cut into parts by two workers at once, each rank keeps its own."""
    import threading

    import parsers._json_split as js
    import parsers.ascend_trace_view as tv
    from diag.ingest import Ingestor
    from diag.store import Store

    job, truth = four_rank_job
    monkeypatch.setattr(js, "MIN_PART_BYTES", 1 << 16)  # the generated traces are a few MB: cut them too
    folders: dict[int, set[Path]] = {}

    def recorded(path: Path, parts: int, tmp: Path) -> list[Path]:
        folders.setdefault(threading.get_ident(), set()).add(tmp)
        return js.split_array(path, parts, tmp)

    monkeypatch.setattr(tv, "split_array", recorded)
    snaps = []
    for jobs in (1, 2):
        db = tmp_path / f"j{jobs}.duckdb"
        with Store(db) as store:
            ing = Ingestor(store)
            setting = "SELECT current_setting('memory_limit')"
            try:
                before = store.con.execute(setting).fetchall()
                summary = ing.run(*ing.collect([job]), jobs=jobs)
                after = store.con.execute(setting).fetchall()
            finally:
                ing.close()
        assert summary.ok
        assert after == before  # the parallel run's larger limit is given back
        snaps.append(query(db, SNAPSHOT))
    assert snaps[0] == snaps[1]
    workers = [dirs for ident, dirs in folders.items() if ident != threading.get_ident()]
    assert len(workers) == 2 and all(len(d) == 1 for d in workers)  # one folder per worker…
    assert workers[0] != workers[1]  # …of its own
    assert [r[9] for r in snaps[1]] == [truth["ranks"][str(r)]["trace"]["device_tasks"] for r in range(4)]
