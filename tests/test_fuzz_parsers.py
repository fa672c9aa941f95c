"""Fuzz every registered parser through the real Ingestor into a temp DuckDB.

Each case must end as stored (ok), stored partial with a message, or refused with a one-line message naming
the file (a ``DiagError``) — never another exception, a hang, or a half-stored file; the run stored before the
cases stays exactly as it was, and the database reopens.  Sizes come from the environment so that
bench/reliability.py runs the same tests at full size:

``DIAG_FUZZ_EXAMPLES`` (hypothesis examples per parser, 6 in CI), ``DIAG_FUZZ_HUGE_BYTES`` (the huge line /
value, 6 MB in CI: over the CSV reader's 4 MB line cap), ``DIAG_FUZZ_CASE_TIMEOUT_S`` (60).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import diag.ingest
from diag.ingest import Ingestor
from diag.schema import DATA_TABLES
from diag.store import Store, q
from parsers import PARSERS, detect_path
from tests.conftest import FIXTURES, ROOT
from tests.fuzz_inputs import TARGETED, Mutation, Seed, apply, default_seeds, mutations
from tests.reliability_checks import half_stored

EXAMPLES = int(os.environ.get("DIAG_FUZZ_EXAMPLES", "6"))
HUGE_BYTES = int(os.environ.get("DIAG_FUZZ_HUGE_BYTES", str(6 << 20)))
CASE_TIMEOUT_S = int(os.environ.get("DIAG_FUZZ_CASE_TIMEOUT_S", "60"))
FULL = (
    os.environ.get("DIAG_RELIABILITY_FULL") == "1"
)  # the slow tests, at the sizes bench/reliability.py uses
BASELINE = FIXTURES / "real" / "msinsight_test_rank_0"
SEEDS: dict[str, Seed] = default_seeds()
TALLY: Counter[str] = Counter()  # outcomes over every case run in this process (read by bench/reliability.py)
CRASHES: list[str] = []


class CaseTimeout(Exception):
    pass


@dataclass
class Verdict:
    status: str
    message: str | None
    problem: str | None  # None: an acceptable outcome
    seconds: float


def snapshot(con, run_ids: list[int]) -> list[tuple]:  # type: ignore[no-untyped-def]
    """Row counts of the given runs in every data table, and their ledger lines."""
    counts = " UNION ALL ".join(
        f"SELECT '{t}', count(*) FROM \"{t}\" WHERE list_contains($ids, run_id)" for t in DATA_TABLES
    )
    ledger = q(
        con,
        "SELECT file_id, relpath, sha256, status, rows FROM files WHERE list_contains($ids, run_id) "
        "ORDER BY file_id",
        {"ids": run_ids},
    )
    runs = q(
        con,
        "SELECT run_id, run_key, start_ns, end_ns FROM runs WHERE list_contains($ids, run_id)",
        {"ids": run_ids},
    )
    return sorted(q(con, counts, {"ids": run_ids})) + ledger + runs


@contextlib.contextmanager
def deadline(seconds: int, con) -> Iterator[list[bool]]:  # type: ignore[no-untyped-def]
    """Interrupt DuckDB after ``seconds`` and raise CaseTimeout in Python code after ``seconds + 5``."""
    fired = [False]

    def interrupt() -> None:
        fired[0] = True
        con.interrupt()

    def on_alarm(*_: object) -> None:
        fired[0] = True
        raise CaseTimeout(f"no outcome after {seconds} s")

    timer = threading.Timer(seconds, interrupt)
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds + 5)
    timer.start()
    try:
        yield fired
    finally:
        timer.cancel()
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def leaked_exceptions() -> Iterator[list[str]]:
    """Exceptions that reached the Ingestor's catch-all (anything but a DiagError out of a parser)."""
    seen: list[str] = []
    original = diag.ingest.one_line

    def spy(exc: BaseException, limit: int = 300) -> str:
        seen.append(f"{type(exc).__name__}: {original(exc)}")
        return original(exc, limit)

    diag.ingest.one_line = spy
    try:
        yield seen
    finally:
        diag.ingest.one_line = original


