"""CANN host/device logs (``plog-*.log``, ``device-*.log``) and torch_npu / vLLM console captures.

One row of ``log_records`` per record: a header line plus the lines that continue it (Possible Cause,
Solution, TraceBack, indented error-manager and Python traceback lines), classified at ingest by the rules of
``diag/rules/log_patterns.toml``.  The grammar is in ``shared/formats/cann_logs.md``; in short:

* plog: ``[LEVEL] MODULE(pid,pname):YYYY-MM-DD-hh:mm:ss.mmm.uuu [file:line]body`` (pname may be empty, TorchAir
  writes a space between date and time, spaces may be missing, two records can be glued on one line); the
  thread id sits in the body in a module-specific layout;
* console: error-manager blocks (``EZ9999: …``, ``EZ9999[PID: n] ts (EZ9999): …``, ``[PID: n] ts Title(EI0011): …``),
  torch_npu ``[ERROR] ts (PID:n, Device:d, RankID:r) ERR00100 …``, c10 ``[W… file:line] Warning: …``, glog,
  MindIE, Python logging and tracebacks, behind vLLM / Ray / torchrun / grep prefixes, which are stripped.
  A file of vLLM / vLLM-Ascend console output alone is claimed by its logger lines
  (``LEVEL MM-DD hh:mm:ss [file.py:N] msg``), whatever its name.

Streaming: the file is read in blocks of about ``BLOCK_BYTES``, each cut just before a line that starts a record
(a plog header), so that blocks parse independently: decoded (UTF-8, else GB18030 — logs of Chinese systems
are often GBK), split, parsed with Polars (slices and regexes over whole columns, which release the GIL) on
``WORKERS`` threads, classified, and inserted in file order as one Arrow batch per block.  Memory is bounded by
a few blocks' frames (plus DuckDB's memory_limit) whatever the file size.
Times are local time as if UTC (logs carry no zone), int64 ns.

What each record says comes from its own lines or its source, never from an unrelated record (rules and their
reasons: ``parsers/_log_records.py``):

* ``origin`` — the process / source: ``VllmWorker TP1 pid=961`` / ``EngineCore_DP0 pid=123`` (vLLM), ``RayWorkerWrapper
  pid=4567, ip=10.0.0.2`` (Ray: the text in the parentheses, spaces collapsed), ``rank6`` (torchrun ``[rank6]:``),
  ``run/plog/plog-2111667_….log`` (a ``grep`` file prefix), else ``pid 1234`` from the record's own pid field (plog
  header, ``[PID: 1234]``, ``(PID:1234, …)``), else NULL (the file itself is the only source);
* a record never spans two sources: a continuation line joins the open record of its own line prefix (and an
  unprefixed line after a blank line, or 50 lines after its source's previous line, opens a record);
* ``codes`` — every error / return code the record's text names, in order, each once; ``code`` — the most specific
  of them (a runtime / CANN code over a wrapper such as EZ9999 / EH9999 / ERR00100 / ERR99999; never a hex retCode):
  ``diag/rules/log_codes.toml``, ``parsers/_log_codes.py``; classification rules match any of ``codes``;
* ``figures`` — JSON of the numbers memory messages state, sizes in bytes (torch_npu / CUDA OOM, vLLM KV cache,
  gpu_memory_utilization, CANN allocation failures): ``diag/rules/log_figures.toml``, ``parsers/_log_figures.py``;
* ``ts_ns`` — the record's own stamp; a stamp without a year (vLLM, glog, c10) takes the year of the nearest dated
  record of the same origin in the block when that puts it within 24 h of it, else NULL.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
import re
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from diag.errors import BadInputError
from parsers._base import ParseContext, ParseResult, Probe
from parsers._io import one_line
from parsers._line_cap import CutLines, capped_blocks
from parsers._log_literals import CAPTURE_BAR, CAPTURE_STAMP, LEVELS

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

# The Polars side of the parser (grammar, records, rules: Polars, NumPy and PyArrow, 0.25 CPU-s and 64 MB to
# import) is imported when a log is read or a rule is needed, not by `import parsers`: an ingest of a profiler
# folder without logs never loads it (issue #25).
_REEXPORTED = {  # names of the Polars side that stay reachable as cann_log.<name> (tests read them so)
    "RULES_PATH": "_log_rules", "Rule": "_log_rules", "classify": "_log_rules", "load_rules": "_log_rules",
    "COLUMNS": "_log_grammar", "parse_lines": "_log_grammar", "split_lines": "_log_grammar",
    "split_lines_fast": "_log_grammar", "enrich": "_log_records", "group_records": "_log_records",
    "mark_starts": "_log_records", "to_table": "_log_records",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    if name in _REEXPORTED:
        return getattr(importlib.import_module(f"parsers.{_REEXPORTED[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


BLOCK_BYTES = 4 << 20
MAX_LINE_BYTES = 64 << 20
# the lines of a block split by Polars (no Python string per line); False: the Python split, kept as the reference
# that tests/test_log_speed_equivalence.py compares the fast lines with
FAST_LINES = True
WORKERS = max(1, min(4, os.cpu_count() or 1))  # blocks parsed at once (each a few tens of MB of frames)
_PLOG_NAME = re.compile(r"^(?:plog|device)-(?:app-)?(\d+)_\d{14,17}\.log$")
_DEVICE_DIR = re.compile(r"^device-(\d+)$")


# -- detection -----------------------------------------------------------------------------------------------
_STRONG = re.compile(
    rf"\[(?:{LEVELS})\]\s?[A-Z][A-Z0-9_]*\(\d+,[^)\n]*\):\d{{4}}-\d\d-\d\d[- ]\d\d:\d\d:\d\d\.\d{{3}}\.\d{{3}}"
    r"|(?:^|[\s:])[EWI][0-9A-Z]\d{4}(?:: (?:Inner Error|\[PID: ?\d+\]|\d{4}-\d\d-\d\d-)|\[PID: ?\d+\]|  +\[)"
    r"|\[PID: ?\d+\] \d{4}-\d\d-\d\d-\d\d:\d\d:\d\d\.\d{3}\.\d{3} [\w -]+\([EWI][0-9A-Z]\d{4}\):"
    r"|\(PID:\d+, Device:-?\d+, RankID:-?\d+\) ERR\d{5}|\[W(?:\d{3,4} [\d:.]+)? ?[\w./-]+:\d+\] Warning: "
    r"|NPU out of memory\. Tried to allocate|will fall back to run on the CPU|(?:NPU|OPS|HCCL) function error: "
    r"|GetWorkspaceSize not in libopapi|Unsupported soc version: |does not hit the high-priority operator"
    r"|The (?:error|extend info) from device\(|\[FUNC:\w+\]\[FILE:[\w.]+\]\[LINE:\d+\]"
    # a CANN error as error_code.json names it, "<ErrorType>(<code>)": Communication_Error_Get_Socket(EI0006),
    # AclNN_Parameter_Error(EZ1001), Device_Absent/Abnormal(EL0001) — also when pasted alone or cut at its start
    r"|\b[A-Za-z]+(?:_[A-Za-z]+)+(?:/[A-Za-z]+)?\([EWI][0-9A-Z]\d{4}\)"
    # vLLM / vLLM-Ascend console (vllm/logger.py: "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s",
    # asctime "%m-%d %H:%M:%S"), behind an optional "(EngineCore_DP0 pid=123) " process prefix
    r"|(?:^|\) )(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[\w./-]+\.py:\d+\] ",
    re.M,
)
_WEAK = re.compile(
    # (a torchrun "[rank4]: " prefix before a traceback or its exception line)
    # (or a vLLM process prefix "(APIServer pid=123) " / "(EngineCore_DP0 pid=9, ip=…) " before it)
    r"\b(?:ERROR|WARNING|INFO|DEBUG|CRITICAL)\b|^(?:\[rank\d+\]: ?|\(\w+ pid=\d+(?:, ip=[\d.]+)?\) )?(?:Traceback \(most recent call last\)|\w[\w.]*(?:Error|Exception): )"
    r"|^[IWEF](?:\d{4})?\d{4} \d\d:\d\d:\d\d|^\[?\d{4}-\d\d-\d\d[ T-]\d\d:\d\d:\d\d|\btorch|\bNPU\b"
    r"|\bNVML\b|\bNCCL (?:INFO|WARN|error)|\bCUDA (?:error|out of memory)"  # CUDA consoles (log_patterns_cuda)
    # a CUDA call's failure as llama.cpp's ggml-cuda ("cudaMalloc failed: out of memory") and TensorRT-LLM's check()
    # ("CUDA runtime error in cudaMemcpyAsync(…): …") print it, without a level (log_codes.toml cuda_call_message)
    r"|\bcuda(?:Malloc|Memcpy|Memset|Free|HostAlloc)\w* failed: |\bCUDA runtime error in ",
    re.M,
)
_JSON_START = re.compile(r'\s*(?:\{|\[\s*(?:\{|"|\[|\]))')
_NOT_LOGS = {
    ".csv",
    ".json",
    ".jsonl",
    ".py",
    ".md",
    ".html",
    ".htm",
    ".xml",
    ".yaml",
    ".yml",
    ".toml",
    ".db",
}
_LOG_NAMES = re.compile(r"(?i)(?:^(?:plog|device)-.*|\.(?:log|txt|out|err|stdout|stderr))$")
# Names that say "console output" by themselves (``*.log``, ``*.out``, ``*.err``, ``*.stdout``, a plog / device log):
# any text in them is read as a log — the classification rules, not the detector, decide what its lines mean (a
# HIP ``AMD_LOG_LEVEL`` trace, a llama.cpp server console, a glog stream with the year, a device-side assert has no
# logger prefix this detector knows).  ``*.txt`` is any text (requirements.txt, notes): it still needs log-ish lines.
_CONSOLE_NAMES = re.compile(r"(?i)(?:^(?:plog|device)-.*|\.(?:log|out|err|stdout|stderr))$")
_HAS_WORDS = re.compile(r"[^\W\d_]{3,}")


def _looks_binary(head: bytes) -> bool:
    # NUL padding is what a writer killed mid-block leaves in a text log (dropped on reading): not a sign of binary
    sample = head[:65536].replace(b"\x00", b"")
    if not sample:
        return False
    ctrl = sum(sample.count(bytes([b])) for b in (*range(0, 9), 11, 12, *range(14, 27), *range(28, 32)))
    return ctrl > max(4, len(sample) // 100)


@lru_cache(maxsize=1)
def _rule_words() -> tuple[re.Pattern[str], ...]:
    """The patterns of the classification rules that say something (not noise), for Python ``re``."""
    from parsers._log_rules import load_rules

    # not the last-resort low-confidence rule (any "error" / "failed" word): a rule that names something specific
    return tuple(
        re.compile(r.pattern)
        for r in load_rules()
        if r.pattern
        and r.role != "noise"
        and not (r.category == "unclassified_error" and r.severity == "low")
    )


def detect(probe: Probe) -> bool:
    """Claims text with CANN / torch_npu log lines; a ``*.log``-like name lowers the bar to any log-ish line or
    any words a classification rule knows (a pasted excerpt such as ``Available KV cache memory: -0.87 GiB`` or
    a device-log ``EXCEPTION TASK:`` dump has no logger prefix at all)."""
    if probe.path.suffix.lower() in _NOT_LOGS or _looks_binary(probe.head):
        return False
    text = probe.text
    if _JSON_START.match(text):
        return False
    if _STRONG.search(text):
        return True
    if not _LOG_NAMES.search(probe.name):
        return False
    if _CONSOLE_NAMES.search(probe.name):
        return bool(_HAS_WORDS.search(text))
    return bool(_WEAK.search(text)) or any(rx.search(text) for rx in _rule_words())


# -- reading -------------------------------------------------------------------------------------------------
@dataclass
class _Text:
    """What decoding saw: notes for the ingest summary."""

    encoding: str = "utf-8"
    nul_bytes: int = 0
    replaced: bool = False
    truncated_last_line: bool = False
    cut: CutLines = field(default_factory=CutLines)  # lines longer than LINE_CAP, kept as their head


def _decode(raw: bytes, seen: _Text) -> str:
    if b"\x00" in raw:  # a writer killed mid-block leaves NUL padding: drop it, keep the text
        seen.nul_bytes += raw.count(b"\x00")
        raw = raw.replace(b"\x00", b"")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:  # logs on Chinese systems are often GBK (a subset of GB18030)
        text = raw.decode("gb18030")
        seen.encoding = "gb18030"
        return text
    except UnicodeDecodeError:
        seen.replaced = True
        return raw.decode("utf-8", errors="replace")


_RECORD_CUT = re.compile(rf"\n(?=\[(?:{LEVELS})\] ?[A-Z][A-Z0-9_]*\(\d+,)".encode())
# Before a console line that starts a record: behind its process / rank / vLLM-logger prefixes, not indented and
# not a continuation word (a prefixed traceback line is not a place to cut); the prefixes are one atomic group so
# that the look-ahead cannot succeed by skipping them (a capture tool's container / stamp prefix first,
# _log_grammar.CAPTURE_PREFIX).
_CONSOLE_CUT = re.compile(
    rf"\n(?=(?>{CAPTURE_STAMP}?(?:{CAPTURE_BAR})?{CAPTURE_STAMP}?".encode()
    + rb"(?:[^\s:\[\]()]+\.log:)?(?:\([^()\n]{1,80}? pid=\d+[^)\n]*\)\s)?(?:\[?rank\d+\]: ?)?"
    rb"(?:(?:ERROR|WARNING|INFO|DEBUG|CRITICAL) (?:\d{4}-)?\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \[?[\w./-]+:\d+\] ?)?)"
    rb"(?![\s^]|TraceBack \(most recent|Possible Cause|Solution:|[^\n]*\[FUNC:\w+\]\[FILE:)\S[^\n]*\n)"  # a whole line: not one cut off
)


def _cut(data: bytes) -> int:
    """Where the last record of a block surely starts (before a plog header, else before a console line that
    starts a record); 0 when the block holds no such place (the record goes on: read on), and then, past
    MAX_LINE_BYTES, the last line end."""
    tail = max(0, len(data) - (1 << 20))
    for rx in (_RECORD_CUT, _CONSOLE_CUT):
        last = None
        for last in rx.finditer(data, tail):  # noqa: B007 - the last match is the one wanted
            pass
        if last is not None and last.start() > 0:
            return last.start() + 1
    return data.rfind(b"\n") + 1 if len(data) >= MAX_LINE_BYTES else 0


_LONE_CR = re.compile(rb"\r(?!\n)")


def _lone_cr_to_lf(data: bytes, at_end: bool) -> bytes:
    """Old Mac / some Windows tools end lines with CR alone: as LF, so that a CR-only log is not one record. A CR
    that ends a block before the end of the file stays (its LF may start the next block)."""
    if b"\r" not in data or data.count(b"\r") == data.count(b"\r\n"):
        return data
    if not at_end and data.endswith(b"\r"):
        return _LONE_CR.sub(b"\n", data[:-1]) + b"\r"
    return _LONE_CR.sub(b"\n", data)


def read_chunks(path: Path, display: str, seen: _Text) -> Iterator[bytes]:
    """Blocks of whole records (a block ends just before a line that starts a record), BOM removed."""
    pending = b""
    with open(path, "rb") as fh:
        first = True
        for chunk, at_end in capped_blocks(fh, BLOCK_BYTES, seen.cut, normalize=_lone_cr_to_lf):
            data = pending + chunk
            if first:
                if _looks_binary(data[:65536]):
                    raise BadInputError(display, "binary content (control bytes), not a text log")
                data, first = data.removeprefix(b"\xef\xbb\xbf"), False
            if at_end:
                if data:
                    seen.truncated_last_line = not data.endswith(b"\n")
                    yield data
                return
            cut = _cut(data)
            if cut <= 0 and len(data) < MAX_LINE_BYTES:  # the record goes on: read on
                pending = data
                continue
            cut = cut if cut > 0 else len(data)
            pending = data[cut:]
            yield data[:cut]


# -- the parser ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _File:
    """What every block of a file is parsed with."""

    run_id: int | None
    file_id: int
    pid: int | None  # from plog-<pid>_<ts>.log / device-<pid>_<ts>.log
    device: int | None  # from a device-<id> folder
    plog_mode: bool  # a plog: a line that is no header continues the record above


def _file_of(ctx: ParseContext, first: bytes) -> _File:
    m = _PLOG_NAME.match(ctx.path.name)
    d = _DEVICE_DIR.match(ctx.path.parent.name)
    head = first[: 1 << 20]
    headers = len(_RECORD_CUT.findall(head)) + bool(re.match(rf"\[(?:{LEVELS})\]".encode(), head))
    plog = m is not None or headers >= 0.5 * max(1, head.count(b"\n"))
    return _File(
        ctx.run_id, ctx.file_id, int(m.group(1)) if m else None, int(d.group(1)) if d else None, plog
    )


def block_lines(data: bytes, seen: _Text) -> list[str] | pl.Series:
    """The decoded lines of a block; a glued progress bar ("…it/s]") needs the line-by-line Python path."""
    from parsers._log_grammar import split_lines, split_lines_fast

    text = _decode(data, seen)
    if not FAST_LINES or "it/s" in text or "s/it" in text:
        return split_lines(text)
    return split_lines_fast(text)


def parse_block(data: bytes, line0: int, f: _File) -> tuple[pa.Table, _Text]:
    """One block of whole records → its rows (record_no from 1 within the block) and what decoding saw."""
    import polars as pl

    from parsers._log_grammar import COLUMNS, parse_lines
    from parsers._log_records import enrich, group_records, mark_starts, to_table
    from parsers._log_rules import classify, load_rules

    seen = _Text()
    parsed = mark_starts(parse_lines(block_lines(data, seen), line0), f.plog_mode)
    if parsed.is_empty():  # only blank lines
        return pl.DataFrame(schema=COLUMNS).to_arrow(), seen
    rec = classify(enrich(group_records(parsed), f.pid, f.device), load_rules())
    return to_table(rec, f.run_id, f.file_id, 0), seen


def _tables(ctx: ParseContext, seen: _Text) -> Iterator[pa.Table]:
    """Blocks parsed on WORKERS threads (Polars releases the GIL), yielded in file order."""
    chunks = read_chunks(ctx.path, ctx.display, seen)
    first = next(chunks, b"")
    if not first:
        return
    f, line0 = _file_of(ctx, first), 1
    with ThreadPoolExecutor(WORKERS, thread_name_prefix="cann_log") as pool:
        pending: deque[Future[tuple[pa.Table, _Text]]] = deque()
        for data in itertools.chain([first], chunks):
            pending.append(pool.submit(parse_block, data, line0, f))
            line0 += data.count(b"\n") + (not data.endswith(b"\n"))
            while len(pending) > WORKERS:
                yield _noted(pending.popleft().result(), seen)
        while pending:
            yield _noted(pending.popleft().result(), seen)


def _noted(result: tuple[pa.Table, _Text], seen: _Text) -> pa.Table:
    table, block = result
    if block.encoding != "utf-8":
        seen.encoding = block.encoding
    seen.nul_bytes += block.nul_bytes
    seen.replaced |= block.replaced
    return table


class CannLogParser:
    name = "cann_log"
    # 2: origin, codes, figures; records never span two sources. 3: recompile_limit_fail rule. 4: code-first rules
    # (codes_from the ACL catalog), unclassified_error, platform noise, vLLM console rules, identity-guard recompiles.
    # 5: task timeouts by the runtime's reason, inner-error messages, device-log dumps, more phrase families (#16)
    # 6: CR-only line ends read as line ends, NUL-padded small logs no longer taken for binary (#18)
    # 7: a line over 1 MiB is stored as its head, the file partial (#18)
    # 8: memory figures (start-up profile, KV blocks / tokens, *_gib sizes; issue #19)
    # 9: round-4 rules (#16): WorkHCCL watchdog timeout, shell "Killed" reports, vllm-ascend KV budget at 0 …
    # 11: round-6 rules (#16): device-error envelope, device notify wait, "# GPU blocks: 0", DCMI and glog codes
    version = 11
    platform = "ascend"
    creates_run = False  # a log joins the run of its folder when there is one

    def detect(self, probe: Probe) -> bool:
        return detect(probe)

    def parse(self, ctx: ParseContext) -> ParseResult:
        result, seen = ParseResult(), _Text()
        rows = 0
        for table in _tables(ctx, seen):
            ctx.con.register("_log_batch", table)
            try:  # record numbers run on across blocks
                ctx.con.execute(
                    "INSERT INTO log_records BY NAME SELECT * REPLACE (record_no + ? AS record_no) FROM _log_batch",
                    [rows],
                ).fetchall()
            except duckdb.Error as exc:  # reported as what failed, not as the aborted transaction after it
                raise BadInputError(ctx.display, f"cannot store its records: {one_line(exc)}") from None
            finally:
                with contextlib.suppress(duckdb.Error):  # an aborted transaction refuses even this
                    ctx.con.unregister("_log_batch")
            rows += table.num_rows
        if rows == 0:
            raise BadInputError(ctx.display, "no log lines found")
        result.add("log_records", rows)
        if seen.encoding != "utf-8":
            result.notes.append(f"decoded as {seen.encoding}")
        if seen.nul_bytes:
            result.notes.append(f"dropped {seen.nul_bytes} NUL bytes")
        if seen.replaced:
            result.notes.append("bytes that are neither UTF-8 nor GB18030 replaced by U+FFFD")
        if note := seen.cut.note():  # a record stored cut short is partial data
            result.partial = f"{note}: its head is stored"
        if seen.truncated_last_line:
            result.notes.append("last line has no newline (file cut mid-write?)")
        return result


PARSER = CannLogParser()
