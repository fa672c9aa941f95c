"""PyTorch profiler (Kineto) Chrome trace from a CUDA or ROCm run: ``{"traceEvents": [...], "deviceProperties": …}``.

The file is a JSON object, not an array, and reaches GBs (plain or ``.gz``), so it is never loaded into
Python objects.  One pass copies the ``traceEvents`` array into a temporary file (a kernel-side
``copy_file_range`` for a plain file, 8 MB chunks inflated on the way for ``.gz``) that DuckDB's
``read_json(format='array')`` reads once, with a projected ``args`` struct, into a temporary table; the small
metadata before and after the array (deviceProperties, distributedInfo, baseTimeNanoseconds …) is parsed
with ``json``.  Timestamps are µs: integers, or with ns fractions.  Relative µs (``4458676522690.655``, with
``baseTimeNanoseconds``) are exact as doubles; epoch µs with ns fractions (``1712195495519689.047``: 19
digits) are not, so for such traces the pass quotes every ``"ts"`` (a regex, ~95 MB/s: the one costly step)
and DuckDB converts the text exactly through DECIMAL.  Epoch ns = ts × 1000 + ``baseTimeNanoseconds`` (0
when absent).  A trace cut off mid-write stores its complete events and is marked partial.

Maps: ``kernel``/``Kernel`` → device_tasks CUDA_KERNEL (COMMUNICATION for nccl kernels), ``gpu_memcpy``/
``Memcpy`` and ``gpu_memset``/``Memset`` → MEMCPY, ``cuda_sync`` → SYNC; CPU ops, Python functions, user
annotations (CPU and GPU), CUDA runtime/driver calls → host_ops; flows (``ac2g``, ``async_cpu_to_gpu``,
``async_gpu``, ``fwdbwd``) → links; ``ProfilerStep#N`` → steps; ``[memory]`` events (``profile_memory=True``)
→ memory and op_memory (``parsers._kineto_memory``).  A trace recorded on AMD GPUs (same categories, HIP names) is stored as platform
``rocm`` (rules/platforms.toml).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from diag.archives import ArchiveLimits
from diag.errors import BadInputError
from diag.store import default_memory_limit, q, sql_literal
from parsers import _kineto_memory
from parsers._base import ParseContext, ParseResult, Probe
from parsers._gpu_vendor import is_rocm
from parsers._io import (
    add_partial,
    data_end,
    drop_untimed_events,
    element_ends,
    one_line,
    read_json_array_sql,
    zero_tail_note,
)
from parsers._json_split import remove as remove_parts
from parsers._json_split import split_array

CHUNK = 8 << 20
HEAD_LIMIT = 64 << 20  # the metadata before traceEvents (deviceProperties, INFO lines) is far smaller
GZIP_MAGIC = b"\x1f\x8b"
MAX_RATIO = ArchiveLimits().max_ratio  # inflated / compressed size beyond which a .gz is taken for a bomb
_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_TS = re.compile(rb'("ts"\s*:\s*)(-?[0-9][0-9.eE+-]*)')
_TS_SAMPLE = re.compile(rb'"ts"\s*:\s*"?-?([0-9]+)(?:\.([0-9]+))?')
_BOUNDARY = re.compile(rb"\}(?=\s*,\s*\{)")  # the end of an element followed by another
_CLOSE = re.compile(rb"[}\[]\s*\]")  # a ']' that may close the events array (after an event, or empty)
ARG_KEYS = ("stream", "device", "correlation", "bytes", "Input Dims", "Input type", "Call stack", "name")
KERNEL_CATS = ("kernel", "Kernel")
MEMCPY_CATS = ("gpu_memcpy", "Memcpy")
MEMSET_CATS = ("gpu_memset", "Memset")
SYNC_CATS = ("cuda_sync",)
HOST_CATS = {  # category as written -> as stored
    "cpu_op": "cpu_op", "Operator": "cpu_op", "operator": "cpu_op", "python_function": "python_function",
    "user_annotation": "user_annotation", "gpu_user_annotation": "gpu_user_annotation",
    "cuda_runtime": "cuda_runtime", "Runtime": "cuda_runtime", "runtime": "cuda_runtime",
    "cuda_driver": "cuda_driver",
}  # fmt: skip
FLOW_CATS = ("ac2g", "async_cpu_to_gpu", "async_gpu", "async", "fwdbwd")


@dataclass
class Extracted:
    events: Path  # a JSON array of the trace events
    meta: dict[str, Any] = field(default_factory=dict)  # every other top-level key
    partial: str | None = None
    quoted_ts: bool = False


def _chunks(path: Path, display: str = "") -> Iterator[bytes]:
    """The file's bytes, inflated when gzip'd; a cut-off gzip stream just ends (the JSON tells).

    Inflates CHUNK bytes at a time, and refuses a stream that inflates to over MAX_RATIO times its size
    (a gzip bomb) as diag.archives does for archive members."""
    cap = max(path.stat().st_size, 1 << 20) * MAX_RATIO
    inflated = 0
    with open(path, "rb") as fh:
        first = fh.read(CHUNK)
        if not first.startswith(GZIP_MAGIC):
            while first:
                yield first
                first = fh.read(CHUNK)
            return
        inflate = zlib.decompressobj(zlib.MAX_WBITS | 32)
        data = first
        while data:
            try:
                out = inflate.decompress(data, CHUNK)
            except zlib.error:
                return
            inflated += len(out)
            if inflated > cap:
                raise BadInputError(
                    display or str(path), f"inflates to over {MAX_RATIO:g}× its size (a decompression bomb?)"
                )
            if out:
                yield out
            if inflate.unconsumed_tail:
                data = inflate.unconsumed_tail
                continue
            if inflate.eof and inflate.unused_data:  # a multi-member gzip file
                data, inflate = inflate.unused_data, zlib.decompressobj(zlib.MAX_WBITS | 32)
                continue
            data = fh.read(CHUNK)
        with contextlib.suppress(zlib.error):
            if tail := inflate.flush():
                yield tail


def head_text(probe: Probe) -> str:
    """The start of the file as text (inflated when gzip'd), for detection."""
    head = probe.head
    if head.startswith(GZIP_MAGIC):
        try:
            head = zlib.decompressobj(zlib.MAX_WBITS | 32).decompress(head, 1 << 20)
        except zlib.error:
            return ""
    return head.decode("utf-8", errors="replace").lstrip("\ufeff")


def _needs_exact_ts(sample: bytes) -> bool:
    """True when a ``ts`` written with a fraction is not exact as a double: its digits, as an integer, reach
    2^52 (2^53 is where doubles stop holding every integer; one bit of margin for the rest of the trace).
    Below that, DuckDB's shortest round-trip rendering of the double gives back the digits as written."""
    for m in _TS_SAMPLE.finditer(sample):
        frac = (m.group(2) or b"").rstrip(b"0")
        if frac and int(m.group(1) + frac) >= 1 << 52:
            return True
    return False


def _copy_range(src: Path, dst: Path, offset: int) -> None:
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        size = os.fstat(fin.fileno()).st_size
        try:
            while offset < size:
                n = os.copy_file_range(fin.fileno(), fout.fileno(), min(size - offset, 1 << 30), offset)
                if n == 0:
                    break
                offset += n
        except (AttributeError, OSError):  # no copy_file_range here (or across these file systems)
            fin.seek(offset)
            fout.seek(0)
            fout.truncate()
            shutil.copyfileobj(fin, fout, CHUNK)


def _transform(rest: bytes, chunks: Iterator[bytes], out: Path, quote: bool) -> None:
    """Write the array from the decoded stream, quoting every ``"ts"`` number when ``quote`` (a regex never
    sees a number cut in two: each block is written up to its last comma, the rest carried over)."""
    carry = b""
    with open(out, "wb") as fh:
        for block in _with_first(rest, chunks):
            data = carry + block
            cut = data.rfind(b",") + 1 if quote else len(data)
            if quote and cut == 0 and len(data) < HEAD_LIMIT:
                carry = data
                continue
            fh.write(_TS.sub(rb'\1"\2"', data[:cut]) if quote else data[:cut])
            carry = data[cut:]
        fh.write(_TS.sub(rb'\1"\2"', carry) if quote else carry)


def extract(path: Path, out: Path, display: str) -> Extracted:
    """Copy the traceEvents array of ``path`` into ``out`` (see the module doc); bounded memory."""
    chunks = _chunks(path, display)
    head = b""
    for chunk in chunks:
        head += chunk
        if m := _KEY.search(head):
            break
        if len(head) > HEAD_LIMIT:
            break
    else:
        m = None
    if not m:
        raise BadInputError(
            display, "no traceEvents array in this JSON object (not a PyTorch profiler trace?)"
        )
    before, rest = head[: m.start()], head[m.end() - 1 :]
    quote = _needs_exact_ts(rest[: 1 << 20])
    with open(path, "rb") as fh:
        plain = not fh.read(2).startswith(GZIP_MAGIC)
    if plain and not quote:  # the array's bytes as they are: a kernel-side copy
        chunks.close()
        _copy_range(path, out, m.end() - 1)
    else:
        _transform(rest, chunks, out, quote)
    meta = _head_meta(before)
    zeros = _drop_zero_tail(out)
    end = _array_end(out)
    if end is not None:
        tail = _truncate(out, end)
        meta.update(_tail_meta(tail))
        return Extracted(out, meta, None, quote)
    size = out.stat().st_size
    cut = _complete_prefix(out, display)
    return Extracted(
        out,
        meta,
        f"truncated trace: the traceEvents array never closes; stored its complete events "
        f"(the first {cut} of {size} bytes of the array)"
        + ("" if "baseTimeNanoseconds" in meta else " — the metadata after the events is lost too")
        + zeros,
        quote,
    )


def _drop_zero_tail(out: Path) -> str:
    """Cut a zero-filled tail (what a crash leaves) off the copy ``out``; the note's words for it, or ''.

    Offsets are the copy's: those of the events array (of the inflated stream for a gzip'd trace)."""
    size = out.stat().st_size
    end = data_end(out)
    if end < size:
        os.truncate(out, end)
    return zero_tail_note(size, end).replace("the file is", "the array is")


def _with_first(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest


def _head_meta(before: bytes) -> dict[str, Any]:
    text = before.decode("utf-8", errors="replace").strip().lstrip("\ufeff").rstrip(", \r\n\t")
    try:
        return dict(json.loads(text + "}")) if text.startswith("{") else {}
    except (ValueError, TypeError, RecursionError):
        return {}


def _tail_meta(tail: bytes) -> dict[str, Any]:
    text = tail.decode("utf-8", errors="replace").strip().lstrip(",").strip()
    try:
        return dict(json.loads("{" + text)) if text.endswith("}") else {}
    except (ValueError, TypeError, RecursionError):
        return {}


def _array_end(out: Path) -> int | None:
    """Offset of the ']' closing the events array, or None when the file has none (a truncated trace).

    It is the first ']' after the last event's '}' (or right after '[' when there is none) past which the
    rest of the file is the object's remaining keys and its closing '}' (the metadata after the events:
    traceName, baseTimeNanoseconds…; it is small, so only the last HEAD_LIMIT bytes are searched).
    """
    size = out.stat().st_size
    window = 1 << 20
    with open(out, "rb") as fh:
        while True:
            start = max(0, size - window)
            fh.seek(start)
            tail = fh.read(size - start)
            for m in _CLOSE.finditer(tail):
                pos, empty = m.end() - 1, start + m.start() == 0 and tail[:1] == b"["
                after = tail[pos + 1 :].strip()
                if after != b"}" and not (after.startswith(b",") and _tail_meta(after)):
                    continue
                if empty or b'"ph"' in tail[:pos]:
                    return start + pos
            if start == 0 or window >= HEAD_LIMIT:
                return None
            window *= 4


def _truncate(out: Path, end: int) -> bytes:
    with open(out, "r+b") as fh:
        fh.seek(end + 1)
        tail = fh.read()
        fh.truncate(end + 1)
    return tail


def _complete_prefix(out: Path, display: str) -> int:
    """Cut ``out`` after its last complete event and close the array; the cut is checked by a full parse."""
    size = out.stat().st_size
    with open(out, "r+b") as fh:
        for tried, cut in enumerate(element_ends(out, _BOUNDARY)):
            if tried >= 8:
                raise BadInputError(display, "truncated trace; no complete prefix of events found", size)
            fh.seek(cut)
            saved = fh.read()
            fh.seek(cut)
            fh.write(b"]")
            fh.truncate(cut + 1)
            fh.flush()
            if _parses(out):
                return cut
            fh.seek(cut)
            fh.write(saved)  # undo, try an earlier boundary
            fh.truncate(cut + len(saved))
            fh.flush()
    raise BadInputError(display, "truncated trace with no complete event", size)


def _parses(path: Path) -> bool:
    """A full parse in a connection of its own: a failed statement would abort the ingest's transaction."""
    with duckdb.connect() as con:
        try:
            q(con, f"SET memory_limit='{default_memory_limit()}'")
            q(con, f"SELECT count(*) FROM {read_json_sql(path)}")
        except duckdb.Error:
            return False
    return True


def read_json_sql(path: Path | list[Path]) -> str:
    args = ", ".join(f'"{k}" VARCHAR' for k in ARG_KEYS)
    cols = {"ph": "VARCHAR", "cat": "VARCHAR", "name": "VARCHAR", "pid": "VARCHAR", "tid": "VARCHAR",
            "ts": "VARCHAR", "dur": "VARCHAR", "id": "VARCHAR", "args": f"STRUCT({args})"}  # fmt: skip
    return read_json_array_sql(path, cols)


def us_to_ns(col: str) -> str:
    """µs as JSON wrote it (integer, 3 decimals, a double's repr, or quoted text) → exact int64 ns."""
    return (
        # x 1000 as text ("5" -> "5000"): exact, and NULL rather than an overflow error past int64
        f"CASE WHEN NOT contains({col}, '.') AND NOT contains(lower({col}), 'e') THEN TRY_CAST({col} || '000' AS BIGINT) "
        f"WHEN {col}[-4] = '.' AND NOT contains(lower({col}), 'e') THEN TRY_CAST(replace({col}, '.', '') AS BIGINT) "
        f"WHEN abs(TRY_CAST({col} AS DOUBLE)) < 1e20 THEN coalesce("
        f"TRY_CAST(round(TRY_CAST({col} AS DECIMAL(38,9)) * 1000) AS BIGINT), "
        f"TRY_CAST(round(TRY_CAST({col} AS DOUBLE) * 1000) AS BIGINT)) END"
    )


def _lit(values: tuple[str, ...] | list[str]) -> str:
    return ", ".join(sql_literal(v) for v in values)


class KinetoTraceParser:
    name = "kineto_trace"
    version = 3  # 2: AMD traces stored as platform rocm; 3: [memory] events stored (#19)
    platform = "cuda"
    run_per_file = True
    fits_memory = True  # a temporary table that spills: DuckDB's limit fitted to the file (diag.store)

    def detect(self, probe: Probe) -> bool:
        text = head_text(probe).lstrip()
        # traceEvents may come after a long metadata block; Kineto's own keys say it too
        return text.startswith("{") and (
            '"traceEvents"' in text or ('"schemaVersion"' in text and '"deviceProperties"' in text)
        )

    def parse(self, ctx: ParseContext) -> ParseResult:
        out = ctx.tmpdir / f"kineto_{ctx.file_id}.json"
        result = ParseResult()
        try:
            ex = extract(ctx.path, out, ctx.display)
            result.partial = ex.partial
            self._load(ctx, ex, result)
        finally:
            out.unlink(missing_ok=True)
            with contextlib.suppress(duckdb.Error):  # an aborted transaction takes its temp tables with it
                q(ctx.con, "DROP TABLE IF EXISTS _kt")
                _kineto_memory.drop(ctx.con)
        return result

    def _load(self, ctx: ParseContext, ex: Extracted, result: ParseResult) -> None:
        con, run, file = ctx.con, ctx.run_id, ctx.file_id
        base = int(ex.meta.get("baseTimeNanoseconds") or 0)
        threads = int(q(con, "SELECT current_setting('threads')")[0][0])
        parts = split_array(ex.events, threads, ctx.tmpdir)  # one part per thread: see parsers._json_split
        try:
            q(
                con,
                f"""CREATE OR REPLACE TEMP TABLE _kt AS
                SELECT ph, cat, name, TRY_CAST(pid AS BIGINT) AS pid, TRY_CAST(tid AS BIGINT) AS tid, pid AS pid_text,
                       {us_to_ns("ts")} + {base} AS ts_ns, {us_to_ns("dur")} AS dur_ns, id, args AS a
                FROM {read_json_sql(parts)}""",
            )
            memory = _kineto_memory.stage(con, parts, f"{us_to_ns('ts')} + {base}")  # before the parts go
        except duckdb.Error as exc:
            raise BadInputError(ctx.display, f"cannot read the trace events: {one_line(exc)}") from None
        finally:
            if parts != [ex.events]:
                remove_parts(parts)
        add_partial(result, drop_untimed_events(con, "_kt", ctx.display))

        def insert(table: str, sql: str) -> None:
            result.add(table, q(con, sql)[0][0])

        gpu = _lit([*KERNEL_CATS, *MEMCPY_CATS, *MEMSET_CATS, *SYNC_CATS])
        devices = q(
            con,
            f"SELECT DISTINCT coalesce(TRY_CAST(a.device AS BIGINT), pid) FROM _kt WHERE ph = 'X' AND cat IN ({gpu})",
        )
        prefix = (
            "'GPU ' || coalesce(TRY_CAST(a.device AS BIGINT), pid) || ' · ' || " if len(devices) > 1 else ""
        )
        stream = "coalesce(TRY_CAST(a.stream AS BIGINT), tid)"
        direction = "regexp_extract(name, '^Memcpy (\\w+)', 1)"
        insert(
            "device_tasks",
            f"""INSERT INTO device_task_rows (run_id, file_id, source, stream, stream_id, task_kind, task_type, name,
                   start_ns, dur_ns, connection_id, memcpy_bytes, memcpy_direction)
            SELECT {run}, {file}, 'kineto', {prefix}'Stream ' || {stream}, {stream},
                   CASE WHEN cat IN ({_lit(KERNEL_CATS)}) AND regexp_matches(name, '^(void\\s+)?nccl') THEN 'COMMUNICATION'
                        WHEN cat IN ({_lit(KERNEL_CATS)}) THEN 'CUDA_KERNEL'
                        WHEN cat IN ({_lit(SYNC_CATS)}) THEN 'SYNC' ELSE 'MEMCPY' END,
                   CASE WHEN cat IN ({_lit(KERNEL_CATS)}) THEN 'CUDA_KERNEL'
                        WHEN cat IN ({_lit(MEMCPY_CATS)}) THEN 'CUDA_MEMCPY_' || coalesce(nullif({direction}, ''), 'Unknown')
                        WHEN cat IN ({_lit(MEMSET_CATS)}) THEN 'CUDA_MEMSET' ELSE 'CUDA_SYNC' END,
                   name, ts_ns, dur_ns, TRY_CAST(a.correlation AS BIGINT), TRY_CAST(a.bytes AS BIGINT),
                   CASE WHEN cat IN ({_lit(MEMCPY_CATS)}) THEN nullif({direction}, '') END
            FROM _kt WHERE ph = 'X' AND cat IN ({gpu})""",
        )
        category = "CASE cat " + " ".join(f"WHEN '{k}' THEN '{v}'" for k, v in HOST_CATS.items()) + " END"
        procs = q(
            con,
            "SELECT pid_text, any_value(a.name) FROM _kt WHERE ph = 'M' AND name = 'process_name' GROUP BY 1",
        )
        whens = " ".join(f"WHEN {_lit([str(p)])} THEN {_lit([str(n)])}" for p, n in procs if p and n)
        process = f"CASE pid_text {whens} END" if whens else "NULL"  # a CASE, not a join: a few processes
        insert(
            "host_ops",
            f"""INSERT INTO host_ops (run_id, file_id, pid, tid, process, category, name, start_ns, dur_ns,
                   correlation, input_dims, input_types, call_stack)
            SELECT {run}, {file}, pid, tid, {process}, {category}, name, ts_ns, dur_ns,
                   CASE WHEN cat IN ('cuda_runtime', 'Runtime', 'runtime', 'cuda_driver')
                        THEN TRY_CAST(a.correlation AS BIGINT) END,
                   a."Input Dims", a."Input type", a."Call stack"
            FROM _kt WHERE ph = 'X' AND cat IN ({_lit(list(HOST_CATS))})""",
        )
        insert(
            "steps",
            f"""INSERT INTO steps (run_id, file_id, step, start_ns, end_ns)
            SELECT {run}, {file}, TRY_CAST(regexp_extract(name, 'ProfilerStep\\s*#\\s*(\\d+)', 1) AS BIGINT),
                   min(ts_ns), max(ts_ns + dur_ns)
            FROM _kt WHERE ph = 'X' AND name LIKE 'ProfilerStep%#%' AND cat <> 'gpu_user_annotation' GROUP BY 3""",
        )
        insert(
            "links",
            f"""INSERT INTO links (run_id, file_id, flow_cat, flow_id, src_pid, src_tid, src_ts_ns, dst_pid, dst_tid,
                   dst_ts_ns)
            SELECT {run}, {file}, cat, id, arg_min(pid, ts_ns) FILTER (ph = 's'), arg_min(tid, ts_ns) FILTER (ph = 's'),
                   min(ts_ns) FILTER (ph = 's'), arg_min(pid, ts_ns) FILTER (ph = 'f'),
                   arg_min(tid, ts_ns) FILTER (ph = 'f'), min(ts_ns) FILTER (ph = 'f')
            FROM _kt WHERE ph IN ('s', 'f') AND cat IN ({_lit(FLOW_CATS)})
            GROUP BY cat, id HAVING count(*) FILTER (ph = 's') > 0 AND count(*) FILTER (ph = 'f') > 0""",
        )
        if memory:
            _kineto_memory.insert(ctx, result)
        self._run_info(ctx, ex.meta, [d[0] for d in devices if d[0] is not None])

    def _run_info(self, ctx: ParseContext, meta: dict[str, Any], devices: list[int]) -> None:
        props = [p for p in meta.get("deviceProperties") or [] if isinstance(p, dict)]
        busiest = q(
            ctx.con,
            f"""SELECT coalesce(TRY_CAST(a.device AS BIGINT), pid) FROM _kt WHERE ph = 'X' AND cat IN ({_lit(KERNEL_CATS)})
                GROUP BY 1 ORDER BY sum(dur_ns) DESC, 1 LIMIT 1""",
        )
        device = busiest[0][0] if busiest else (min(devices) if devices else None)
        by_id = {p.get("id", i): p for i, p in enumerate(props)}
        name = (by_id.get(device) or (props[0] if props else {})).get("name")
        dist = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else {}
        versions = {k: meta.get(k) for k in ("schemaVersion", "cupti_version", "cuda_runtime_version",
                                              "cuda_driver_version", "pytorch_version", "torch_version")}  # fmt: skip
        versions |= {"nccl": dist.get("nccl_version"), "distributed_backend": dist.get("backend")}
        versions = {
            ("kineto_schema" if k == "schemaVersion" else k): v for k, v in versions.items() if v is not None
        }
        rank = dist.get("rank")
        ctx.store.update_run(
            ctx.run_id,
            platform="rocm" if is_rocm(ctx.con, "_kt", meta, props) else None,
            device_name=name,
            device=device,
            rank=int(rank) if isinstance(rank, int | str) and str(rank).isdigit() else None,
            versions=json.dumps(versions) if versions else None,
        )


PARSER = KinetoTraceParser()
