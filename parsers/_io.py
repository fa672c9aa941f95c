"""File-level helpers for parsers: CSV headers, encodings, error translation, truncated JSON arrays."""

from __future__ import annotations

import codecs
import contextlib
import csv
import io
import re
from collections.abc import Callable, Iterable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import duckdb

from diag.errors import BadInputError
from diag.store import file_literal, sql_literal
from parsers._sql import ident

T = TypeVar("T")

CSV_OPTIONS = (
    "header=true, delim=',', quote='\"', escape='\"', "
    "null_padding=false, max_line_size=4194304, buffer_size=16777216, auto_detect=false"
)
JSON_MAX_OBJECT = 16 * 1024 * 1024  # DuckDB buffers 2x this per thread: one event is never near it
_CHUNK = 8 * 1024 * 1024


def first_invalid_utf8(path: Path) -> int | None:
    """Byte offset of the first byte that is not valid UTF-8, or None."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            try:
                decoder.decode(chunk)
            except UnicodeDecodeError as exc:
                return offset + exc.start
            offset += len(chunk)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            return offset
    return None


def encoding_error(path: Path, display: str) -> BadInputError | None:
    """A one-line error for a file that is not UTF-8, naming the encoding it most likely is."""
    bad = first_invalid_utf8(path)
    if bad is None:
        return None
    with open(path, "rb") as fh:
        fh.seek(max(0, bad - 4096))
        sample = fh.read(1 << 16)
    try:
        sample.decode("gb18030")
        guess = "looks like GB18030/GBK (e.g. re-saved by Excel on a Chinese Windows)"
    except UnicodeDecodeError:
        guess = "not text in any encoding diag knows"
    return BadInputError(
        display,
        f"not UTF-8: {guess}; profilers write UTF-8 — convert with `iconv -f GB18030 -t UTF-8`",
        offset=bad,
    )


def check_not_empty(path: Path, display: str) -> None:
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if not head.removeprefix(b"\xef\xbb\xbf").strip():
        raise BadInputError(display, "empty file")
    if b"\x00" in head:
        raise BadInputError(display, "binary content (NUL bytes) where text was expected")


def csv_header(path: Path, display: str) -> list[str]:
    check_not_empty(path, display)
    with open(path, "rb") as fh:
        raw = fh.readline(1 << 20)
    try:
        line = raw.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError:
        raise encoding_error(path, display) or BadInputError(display, "header is not UTF-8") from None
    try:
        header = next(csv.reader(io.StringIO(line)), [])
    except csv.Error as exc:  # e.g. a stray carriage return inside the header line
        raise BadInputError(display, f"header is not a CSV line: {exc}") from None
    return [h.strip() for h in header]


def resolve_columns(
    header: list[str], aliases: dict[str, tuple[str, ...]], required: Iterable[str], display: str
) -> dict[str, str]:
    """Map canonical column names to the header's own spelling; fail naming the missing required ones."""
    present = {h: h for h in header}
    lowered = {h.lower(): h for h in header}
    found: dict[str, str] = {}
    for canonical, spellings in aliases.items():
        for spelling in spellings or (canonical,):
            hit = present.get(spelling) or lowered.get(spelling.lower())
            if hit:
                found[canonical] = hit
                break
    missing = [(aliases.get(c) or (c,))[0] for c in required if c not in found]
    if missing:
        raise BadInputError(
            display,
            f"missing required column(s) {', '.join(missing)}; header is: {','.join(header)[:200]}",
        )
    return found


def col(found: dict[str, str], canonical: str) -> str:
    """The SQL reference to a column, or NULL when the file lacks it."""
    return ident(found[canonical]) if canonical in found else "NULL"


_SQL_CONTEXT = re.compile(r"\s+LINE \d+:.*$", re.S)  # DuckDB quotes the statement after its message
_COLUMN_IN_SQL = re.compile(r'(?:trim|CAST|TRY_CAST)\(\s*(?:NULLIF\()*\s*"([^"]+)"')


def one_line(exc: BaseException, limit: int = 300) -> str:
    """A DuckDB error as one line a person reads: its message without the SQL it quotes (the column a
    conversion failed on is named instead)."""
    raw = " ".join(str(exc).split())
    text = _SQL_CONTEXT.sub("", raw)
    if text != raw and "convert" in text.lower():
        column = _COLUMN_IN_SQL.search(raw[len(text) :])
        if column:
            text += f' (column "{column.group(1)}")'
    text = re.sub(r"^(Invalid Input|Conversion|Binder|Parser) Error: ", "", text)
    return text[:limit]


