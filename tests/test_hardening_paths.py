"""Paths reach DuckDB as literal files (#18): a folder or file name holding a glob character (``[ ] * ?``) or a
leading ``~`` must read that file only, never its neighbours (DuckDB's read_csv / read_json expand globs and
``~``). Each case builds its own names; the neighbour that a glob would match holds different content."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from diag.store import Store, file_literal
from tests.conftest import FIXTURES, REAL_AICPU_TRACE, REAL_LEVEL2, ingest_into, query

KINETO = FIXTURES / "kineto" / "ok_legacy_capitalised.json"
NCU = FIXTURES / "ncu_csv" / "ok_raw_wide.csv"


def _counts(db: Path) -> dict[str, int]:
    return dict(query(db, "SELECT 'device_tasks', count(*) FROM device_tasks UNION ALL "
                          "SELECT 'host_ops', count(*) FROM host_ops UNION ALL "
                          "SELECT 'kernel_metrics', count(*) FROM kernel_metrics"))  # fmt: skip


def _ingest(db: Path, *paths: Path) -> list:
    with Store(db) as store:
        return ingest_into(store, list(paths)).files


@pytest.fixture(scope="module")
def alone(tmp_path_factory) -> dict[str, dict[str, int]]:
    """The figures of each input ingested under a plain name."""
    out = {}
    for name, src in (("level2", REAL_LEVEL2), ("kineto", KINETO), ("ncu", NCU)):
        db = tmp_path_factory.mktemp(name) / "a.duckdb"
        assert {o.status for o in _ingest(db, src)} <= {"ok", "unchanged"}
        out[name] = _counts(db)
    return out


@pytest.mark.parametrize(("name", "neighbour"), [
    ("rank[0]_ascend_pt", "rank0_ascend_pt"),
    ("rank[01]_ascend_pt", "rank1_ascend_pt"),
    ("run*_ascend_pt", "run2_ascend_pt"),
    ("run?_ascend_pt", "runX_ascend_pt"),
])  # fmt: skip
def test_a_run_folder_with_a_glob_character_reads_only_itself(tmp_path, alone, name, neighbour):
    shutil.copytree(REAL_LEVEL2, tmp_path / name)
    other = tmp_path / neighbour / "ASCEND_PROFILER_OUTPUT"  # what the glob would also match: another run
    other.mkdir(parents=True)
    shutil.copy(REAL_AICPU_TRACE, other / "trace_view.json")
    for csv_name in ("kernel_details.csv", "step_trace_time.csv", "op_statistic.csv"):
        shutil.copy(REAL_LEVEL2 / "ASCEND_PROFILER_OUTPUT" / csv_name, other / csv_name)
    db = tmp_path / "g.duckdb"
    outcomes = _ingest(db, tmp_path / name)
    assert {o.status for o in outcomes} == {"ok"}
    assert _counts(db) == alone["level2"]
    (source,) = query(db, "SELECT DISTINCT source FROM runs")
    assert source[0].endswith(name)


@pytest.mark.parametrize("name", ["trace[1].json", "trace*.json", "trace?.json"])
def test_a_kineto_file_with_a_glob_character_reads_only_itself(tmp_path, alone, name):
    shutil.copy(KINETO, tmp_path / name)
    shutil.copy(FIXTURES / "kineto" / "truncated_epoch_ns.pt.trace.json", tmp_path / "trace1.json")
    db = tmp_path / "k.duckdb"
    (outcome,) = _ingest(db, tmp_path / name)
    assert outcome.status == "ok"
    assert _counts(db) == alone["kineto"]


def test_an_ncu_csv_with_brackets_reads_only_itself(tmp_path, alone):
    shutil.copy(NCU, tmp_path / "ncu[a].csv")
    shutil.copy(FIXTURES / "ncu_csv" / "ok_details_no_rules.csv", tmp_path / "ncua.csv")
    db = tmp_path / "n.duckdb"
    (outcome,) = _ingest(db, tmp_path / "ncu[a].csv")
    assert outcome.status == "ok"
    assert _counts(db) == alone["ncu"]


@pytest.mark.parametrize(("kind", "src", "other"), [
    ("kineto", KINETO, FIXTURES / "kineto" / "truncated_epoch_ns.pt.trace.json"),
    ("ncu", NCU, FIXTURES / "ncu_csv" / "ok_details_no_rules.csv"),
])  # fmt: skip
def test_a_relative_tilde_path_is_not_the_home_folder(tmp_path, alone, monkeypatch, kind, src, other):
    home, work = tmp_path / "home", tmp_path / "work"
    (home / "x").mkdir(parents=True)
    shutil.copy(other, home / "x" / src.name)
    (work / "~" / "x").mkdir(parents=True)
    shutil.copy(src, work / "~" / "x" / src.name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    db = tmp_path / "t.duckdb"
    (outcome,) = _ingest(db, Path("~") / "x" / src.name)
    assert outcome.status == "ok"
    assert _counts(db) == alone[kind]


@pytest.mark.parametrize(("path", "literal"), [
    ("/a/rank[0]/f.csv", "'/a/rank[[]0]/f.csv'"),
    ("/a/run*/f?.csv", "'/a/run[*]/f[?].csv'"),
    ("/a/it's.csv", "'/a/it''s.csv'"),
])  # fmt: skip
def test_file_literal(path, literal):
    assert file_literal(path) == literal
