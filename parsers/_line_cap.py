"""Read a text file in blocks with every line cut at LINE_CAP bytes, so that one huge line costs a bounded
amount of memory downstream (the record text, the regexes and Polars columns over it, DuckDB's insert).

A crashed writer, a dumped tensor or a base64 blob can leave a line of tens of MB in a log; kept whole it is
copied several times over (decoded, split, grouped, matched, inserted: ~40× its size measured on a 60 MB
line, which ran DuckDB out of memory). The head of such a line is what a person reads; the rest is dropped
and the cut is noted: ``line N cut at 1 MiB of 60.0 MiB``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

LINE_CAP = 1 << 20  # bytes of one line kept


@dataclass
class CutLines:
    """The lines cut so far: (line number from 1, the line's full length in bytes without its newline)."""

    lines: list[tuple[int, int]] = field(default_factory=list)

    def note(self) -> str | None:
        if not self.lines:
            return None
        line, size = self.lines[0]
        first = f"line {line:,} cut at {LINE_CAP >> 20} MiB of {size / (1 << 20):,.1f} MiB"
        more = (
            f" (and {len(self.lines) - 1:,} more line(s) over {LINE_CAP >> 20} MiB)"
            if len(self.lines) > 1
            else ""
        )
        return first + more


def _utf8_start(data: bytes, at: int) -> int:
    """``at`` moved back (≤ 3 bytes) off UTF-8 continuation bytes, so a cut never splits a character."""
    back = at
    while back > at - 3 and back > 0 and 0x80 <= data[back] < 0xC0:
        back -= 1
    return back


def capped_blocks(
    fh: BinaryIO, block_bytes: int, cut: CutLines, normalize: Callable[[bytes, bool], bytes] | None = None
) -> Iterator[tuple[bytes, bool]]:
    """``(bytes, at_end)`` blocks of ``fh`` with every line past LINE_CAP bytes cut to its head (see module doc).

    ``normalize(block, at_end)`` runs first (CR-only line ends made LF: they must count as line ends here); a
    CR it leaves at a block's end is held for the next block, where its LF may be. Line ends are found with
    C-level ``rfind`` over windows of LINE_CAP bytes: a few calls per block, whatever the number of lines."""
    run, dropping, lines_before = 0, False, 0  # bytes of the current line so far; past the cap?
    held = b""
    while True:
        raw = fh.read(block_bytes)
        at_end = len(raw) < block_bytes
        chunk = normalize(held + raw, at_end) if normalize else held + raw
        held = b""
        if not at_end and chunk.endswith(b"\r"):
            chunk, held = chunk[:-1], b"\r"
        kept: list[bytes] = []
        start = pos = 0
        n = len(chunk)
        while pos < n:
            if dropping:
                nl = chunk.find(b"\n", pos)
                if nl < 0:
                    run, pos, start = run + n - pos, n, n
                    break
                cut.lines.append((lines_before + chunk.count(b"\n", 0, nl) + 1, run + nl - pos))
                dropping, run, start, pos = False, 0, nl, nl + 1  # the newline is kept
                continue
            room = LINE_CAP - run
            nl = chunk.rfind(b"\n", pos, pos + room)
            if nl >= 0:  # every line from pos to nl fits: the first in what is left, the others in less
                pos, run = nl + 1, 0
                continue
            if pos + room >= n:  # the block ends before the line reaches the cap
                run, pos = run + n - pos, n
                break
            end = _utf8_start(chunk, pos + room)
            kept.append(chunk[start:end])
            dropping, run, pos, start = True, LINE_CAP, pos + room, pos + room  # run: bytes kept or dropped
        kept.append(chunk[start:n])
        lines_before += chunk.count(b"\n")
        if dropping and at_end:
            cut.lines.append((lines_before + 1, run))
        yield b"".join(kept), at_end
        if at_end:
            return
