"""vLLM ``benchmark_serving.py`` / ``vllm bench serve`` and SGLang ``bench_serving`` result blocks, whole, cut
short or without their header (``shared/formats/llm_inference_reference.md`` §9); the value conversion every
serving format shares.  Used by ``parsers.serving_bench``, which owns detection and storing.

A block cut short — no closing ``=====`` line, a last row without its value, a last line that is no row — is
returned with every figure it holds and a ``partial`` text naming where it was cut and the usual figures it
lacks; a bad line followed by more rows is garbled and a ``BadInputError`` naming its line.  A block without
its header is recognised by its rows: at least ``_MIN_ROWS`` distinct result rows (not the load preamble)
in consecutive lines under one prefix.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

from diag.errors import BadInputError

HEADER = re.compile(r"=+ ?Serving Benchmark Result ?=+\s*$", re.M)
_LAT_LABEL = re.compile(
    r"^(mean|median|std|min|max|p\d+(?:\.\d+)?) (ttft|tpot|itl|e2el|e2e latency) \(ms\)$", re.I
)
_NONE_VALUES = {"inf", "not set", "none", "n/a", "nan", "null", "-"}
_SGLANG_LABELS = {
    "backend",
    "traffic request rate",
    "max request concurrency",
    "max reqeuest concurrency",
    "total generated tokens (retokenized)",
}

# label (lower case, single spaces) -> (column, kind)
_TEXT_FIELDS: dict[str, tuple[str, str]] = {
    "successful requests": ("successful_requests", "int"),
    "failed requests": ("failed_requests", "int"),
    "maximum request concurrency": ("max_concurrency", "int"),
    "max request concurrency": ("max_concurrency", "int"),
    "max reqeuest concurrency": ("max_concurrency", "int"),
    "request rate configured (rps)": ("request_rate_rps", "float"),
    "traffic request rate": ("request_rate_rps", "float"),
    "backend": ("backend", "text"),
    "benchmark duration (s)": ("duration_s", "float"),
    "total input tokens": ("total_input_tokens", "int"),
    "total generated tokens": ("total_output_tokens", "int"),
    "request throughput (req/s)": ("request_throughput_rps", "float"),
    "input token throughput (tok/s)": ("input_throughput_tps", "float"),
    "output token throughput (tok/s)": ("output_throughput_tps", "float"),
    "total token throughput (tok/s)": ("total_throughput_tps", "float"),
    "total throughput (tok/s)": ("total_throughput_tps", "float"),
    "peak output token throughput (tok/s)": ("peak_output_throughput_tps", "float"),
    "peak concurrent requests": ("peak_concurrent_requests", "float"),
    "concurrency": ("mean_concurrency", "float"),
}


# -- values ----------------------------------------------------------------------------------------------------
def value_of(display: str, line_no: int, label: str, raw: str, kind: str) -> Any:
    text = raw.strip()
    if kind == "text":
        return text or None
    if text.lower() in _NONE_VALUES:
        return None
    unit = ""
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([A-Za-z/%]*)", text)
    if not m:
        raise BadInputError(display, f"line {line_no}: {label!r} has value {raw.strip()!r}, not a number")
    number, unit = float(m.group(1)), m.group(2).lower()
    if not math.isfinite(number) or (kind == "int" and abs(number) >= 2**63):  # 1e400, 20-digit counts
        raise BadInputError(display, f"line {line_no}: {label!r} has value {text!r}, out of range")
    if kind == "duration":  # AISBench prints durations with their unit; exact decimal scaling
        return float(Decimal(m.group(1)) / 1000) if unit in ("ms", "") else number
    if kind == "latency":
        return float(Decimal(m.group(1)) * {"s": Decimal(1000), "us": Decimal("0.001")}.get(unit, Decimal(1)))
    if kind == "int":
        if number != int(number):
            raise BadInputError(display, f"line {line_no}: {label!r} has value {text!r}, not a whole number")
        return int(number)
    return number


# -- vLLM / SGLang text blocks ---------------------------------------------------------------------------------
# Rows that only a result block prints (not the load preamble printed before it): at least _MIN_ROWS of them in
# a row of lines make a block without its header (a tail, an issue paste starting at "Successful requests:").
_RESULT_LABELS = {k for k in _TEXT_FIELDS if k not in {"backend", "traffic request rate", "concurrency"}} - {
    "maximum request concurrency",
    "max request concurrency",
    "max reqeuest concurrency",
    "request rate configured (rps)",
}
_MIN_ROWS = 3
# cheap test before the row-by-row one: sniffing runs this over every text file
ROW_HINT = re.compile(
    r"(?i)successful requests|benchmark duration|token throughput|request throughput|total (?:input|generated) "
    r"tokens|failed requests|(?:mean|median|p\d+) (?:ttft|tpot|itl|e2e)|-{3,}[a-z]"
)
_ROW = re.compile(r"([A-Za-z][^:]*?)\s*:\s*(.*)")
_SECTION = re.compile(r"-{3,}[^-].*?-{3,}")
_CLOSING = re.compile(r"={20,}")
_NUMERIC = re.compile(r"-?\d[\d.,eE+-]*\s*[A-Za-z/%]*")
_REMARK = re.compile(r"(-?\d[\d.eE+-]*)\s{2,}(\D*)")  # "0          <<<<<<< New line": a note after the value
# figures a vLLM block prints whatever the version: named in a partial block's message when absent
_CORE = (
    ("successful_requests", "Successful requests"),
    ("duration_s", "Benchmark duration (s)"),
    ("total_input_tokens", "Total input tokens"),
    ("total_output_tokens", "Total generated tokens"),
    ("request_throughput_rps", "Request throughput (req/s)"),
    ("output_throughput_tps", "Output token throughput (tok/s)"),
    ("total_throughput_tps", "Total token throughput (tok/s)"),
)
_CORE_LATENCY = (("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"))


def _prefix_pattern(prefix: str) -> re.Pattern[str]:
    """The header's prefix, with its digits generalised (a logging timestamp changes from line to line)."""
    return re.compile("".join(r"\d" if ch.isdigit() else re.escape(ch) for ch in prefix))


