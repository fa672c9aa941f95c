"""Serving-benchmark results: one ``serving_runs`` row per benchmark run.

Formats (``shared/formats/llm_inference_reference.md`` §9):

* vLLM ``benchmark_serving.py`` / ``vllm bench serve`` and SGLang ``bench_serving`` text blocks: a
  ``==== Serving Benchmark Result ====`` header, ``Label:  value`` rows, ``----Section----`` lines, a closing
  ``=====`` line.  Rows come and go with versions (unknown ones are kept in ``fields``); values may carry
  trailing blanks, lines CRLF, and every line the same prefix (Markdown indent, ``# ``, a logging prefix
  whose digits change from line to line).
* AISBench box tables (``Performance Parameters`` + ``Common Metric``), values with units in the cell.
* vLLM ``--save-result`` JSON and SGLang ``--output-file`` JSONL (one object per run).

Model, dataset, lengths and load come from the block itself or, for text, from the lines before it
(``Namespace(...)``, the command line, ``Maximum request concurrency:`` preambles).  A text block cut short
is stored with the figures it holds and the file is ``partial`` (its message names the cut and what is
missing); a block without its header is read by its rows (``parsers/serving_text.py``).  So is an AISBench
table cut short (the rows before the cut) and a JSON document or last JSONL line cut short (the members read
before the cut; a number the text ends on is dropped, it may itself be cut).  A garbled block, a broken line
inside a JSONL file or a cut before the request count is a ``BadInputError`` naming its line.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from diag.errors import BadInputError
from parsers._base import ParseContext, ParseResult, Probe
from parsers.serving_aisbench import AIS_TABLE_HEAD, AIS_TITLE, ais_block
from parsers.serving_text import (
    HEADER,
    ROW_HINT,
    headerless_at,
    missing_figures,
    value_of,
    vllm_block,
)

_JSON_KEYS = re.compile(r'"completed"\s*:')
_LAT_KEY = re.compile(r"^(mean|median|std|min|max|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el|e2e_latency)_ms$")
_JSON_FIELDS: dict[str, tuple[str, str]] = {
    "completed": ("successful_requests", "int"),
    "failed": ("failed_requests", "int"),
    "num_failed": ("failed_requests", "int"),
    "duration": ("duration_s", "float"),
    "total_input_tokens": ("total_input_tokens", "int"),
    "total_output_tokens": ("total_output_tokens", "int"),
    "request_throughput": ("request_throughput_rps", "float"),
    "input_throughput": ("input_throughput_tps", "float"),
    "output_throughput": ("output_throughput_tps", "float"),
    "total_token_throughput": ("total_throughput_tps", "float"),
    "total_throughput": ("total_throughput_tps", "float"),
    "max_output_tokens_per_s": ("peak_output_throughput_tps", "float"),
    "max_concurrent_requests": ("peak_concurrent_requests", "float"),
    "concurrency": ("mean_concurrency", "float"),
    "model_id": ("model", "text"),
    "model": ("model", "text"),
    "backend": ("backend", "text"),
    "dataset_name": ("dataset", "text"),
    "request_rate": ("request_rate_rps", "float"),
    "max_concurrency": ("max_concurrency", "int"),
    "random_input_len": ("input_len", "int"),
    "random_output_len": ("output_len", "int"),
    "num_prompts": ("num_prompts", "int"),
    "hardware": ("hardware", "text"),
    "device": ("hardware", "text"),
    "gpu": ("hardware", "text"),
    "platform": ("platform", "text"),
}
# Namespace(...) / command-line arguments -> column
_ARGS = {
    "model": "model",
    "served_model_name": "model",
    "backend": "backend",
    "dataset_name": "dataset",
    "random_input_len": "input_len",
    "random_input": "input_len",
    "random_output_len": "output_len",
    "random_output": "output_len",
    "max_concurrency": "max_concurrency",
    "request_rate": "request_rate_rps",
    "num_prompts": "num_prompts",
    "num_prompt": "num_prompts",
}
_KINDS = {
    "input_len": "int",
    "output_len": "int",
    "max_concurrency": "int",
    "num_prompts": "int",
    "request_rate_rps": "float",
}
_NS_ARG = re.compile(r"\b(\w+)=('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,()\s]+)")
_CLI_ARG = re.compile(r"--([a-z][\w-]*)[= ]+(?!-)(\"[^\"]*\"|'[^']*'|\S+)")
_PLATFORM_WORDS = {"npu": "ascend", "ascend": "ascend", "gpu": "cuda", "nvidia": "cuda", "cuda": "cuda"}
_PLATFORM_HINTS = (
    ("ascend", re.compile(r"\b(?:ascend|npu|torch_npu|vllm[-_]ascend|npu-smi)\b", re.I)),
    ("cuda", re.compile(r"\b(?:cuda|nvidia|nvidia-smi)\b", re.I)),
)


class ServingBenchParser:
    name = "serving_bench"
    version = 3  # 2: partial and headerless blocks are stored; 3: cut JSON / AISBench results too
    platform = "ascend"  # unused: results create no run (they join the run of their folder, if any)
    creates_run = False

    def detect(self, probe: Probe) -> bool:
        text = probe.text
        if text.lstrip().startswith("{"):
            return bool(_JSON_KEYS.search(text)) and '"total_input_tokens"' in text
        if HEADER.search(text) or AIS_TITLE.search(text):
            return True
        if re.search(r"^\S*\s*[│|]\s*Performance Parameters\s*[│|]", text, re.M):
            return True
        if not ROW_HINT.search(text):
            return False
        lines = text.splitlines()
        return any(headerless_at(lines, i) for i in range(len(lines)))

    def parse(self, ctx: ParseContext) -> ParseResult:
        text = _read(ctx)
        partial: list[str] = []
        if text.lstrip().startswith("{"):
            rows = _json_rows(ctx.display, text)
            partial = [r["partial"] for r in rows if r.get("partial")]
        else:
            rows, partial = _text_rows(ctx.display, text)
        if not rows:
            raise BadInputError(ctx.display, "no serving benchmark result found")
        platform = _platform_hint(text)
        # a sequence, not max()+1: files ingested at once (diag ingest --jobs) must not draw the same ids
        ids = [
            int(r[0])
            for r in ctx.con.execute("SELECT nextval('seq_serving') FROM range(?)", [len(rows)]).fetchall()
        ]
        for i, row in enumerate(rows, 1):
            stated = str(row.get("platform") or "").lower()
            row["platform"] = _PLATFORM_WORDS.get(stated, stated or None) if stated else platform
            row.update(run_id=ctx.run_id, file_id=ctx.file_id, serving_id=ids[i - 1], block_no=i)
            latency = row.get("latency_ms") or {}
            for stat in ("mean", "median", "p99"):
                for metric in ("ttft", "tpot", "itl", "e2el"):
                    row[f"{metric}_{stat}_ms"] = latency.get(metric, {}).get(stat)
            row["latency_ms"] = json.dumps(latency)
            row["fields"] = json.dumps(row.get("fields") or {}, ensure_ascii=False, default=str)
            cols = list(row)
            ctx.con.execute(
                f"INSERT INTO serving_runs ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})",
                [row[c] for c in cols],
            ).fetchall()
        result = ParseResult(partial=f"partial: {'; '.join(partial)}" if partial else None)
        result.add("serving_runs", len(rows))
        return result


def _read(ctx: ParseContext) -> str:
    data = ctx.path.read_bytes()
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise BadInputError(ctx.display, "neither UTF-8 nor GB18030 text")


def _platform_hint(text: str) -> str | None:
    found = {name for name, pattern in _PLATFORM_HINTS if pattern.search(text)}
    return found.pop() if len(found) == 1 else None


# -- text files: vLLM / SGLang blocks (parsers/serving_text.py) and AISBench tables ----------------------
def _text_rows(display: str, text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The blocks of a text file, and for each partial one what it lacks (the file's message)."""
    lines = text.splitlines()
    rows: list[dict[str, Any]] = []
    i, after_last = 0, 0
    while i < len(lines):
        line = lines[i]
        if HEADER.search(line):
            row, end = vllm_block(display, lines, i, headed=True)
            row.update({k: v for k, v in _preamble(lines[after_last:i]).items() if row.get(k) is None})
        elif AIS_TITLE.search(line) or AIS_TABLE_HEAD.search(line.strip()):
            row, end = ais_block(display, lines, i)
        elif headerless_at(lines, i):
            row, end = vllm_block(display, lines, i, headed=False)
            row.update({k: v for k, v in _preamble(lines[after_last:i]).items() if row.get(k) is None})
        else:
            i += 1
            continue
        rows.append(row)
        i = after_last = end + 1
    return rows, [r["partial"] for r in rows if r.get("partial")]


