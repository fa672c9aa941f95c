"""What an ingest holds in memory (issue #25): the libraries it imports, and DuckDB's limit for each file."""

from __future__ import annotations

import subprocess
import sys

import duckdb
import pytest

from diag.errors import BadInputError
from diag.store import Store, fitted_memory_limit, ingest_memory_limit
from tests.conftest import FIXTURES, ROOT, ingest_into, query

KINETO = FIXTURES / "traps" / "unrelated_captures_one_folder" / "llama_rank0.pt.trace.json"
LOG = FIXTURES / "traps" / "code_first_timeout" / "console.log"
HEAVY = ("numpy", "parsers.cann_log", "polars", "pyarrow")


def test_a_kineto_ingest_imports_no_polars_pyarrow_or_numpy():
    """The registry defers the log parser, whose reading needs Polars, PyArrow and NumPy (~60 MB of RSS): a trace
    another parser claims never loads it; a log loads the parser's module, and the libraries when it is read
    (``tests/test_cli.py`` checks that a log ingest imports them)."""
    code = (
        "import sys; from pathlib import Path; import diag.ingest, parsers; "
        f"loaded = lambda: [m for m in {HEAVY!r} if m in sys.modules]; "
        f"print(parsers.detect_path(Path({str(KINETO)!r})).name, loaded()); "
        f"print(parsers.detect_path(Path({str(LOG)!r})).name, loaded())"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert run.stdout.splitlines() == [
        "kineto_trace []",
        "cann_log ['parsers.cann_log']",
    ], run.stderr


def test_the_deferred_log_parser_answers_as_the_parser():
    import parsers
    from parsers import cann_log

    deferred = parsers.PARSER_BY_NAME["cann_log"]
    assert (deferred.name, deferred.version, deferred.platform) == (
        "cann_log",
        cann_log.PARSER.version,
        "ascend",
    )
    assert deferred.creates_run is False  # what the ingest's run grouping asks of it


@pytest.mark.parametrize(
    ("size", "limit"),
    [
        (0, "100000000B"),  # the floor
        (160_000_000, "100000000B"),
        (250_149_710, "100059884B"),  # the bench's Kineto trace
        (399_000_000, "159600000B"),
        (400_000_000, "160MB"),  # from 400 MB on: the whole limit, as before
        (1_100_410_444, "160MB"),
    ],
)
def test_fitted_memory_limit(size, limit, monkeypatch):
    monkeypatch.delenv("DIAG_INGEST_MEMORY_LIMIT", raising=False)
    assert fitted_memory_limit(size) == limit


def test_an_explicit_ingest_limit_is_not_fitted(monkeypatch):
    monkeypatch.setenv("DIAG_INGEST_MEMORY_LIMIT", "1GB")
    assert fitted_memory_limit(10) == "1GB"


def _setting(limit: str) -> str:
    with duckdb.connect() as con:
        con.execute(f"SET memory_limit='{limit}'")
        return con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]


def _recording(monkeypatch, fail_while: set[str] | None = None) -> list[str]:
    """Record DuckDB's limit each time the Kineto parser runs; fail with DuckDB's out-of-memory text while the
    limit is one of ``fail_while``."""
    from parsers.kineto_trace import KinetoTraceParser

    seen: list[str] = []
    parse = KinetoTraceParser.parse

    def recorded(self, ctx):  # noqa: ANN001, ANN202
        limit = ctx.con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        seen.append(limit)
        if fail_while and limit in fail_while:
            raise BadInputError(
                ctx.display, "cannot read the trace events: Out of Memory Error: failed to allocate"
            )
        return parse(self, ctx)

    monkeypatch.setattr(KinetoTraceParser, "parse", recorded)
    return seen


def test_each_file_is_parsed_under_its_fitted_limit_and_the_limit_is_given_back(tmp_path, monkeypatch):
    monkeypatch.delenv("DIAG_INGEST_MEMORY_LIMIT", raising=False)
    seen = _recording(monkeypatch)
    after: list[str] = []
    with Store(tmp_path / "d.duckdb") as store:
        setting = "SELECT current_setting('memory_limit')"
        summary = ingest_into(
            store, [KINETO], on_file_done=lambda _o: after.append(store.con.execute(setting).fetchall()[0][0])
        )
    assert [f.status for f in summary.files] == ["ok"]
    assert seen == [_setting("100000000B")]  # a file of 0.2 MB: the floor
    assert after == [_setting(ingest_memory_limit())]  # the next file starts from the whole limit


def test_out_of_memory_at_the_fitted_limit_retries_at_the_whole_limit(tmp_path, monkeypatch):
    monkeypatch.delenv("DIAG_INGEST_MEMORY_LIMIT", raising=False)
    seen = _recording(monkeypatch, fail_while={_setting("100000000B")})
    db = tmp_path / "d.duckdb"
    with Store(db) as store:
        summary = ingest_into(store, [KINETO])
    assert [f.status for f in summary.files] == ["ok"]
    assert seen == [_setting("100000000B"), _setting(ingest_memory_limit())]
    # the first try was rolled back whole: one run, one ledger line, its rows once (a Kineto trace's run is
    # keyed by its digest, not reserved ahead, so the retry draws the next run id: a gap, nothing else)
    assert query(db, "SELECT count(*) FROM runs")[0][0] == 1
    assert query(db, "SELECT status, rows FROM files") == [("ok", sum(summary.files[0].rows.values()))]
    assert query(db, "SELECT count(*) FROM device_tasks")[0][0] == summary.files[0].rows["device_tasks"] > 0


def test_out_of_memory_at_the_whole_limit_fails_once(tmp_path, monkeypatch):
    monkeypatch.delenv("DIAG_INGEST_MEMORY_LIMIT", raising=False)
    seen = _recording(monkeypatch, fail_while={_setting("100000000B"), _setting(ingest_memory_limit())})
    with Store(tmp_path / "d.duckdb") as store:
        summary = ingest_into(store, [KINETO])
    assert [f.status for f in summary.files] == ["failed"]
    assert len(seen) == 2  # the fitted try and one at the whole limit, no more
    assert "Out of Memory Error" in summary.files[0].message


def test_a_parser_that_does_not_fit_memory_gets_the_whole_limit(tmp_path, monkeypatch):
    """Only parsers measured to read through spillable tables (``fits_memory``) get a fitted limit: a 0.9 MB
    Ascend profiler .db needs more than 64 MB, whatever its size."""
    from parsers.cann_log import CannLogParser

    monkeypatch.delenv("DIAG_INGEST_MEMORY_LIMIT", raising=False)
    seen: list[str] = []
    parse = CannLogParser.parse

    def recorded(self, ctx):  # noqa: ANN001, ANN202
        seen.append(ctx.con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
        return parse(self, ctx)

    monkeypatch.setattr(CannLogParser, "parse", recorded)
    with Store(tmp_path / "d.duckdb") as store:
        summary = ingest_into(store, [LOG])
    assert [f.status for f in summary.files] == ["ok"]
    assert seen == [_setting(ingest_memory_limit())]