def _row_key(body: str) -> str | None:
    """The label of a row of a result block (any known label, preamble ones included), else None."""
    kv = _ROW.fullmatch(body)
    if not kv:
        return None
    key = " ".join(kv.group(1).lower().split())
    return key if key in _TEXT_FIELDS or _LAT_LABEL.match(key) else None


def _is_result_row(body: str) -> bool:
    key = _row_key(body)
    return key is not None and (key in _RESULT_LABELS or bool(_LAT_LABEL.match(key)))


def _row_start(line: str) -> int | None:
    """Where a result row or a section title starts in ``line`` (after any prefix), else None."""
    hint = ROW_HINT.search(line)
    if hint is None:
        return None
    for m in re.finditer(r"[A-Za-z-]", line[: hint.start() + 1]):
        body = line[m.start() :].strip()
        if _row_key(body) or _SECTION.fullmatch(body):
            return m.start()
        if m.start() > 80:
            break
    return None


def headerless_at(lines: list[str], start: int) -> bool:
    """A block without its header starts here: a result row (or section title) followed, under the same
    prefix, by result rows — at least _MIN_ROWS distinct ones before the first line that is neither."""
    at = _row_start(lines[start])
    if at is None:
        return False
    prefix = _prefix_pattern(lines[start][:at])
    seen: set[str] = set()
    for line in lines[start : start + 60]:
        m = prefix.match(line)
        body = line[m.end() :].strip() if m else ""
        if _SECTION.fullmatch(body):
            continue
        key = _row_key(body)
        if key is None:
            break
        if _is_result_row(body):
            seen.add(key)
    return len(seen) >= _MIN_ROWS


def _continues(lines: list[str], j: int, prefix: re.Pattern[str]) -> bool:
    """More rows of the block follow line ``j`` (then a bad line is garbled, not the point where it was cut)."""
    for line in lines[j : j + 3]:
        m = prefix.match(line)
        body = line[m.end() :].strip() if m else ""
        if _row_key(body) or _SECTION.fullmatch(body) or _CLOSING.fullmatch(body):
            return True
    return False


def _foreign(key: str, value: str, lines: list[str], j: int, prefix: re.Pattern[str]) -> bool:
    """A line after a cut block that only looks like a row (``INFO 08-05 04:46:12 [loggers.py:123] …``): an
    unknown label with a value that is no number, and no row of the block after it. Unknown rows with numbers
    (new vLLM rows, speculative-decoding rows) stay in the block."""
    known = key in _TEXT_FIELDS or _LAT_LABEL.match(key)
    return not known and not _NUMERIC.fullmatch(value.strip()) and not _continues(lines, j + 1, prefix)


