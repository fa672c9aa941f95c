"""Parsed log lines → records (a header line and the lines that continue it) → the rows of ``log_records``.

What a record says is taken from its own lines or from its origin, never from an unrelated record:

* **origin** — the process / source the record came from, from the line's outermost prefix, else the record's own
  pid field, else NULL (the file itself is the only source).  Forms, normalised:
  ``VllmWorker TP1 pid=961`` (vLLM ``(VllmWorker TP1 pid=961)``), ``EngineCore_DP0 pid=123``,
  ``RayWorkerWrapper pid=4567, ip=10.0.0.2`` (Ray: the text inside the parentheses, spaces collapsed),
  ``rank6`` (torchrun ``[rank6]:``), ``run/plog/plog-2111667_20251024111652406.log`` (a ``grep`` file prefix),
  ``pid 1234`` (a plog header's ``MODULE(1234,name)``, error-manager ``[PID: 1234]``, torch_npu ``(PID:1234, …)``).
* **records never span two sources** — a continuation line (indented, ``TraceBack``, ``Possible Cause``…) joins
  the last record whose first line has the same line prefix (the same process; lines without a prefix are one
  source, the file's own), not merely the line above: the lines of two interleaved processes make two records
  each, a line of another prefix always starts its own, so does an unprefixed line after a blank line (console
  captures: pasted or concatenated logs), and a continuation more than ``CONTINUATION_GAP_LINES``
  lines after the previous line of its source starts its own record (NULL origin) rather than reach that far.
* **rank, pid, device, codes, figures** — from the record's own lines (its first line's fields, then its text) or
  its origin (``rank=1`` / ``rank6`` in the prefix); the file name gives the pid / device of a plog file only.
* **time** — the record's own stamp; a stamp without a year (vLLM ``ERROR 06-25 10:45:23``, glog ``E1210 …``,
  c10 ``[W625 10:45:01.123…``) takes the year of the nearest dated record *of the same origin* in the same block,
  before it (else after it), and only when the result lies within ``YEAR_WINDOW_NS`` of that record (so a log that
  crosses New Year, or a reference a day away, leaves it NULL).  Otherwise a record without a stamp has NULL
  ``ts_ns``.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa

from parsers._log_codes import with_codes
from parsers._log_figures import with_figures
from parsers._log_grammar import COLUMNS, CONT, DEVICE_RX, LINE_FIELDS, RANK_RX

YEAR_WINDOW_NS = 24 * 3600 * 10**9
CONTINUATION_GAP_LINES = 50  # a continuation this many lines after its source's previous line starts a record
# The header of a glog-style line as PyTorch's TORCH_LOGS formatter writes it (torch/_logging/_internal.py
# TorchLogsFormatter: level letter, stamp to the microsecond, pid, file:line], then the trace id and artifact tags
# "[1/37] [__recompiles]") — it repeats the whole header before every line of a multi-line message, so a line whose
# header is the previous line's and whose text is indented (or empty) is the same log call's next line
# ("Recompiling function …", "    triggered by the following guard failure(s):", "    - 1/36: ___check_obj_id(…)").
_CALL_HEADER = r"[IWEFVD]\d{3,4} \d\d:\d\d:\d\d\.\d{6} +\d+ [^\s\]]+:\d+\](?: \[[^\]\n]*\])*"
_SLACK_NS = 10**9  # second-resolution stamps (vLLM, torch_npu) round down


def mark_starts(lines: pl.DataFrame, plog_mode: bool) -> pl.DataFrame:
    """A recognised header starts a record; in a console capture so does any line that is not a continuation,
    and an unprefixed line after a blank one (pasted or concatenated logs: the next one's indented first lines are
    its own; a prefixed process's record goes on, the blank line is not known to be its) — but not an indented line
    under the same TORCH_LOGS header as the line above (``_CALL_HEADER``: one multi-line message)."""
    start = pl.col("form").is_not_null()
    if not plog_mode:
        after_blank = (pl.col("ord").cast(pl.Int64) - pl.col("ord").cast(pl.Int64).shift(1)) > 1
        unprefixed = pl.col(
            "line_src"
        ).is_null()  # a blank line has no prefix: it ends only the file's own record
        start = start | ~pl.col("c").str.contains(CONT) | (after_blank.fill_null(False) & unprefixed)
        indented_head = pl.col("c").str.extract(f"^({_CALL_HEADER})(?:  +\\S| *$)", 1)
        same_call = indented_head == pl.col("c").str.extract(f"^({_CALL_HEADER})", 1).shift(1)
        start = start & ~same_call.fill_null(False)
    return lines.with_columns(start=start)


def _record_ids(lines: pl.DataFrame) -> pl.DataFrame:
    """``rec`` of each line: a start opens a record; another line joins the open record of its own prefix."""
    lines = lines.with_columns(start=pl.col("start") | (pl.int_range(pl.len()) == 0))
    if lines["line_src"].n_unique() <= 1:  # one source: a line continues the record above it
        return lines.with_columns(rec=pl.col("start").cum_sum().cast(pl.Int64) - 1)
    lines = lines.with_columns(_idx=pl.int_range(pl.len(), dtype=pl.Int64))  # a column: not per group
    key = pl.col("line_src").fill_null("")
    # the first line of a source, or one far from its source's previous line, opens a record
    far = (pl.col("_idx") - pl.col("_idx").shift(1).over(key)) > CONTINUATION_GAP_LINES
    lines = lines.with_columns(start=pl.col("start") | far.fill_null(True))
    lines = lines.with_columns(_owner=pl.when("start").then("_idx").forward_fill().over(key))
    lines = lines.with_columns(_owner=pl.coalesce("_owner", "_idx"))
    lines = lines.with_columns(_recno=pl.col("start").cum_sum().cast(pl.Int64) - 1)
    return lines.with_columns(rec=pl.col("_recno").gather(pl.col("_owner"))).drop("_idx", "_owner", "_recno")


def group_records(lines: pl.DataFrame) -> pl.DataFrame:
    """Records from lines with a ``start`` flag: the first line's fields, the raw text, continuation in msg.

    ``rec`` numbers the records from 0 in file order; only the lines of multi-line records are grouped.
    """
    lines = _record_ids(lines)
    if lines["start"].all():
        return lines.with_columns(raw=pl.col("l"), last_line=pl.col("line_no"))
    contiguous = lines["rec"].is_sorted()  # else two sources interleave: count each record's lines
    single = (
        pl.col("start") & pl.col("start").shift(-1, fill_value=True)
        if contiguous
        else pl.len().over("rec") == 1
    )
    one = lines.filter(single).with_columns(raw=pl.col("l"), last_line=pl.col("line_no"))
    firsts = [pl.col(c).first() for c in ("line_no", *LINE_FIELDS)]
    multi = (
        lines.filter(~single)
        .group_by("rec", maintain_order=True)
        .agg(
            *firsts,
            raw=pl.col("l").str.join("\n"),
            more=pl.col("c").slice(1).str.join("\n"),
            last_line=pl.col("line_no").last(),
        )
    )
    more = pl.col("more")
    multi = multi.with_columns(
        msg=pl.when(more != "").then(pl.col("msg") + "\n" + more).otherwise(pl.col("msg"))
    )
    keep = ["rec", "line_no", *LINE_FIELDS, "raw", "last_line"]
    return pl.concat([one.select(keep), multi.select(keep)]).sort("rec")


def _in_year(year: pl.Expr) -> pl.Expr:
    stamp = pl.concat_str(year.cast(pl.String), pl.lit("-"), pl.col("ny"))
    base = stamp.str.to_datetime("%Y-%m-%d %H:%M:%S", time_unit="ns", strict=False).cast(pl.Int64)
    return base + pl.col("nyf")


def with_years(rec: pl.DataFrame) -> pl.DataFrame:
    """ts_ns of records whose stamp has no year, from a dated record of the same origin (module docstring)."""
    todo = pl.col("ts_ns").is_null() & pl.col("ny").is_not_null()
    if not rec.select(todo.any()).item():
        return rec
    key = pl.col("origin").fill_null("")
    rec = rec.with_columns(
        _prev=pl.col("ts_ns").forward_fill().over(key), _next=pl.col("ts_ns").backward_fill().over(key)
    )
    guesses = []
    for ref, years in (("_prev", (0, 1)), ("_next", (0, -1))):
        year = pl.from_epoch(pl.col(ref), time_unit="ns").dt.year()
        for dy in years:
            t = _in_year(year + dy)
            lo, hi = (pl.col(ref) - _SLACK_NS, pl.col(ref) + YEAR_WINDOW_NS)
            if ref == "_next":
                lo, hi = (pl.col(ref) - YEAR_WINDOW_NS, pl.col(ref) + _SLACK_NS)
            guesses.append(pl.when(t.is_between(lo, hi)).then(t))
    return rec.with_columns(ts_ns=pl.when(todo).then(pl.coalesce(guesses)).otherwise("ts_ns")).drop(
        "_prev", "_next"
    )


def enrich(rec: pl.DataFrame, file_pid: int | None, file_device: int | None) -> pl.DataFrame:
    """Codes (every one, and the primary), figures, rank and device named in the record's own text; the year of
    yearless stamps; file-name pid / device."""
    cann = r"^[EWI][0-9A-Z]\d{4}$"
    first_cann = pl.col("codes").list.eval(pl.element().filter(pl.element().str.contains(cann))).list.first()
    rec = with_figures(with_codes(rec.with_columns(_form_code=pl.col("code"))))
    msg = pl.col("msg")
    letter = (  # a level from the header's code (EZ9999 → ERROR, W11001 → WARNING), else the first CANN code
        pl.coalesce("_form_code", first_cann).str.extract(r"^([EWI])[0-9A-Z]\d{4}$", 1)
        .replace({"E": "ERROR", "W": "WARNING", "I": "INFO"})
    )  # fmt: skip
    origin_rank = pl.col("origin").str.extract(r"(?:^rank|\brank=)(\d+)\b", 1)
    rec = rec.with_columns(
        level=pl.coalesce(pl.col("level"), letter),
        rank=pl.coalesce(
            pl.col("rank"),
            msg.str.extract(RANK_RX, 1).cast(pl.Int32, strict=False),
            origin_rank.cast(pl.Int32, strict=False),
        ),
        dev=pl.coalesce(
            pl.col("dev"),
            msg.str.extract(DEVICE_RX, 1).cast(pl.Int32, strict=False),
            pl.lit(file_device, pl.Int32),
        ),
        pid=pl.coalesce(pl.col("pid"), pl.lit(file_pid, pl.Int64)),
        pname=pl.when(pl.col("pname") != "").then(pl.col("pname")),
    )
    return with_years(rec.drop("_form_code"))


def to_table(rec: pl.DataFrame, run_id: int | None, file_id: int, record0: int) -> pa.Table:
    out = rec.with_columns(
        run_id=pl.lit(run_id, pl.Int64),
        file_id=pl.lit(file_id, pl.Int64),
        record_no=pl.col("rec") + (record0 + 1),  # the insert adds the records of the blocks before
        line_count=(pl.col("last_line") - pl.col("line_no") + 1).cast(pl.Int32),
        process_name=pl.col("pname"),
        device_id=pl.col("dev"),
        source_loc=pl.col("src"),
        message=pl.col("msg"),
    )
    return out.select(pl.col(c).cast(t) for c, t in COLUMNS.items()).to_arrow()