def csv_source(path: Path, header: list[str], lenient: bool = False) -> str:
    """``read_csv`` over ``path`` with the header's own column names, every value as text."""
    names: list[str] = []
    for h in header:
        name, n = h or "column", 1
        while name in names:  # duplicate header names: keep both, the second as 'name_2'
            n += 1
            name = f"{h}_{n}"
        names.append(name)
    columns = "{" + ", ".join(f"{sql_literal(n)}: 'VARCHAR'" for n in names) + "}"
    extra = (
        ", ignore_errors=true, store_rejects=true, rejects_table='_rej', rejects_scan='_rej_scan'"
        if lenient
        else ""
    )
    return f"read_csv({file_literal(path)}, {CSV_OPTIONS}, columns={columns}{extra})"


class RetryLenient(Exception):
    """A strict CSV read failed and aborted the transaction: ingest the file again with ``lenient``."""

    def __init__(self, display: str) -> None:
        super().__init__(f"{display}: malformed rows, reading it again skipping them")


def run_csv(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    display: str,
    header: list[str],
    body: Callable[[str], T],
    lenient: bool = False,
) -> tuple[T, str | None]:
    """Run ``body(read_csv_sql)`` in one pass; DuckDB errors become one-line BadInputErrors.

    Rows that do not fit the header (a missing field, a last line cut off by a killed writer) are skipped,
    the rest stored, and the returned note says which lines were dropped and why: partial, never shifted.
    Collecting rejects slows the reader down by half, and nearly every file is well formed, so the first read
    is strict.  A failed statement aborts the whole transaction in DuckDB, so when it fails the caller's
    transaction is redone with ``lenient`` (RetryLenient), which pays for the reject-collecting read.
    """
    if not lenient:
        try:
            return body(csv_source(path, header)), None
        except duckdb.Error:
            enc = encoding_error(path, display)
            if enc:
                raise enc from None
            raise RetryLenient(display) from None
    try:
        result = body(csv_source(path, header, lenient=True))
        rejects = con.execute(
            "SELECT line, byte_position, error_type, error_message FROM _rej ORDER BY line"
        ).fetchall()
    except duckdb.Error as exc:
        enc = encoding_error(path, display)
        raise (enc or BadInputError(display, f"cannot read as CSV: {one_line(exc)}")) from None
    finally:
        for table in ("_rej", "_rej_scan"):
            with contextlib.suppress(duckdb.Error):  # an aborted transaction takes its temp tables with it
                con.execute(f"DROP TABLE IF EXISTS {table}").fetchall()
    if not rejects:
        return result, None
    if any(r[2] == "INVALID ENCODING" or "unicode" in str(r[3]).lower() for r in rejects):
        raise encoding_error(path, display) or BadInputError(display, "not UTF-8 text")
    line, _, _, why = rejects[0]
    cut = " (file ends without a newline: truncated)" if _last_newline(path) is not None else ""
    more = f" and {len(rejects) - 1} more" if len(rejects) > 1 else ""
    return result, f"skipped {len(rejects)} malformed row(s): line {line}: {why}{more}{cut}"


def _last_newline(path: Path) -> int | None:
    """Offset just past the last newline when the file does not end with one (a truncated file)."""
    size = path.stat().st_size
    with open(path, "rb") as fh:
        fh.seek(max(0, size - 1))
        if fh.read(1) == b"\n":
            return None
        pos = size
        while pos > 0:
            start = max(0, pos - (1 << 20))
            fh.seek(start)
            block = fh.read(pos - start)
            idx = block.rfind(b"\n")
            if idx >= 0:
                return start + idx + 1
            pos = start
    return None


def _copy_prefix(src: Path, dst: Path, length: int, suffix: bytes = b"") -> None:
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        remaining = length
        while remaining > 0:
            block = fin.read(min(_CHUNK, remaining))
            if not block:
                break
            fout.write(block)
            remaining -= len(block)
        fout.write(suffix)


# -- JSON arrays ---------------------------------------------------------------------------------------------
# The end of a top-level element: its '}' followed by the next element's '{' (or by the end of the data).
# An inner object's '}' is followed by another key ('}, "ph"'), so it does not match.
_BOUNDARY = re.compile(rb"\}(?=\s*,\s*\{|\s*$)")


def json_array_is_complete(path: Path) -> bool:
    size = path.stat().st_size
    with open(path, "rb") as fh:
        fh.seek(max(0, size - 4096))
        tail = fh.read().rstrip()
    return tail.endswith(b"]")


def data_end(path: Path) -> int:
    """Offset just past the last byte that is not NUL: a crash that pre-allocated the file leaves its tail
    zero-filled (often sparse, gigabytes of it). Scans back from the end in blocks, so memory stays one block."""
    pos = path.stat().st_size
    with open(path, "rb") as fh:
        while pos > 0:
            start = max(0, pos - _CHUNK)
            fh.seek(start)
            block = fh.read(pos - start)
            kept = len(block.rstrip(b"\x00"))
            if kept:
                return start + kept
            pos = start
    return 0


def zero_tail_note(size: int, end: int) -> str:
    """The partial note's words for a zero-filled tail (``end`` < ``size``), or '' when there is none."""
    if end >= size:
        return ""
    return f"; the file is zero bytes from byte {end:,} to its end ({(size - end) / 1e6:,.1f} MB of NULs: a crash)"


