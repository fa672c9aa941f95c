"""torch_npu db export (ascend_pytorch_profiler_*.db, analysis.db) against the text export, over the real corpus.

The corpus's db and text exports of levels 0/1/2 are the same model and step (ProfilerStep#50) captured
separately (their timestamps differ by minutes), so counts must be equal and times close; the st/level2
folders hold analysis.db *and* the text files of one and the same capture, so there the figures must agree
to 0.1%.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from diag.analyses.stall_breakdown import breakdown
from diag.store import Store
from tests.conftest import ingest_into, query

pytestmark = pytest.mark.corpus
PT = ("msinsight", "test", "data", "pytorch")
LEVELS = (0, 1, 2)


def ingest(db: Path, *paths: Path) -> dict[str, dict]:
    with Store(db) as store:
        summary = ingest_into(store, paths)
    return {f.source: f.to_json() for f in summary.files}


def _root(corpus: Path) -> Path:
    return corpus.joinpath("ascend", *PT)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Path:
    corpus = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"
    if not (corpus / "ascend").is_dir():
        pytest.skip("../shared/corpus is not present")
    root = _root(corpus)
    db = tmp_path_factory.mktemp("db") / "both.duckdb"
    files = ingest(
        db, *(root / kind / f"level{n}" / "rank0_ascend_pt" for kind in ("text", "db") for n in LEVELS)
    )
    assert all(f["status"] == "ok" for f in files.values()), files
    return db


def _run(db: Path, kind: str, level: int) -> int:
    rows = query(
        db, "SELECT run_id FROM runs WHERE source LIKE ?", [f"%/{kind}/level{level}/rank0_ascend_pt"]
    )
    assert len(rows) == 1
    return rows[0][0]


FIGURES = """
    SELECT (SELECT count(*) FROM kernels WHERE run_id = $r),
           (SELECT count(*) FROM kernels WHERE run_id = $r AND task_kind = 'COMMUNICATION'),
           (SELECT count(*) FROM kernels WHERE run_id = $r AND task_kind = 'AI_CPU'),
           (SELECT count(*) FROM device_tasks WHERE run_id = $r AND stream NOT LIKE 'Plane%'),
           (SELECT count(*) FROM device_tasks WHERE run_id = $r AND task_kind = 'AI_CPU'),
           (SELECT count(*) FROM device_tasks WHERE run_id = $r AND task_kind = 'MEMCPY'),
           (SELECT count(*) FROM device_tasks WHERE run_id = $r AND task_kind IN ('COMM_TASK', 'COMMUNICATION')
              AND stream NOT LIKE 'Plane%'),
           (SELECT sum(dur_ns) FROM kernels WHERE run_id = $r AND coalesce(task_kind, '') <> 'COMMUNICATION'),
           (SELECT computing_ns FROM step_trace WHERE run_id = $r)"""


@pytest.mark.parametrize("level", LEVELS)
def test_db_figures_equal_the_text_export(both: Path, level: int):
    text = query(both, FIGURES.replace("$r", str(_run(both, "text", level))))[0]
    db = query(both, FIGURES.replace("$r", str(_run(both, "db", level))))[0]
    # kernels, comm ops, AI_CPU kernels, device tasks (the trace's HCCL Plane lanes repeat the comm tasks
    # already on their streams), AI_CPU tasks, memcpy tasks, communication tasks: equal
    assert text[:7] == db[:7]
    assert db[:7] == (191, 4, 0, 537 if level == 0 else 539, 0, 24, 300)
    # total device compute time: each export equals its own exporter's Computing to 0.1% ...
    for figures in (text, db):
        assert abs(figures[7] - figures[8]) <= 0.001 * figures[8]
    # ... and the two captures of the same step differ by less than 0.5% (measured: 0.19%, 0.34%, 0.37%)
    assert abs(db[7] - text[7]) <= 0.005 * text[7]


def test_db_breakdown_matches_its_analysis_db(both: Path):
    with Store(both, read_only=True) as store:
        for level in LEVELS:
            result = breakdown(store, _run(both, "db", level))
            rows = [r for s in result.steps for r in s.ours_vs_export() if r["export_ns"]]
            assert rows and all(abs(r["diff_pct"]) < 0.1 for r in rows if r["metric"] != "Preparing"), rows


def test_mix_and_hccl_container_tasks_are_not_counted(both: Path):
    run = _run(both, "db", 1)
    kinds = dict(
        query(both, "SELECT task_kind, count(*) FROM device_tasks WHERE run_id = ? GROUP BY 1", [run])
    )
    assert kinds["MIX_AIV"] == 13 and kinds["AI_VECTOR_CORE"] == 149 and kinds["AI_CORE"] == 23
    # the FFTS+ containers of the 4 allreduce ops (88 ms of 'AI_CORE' on the comm stream) are left out
    assert (
        query(both, "SELECT max(dur_ns) FROM device_tasks WHERE run_id = ? AND task_kind = 'AI_CORE'", [run])[
            0
        ][0]
        < 1_000_000
    )


def test_strings_shapes_pmu_and_steps(both: Path):
    run = _run(both, "db", 1)
    row = query(
        both,
        "SELECT name, op_type, accelerator_core, input_shapes, input_dtypes, block_dim, step, wait_ns FROM kernels "
        "WHERE run_id = ? ORDER BY start_ns LIMIT 1",
        [run],
    )[0]
    assert row == ("trans_TransData_0", "TransData", "AI_VECTOR_CORE", "32,3,224,224", "FLOAT", 32, 50, 0)
    names = query(both, "SELECT names FROM pmu_columns WHERE run_id = ?", [run])[0][0]
    assert "aicore_time(us)" in names and "aic_mac_ratio" in names
    conv = query(
        both,
        "SELECT m.value, k.dur_ns FROM kernel_pmu m JOIN kernels k USING (file_id, name, start_ns) "
        "WHERE m.run_id = ? AND m.name = 'Conv2D1' AND m.metric = 'aicore_time(us)'",
        [run],
    )[0]
    assert 0 < conv[0] * 1000 <= conv[1]  # µs of core time within the kernel's ns


def test_host_side(both: Path):
    run = _run(both, "db", 1)
    cats = dict(query(both, "SELECT category, count(*) FROM host_ops WHERE run_id = ? GROUP BY 1", [run]))
    assert cats == {"cpu_op": 860, "python_function": 1282, "enqueue": 159, "dequeue": 159, "cann_api": 710}
    flows = dict(
        query(
            both,
            "SELECT l.flow_cat, count(*) FROM links l JOIN device_tasks d ON d.run_id = l.run_id "
            "AND d.start_ns = l.dst_ts_ns WHERE l.run_id = ? GROUP BY 1",
            [run],
        )
    )
    assert flows["async_npu"] > 200 and flows["HostToDevice"] > 200
    steps = query(both, "SELECT step, end_ns - start_ns FROM steps WHERE run_id = ?", [run])
    assert steps[0][0] == 50 and steps[0][1] > 0
    mem = dict(query(both, "SELECT source, count(*) FROM memory WHERE run_id = ? GROUP BY 1", [run]))
    assert mem["memory_record"] == 990 + 14 and mem["npu_module_mem"] == 1078
    info = query(both, "SELECT device_name, rank, device, metadata FROM runs WHERE run_id = ?", [run])[0]
    assert info[:3] == ("Ascend910B", 0, 0) and "ENV_VARIABLES" in json.loads(info[3])


def test_analysis_db_equals_the_text_files_of_the_same_capture(corpus: Path, tmp_path: Path):
    """st/level2: analysis.db beside step_trace_time.csv and communication.json of the same run."""
    for rank_dir in sorted(
        (corpus / "ascend" / "msinsight" / "test" / "st" / "level2").glob("rank_*_ascend_pt")
    ):
        alone = tmp_path / "db_only" / rank_dir.name / "ASCEND_PROFILER_OUTPUT"
        alone.mkdir(parents=True)
        shutil.copy(rank_dir / "ASCEND_PROFILER_OUTPUT" / "analysis.db", alone)
        db = tmp_path / f"{rank_dir.name}.duckdb"
        ingest(db, alone.parent, rank_dir)
        sides = {}
        for name, where in (("db", "%db_only%"), ("text", f"%{rank_dir}")):
            run = query(db, "SELECT run_id FROM runs WHERE source LIKE ?", [where])[0][0]
            sides[name] = query(
                db,
                """SELECT (SELECT list([computing_ns, comm_not_overlapped_ns, free_ns, stage_ns, preparing_ns]
                                       ORDER BY step) FROM step_trace WHERE run_id = $r),
                          (SELECT count(*) FROM comm_ops WHERE run_id = $r),
                          (SELECT sum(elapse_ns) FROM comm_ops WHERE run_id = $r),
                          (SELECT sum(wait_ns) FROM comm_ops WHERE run_id = $r),
                          (SELECT count(*) FROM comm_matrix WHERE run_id = $r),
                          (SELECT sum(size_bytes) FROM comm_bandwidth WHERE run_id = $r)""".replace(
                    "$r", str(run)
                ),
            )[0]
        text, dbf = sides["text"], sides["db"]
        assert dbf[1:] == pytest.approx(text[1:], rel=1e-3), rank_dir.name
        for a, b in zip(dbf[0], text[0], strict=True):
            assert a == pytest.approx(b, rel=1e-3, abs=200), rank_dir.name


def test_text_and_db_of_one_run_are_not_counted_twice(corpus: Path, tmp_path: Path, db: Path):
    run_dir = tmp_path / "rank0_ascend_pt"
    shutil.copytree(_root(corpus) / "text" / "level1" / "rank0_ascend_pt", run_dir)
    for f in (_root(corpus) / "db" / "level1" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT").iterdir():
        shutil.copy(f, run_dir / "ASCEND_PROFILER_OUTPUT")
    files = ingest(db, run_dir)
    dbs = {Path(p).name: f for p, f in files.items() if p.endswith(".db")}
    assert set(dbs) == {"analysis.db", "ascend_pytorch_profiler_0.db"}
    for f in dbs.values():
        assert f["status"] == "ok" and f["rows"] == {} and "text export of the same run" in f["message"]
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]
    assert query(db, "SELECT count(*) FROM device_tasks WHERE source = 'db'") == [(0,)]
    assert query(db, "SELECT count(*) FROM step_trace") == [(1,)]


def test_db_ingest_is_idempotent(corpus: Path, db: Path):
    root = _root(corpus) / "db"
    first = ingest(db, root)
    assert {f["status"] for f in first.values()} == {"ok"}
    again = ingest(db, root)
    assert {f["status"] for f in again.values()} == {"unchanged"}