class FuzzEnv:
    """One temp database per parser: a baseline run stored first, then that parser's cases one by one."""

    def __init__(self, seed: Seed) -> None:
        self.seed = seed
        self.dir = Path(tempfile.mkdtemp(prefix=f"diag-fuzz-{seed.parser}-"))
        self.db = self.dir / "fuzz.duckdb"
        self.cases = 0
        self._open()
        summary = self.ingestor.ingest([BASELINE])
        assert summary.ok, [f.message for f in summary.files]
        self.baseline_runs = summary.run_ids
        self.baseline = snapshot(self.store.con, self.baseline_runs)

    def _open(self) -> None:
        self.store = Store(self.db)
        self.ingestor = Ingestor(self.store)

    def close(self) -> None:
        self.ingestor.close()
        self.store.close()

    def reopen(self) -> None:
        self.close()
        self._open()

    def remove(self) -> None:
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_case(self, data: bytes) -> Verdict:
        path = self.dir / "case" / self.seed.relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        started = time.perf_counter()
        status, message, problem = "crash", None, None
        with leaked_exceptions() as leaked, deadline(CASE_TIMEOUT_S, self.store.con) as fired:
            try:
                [out] = self.ingestor.ingest([path]).files
                status, message = out.status, out.message
            except BaseException as exc:  # noqa: BLE001 - anything escaping ingest is the finding
                problem = f"ingest raised {type(exc).__name__}: {exc}"
        seconds = time.perf_counter() - started
        if fired[0]:
            problem = f"hang: no outcome within {CASE_TIMEOUT_S} s"
        problem = problem or _judge(status, message, path, leaked)
        self.cases += 1
        if self.cases % 25 == 0:
            self.reopen()  # the database still opens
        broken = half_stored(self.store.con)
        if snapshot(self.store.con, self.baseline_runs) != self.baseline:
            broken.append("the baseline run changed")
        problem = problem or ("; ".join(broken) if broken else None)
        TALLY["tried"] += 1
        TALLY["crash" if problem else status] += 1
        if problem:
            CRASHES.append(f"{self.seed.parser}: {problem}")
        return Verdict(status, message, problem, seconds)


def _judge(status: str, message: str | None, path: Path, leaked: list[str]) -> str | None:
    if leaked:
        return f"{status} after an exception that is not a DiagError: {leaked[0]}"
    if status == "partial" and not message:
        return "partial without a message saying what was dropped"
    if status == "failed":
        if not message or "\n" in message:
            return f"refusal is not one line: {message!r}"
        if path.name not in message:
            return f"refusal does not name the file: {message!r}"
    return None


_ENVS: dict[str, FuzzEnv] = {}


def env_for(parser: str) -> FuzzEnv:
    if parser not in _ENVS:
        _ENVS[parser] = FuzzEnv(SEEDS[parser])
    return _ENVS[parser]


@pytest.fixture(scope="module", autouse=True)
def _cleanup() -> Iterator[None]:
    yield
    for env in _ENVS.values():
        env.remove()
    _ENVS.clear()
    if out := os.environ.get("DIAG_FUZZ_TALLY"):  # bench/reliability.py reads the figures from here
        Path(out).write_text(json.dumps({"tally": TALLY, "crashes": CRASHES}), encoding="utf-8")


def check(parser: str, mutation: Mutation) -> Verdict:
    seed = SEEDS[parser]
    data = apply(seed, seed.path.read_bytes(), mutation, HUGE_BYTES)
    verdict = env_for(parser).run_case(data)
    assert verdict.problem is None, f"{parser} {mutation!r}: {verdict.problem}"
    return verdict