def vllm_block(display: str, lines: list[str], start: int, headed: bool) -> tuple[dict[str, Any], int]:
    """One block from its header (or, ``headed=False``, its first row); cut short, it is returned partial."""
    at = HEADER.search(lines[start]).start() if headed else _row_start(lines[start])  # type: ignore[union-attr]
    prefix = _prefix_pattern(lines[start][:at])
    fields: dict[str, str] = {}
    latency: dict[str, dict[str, float]] = {}
    row: dict[str, Any] = {"line_no": start + 1, "tool": "vllm", "format": "text"}
    last: tuple[str, int] | None = None  # the last row read: where a cut block was cut
    for j in range(start + 1 if headed else start, len(lines)):
        m = prefix.match(lines[j])
        body = lines[j][m.end() :].strip() if m else None
        if body is None or HEADER.search(lines[j]):
            return _cut(display, row, fields, latency, start, last, headed), j - 1
        if _CLOSING.fullmatch(body):
            return _finish_text(display, row, fields, latency, start, headed), j
        if _SECTION.fullmatch(body):
            continue  # section title
        kv = _ROW.fullmatch(body)
        if not kv or not kv.group(2):
            if _continues(lines, j + 1, prefix):
                what = "has no value" if kv else "is not a 'label: value' row"
                label = kv.group(1) if kv else body[:60]
                raise BadInputError(display, f"line {j + 1}: {label!r} {what} (garbled block?)")
            return _cut(display, row, fields, latency, start, last, headed), j
        label, raw = kv.group(1), kv.group(2)
        remark = _REMARK.fullmatch(raw.strip())
        value = remark.group(1) if remark else raw
        key = " ".join(label.lower().split())
        if _foreign(key, value, lines, j, prefix):
            return _cut(display, row, fields, latency, start, last, headed), j - 1
        fields[label] = raw
        lat = _LAT_LABEL.match(key)
        if lat:
            metric = {"e2e latency": "e2el"}.get(lat.group(2), lat.group(2))
            latency.setdefault(metric, {})[lat.group(1)] = value_of(display, j + 1, label, value, "float")
        elif key in _TEXT_FIELDS:
            col, kind = _TEXT_FIELDS[key]
            row[col] = value_of(display, j + 1, label, value, kind)
        if key in _SGLANG_LABELS:
            row["tool"] = "sglang"
        last = (label, j + 1)
    return _cut(display, row, fields, latency, start, last, headed), len(lines) - 1


def missing_figures(row: dict[str, Any], latency: dict[str, dict[str, float]]) -> list[str]:
    names = [label for col, label in _CORE if row.get(col) is None]
    for metric, name in _CORE_LATENCY:
        stats = [s for s in ("mean", "median", "p99") if s not in latency.get(metric, {})]
        if stats:
            names.append(f"{name} {'/'.join(stats)}")
    return names


def _cut(
    display: str,
    row: dict[str, Any],
    fields: dict[str, str],
    latency: dict[str, dict[str, float]],
    start: int,
    last: tuple[str, int] | None,
    headed: bool,
) -> dict[str, Any]:
    """A block without its closing line: the figures it holds, and its message naming what it lacks."""
    if last is None:
        raise BadInputError(
            display, f"line {start + 1}: result block holds no row (cut right after its header)"
        )
    row["fields"], row["latency_ms"] = fields, latency
    where = "" if headed else " (no header: read by its rows)"
    row["partial"] = (
        f'block of line {start + 1}{where} cut after "{last[0]}" (line {last[1]}); '
        f"missing: {', '.join(missing_figures(row, latency)) or 'none of the usual figures'}"
    )
    return row


def _finish_text(
    display: str,
    row: dict[str, Any],
    fields: dict[str, str],
    latency: dict[str, dict[str, float]],
    start: int,
    headed: bool,
) -> dict[str, Any]:
    row["fields"], row["latency_ms"] = fields, latency
    if not headed:  # a closed tail: what came before its first row is not in the file
        missing = missing_figures(row, latency)
        if missing:
            row["partial"] = (
                f"block of line {start + 1} (no header: read by its rows); missing: {', '.join(missing)}"
            )
        return row
    for label in ("Successful requests", "Benchmark duration (s)"):
        if label not in fields:
            raise BadInputError(display, f"line {start + 1}: result block has no {label!r} row")
    return row