def _preamble(lines: list[str]) -> dict[str, Any]:
    """Run settings printed before a block: Namespace(...), the command line, the load preamble."""
    found: dict[str, Any] = {}
    for line in lines[-400:]:
        args: list[tuple[str, str]] = []
        if "Namespace(" in line:
            args = _NS_ARG.findall(line.split("Namespace(", 1)[1])
        elif "bench" in line and "--" in line:
            args = [(k.replace("-", "_"), v) for k, v in _CLI_ARG.findall(line)]
        for key, raw in args:
            col = _ARGS.get(key)
            value = raw.strip("'\"")
            if col and value not in ("None", ""):
                kind = _KINDS.get(col, "text")
                try:
                    found[col] = value_of("", 0, key, value, kind)
                except BadInputError:
                    continue
        m = re.search(r"(?:Maximum request concurrency|Traffic request rate):\s*(\S+)", line)
        if m:
            col = "max_concurrency" if "concurrency" in line else "request_rate_rps"
            with contextlib.suppress(BadInputError):
                found[col] = value_of("", 0, col, m.group(1), _KINDS[col])
    return found


# -- JSON (--save-result) / JSONL (--output-file) -------------------------------------------------------------
def _json_rows(display: str, text: str) -> list[dict[str, Any]]:
    """One result per object: the whole text as one document, else one per line (JSONL). A document or last
    line cut short (a pasted or copied-while-running file) keeps the members read before the cut, partial."""
    try:
        return [_json_row(display, 1, json.loads(text))]
    except json.JSONDecodeError:
        pass
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    rows: list[dict[str, Any]] = []
    for i, (n, line) in enumerate(lines):
        try:
            rows.append(_json_row(display, n, json.loads(line)))
            continue
        except json.JSONDecodeError as exc:
            error = f"line {n}: not valid JSON ({exc.msg}; truncated?)"
        if i == 0:  # one document spread over lines (--save-result is indented), cut short
            return [_cut_json_row(display, 1, text, error)]
        if i == len(lines) - 1:  # the last line of a JSONL file, cut short
            rows.append(_cut_json_row(display, n, line, error))
            break
        raise BadInputError(display, error)  # a broken line inside: garbled, not cut
    return rows


