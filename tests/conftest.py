from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT.parent / "shared" / "corpus"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLES = ROOT / "sample_traces"
REAL_LEVEL2 = SAMPLES / "real" / "msinsight_level2_rank0_ascend_pt"
REAL_AICPU_TRACE = SAMPLES / "real" / "mstt_timeline_advice" / "trace_view.json"


def ingest_into(store, paths, jobs: int = 1, **ingestor_options):  # noqa: ANN001, ANN201
    """Ingest ``paths`` in-process into the open ``store`` (with ``jobs`` workers); the Ingestor is closed after.

    Returns the IngestSummary."""
    from diag.ingest import Ingestor

    ingestor = Ingestor(store, **ingestor_options)
    try:
        return ingestor.run(*ingestor.collect(list(paths)), jobs=jobs)
    finally:
        ingestor.close()


@pytest.fixture(autouse=True)
def _english_unless_a_test_asks(monkeypatch: pytest.MonkeyPatch):
    """Every test reads diag in English whatever the machine's locale (LANG=zh_CN.UTF-8 would make it Chinese,
    diag.i18n), and no test's language choice leaks into the next: a test that wants Chinese sets it itself."""
    from diag import i18n

    monkeypatch.setenv("DIAG_LANG", "en")
    i18n.set_language(None)
    yield
    i18n.set_language(None)


@pytest.fixture
def corpus() -> Path:
    if not (CORPUS / "ascend").is_dir():
        pytest.skip("../shared/corpus is not present (a user's clone has none)")
    return CORPUS


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "test.duckdb"


def run_cli(*args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "diag.cli", *args], capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"diag {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def cli_json(*args: str) -> tuple[int, dict]:
    proc = run_cli(*args, "--json")
    return proc.returncode, json.loads(proc.stdout)


def query(db: Path, sql: str, params: list | None = None) -> list[tuple]:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def open_page(monkeypatch, db: Path, page: str | None = None, uploads: Path | None = None):  # noqa: ANN001, ANN201
    """The app (an AppTest) on database ``db``, switched to ``page`` (``app_pages/NN_name.py``) when given; fails
    on an exception drawn by the page."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("DIAG_DB", str(db))
    if uploads is not None:
        monkeypatch.setenv("DIAG_UPLOAD_DIR", str(uploads))
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=60)
    at.run()
    if page is not None:
        at.switch_page(page).run()
    assert not at.exception, at.exception
    return at
