"""Every torch_npu export in ../shared/corpus/ascend ingests, with figures checked against the source files.

The expected figures come from tests/oracle.py, which reads the files with the standard library only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import cli_json, query
from tests.oracle import csv_rows, kernel_figures, load_trace, trace_counts

pytestmark = pytest.mark.corpus

# Files in the corpus that diag does not read yet, each for a stated reason (later issues).
EXPECTED_SKIPS = {
    "PROVENANCE.md": "documentation",
    "cluster_step_trace_time.csv": "msprof-analyze cluster output (issue 7)",
    "cluster_communication.json": "msprof-analyze cluster output (issue 7)",
    "cluster_communication_matrix.json": "msprof-analyze cluster output (issue 7)",
    "communication_group.json": "msprof-analyze cluster output (issue 7)",
}


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    corpus = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "ascend"
    if not corpus.is_dir():
        pytest.skip("../shared/corpus is not present")
    db = tmp_path_factory.mktemp("corpus") / "corpus.duckdb"
    code, payload = cli_json("ingest", str(corpus), "--db", str(db))
    return db, {"code": code, "payload": payload, "corpus": corpus}


def _file_id(db: Path, source_suffix: str) -> int:
    rows = query(
        db, "SELECT file_id FROM files WHERE source LIKE ? AND status <> 'failed'", [f"%{source_suffix}"]
    )
    assert len(rows) == 1, (source_suffix, rows)
    return rows[0][0]


def test_every_file_ingests_or_is_skipped_for_a_stated_reason(ingested):
    db, info = ingested
    files = info["payload"]["files"]
    assert info["code"] == 0
    statuses = {f["path"]: f["status"] for f in files}
    assert not [p for p, s in statuses.items() if s == "failed"]
    skipped = {Path(p).name for p, s in statuses.items() if s == "skipped"}
    assert skipped == set(EXPECTED_SKIPS)
    partial = [f for f in files if f["status"] == "partial"]
    # The only partial file: a real upstream test fixture whose line 17 lost a field.
    assert [Path(f["path"]).parent.parent.name for f in partial] == ["test_rank_0"]
    assert (
        "line 17" in partial[0]["message"]
        and "Expected Number of Columns: 32 Found: 31" in partial[0]["message"]
    )
    assert info["payload"]["summary"]["ok"] == 108  # 98 text files + 10 db files (tests/test_ascend_db.py)


def _traces(corpus: Path) -> list[Path]:
    return sorted(corpus.rglob("trace_view.json"))


def test_trace_view_rows_equal_independent_counts(ingested):
    db, info = ingested
    traces = _traces(info["corpus"])
    assert len(traces) == 5
    for trace in traces:
        expected = trace_counts(load_trace(trace))
        fid = _file_id(db, str(trace.relative_to(info["corpus"])))
        for table in ("device_tasks", "host_ops", "overlap_slices", "links", "counters", "steps"):
            got = query(db, f"SELECT count(*) FROM {table} WHERE file_id = ?", [fid])[0][0]
            assert got == expected[table], (trace, table, got, expected[table])
        ai_cpu = query(
            db, "SELECT count(*) FROM device_tasks WHERE file_id = ? AND task_kind = 'AI_CPU'", [fid]
        )[0][0]
        assert ai_cpu == expected["ai_cpu"], trace


def test_mstt_trace_has_its_two_ai_cpu_tasks(ingested):
    db, _ = ingested
    names = query(
        db,
        "SELECT name FROM device_tasks d JOIN files f USING (file_id) "
        "WHERE f.source LIKE '%timeline_advice/trace_view.json' AND d.task_kind = 'AI_CPU' ORDER BY name",
    )
    assert [n[0] for n in names] == ["aclnnCast_CastAiCpu_Cast", "aclnnReduceSum_CastAiCpu_Cast"]


def test_level2_trace_figures(ingested):
    db, _ = ingested
    rows = query(
        db,
        """SELECT count(*) FILTER (WHERE task_kind = 'MEMCPY'), sum(memcpy_bytes),
                  count(*) FILTER (WHERE task_type = 'PCIE_DMA_SQE'),
                  count(*) FILTER (WHERE task_kind = 'COMMUNICATION' AND stream LIKE 'Group%')
           FROM device_tasks d JOIN files f USING (file_id)
           WHERE f.source LIKE '%text/level2/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json'""",
    )
    memcpy, memcpy_bytes, pcie, collectives = rows[0]
    assert (memcpy, pcie) == (24, 14)
    assert memcpy_bytes > 0
    assert collectives > 0


def test_kernel_details_figures(ingested):
    db, info = ingested
    files = sorted(info["corpus"].rglob("kernel_details.csv")) + [
        info["corpus"] / "mstt/profiler/msprof_analyze/test/resource/test.csv"
    ]
    assert len(files) == 8
    for path in files:
        expected = kernel_figures(path)
        fid = _file_id(db, str(path.relative_to(info["corpus"])))
        n, ai_cpu, dur, first = query(
            db,
            "SELECT count(*), count(*) FILTER (WHERE task_kind = 'AI_CPU'), sum(dur_ns), min(start_ns) "
            "FROM kernels WHERE file_id = ?",
            [fid],
        )[0]
        assert (n, ai_cpu, dur) == (expected["rows"], expected["ai_cpu"], expected["dur_ns"]), path
        assert first <= expected["first_start_ns"]


def test_exact_nanoseconds_from_tab_suffixed_timestamps(ingested):
    db, _ = ingested
    # level0 kernel_details first row: "1736405443881410.320\t" and duration 50.621 µs
    rows = query(
        db,
        "SELECT start_ns, dur_ns FROM kernels k JOIN files f USING (file_id) "
        "WHERE f.source LIKE '%text/level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv' "
        "AND name = 'trans_TransData_0'",
    )
    assert rows == [(1736405443881410320, 50621)]


@pytest.mark.parametrize(
    ("name", "table"),
    [
        ("operator_details.csv", "op_details"),
        ("memory_record.csv", "memory"),
        ("npu_module_mem.csv", "memory"),
        ("operator_memory.csv", "op_memory"),
        ("op_statistic.csv", "op_stats"),
        ("api_statistic.csv", "api_stats"),
        ("l2_cache.csv", "l2_cache"),
        ("step_trace_time.csv", "step_trace"),
    ],
)
def test_csv_rows_equal_source_rows(ingested, name, table):
    db, info = ingested
    files = sorted(info["corpus"].rglob(name))
    assert files
    for path in files:
        _, rows = csv_rows(path)
        fid = _file_id(db, str(path.relative_to(info["corpus"])))
        got = query(db, f"SELECT count(*) FROM {table} WHERE file_id = ?", [fid])[0][0]
        assert got == len(rows), path


def test_step_counts_and_breakdown(ingested):
    db, _ = ingested
    rows = query(
        db,
        """SELECT r.name, s.step, s.computing_ns, s.free_ns, s.preparing_ns FROM step_trace s JOIN runs r USING (run_id)
           JOIN files f USING (file_id) WHERE f.source LIKE '%text/level1/rank0_ascend_pt/%'""",
    )
    # step_trace_time.csv: 50,8873.756000000001,101963.203,...,25744.050000000003,...,17902.5
    assert rows == [("rank0_ascend_pt", 50, 8873756, 25744050, 17902500)]
    steps = query(
        db,
        "SELECT step, end_ns - start_ns FROM steps s JOIN files f USING (file_id) "
        "WHERE f.source LIKE '%text/level1/rank0_ascend_pt/%'",
    )
    assert len(steps) == 1 and steps[0][0] == 50 and steps[0][1] > 0


def test_communication_json_ops(ingested):
    import json

    db, info = ingested
    for path in sorted(info["corpus"].rglob("communication.json")):
        data = json.loads(path.read_text())
        expected = sum(
            1
            for kinds in data.values()
            for kind in ("collective", "p2p")
            for op in (kinds.get(kind) or {})
            if op != "Total Op Info"
        )
        fid = _file_id(db, str(path.relative_to(info["corpus"])))
        assert query(db, "SELECT count(*) FROM comm_ops WHERE file_id = ?", [fid])[0][0] == expected, path


def test_run_metadata(ingested):
    db, _ = ingested
    rows = query(
        db,
        "SELECT name, rank, device, profiler_level, aic_metrics, torch_npu_version, cann_version FROM runs "
        "WHERE source LIKE '%st/level2/rank_0_ascend_pt'",
    )
    assert rows == [("rank_0_ascend_pt", 0, 0, "Level2", "ACL_AICORE_PIPE_UTILIZATION", "2.7.1", "8.3.RC1")]
    level1 = query(db, "SELECT rank, device FROM runs WHERE source LIKE '%text/level1/rank1_ascend_pt'")
    assert level1 == [(1, 1)]


def test_job_parallel_groups_merge_every_ranks_metadata(ingested):
    """Each rank's profiler_metadata.json lists only its own groups; the job holds all of them."""
    import json

    db, info = ingested
    (groups,) = query(db, "SELECT parallel_groups FROM jobs WHERE source LIKE '%st/level2'")[0]
    groups = json.loads(groups)
    expected: dict[str, list[int]] = {}
    for rank in range(4):
        meta = (
            info["corpus"] / "msinsight/test/st/level2" / f"rank_{rank}_ascend_pt" / "profiler_metadata.json"
        )
        for key, g in json.loads(meta.read_text())["parallel_group_info"].items():
            expected[key] = g["global_ranks"]
    assert {k: g["global_ranks"] for k, g in groups.items()} == expected
    assert len(groups) == 14 and groups["group_name_0"]["global_ranks"] == [0, 1, 2, 3]


def test_ingest_twice_is_idempotent(ingested):
    db, info = ingested
    before = {
        t: query(db, f"SELECT count(*) FROM {t}")[0][0]
        for t in ("device_tasks", "host_ops", "kernels", "runs")
    }
    code, payload = cli_json("ingest", str(info["corpus"]), "--db", str(db))
    assert code == 0
    assert payload["summary"]["unchanged"] == 109 and payload["summary"]["ok"] == 0
    after = {t: query(db, f"SELECT count(*) FROM {t}")[0][0] for t in before}
    assert after == before
