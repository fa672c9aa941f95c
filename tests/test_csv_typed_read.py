"""kernel_details.csv: the strict read types the number columns; the values stored are those of the text read."""

from __future__ import annotations

from pathlib import Path

import pytest

from diag.store import Store
from parsers import _csv_table
from tests.conftest import ingest_into

HEADER = (
    "Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
    "Wait Time(us),Block Dim,Mix Block Dim,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,"
    "Output Shapes,Output Data Types,Output Formats,Context ID,aic_mac_ratio,aiv_vec_ratio\n"
)
ROWS = (
    '11,4294967295,300,3,IndexPut,IndexPut,dynamic,AI_CPU,1736933600984291.455\t,162.183,0,1,0,NO,"""16,1""",'
    "DOUBLE,FORMAT_ND,N/A,DOUBLE,FORMAT_ND,N/A,N/A,0.25\n"
    '11,18446744073709551615,301,2,MatMul,MatMul,static,AI_CORE,1736933600984500.001,2e-02,N/A,24,N/A,NO,"""4,8""",'
    "FLOAT16,FORMAT_ND,N/A,FLOAT16,FORMAT_ND,N/A,0.5,N/A\n"
)
# (step, model_id, hw_task_id, stream_id, task_kind, start_ns, dur_ns, wait_ns, block_dim, mix_block_dim,
#  input_shapes, pmu_values) as the all-text read stores them
EXPECTED = [
    (11, None, 300, 3, "AI_CPU", 1736933600984291455, 162183, 0, 1, 0, "16,1", [None, 0.25]),
    (11, None, 301, 2, "AI_CORE", 1736933600984500001, 20, None, 24, None, "4,8", [0.5, None]),
]
COLUMNS = (
    "step, model_id, hw_task_id, stream_id, task_kind, start_ns, dur_ns, wait_ns, block_dim, mix_block_dim, "
    "input_shapes, pmu_values"
)


def _ingest(tmp_path: Path, body: str) -> tuple[Store, object]:
    path = tmp_path / "PROF" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    path.parent.mkdir(parents=True)
    path.write_text(HEADER + body, encoding="utf-8")
    store = Store(tmp_path / "k.duckdb")
    return store, ingest_into(store, [path])


def _rows(store: Store) -> list[tuple]:
    return store.con.execute(f"SELECT {COLUMNS} FROM kernels ORDER BY start_ns").fetchall()


def test_typed_strict_read_stores_the_text_reads_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources: list[str] = []
    typed_source = _csv_table.typed_source
    monkeypatch.setattr(
        _csv_table, "typed_source", lambda s, t: sources.append(typed_source(s, t)) or sources[-1]
    )
    store, summary = _ingest(tmp_path, ROWS)
    assert _rows(store) == EXPECTED
    assert [f.status for f in summary.files] == ["ok"]
    # one strict read, typed: integers as HUGEINT (UINT64_MAX reads, then is NULL), PMU columns as DOUBLE
    assert len(sources) == 1
    for typed in ("'Model ID': 'HUGEINT'", "'Block Dim': 'HUGEINT'", "'aic_mac_ratio': 'DOUBLE'"):
        assert typed in sources[0]
    assert "'Duration(us)': 'VARCHAR'" in sources[0] and "nullstr=['N/A', '']" in sources[0]


def test_text_in_a_number_column_is_read_again_as_text_with_the_same_result(tmp_path: Path) -> None:
    odd = ROWS.replace(",24,N/A,NO,", ",twenty,N/A,NO,")  # Block Dim holding text: the typed read fails
    store, summary = _ingest(tmp_path, odd)
    expected = [EXPECTED[0], EXPECTED[1][:8] + (None,) + EXPECTED[1][9:]]
    assert _rows(store) == expected
    assert [(f.status, f.message) for f in summary.files] == [("ok", None)]


def test_stand_in_device_tasks_are_the_kernel_rows(tmp_path: Path) -> None:
    store, _ = _ingest(tmp_path, ROWS)
    tasks = store.con.execute(
        "SELECT source, stream, stream_id, task_kind, task_type, name, op_type, start_ns, dur_ns, step, hw_task_id "
        "FROM device_tasks ORDER BY start_ns"
    ).fetchall()
    assert tasks == [
        (
            "kernel_details",
            "Stream 3",
            3,
            "AI_CPU",
            "AI_CPU",
            "IndexPut",
            "IndexPut",
            1736933600984291455,
            162183,
            11,
            300,
        ),
        (
            "kernel_details",
            "Stream 2",
            2,
            "AI_CORE",
            "AI_CORE",
            "MatMul",
            "MatMul",
            1736933600984500001,
            20,
            11,
            301,
        ),
    ]
