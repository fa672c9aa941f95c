"""``diag sql`` is read-only as documented (#18): the store's own tables and views are all readable; no file is
read or written outside it, no extension installed or loaded, no setting turned back on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, cli_json, run_cli


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sql") / "s.duckdb"
    code, _ = cli_json("ingest", str(FIXTURES / "kineto" / "ok_legacy_capitalised.json"), "--db", str(path))
    assert code == 0
    return path


@pytest.mark.parametrize("escape", [
    "COPY runs TO '{out}/x.csv'",
    "EXPORT DATABASE '{out}/dump'",
    "SELECT * FROM read_text('/etc/passwd')",
    "SELECT * FROM read_csv('/etc/hostname')",
    "SELECT * FROM read_blob('/etc/hostname')",
    "SELECT * FROM glob('/*')",
    "SELECT * FROM sniff_csv('/etc/hostname')",
    "ATTACH '{out}/other.duckdb' AS o",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "RESET lock_configuration",
])  # fmt: skip
def test_sql_cannot_reach_the_machine(db, tmp_path, escape):
    proc = run_cli("sql", escape.format(out=tmp_path), "--db", str(db))
    code, out, err = proc.returncode, proc.stdout, proc.stderr
    assert code == 1 and out.strip() == ""
    assert err.startswith("diag: error: query "), err
    assert len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_every_table_and_view_of_the_store_stays_readable(db):
    code, listed = cli_json(
        "sql", "SELECT table_name FROM information_schema.tables ORDER BY 1", "--db", str(db)
    )
    assert code == 0
    names = [r["table_name"] for r in listed["rows"]]
    assert {"runs", "files", "device_tasks", "host_ops", "log_records"} <= set(names)
    union = " UNION ALL ".join(f"SELECT '{n}' AS t, count(*) AS n FROM \"{n}\"" for n in names)
    code, counted = cli_json("sql", union, "--db", str(db), "--limit", "1000")
    assert code == 0 and len(counted["rows"]) == len(names)
    assert {r["t"]: r["n"] for r in counted["rows"]}["device_tasks"] == 3
