"""The fast log path stores the same rows as the path it replaced (issue #25), on every log fixture, the wild
logs, the corpus logs and generated edge cases (encodings, CR / NUL / BOM, long lines, glued progress bars).

Two checks:

* the lines of the fast path (Polars' split of the whole text) equal those of the reference path (``split_lines``, the Python
  split kept callable for this) in every block of every file; all that follows the split is the same code, so
  every column — rules, codes and figures included — follows;
* a digest of the columns the grammar decides (not the rule-data ones: codes, figures, level, rule columns)
  equals the digest taken from the code before the change (``fixtures/log_speed_digests.json``, written by
  ``python tests/test_log_speed_equivalence.py --write`` on commit 4e333b0): a sixth of the files here, every
  file with ``--check`` (~50 s).
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import polars as pl
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from diag.errors import BadInputError  # noqa: E402
from diag.store import Store  # noqa: E402
from parsers import cann_log  # noqa: E402
from parsers._base import ParseContext, Probe  # noqa: E402
from parsers._log_grammar import split_lines  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CORPUS = ROOT.parent / "shared" / "corpus"
DIGESTS = FIXTURES / "log_speed_digests.json"
GRAMMAR_COLUMNS = (
    "record_no, line_no, line_count, ts_ns, module, pid, tid, process_name, device_id, rank, source_loc, "
    "origin, message, raw"
)
_PLOG = "[ERROR] RUNTIME(4242,python3):2025-06-25-10:45:23.123.456 [stream.cc:812]4243 SubmitTask:"


def edge_cases() -> dict[str, bytes]:
    """Small inputs for what the byte handling must keep: encodings, line ends, NULs, caps, glued lines."""
    plog = "\n".join(f"{_PLOG}task {i} failed, ret=507015" for i in range(40)) + "\n"
    console = (
        "(VllmWorker TP0 pid=961) ERROR 06-25 10:45:23 [worker.py:12] EZ9999: Inner Error\n"
        "(VllmWorker TP0 pid=961)         TraceBack (most recent call last):\n"
        "Processed prompts:   0%|          | 0/4 [00:00<?, ?it/s]INFO 06-25 10:45:24 [llm.py:3] started\n"
        'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\nRuntimeError: NPU out of memory\n'
    )
    return {
        "plog-4242_20250625104523123.log": plog.encode(),
        "bom_crlf_plog-1_20250625104523123.log": b"\xef\xbb\xbf" + plog.replace("\n", "\r\n").encode(),
        "gb18030.log": ("[ERROR] 设备 内存不足 EL0004\n" + plog).encode("gb18030"),
        "lone_cr.log": plog.replace("\n", "\r").encode(),
        "double_cr.log": plog.replace("\n", "\r\r\n").encode(),
        "nul_padded.log": plog.encode() + b"\x00" * 300 + plog.encode(),
        "no_final_newline.log": plog.rstrip("\n").encode(),
        "invalid_bytes.log": plog.encode() + b"\xff\xfe broken \x81\n" + plog.encode(),
        "long_line.log": (plog + "[ERROR] x " + "y" * (3 << 19) + "\n" + plog).encode(),
        "console_prefixed.log": console.encode(),
        "blank_lines.log": ("\n\n" + console + "\n\n   \n" + plog).encode(),
        "unicode_seps.log": (plog + "EZ9999: a\u2028b\u0085c\x0bd\x0ce\n").encode(),
    }


def log_files() -> list[Path]:
    """Every log of the fixtures and, when present, the corpus (those cann_log claims)."""
    out = sorted(p for p in (FIXTURES / "cann_log").rglob("*") if p.is_file())
    out += sorted(p for p in (FIXTURES / "logs_wild").rglob("*") if p.is_file() and _claimed(p))
    if CORPUS.is_dir():
        out += sorted(p for p in CORPUS.rglob("*") if p.is_file() and _claimed(p))
    return out


def _claimed(path: Path) -> bool:
    return cann_log.detect(Probe.of(path))


def _key(path: Path) -> str:
    for base in (FIXTURES, CORPUS):
        if path.is_relative_to(base):
            return f"{base.name}/{path.relative_to(base).as_posix()}"
    return path.name


def stored(paths: list[Path], tmp: Path) -> dict[str, dict]:
    """Per file: the digest of every stored column, of the grammar's columns, the notes and the partial mark."""
    store = Store(tmp / "eq.duckdb")
    out = {}
    try:
        for file_id, path in enumerate(paths, start=1):
            out[_key(path)] = _one(store, path, file_id, tmp)
    finally:
        store.con.close()
    return out