_BLOCK = 4 << 20  # the tail is searched for element ends this many bytes at a time, backwards
_OVERLAP = 64 << 10  # bytes past a block kept in view, so a boundary's look-ahead may reach into the next one


def element_ends(
    path: Path, boundary: re.Pattern[bytes] = _BOUNDARY, end: int | None = None
) -> Iterator[int]:
    """Offsets just past the ``}`` of top-level elements, from ``end`` (the data's end) backwards.

    Reads the file backwards one block at a time (plus a small overlap), so a file cut anywhere costs a few MB
    of memory whatever its size. Callers confirm each candidate with a full parse (a look-alike inside a
    string is then skipped).
    """
    stop = path.stat().st_size if end is None else end
    hi = stop
    with open(path, "rb") as fh:
        while hi > 0:
            lo = max(0, hi - _BLOCK)
            view_end = min(stop, hi + _OVERLAP)
            fh.seek(lo)
            view = fh.read(view_end - lo)
            starts = [m.start() for m in boundary.finditer(view) if m.start() < hi - lo]
            at_data_end = view_end == stop
            for s in reversed(starts):
                # '$' in a boundary means the end of the data; in an earlier view it is only the view's end
                if at_data_end or view[s + 1 : s + 4097].strip():
                    yield lo + s + 1
            hi = lo


def json_array_prefix(
    path: Path, display: str, tmpdir: Path, validate: Callable[[Path], object]
) -> tuple[Path, str]:
    """Write the longest prefix of a truncated JSON array that ends on a complete element, closed with ']'.

    A zero-filled tail is skipped first (see ``data_end``); the prefix is copied file to file, never through
    more than one block of memory."""
    size = path.stat().st_size
    end = data_end(path)
    out = tmpdir / f"prefix_{path.name}"
    for tried, cut in enumerate(element_ends(path, end=end)):
        if tried >= 8:
            raise BadInputError(display, "truncated JSON array; no complete prefix found", offset=size)
        _copy_prefix(path, out, cut, b"]")
        try:
            validate(out)
        except duckdb.Error:
            out.unlink(missing_ok=True)
            continue
        return out, (
            f"truncated at byte {size} (file size); stored the complete events up to byte {cut}"
            + zero_tail_note(size, end)
        )
    raise BadInputError(display, "truncated JSON array with no complete event", offset=size)


def scaled_exact(value: Any, factor: Decimal) -> int | None:
    """A number from a JSON or SQLite value (µs, ms, MB…) × ``factor`` as an exact int (ns, bytes).

    None for null, 'N/A', '', a non-number, or a value outside BIGINT (a float goes through its shortest repr).
    """
    if value is None or value == "N/A":
        return None
    try:
        scaled = (Decimal(str(value)) * factor).to_integral_value()
    except ArithmeticError:  # decimal.InvalidOperation: not a number
        return None
    return int(scaled) if scaled.is_finite() and -(1 << 63) <= scaled < (1 << 63) else None


def read_json_array_sql(paths: Path | list[Path], columns: dict[str, str]) -> str:
    """``read_json`` over one or several JSON arrays of events with a fixed projection (see _json_split)."""
    listed = paths if isinstance(paths, list) else [paths]
    p = ", ".join(file_literal(x) for x in listed)
    spec = "{" + ", ".join(f"'{k}': '{v}'" for k, v in columns.items()) + "}"
    return f"read_json([{p}], format='array', columns={spec}, maximum_object_size={JSON_MAX_OBJECT})"


def drop_untimed_events(con: duckdb.DuckDBPyConnection, table: str, display: str) -> str | None:
    """Remove the complete (``X``) events of ``table`` whose ``ts_ns`` or ``dur_ns`` did not read as a number
    (``"ts": "abc"``): stored, they would be tasks at no time that every analysis trips over. All of them
    unreadable is a BadInputError; some is the file's partial note, saying how many were left out."""
    total, untimed = con.execute(
        f"SELECT count(*), count(*) FILTER (WHERE ts_ns IS NULL OR dur_ns IS NULL) FROM {table} WHERE ph = 'X'"
    ).fetchall()[0]
    if not untimed:
        return None
    if untimed == total:
        raise BadInputError(display, f"none of its {total:,} complete events has a readable 'ts' / 'dur'")
    con.execute(f"DELETE FROM {table} WHERE ph = 'X' AND (ts_ns IS NULL OR dur_ns IS NULL)").fetchall()
    return (
        f"partial: {untimed:,} of {total:,} complete events have no readable 'ts' / 'dur' and were not stored"
    )


def add_partial(result: Any, note: str | None) -> None:
    """Add ``note`` (``partial: …``) to a ParseResult's partial message, after what it already says."""
    if note:
        result.partial = f"{result.partial}; {note.removeprefix('partial: ')}" if result.partial else note