# -- tests ---------------------------------------------------------------------------------------------------
def test_a_seed_for_every_registered_parser() -> None:
    """A parser added to the registry needs a seed in tests/fuzz_inputs.py (one only the corpus has may lack it)."""
    from tests.fuzz_inputs import ANALYSIS_DB

    missing = {p.name for p in PARSERS} - set(SEEDS)
    assert missing <= ({"ascend_analysis_db"} if not ANALYSIS_DB.is_file() else set()), missing
    for name, seed in SEEDS.items():
        found = detect_path(seed.path)
        assert found is not None and found.name == name, (name, seed.path)


@pytest.mark.parametrize("parser", sorted(SEEDS))
def test_seed_itself_is_stored(parser: str) -> None:
    verdict = check(parser, ("truncate", 1.0))
    expected = {"failed"} if parser == "nsight_report" else {"ok", "partial"}  # binary reports: refused
    assert verdict.status in expected, verdict


@pytest.mark.parametrize("parser", sorted(SEEDS))
def test_targeted_damage(parser: str) -> None:
    """The damage named in the issue, each once: one outcome each, none a crash."""
    seed = SEEDS[parser]
    problems = []
    for mutation in TARGETED:
        if mutation[0] == "columns" and seed.kind != "csv":
            continue
        data = apply(seed, seed.path.read_bytes(), mutation, HUGE_BYTES)
        verdict = env_for(parser).run_case(data)
        if verdict.problem:
            problems.append(f"{mutation[:2]!r}: {verdict.problem}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("parser", sorted(SEEDS))
@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("DIAG_FUZZ_RANDOM") != "1",  # CI: the same cases every time
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
@given(data=st.data())
def test_random_damage(parser: str, data) -> None:  # type: ignore[no-untyped-def]
    mutation = data.draw(mutations(SEEDS[parser], huge=False), label="mutation")
    check(parser, mutation)


def ingest_peak_rss(paths: list[Path], db: Path) -> tuple[dict, int]:
    """``diag ingest --json`` in a child process: its JSON and its peak RSS in bytes."""
    code = (
        "import json, resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
        "print(json.dumps([p.stdout, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024]))"
    )
    cmd = [sys.executable, "-m", "diag.cli", "ingest", *map(str, paths), "--db", str(db), "--json"]
    out = subprocess.run(
        [sys.executable, "-c", code, *cmd], capture_output=True, text=True, cwd=ROOT, timeout=900
    )
    stdout, rss = json.loads(out.stdout)
    return json.loads(stdout), rss


def huge_inputs(folder: Path, n: int) -> list[Path]:
    """A kernel_details.csv with an ``n``-byte line and a trace_view.json with an ``n``-byte value."""
    out = []
    for parser, mutation in (
        ("ascend_kernel_details", ("huge_line", 0.5)),
        ("ascend_trace_view", ("huge_value", 0.5)),
    ):
        seed = SEEDS[parser]
        path = folder / seed.relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(apply(seed, seed.path.read_bytes(), mutation, n))
        out.append(path)
    return out


def check_bounded_memory(tmp_path: Path, n: int, limit: int) -> int:
    payload, rss = ingest_peak_rss(huge_inputs(tmp_path / "in", n), tmp_path / "huge.duckdb")
    statuses = {f["status"] for f in payload["files"]}
    assert statuses <= {"ok", "partial", "failed"} and all(
        "\n" not in (f["message"] or "") for f in payload["files"]
    )
    assert rss < limit, f"peak RSS {rss >> 20} MB for {n >> 20} MB single lines"
    return rss


def test_huge_single_lines_take_bounded_memory(tmp_path: Path) -> None:
    check_bounded_memory(tmp_path, 24 << 20, 700 << 20)


@pytest.mark.slow
@pytest.mark.skipif(not FULL, reason="full size: DIAG_RELIABILITY_FULL=1 (bench/reliability.py)")
def test_huge_single_lines_take_bounded_memory_full_size(tmp_path: Path) -> None:
    check_bounded_memory(tmp_path, 512 << 20, 1200 << 20)