def _one(store: Store, path: Path, file_id: int, tmp: Path) -> dict:
    try:
        with store.transaction() as con:
            result = cann_log.PARSER.parse(ParseContext(store, con, path, path.name, None, file_id, tmp))  # type: ignore[arg-type]
    except BadInputError as exc:
        return {"error": str(exc)}

    def digest(columns: str) -> str:
        rows = store.con.execute(
            f"SELECT {columns} FROM log_records WHERE file_id = ? ORDER BY record_no", [file_id]
        ).fetchall()
        return hashlib.sha256(repr(rows).encode()).hexdigest()[:16]

    return {
        "rows": result.rows.get("log_records", 0),
        "all": digest("* EXCLUDE (run_id, file_id)"),
        "grammar": digest(GRAMMAR_COLUMNS),
        "notes": result.notes,
        "partial": result.partial,
    }


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("edge")
    for name, data in edge_cases().items():
        (folder / name).write_bytes(data)
    return [*sorted(folder.iterdir()), *log_files()]


def _some(paths: list[Path]) -> list[Path]:
    """Every edge case and fixture of cann_log, every 6th other file: the default run's share (~6 s)."""
    return [p for i, p in enumerate(paths) if not p.is_relative_to(FIXTURES / "logs_wild") and not
            p.is_relative_to(CORPUS) or p.is_relative_to(FIXTURES / "cann_log") or i % 6 == 0]  # fmt: skip


def test_fast_lines_equal_the_reference_split(inputs):
    """Every block of every file: the fast split gives the lines (and decoding notes) of the Python split."""
    compared = differ = 0
    for path in inputs:
        try:
            for block in cann_log.read_chunks(path, path.name, cann_log._Text()):
                fast_seen, ref_seen = cann_log._Text(), cann_log._Text()
                fast = cann_log.block_lines(block, fast_seen)
                reference = split_lines(cann_log._decode(block, ref_seen))
                fast = fast.to_list() if isinstance(fast, pl.Series) else fast
                differ += (fast, fast_seen) != (reference, ref_seen)
                compared += 1
        except BadInputError:
            continue
    assert (differ, compared >= len(inputs) - 2) == (0, True)


def _compare_with_before(paths: list[Path], tmp: Path) -> None:
    """Every file the digests were taken on: a log added to the fixtures since (a later wild batch) has no
    "before" to equal; a digested file that is gone fails (a renamed one would hide)."""
    before = json.loads(DIGESTS.read_text())
    paths = [p for p in paths if _key(p) in before]
    now = stored(paths, tmp)
    fields = ("rows", "grammar", "error", "notes", "partial")
    differ = [n for n in now if n in before and tuple(now[n].get(f) for f in fields) != tuple(before[n].get(f) for f in fields)]  # fmt: skip
    assert differ == [], (
        f"{len(differ)} of {len(now)} files store other rows than before, first: {differ[:5]}"
    )
    assert sum(n in before for n in now) == len(now)  # every file compared (a renamed one would hide)


def test_stored_rows_equal_those_of_the_code_before(inputs, tmp_path):
    paths = _some(inputs)
    assert len(paths) >= 40
    present = {_key(p) for p in inputs}
    absent_corpus = "corpus/" if not CORPUS.is_dir() else None  # a user's clone has no ../shared
    gone = [n for n in json.loads(DIGESTS.read_text()) if n not in present and not (absent_corpus and n.startswith(absent_corpus))]  # fmt: skip
    assert gone == []  # none renamed or gone
    _compare_with_before(paths, tmp_path)


def _main(argv: list[str]) -> int:
    """``--write``: digests of every log from the code as it is (taken on 4e333b0, before the fast path);
    ``--check``: every log compared with them (the test compares a sixth, for time)."""
    with tempfile.TemporaryDirectory() as tmp_dir:
        edge = Path(tmp_dir) / "edge"
        edge.mkdir()
        for name, data in edge_cases().items():
            (edge / name).write_bytes(data)
        paths = [*sorted(edge.iterdir()), *log_files()]
        if argv == ["--check"]:
            _compare_with_before(paths, Path(tmp_dir))
            print(f"{len(paths)} files store the rows they stored before")
            return 0
        taken = stored(paths, Path(tmp_dir))
    keep = {
        k: {f: v[f] for f in ("rows", "grammar", "error", "notes", "partial") if f in v}
        for k, v in taken.items()
    }
    DIGESTS.write_text(json.dumps(keep, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(keep)} digests to {DIGESTS}")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