def _cut_json_row(display: str, n: int, text: str, error: str) -> dict[str, Any]:
    members, last_key, cut_line = _members_before_cut(text)
    if "completed" not in members:
        raise BadInputError(display, error)
    row = _json_row(display, n, members, whole=False)
    where = f"line {n + cut_line - 1}"
    row["partial"] = (
        f'result {n} cut after "{last_key}" ({where}); '
        f"missing: {', '.join(missing_figures(row, row['latency_ms'])) or 'none of the usual figures'}"
    )
    return row


_KEY_SEP = re.compile(r"\s*:\s*")
_MEMBER_GAP = re.compile(r"\s*,?\s*")


def _members_before_cut(text: str) -> tuple[dict[str, Any], str | None, int]:
    """The members of a top-level JSON object read one by one until the text breaks: the members, the last key
    read and the line (1-based, in ``text``) where reading stopped."""
    decoder = json.JSONDecoder()
    members: dict[str, Any] = {}
    last_key: str | None = None
    i = text.find("{") + 1
    while 0 < i < len(text):
        at = _MEMBER_GAP.match(text, i).end()
        try:
            key, after_key = decoder.raw_decode(text, at)
            sep = _KEY_SEP.match(text, after_key)
            if not isinstance(key, str) or sep is None:
                break
            value, end = decoder.raw_decode(text, sep.end())
        except (json.JSONDecodeError, ValueError):
            break
        if end >= len(text.rstrip()) and isinstance(value, int | float):
            break  # a number the text ends on may itself be cut (98 of 980)
        i = end
        members[key], last_key = value, key
    return members, last_key, text.count("\n", 0, max(i, 0)) + 1


def _json_row(display: str, n: int, obj: Any, whole: bool = True) -> dict[str, Any]:
    if not isinstance(obj, dict) or (whole and ("completed" not in obj or "duration" not in obj)):
        raise BadInputError(display, f"result {n}: not a benchmark result (no 'completed' / 'duration')")
    row: dict[str, Any] = {"line_no": n, "tool": "sglang" if "mean_e2e_latency_ms" in obj else "vllm"}
    row["format"] = "json"
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    latency: dict[str, dict[str, float]] = {}
    for key, value in {**meta, **obj}.items():
        lat = _LAT_KEY.match(key)
        if lat and isinstance(value, int | float):
            metric = {"e2e_latency": "e2el"}.get(lat.group(2), lat.group(2))
            latency.setdefault(metric, {})[lat.group(1)] = float(value)
        elif key in _JSON_FIELDS and value is not None and not isinstance(value, list | dict):
            col, kind = _JSON_FIELDS[key]
            row[col] = value_of(display, n, key, str(value), kind)
    if row.get("failed_requests") is None and isinstance(obj.get("errors"), list) and whole:
        row["failed_requests"] = sum(1 for e in obj["errors"] if e)
    row["latency_ms"] = latency
    row["fields"] = {k: v for k, v in obj.items() if not isinstance(v, list | dict)}
    return row


PARSER = ServingBenchParser()
