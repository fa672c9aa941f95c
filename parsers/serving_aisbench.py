"""AISBench (MindIE / Ascend) serving results: the ``Performance Parameters`` and ``Common Metric`` box tables,
values with units in the cell. A table cut short keeps the rows read before the cut and the block is partial."""

from __future__ import annotations

import re
from typing import Any

from diag.errors import BadInputError
from parsers.serving_text import missing_figures, value_of

AIS_TITLE = re.compile(r"Performance Results of task \[([^\]]*)\]")
AIS_TABLE_HEAD = re.compile(r"^[│|]\s*(Performance Parameters|Common Metric)\s*[│|]")
_AIS_COMMON: dict[str, tuple[str, str]] = {
    "benchmark duration": ("duration_s", "duration"),
    "total requests": ("num_prompts", "int"),
    "failed requests": ("failed_requests", "int"),
    "success requests": ("successful_requests", "int"),
    "concurrency": ("mean_concurrency", "float"),
    "max concurrency": ("max_concurrency", "int"),
    "request throughput": ("request_throughput_rps", "float"),
    "total input tokens": ("total_input_tokens", "int"),
    "total generated tokens": ("total_output_tokens", "int"),
    "input token throughput": ("input_throughput_tps", "float"),
    "output token throughput": ("output_throughput_tps", "float"),
    "total token throughput": ("total_throughput_tps", "float"),
}
_AIS_STATS = {"average": "mean", "min": "min", "max": "max", "median": "median"}


# -- box tables -------------------------------------------------------------------------------------
def _cells(line: str) -> list[str] | None:
    body = line.strip()
    if not body or body[0] not in "│|":
        return None
    return [c.strip() for c in re.split(r"[│|]", body.strip("│|"))]


def _ais_tables(display: str, lines: list[str], start: int) -> tuple[list[list[list[str]]], int, str | None]:
    """The box tables from ``start`` on: each a list of rows (header first); index of the last line used; where
    the last table was cut short (``None`` when every table closed)."""
    tables: list[list[list[str]]] = []
    j, last, cut = start, start, None
    while j < len(lines):
        body = lines[j].strip()
        if body.startswith(("╒", "┌", "+")) or (body and body[0] in "│|" and not tables):
            rows: list[list[str]] = []
            k = j if body[0] in "│|" else j + 1
            while k < len(lines):
                b = lines[k].strip()
                cells = _cells(b)
                if cells is not None:
                    rows.append(cells)
                elif b.startswith(("╘", "└")) or (b.startswith("+") and not _cells(_at(lines, k + 1))):
                    break
                elif not b.startswith(("╞", "├", "+", "╪")):
                    cut = f"AISBench table of line {j + 1} cut at line {k + 1}"  # a pasted / tailed table
                    break
                k += 1
            else:
                cut = f"AISBench table of line {j + 1} not closed (file ends at line {len(lines)})"
            tables.append(rows)
            j = last = k if cut is None else k - 1
            if cut:
                break
        elif (body and tables) or (not tables and j - start > 5):
            break  # the tables are over, or no table follows the title
        j += 1
    if not tables or not any(len(t) > 1 for t in tables):
        raise BadInputError(display, f"line {start + 1}: AISBench result without its tables (truncated?)")
    return tables, last, cut


def _at(lines: list[str], k: int) -> str:
    return lines[k] if k < len(lines) else ""


def ais_block(display: str, lines: list[str], start: int) -> tuple[dict[str, Any], int]:
    row: dict[str, Any] = {"line_no": start + 1, "tool": "aisbench", "format": "box_table"}
    title = AIS_TITLE.search(lines[start])
    if title:
        backend, _, dataset = title.group(1).partition("/")
        row.update(backend=backend or None, dataset=dataset or None)
    tables, end, cut = _ais_tables(display, lines, start + (1 if title else 0))
    if cut and len(tables[-1][-1]) != len(tables[-1][0]):
        tables[-1].pop()  # the row the cut went through
    fields: dict[str, str] = {}
    latency: dict[str, dict[str, float]] = {}
    kinds = [t[0][0].lower() if t and t[0] else "" for t in tables]
    if "common metric" not in kinds and not cut:
        raise BadInputError(
            display, f"line {start + 1}: AISBench result has no 'Common Metric' table (truncated?)"
        )
    for table in tables:
        _ais_table_figures(display, start, table, row, fields, latency)
    if cut:
        row["partial"] = (
            f"block of line {start + 1}: {cut}; missing: {', '.join(missing_figures(row, latency))}"
        )
    else:
        for col in ("successful_requests", "duration_s"):
            if row.get(col) is None:
                raise BadInputError(display, f"line {start + 1}: AISBench result lacks {col}")
    row["fields"], row["latency_ms"] = fields, latency
    return row, end


def _ais_table_figures(
    display: str,
    start: int,
    table: list[list[str]],
    row: dict[str, Any],
    fields: dict[str, str],
    latency: dict[str, dict[str, float]],
) -> None:
    """One box table's rows into the block's figures (``row`` columns, ``latency`` stats, raw ``fields``)."""
    header = [h.lower() for h in table[0]]
    for cells in table[1:]:
        if len(cells) != len(header):
            raise BadInputError(display, f"line {start + 1}: AISBench row {cells[:1]} has {len(cells)} cells")
        name, stage = cells[0], cells[1].lower()
        key = name if stage == "total" else f"{name} [{stage}]"
        fields[key] = " | ".join(cells[2:])
        if stage != "total":
            continue
        if header[0] == "common metric" and name.lower() in _AIS_COMMON:
            col, kind = _AIS_COMMON[name.lower()]
            row[col] = value_of(display, start + 1, name, cells[2], kind)
        elif header[0] == "performance parameters" and name.upper() in ("TTFT", "TPOT", "ITL", "E2EL"):
            stats = latency.setdefault(name.lower(), {})
            for h, cell in zip(header[2:], cells[2:], strict=True):
                stat = _AIS_STATS.get(h, h if re.fullmatch(r"p\d+(?:\.\d+)?", h) else None)
                if stat:
                    stats[stat] = value_of(display, start + 1, name, cell, "latency")
