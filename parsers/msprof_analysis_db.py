"""torch_npu ``analysis.db`` (db export): step breakdown and communication analysis, in the text units.

Tables (TN ``DbConstant``; ``../shared/formats/ascend_profiler.md`` §a.11): ``StepTraceTime`` (µs, as
step_trace_time.csv), ``CommAnalyzerTime`` (start µs, times ms), ``CommAnalyzerBandwidth`` (MB = 10^6 B, ms;
one row per packet-size bucket, the per-transport figures repeated on each), ``CommAnalyzerMatrix``.  They
fill ``step_trace``, ``comm_ops``, ``comm_bandwidth`` and ``comm_matrix`` as step_trace_time.csv,
communication.json and communication_matrix.json do.  The tables are small (one row per step, op, link), so
they are read with ``sqlite3`` and handed to DuckDB as Arrow tables; REAL values go through ``Decimal(repr)``
as the JSON parser's do, so both exports give the same nanoseconds.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from typing import Any

from diag.errors import BadInputError
from parsers._base import ParseContext, ParseResult, Probe
from parsers._io import one_line, scaled_exact
from parsers._sqlite_export import SQLITE_MAGIC, open_readonly
from parsers.ascend_communication import _insert
from parsers.ascend_profiler_db import db_tables, skipped_as_duplicate

TABLES = ("StepTraceTime", "CommAnalyzerTime", "CommAnalyzerBandwidth", "CommAnalyzerMatrix")
TEXT_TWINS = ("step_trace_time.csv", "communication.json", "communication_matrix.json")
US, MS, MB = Decimal(1000), Decimal(1_000_000), Decimal(1_000_000)


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _step(value: Any) -> int | None:
    text = str(value or "")
    return _int(text[4:] if text.startswith("step") else text)


def _ratio(part: int | None, transit: int | None) -> float | None:
    if part is None or transit is None:
        return None
    return round(part / (part + transit), 4) if part + transit else 0.0


def _rows(con: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    cur = con.execute(f'SELECT * FROM "{table}"')
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def step_trace(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    keys = {
        "computing_ns": "computing", "comm_not_overlapped_ns": "communication_not_overlapped",
        "overlapped_ns": "overlapped", "communication_ns": "communication", "free_ns": "free",
        "stage_ns": "stage", "bubble_ns": "bubble",
        "comm_not_overlapped_excl_receive_ns": "communication_not_overlapped_and_exclude_receive",
        "preparing_ns": "preparing",
    }  # fmt: skip
    return [
        {"device_id": _int(r.get("deviceId")), "step": _int(r.get("step"))}
        | {k: scaled_exact(r.get(c), US) for k, c in keys.items()}
        for r in rows
    ]


def comm_ops(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        transit, wait, sync = (
            scaled_exact(r.get(k), MS) for k in ("transit_time", "wait_time", "synchronization_time")
        )
        out.append(
            {
                "step": _step(r.get("step")),
                "kind": r.get("type"),
                "op_name": r.get("hccl_op_name"),
                "group_name": r.get("group_name"),
                "start_ns": scaled_exact(r.get("start_timestamp"), US),
                "elapse_ns": scaled_exact(r.get("elapse_time"), MS),
                "transit_ns": transit,
                "wait_ns": wait,
                "sync_ns": sync,
                "idle_ns": scaled_exact(r.get("idle_time"), MS),
                "wait_ratio": _ratio(wait, transit),
                "sync_ratio": _ratio(sync, transit),
            }  # fmt: skip
        )
    return out


def comm_bandwidth(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = (
            r.get("step"),
            r.get("type"),
            r.get("hccl_op_name"),
            r.get("group_name"),
            r.get("transport_type"),
        )
        seen.setdefault(
            key,
            {
                "step": _step(r.get("step")),
                "kind": r.get("type"),
                "op_name": r.get("hccl_op_name"),
                "group_name": r.get("group_name"),
                "transport": r.get("transport_type"),
                "size_bytes": scaled_exact(r.get("transit_size"), MB),
                "transit_ns": scaled_exact(r.get("transit_time"), MS),
                "bandwidth_gbps": r.get("bandwidth"),
                "large_packet_ratio": r.get("large_packet_ratio"),
            },  # fmt: skip
        )
    return list(seen.values())


def comm_matrix(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "step": _step(r.get("step")),
            "kind": r.get("type"),
            "op_key": r.get("hccl_op_name"),
            "group_name": r.get("group_name"),
            "src_rank": _int(r.get("src_rank")),
            "dst_rank": _int(r.get("dst_rank")),
            "transport": r.get("transport_type"),
            "size_bytes": scaled_exact(r.get("transit_size"), MB),
            "transit_ns": scaled_exact(r.get("transit_time"), MS),
            "bandwidth_gbps": r.get("bandwidth"),
            "op_name": r.get("op_name"),
        }  # fmt: skip
        for r in rows
    ]


MAPPERS = {
    "StepTraceTime": ("step_trace", step_trace),
    "CommAnalyzerTime": ("comm_ops", comm_ops),
    "CommAnalyzerBandwidth": ("comm_bandwidth", comm_bandwidth),
    "CommAnalyzerMatrix": ("comm_matrix", comm_matrix),
}


class AnalysisDbParser:
    name = "ascend_analysis_db"
    version = 1
    platform = "ascend"

    def detect(self, probe: Probe) -> bool:
        if not probe.head.startswith(SQLITE_MAGIC):
            return False
        names = db_tables(probe.path) or set()
        return bool(names & set(TABLES)) and "STRING_IDS" not in names

    def parse(self, ctx: ParseContext) -> ParseResult:
        skipped = skipped_as_duplicate(ctx.path, TEXT_TWINS)
        if skipped is not None:
            return skipped
        result = ParseResult()
        try:
            con = open_readonly(ctx.path)
            try:
                present = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                for table, (target, mapper) in MAPPERS.items():
                    if table in present:
                        result.add(target, _insert(ctx, target, mapper(_rows(con, table))))
            finally:
                con.close()
        except (sqlite3.Error, UnicodeDecodeError) as exc:  # a column name that is not UTF-8 (a damaged file)
            raise BadInputError(ctx.display, f"cannot read as SQLite: {one_line(exc)}") from None
        return result


PARSER = AnalysisDbParser()
