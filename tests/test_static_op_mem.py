"""static_op_mem.csv (graph mode, issue #19): the parser, the ``static_graph`` figures of ``diag memory`` and its
text line.  The fixture is written from the CANN profiling doc's header (tests/fixtures/static_op_mem/README.md);
figures are checked against an independent reading with the csv module."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from diag.analyses.memory import memory_summary
from diag.cli import main
from diag.store import Store
from tests.conftest import FIXTURES, ingest_into

OK = FIXTURES / "static_op_mem" / "ok"
OK_CSV = OK / "ASCEND_PROFILER_OUTPUT" / "static_op_mem.csv"
BAD_CSV = FIXTURES / "static_op_mem" / "bad" / "static_op_mem.csv"
KB = 1024


def _csv_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _bytes(row: dict[str, str]) -> int:
    return round(float(row["Size(KB)"]) * KB)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def ingested(tmp_path: Path) -> Path:
    db = tmp_path / "static.duckdb"
    with Store(db) as store:
        ingest_into(store, [OK])
    return db


def test_fixture_parses_with_exact_rows_and_bytes(ingested: Path) -> None:
    rows = _csv_rows(OK_CSV)
    with Store(ingested, read_only=True) as store:
        stored = (
            store.cursor()
            .execute(
                "SELECT device, op_name, model_name, graph_id, node_index_start, node_index_end, size_bytes "
                "FROM static_op_memory ORDER BY rowid"
            )
            .fetchall()
        )
    assert len(stored) == len(rows) == 8
    assert sum(r[6] for r in stored) == sum(_bytes(r) for r in rows) == 3_491_889_664
    assert stored[0] == ("0", "model.layers.0.self_attn/MatMulV2", "0", "1", 3, 9, 524288 * KB)
    assert stored[1][6] == 134_218_240  # 131072.5 KB: the fraction kept, KB × 1024
    assert stored[2][5] is None  # 4294967295: held to the graph's end
    assert stored[6][1:4] == ("TOTAL", "0", "1") and stored[6][4:6] == (None, None)


def test_bad_header_is_one_line_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "ingest", "--db", str(tmp_path / "bad.duckdb"), str(BAD_CSV))
    assert code == 1
    errors = [line for line in (out + err).splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: {BAD_CSV}: missing required column(s) Size(KB); header is: Device_id,Op Name,Model Name,"
        "Graph ID,Node Index Start,Node Index End"
    ]
    assert "Traceback" not in out + err


def test_memory_json_static_graph_exact_total(ingested: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _csv_rows(OK_CSV)
    totals = sum(_bytes(r) for r in rows if r["Op Name"] == "TOTAL")
    ops = [r for r in rows if r["Op Name"] != "TOTAL"]
    code, out, _ = _cli(capsys, "memory", "--db", str(ingested), "--json")
    assert code == 0
    g = json.loads(out)["static_graph"]
    assert (g["total_bytes"], g["total_from"]) == (totals, "TOTAL rows") == (1_476_460_544, "TOTAL rows")
    assert (g["ops_bytes"], g["op_count"], g["graph_count"]) == (sum(_bytes(r) for r in ops), 6, 2)
    largest = max(ops, key=_bytes)
    assert g["ops"][0] == {"name": largest["Op Name"], "bytes": _bytes(largest), "graph_id": "1"}
    assert [o["bytes"] for o in g["ops"]] == sorted((_bytes(r) for r in ops), reverse=True)


def test_memory_text_line(ingested: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _cli(capsys, "memory", "--db", str(ingested))
    assert code == 0 and err == ""
    assert (
        "Static graph memory (graph mode): 1.4 GiB over 6 ops (largest: model.layers.0.mlp/MatMulV2 1.0 GiB)"
        in out.splitlines()
    )
    assert "no memory records" not in out and "None" not in out


def test_without_total_rows_the_ops_sum_is_the_total(tmp_path: Path) -> None:
    folder = tmp_path / "ASCEND_PROFILER_OUTPUT"
    folder.mkdir()
    lines = OK_CSV.read_text(encoding="utf-8").splitlines()
    (folder / "static_op_mem.csv").write_text(
        "\n".join(x for x in lines if ",TOTAL," not in x) + "\n", encoding="utf-8"
    )
    with Store(tmp_path / "ops.duckdb") as store:
        ingest_into(store, [tmp_path])
        g = memory_summary(store)["static_graph"]
    ops = [r for r in _csv_rows(OK_CSV) if r["Op Name"] != "TOTAL"]
    assert (g["total_bytes"], g["total_from"]) == (sum(_bytes(r) for r in ops), "sum of ops")
    assert g["total_bytes"] == 2_015_429_120


def test_a_run_without_static_op_mem_has_none(tmp_path: Path) -> None:
    with Store(tmp_path / "none.duckdb") as store:
        store.cursor().execute("INSERT INTO runs (run_id, run_key, platform) VALUES (3, 'k', 'ascend')")
        assert memory_summary(store, 3)["static_graph"] is None


def test_text_graph_id_and_npu_device_as_mindstudio_insight_writes_them(tmp_path: Path) -> None:
    """MindStudio Insight's own parser test writes Graph ID as text, Device_id as NPU:0 and node indices on TOTAL."""
    folder = tmp_path / "ASCEND_PROFILER_OUTPUT"
    folder.mkdir()
    (folder / "static_op_mem.csv").write_text(
        "Device_id,Op Name,Model Name,Graph ID,Node Index Start,Node Index End,Size(KB)\n"
        "NPU:0,TOTAL,model,parsed-graph,0,5,4096\n"
        "NPU:0,Add,model,parsed-graph,1,4,1024\n",
        encoding="utf-8",
    )
    with Store(tmp_path / "msi.duckdb") as store:
        ingest_into(store, [tmp_path])
        g = memory_summary(store)["static_graph"]
    assert (g["total_bytes"], g["op_count"], g["graph_count"]) == (4096 * KB, 1, 1)
    assert g["ops"] == [{"name": "Add", "bytes": 1024 * KB, "graph_id": "parsed-graph"}]
