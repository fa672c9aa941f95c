"""msprof (CANN command-line profiler) PROF_* folders, msprof_*.db, and MindSpore *_ascend_ms folders.

No real public msprof CLI output exists (../shared/corpus/ascend/PROVENANCE.md: the MindStudio-Insight test
folder for it holds 0-byte placeholders), so the fixtures under tests/fixtures/msprof/ are written by hand
from the documented format, ../shared/formats/ascend_profiler.md:

* ``PROF_*/mindstudio_profiler_output/*.csv`` — headers from §d "CSV headers" (op_summary with the newest
  ``Block Num``/``Mix Block Num`` and the §c base order, trailing TAB after timestamps per §0.2,
  doubly-quoted shapes per §0.3, ``N/A`` per §0.4); ``msprof_*.json`` — §b (bare array, processes by
  ``process_name``, ``Physic Stream Id``, the newest memcpy args ``size(B)``/``operation``, the
  ``Communication`` process name of current msprof);
* ``msprof_db.sql`` — the §a.11 table/column lists (newest ``blockNum``/``mixBlockNum``,
  ``COMMUNICATION_OP.deviceId``, ``RANK_DEVICE_MAP`` rank −1), loaded into ``msprof_*.db`` by the tests;
* ``mindspore/*_ascend_ms`` — §a: MindSpore's folder differs from torch_npu's only by its suffix (the notes
  show no other difference), torch_npu-shaped content.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from diag.discover import run_root_of
from diag.store import Store
from tests.conftest import FIXTURES, ingest_into, query

MSPROF = FIXTURES / "msprof"
PROF = MSPROF / "PROF_000001_20250110120000123_ABCDEFGHIJKLMNOP"
BASE = 1736400000000000000  # the fixtures' epoch ns origin


def ingest(db: Path, *paths: Path) -> dict[str, dict]:
    with Store(db) as store:
        summary = ingest_into(store, paths)
    return {Path(f.source).name: f.to_json() for f in summary.files}


def _db_folder(tmp: Path, name: str = "PROF_000002_20250110130000456_QRSTUVWXYZABCDEF") -> Path:
    prof = tmp / name
    prof.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(prof / "msprof_20250110130005.db")
    con.executescript((MSPROF / "msprof_db.sql").read_text())
    con.commit()
    con.close()
    return prof


def test_a_prof_folder_is_one_run(db: Path):
    files = ingest(db, PROF)
    parsers = {n: f["parser"] for n, f in files.items() if f["status"] == "ok"}
    assert parsers == {
        "op_summary_20250110120005.csv": "ascend_kernel_details",
        "op_statistic_20250110120005.csv": "ascend_op_statistic",
        "api_statistic_20250110120005.csv": "ascend_api_statistic",
        "task_time_20250110120005.csv": "msprof_task_time",
        "communication_statistic_20250110120005.csv": "msprof_communication_statistic",
        "step_trace_20250110120005.csv": "msprof_step_trace",
        "msprof_20250110120005.json": "ascend_trace_view",
    }
    # raw collection data and info files are not exports
    assert {n for n, f in files.items() if f["status"] == "skipped"} == {
        "ts_track.data.0.slice_0",
        "info.json.0",
        "info.json",
    }
    assert query(db, "SELECT name FROM runs") == [(PROF.name,)]
    assert len({f["run_id"] for f in files.values() if f["status"] == "ok"}) == 1
    # the timeline holds task_time's tasks: stored once
    assert "not stored" in files["task_time_20250110120005.csv"]["message"]


def test_prof_figures(db: Path):
    ingest(db, PROF)
    kernels = query(
        db,
        "SELECT name, accelerator_core, task_kind, start_ns - ?, dur_ns, wait_ns, block_dim, input_shapes "
        "FROM kernels ORDER BY start_ns",
        [BASE],
    )
    assert kernels[0] == (
        "aclnnMm_MatMulV3Common_MatMulV3",
        "AI_CORE",
        "AI_CORE",
        100000,
        50120,
        0,
        24,
        "4096,4096;4096,4096",
    )
    assert [k[2] for k in kernels] == ["AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "COMMUNICATION"]
    kinds = dict(query(db, "SELECT kind, count(*) FROM tasks GROUP BY 1"))
    assert kinds == {
        "AI_CORE": 1,
        "AI_VECTOR_CORE": 1,
        "AI_CPU": 1,
        "MEMCPY": 1,
        "SYNC": 1,
        "COMMUNICATION": 1,
    }
    assert query(
        db, "SELECT memcpy_bytes, memcpy_direction FROM device_tasks WHERE task_kind = 'MEMCPY'"
    ) == [(4096, "host to device")]
    stats = query(db, "SELECT op_type, core_type, total_ns FROM op_stats ORDER BY total_ns DESC")
    assert stats[0] == ("hcom_allReduce_", "COMMUNICATION", 300000) and len(stats) == 4
    assert query(db, "SELECT step, start_ns - ?, end_ns - ? FROM steps", [BASE, BASE]) == [(1, 50000, 800000)]
    assert query(db, "SELECT count(*) FROM api_stats") == [(3,)]


def test_task_time_is_the_device_timeline_without_msprof_json(tmp_path: Path, db: Path):
    prof = tmp_path / PROF.name
    shutil.copytree(PROF, prof)
    next((prof / "mindstudio_profiler_output").glob("msprof_*.json")).unlink()
    files = ingest(db, prof)
    assert files["task_time_20250110120005.csv"]["rows"] == {"device_tasks": 5}
    rows = query(db, "SELECT source, name, task_kind, stream FROM device_tasks ORDER BY start_ns")
    assert {r[0] for r in rows} == {"task_time"}  # op_summary's stand-ins gave way
    assert [r[2] for r in rows] == ["AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "MEMCPY", "SYNC"]
    assert rows[3][1] == "MEMCPY_ASYNC" and rows[0][3] == "Stream 2"


def test_msprof_db(tmp_path: Path, db: Path):
    prof = _db_folder(tmp_path)
    files = ingest(db, prof)
    assert files["msprof_20250110130005.db"]["status"] == "ok", files
    assert files["msprof_20250110130005.db"]["parser"] == "ascend_profiler_db"
    tasks = query(
        db, "SELECT task_kind, name, start_ns - ?, dur_ns FROM device_tasks ORDER BY start_ns, name", [BASE]
    )
    # the MIX kernel's FFTS+ parent and the allreduce's container task are left out
    assert [t[0] for t in tasks] == ["AI_CORE", "MIX_AIV", "AI_CPU", "MEMCPY", "COMMUNICATION", "COMM_TASK"]
    assert tasks[4][1:] == ("hcom_allReduce__123_0_1", 400000, 300000)
    assert tasks[5][1] == "Notify_Wait"
    kernels = query(
        db,
        "SELECT name, task_kind, block_dim, mix_block_dim, input_shapes, wait_ns FROM kernels ORDER BY start_ns",
    )
    assert kernels[1] == (
        "aclnnRmsNorm_RmsNormAiCore_RmsNorm",
        "MIX_AIV",
        20,
        40,
        "4096,4096;4096,4096",
        10380,
    )
    assert [k[1] for k in kernels] == ["AI_CORE", "MIX_AIV", "AI_CPU", "COMMUNICATION"]
    pmu = dict(query(db, "SELECT metric, value FROM kernel_pmu WHERE name LIKE 'aclnnMm%'"))
    assert pmu == {"aic_mac_ratio": 0.91, "aicore_time(us)": 48.2}
    assert query(
        db, "SELECT memcpy_bytes, memcpy_direction FROM device_tasks WHERE task_kind = 'MEMCPY'"
    ) == [(4096, "host to device")]
    assert query(db, "SELECT name, pid, tid, api_level FROM host_ops") == [
        ("Node@launch", 7001, 7001, "node")
    ]
    assert query(db, "SELECT flow_cat, dst_ts_ns - ? FROM links", [BASE]) == [("HostToDevice", 100000)]
    assert query(db, "SELECT device_name, rank, device FROM runs") == [("Ascend910B", None, 0)]


def test_msprof_db_beside_the_text_summaries_is_not_counted_twice(tmp_path: Path, db: Path):
    prof = tmp_path / PROF.name
    shutil.copytree(PROF, prof)
    _db_folder(tmp_path, PROF.name)
    files = ingest(db, prof)
    assert files["msprof_20250110130005.db"]["rows"] == {}
    assert "msprof_20250110120005.json" in files["msprof_20250110130005.db"]["message"]
    assert query(db, "SELECT count(*) FROM kernels") == [(4,)]
    assert query(db, "SELECT count(*) FROM runs") == [(1,)]


def test_prof_inside_a_torch_npu_run_belongs_to_that_run(tmp_path: Path):
    f = tmp_path / "rank0_ascend_pt" / PROF.name / "device_0" / "data" / "x.data"
    assert run_root_of(f, stop=None) == tmp_path / "rank0_ascend_pt"
    g = tmp_path / PROF.name / "mindstudio_profiler_output" / "op_summary_1.csv"
    assert run_root_of(g, stop=None) == tmp_path / PROF.name


def test_mindspore_ascend_ms_folder(db: Path):
    files = ingest(db, MSPROF / "mindspore")
    assert {f["status"] for f in files.values()} == {"ok"}
    assert query(db, "SELECT name, rank, profiler_level FROM runs") == [
        ("rank0_4321_20250110120000000_ascend_ms", 0, "Level1")
    ]
    assert query(db, "SELECT count(*) FILTER (WHERE task_kind = 'AI_CPU'), count(*) FROM kernels") == [(1, 2)]
    assert query(db, "SELECT computing_ns, preparing_ns FROM step_trace") == [(130000, 10000)]


def test_block_num_wins_over_a_reused_block_dim(tmp_path: Path, db: Path):
    """The newest schema has both: blockNum (the old blockDim's meaning) and blockDim re-used for SIMT kernels
    (formats/ascend_profiler.md, surprises #1).  The db and the CSV read blockNum."""
    prof = _db_folder(tmp_path)
    con = sqlite3.connect(next(prof.glob("msprof_*.db")))
    con.executescript(
        "ALTER TABLE COMPUTE_TASK_INFO ADD COLUMN blockDim INTEGER; ALTER TABLE COMPUTE_TASK_INFO ADD COLUMN "
        "mixBlockDim INTEGER; UPDATE COMPUTE_TASK_INFO SET blockDim = 999, mixBlockDim = 998;"
    )
    con.commit()
    con.close()
    csv_dir = tmp_path / "PROF_000003_20250110140000789_GHIJKLMNOPQRSTUV" / "mindstudio_profiler_output"
    csv_dir.mkdir(parents=True)
    src = next((PROF / "mindstudio_profiler_output").glob("op_summary_*.csv"))
    lines = src.read_text(encoding="utf-8").splitlines()
    lines = [lines[0] + ",Block Dim,Mix Block Dim"] + [line + ",999,998" for line in lines[1:]]
    (csv_dir / src.name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    files = ingest(db, prof, csv_dir.parent)
    assert {f["status"] for f in files.values()} == {"ok"}, files
    dims = query(db, "SELECT DISTINCT block_dim, mix_block_dim FROM kernels WHERE block_dim IS NOT NULL")
    assert dims and not {999, 998} & {v for row in dims for v in row}, dims
    assert (20, 40) in dims  # the RmsNorm MIX kernel, as in the fixtures without blockDim
