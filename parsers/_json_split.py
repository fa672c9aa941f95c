"""Cut one large JSON array of events into several smaller arrays, so that DuckDB reads them in parallel.

DuckDB reads one ``format='array'`` file on a single thread, and everything downstream of that read (casts,
the temporary table) runs on the same thread; given several files it reads one per thread.  The parts are
written next to the other ingest temporaries with ``copy_file_range`` (a copy inside the kernel: ~0.1 s for
300 MB), each a valid array: ``[`` + a run of whole elements + ``]``.

A cut goes just before an element that starts ``{"``: a quote inside a JSON string is always escaped, so that
pair of characters is never inside a string.  That the object after the cut is a top-level event and not one
nested in another value (``"args": {"calls": [{"ph": …}, {"ph": …}]}``) is checked by decoding the run of
elements that follows it: each must be an object with the key every trace event has (``ph``), separated by
commas, for ``_CHAIN`` bytes — a nested array ends (``]``) within a few elements, the top-level one only at the
end of the file, so a candidate whose run reaches a ``]`` is not a cut.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

MIN_PART_BYTES = 32 << 20  # smaller files are read whole: the copy would cost more than it saves
_CUT = re.compile(rb"\}\s*,\s*(?=\{\")")
_WINDOW = 4 << 20  # bytes searched for a cut
_CHAIN = 256 << 10  # bytes after a candidate cut decoded as a run of top-level events
_SEPARATOR = re.compile(r"\s*,\s*")
_MAX_TRIES = 32  # candidate cuts decoded per offset (bounds the work on a file that has none)
_DECODER = json.JSONDecoder()


def split_points(path: Path, parts: int, required_key: str = "ph") -> list[tuple[int, int]]:
    """``(end of a part, start of the next)`` byte offsets for up to ``parts - 1`` cuts, in file order."""
    size = path.stat().st_size
    cuts: list[tuple[int, int]] = []
    with open(path, "rb") as fh:
        for i in range(1, parts):
            start = size * i // parts
            if cuts and start <= cuts[-1][1]:
                continue
            fh.seek(start)
            window = fh.read(_WINDOW)
            at_eof = start + len(window) >= size
            for tried, m in enumerate(_CUT.finditer(window)):
                if tried == _MAX_TRIES:
                    break  # no cut near this offset: one part fewer
                nxt = start + m.end()
                if _is_event(window[m.end() :], required_key, at_eof):
                    cuts.append((start + m.start() + 1, nxt))
                    break
    return cuts


def _is_event(data: bytes, required_key: str, at_eof: bool = False) -> bool:
    """Whether ``data`` starts a run of top-level events: comma-separated objects holding ``required_key`` up to
    the end of the ``_CHAIN`` bytes read, no array or object closing after one of them (but the top-level
    array's own ``]`` when ``data`` runs to the end of the file, ``at_eof``)."""
    chunk = data[:_CHAIN]
    text = chunk.decode("utf-8", errors="replace")
    whole = at_eof and len(chunk) == len(data)
    at, decoded = 0, 0
    while True:
        try:
            obj, end = _DECODER.raw_decode(text, at)
        except ValueError:
            return decoded > 0 and not whole  # the bytes read end inside an element
        if not (isinstance(obj, dict) and required_key in obj):
            return False
        decoded += 1
        sep = _SEPARATOR.match(text, end)
        if sep is None:  # "]" or "}" after it: a nested array or object closing, or the top-level array's end
            return whole and text[end:].strip() == "]"
        at = sep.end()


def split_array(path: Path, parts: int, tmpdir: Path) -> list[Path]:
    """``path`` as ``parts`` arrays written under ``tmpdir`` (or ``[path]`` when not worth it / no cut found)."""
    size = path.stat().st_size
    parts = min(parts, size // MIN_PART_BYTES)
    if parts < 2:
        return [path]
    cuts = split_points(path, parts)
    if not cuts:
        return [path]
    bounds = [(0, cuts[0][0])] + [(cuts[i][1], cuts[i + 1][0]) for i in range(len(cuts) - 1)]
    bounds.append((cuts[-1][1], size))
    out: list[Path] = []
    try:
        with open(path, "rb") as src:
            for i, (lo, hi) in enumerate(bounds):
                part = tmpdir / f"part{i}_{path.name}"
                out.append(part)
                with open(part, "wb") as dst:
                    if i > 0:
                        dst.write(b"[")
                        dst.flush()
                    _copy_range(src, dst, lo, hi)
                    if i < len(bounds) - 1:
                        dst.write(b"]")
    except OSError:
        remove(out)
        return [path]
    return out


def _copy_range(src, dst, lo: int, hi: int) -> None:  # type: ignore[no-untyped-def]
    offset = lo
    try:
        while offset < hi:
            n = os.copy_file_range(src.fileno(), dst.fileno(), hi - offset, offset)
            if n == 0:
                break
            offset += n
    except (OSError, AttributeError):  # another filesystem or platform: copy through user space
        src.seek(offset)
        remaining = hi - offset
        while remaining > 0:
            block = src.read(min(8 << 20, remaining))
            if not block:
                break
            dst.write(block)
            remaining -= len(block)
        return
    dst.seek(0, os.SEEK_END)


def remove(parts: list[Path]) -> None:
    for p in parts:
        with contextlib.suppress(OSError):
            p.unlink()


__all__ = ["MIN_PART_BYTES", "remove", "split_array", "split_points"]
