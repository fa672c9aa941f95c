"""``communication.json`` and ``communication_matrix.json``: per-step HCCL op timing, bandwidth and links.

Both are nested objects keyed by step, op kind, op name (``<op>@<group>``) and transport or link — dynamic
keys that a columnar reader cannot project — and small (KB–MB per rank), so they are walked in Python and
handed to DuckDB as Arrow tables. Times are ms (start µs), sizes decimal MB (10^6 B).
"""

from __future__ import annotations

import contextlib
import json
import re
from decimal import Decimal
from typing import Any

import duckdb

from diag.errors import BadInputError
from diag.store import q
from parsers._base import ParseContext, ParseResult, Probe
from parsers._io import one_line, scaled_exact

_STEP_KEY = re.compile(r'^\s*\{\s*"step\d*"\s*:\s*\{\s*"(p2p|collective)"')
_MS = Decimal(1_000_000)
_MB = Decimal(1_000_000)


def _ns(value: Any, factor: Decimal = _MS) -> int | None:
    return scaled_exact(value, factor)


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer of 400 digits
        return None


def _step(key: str) -> int | None:
    digits = key[4:] if key.startswith("step") else ""
    return int(digits) if digits.isdigit() else None


def _split_op(key: str) -> tuple[str, str | None]:
    name, _, group = key.rpartition("@")
    return (name, group) if name else (key, None)


def load_json_object(ctx: ParseContext) -> dict[str, Any]:
    try:
        with open(ctx.path, encoding="utf-8") as fh:
            data = json.load(fh, parse_float=Decimal)
    except UnicodeDecodeError as exc:
        raise BadInputError(ctx.display, "not UTF-8 text", offset=exc.start) from None
    except json.JSONDecodeError as exc:
        raise BadInputError(ctx.display, f"invalid JSON: {exc.msg}", offset=exc.pos) from None
    except (ValueError, RecursionError) as exc:  # a 5,000-digit number, arrays nested 100,000 deep
        raise BadInputError(ctx.display, f"invalid JSON: {type(exc).__name__}: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        raise BadInputError(ctx.display, "expected a JSON object at the top level")
    return data


def _insert(ctx: ParseContext, table: str, rows: list[dict[str, Any]]) -> int:
    if not rows:
        return 0
    import pyarrow as pa  # here: ascend_profiler_info and the registry import this module for every ingest

    try:
        arrow = pa.Table.from_pylist(rows)
        cols = ", ".join(f'"{c}"' for c in arrow.column_names)
        ctx.con.register("_rows", arrow)
        try:
            q(
                ctx.con,
                f'INSERT INTO "{table}" (run_id, file_id, {cols}) SELECT {ctx.run_id}, {ctx.file_id}, {cols} FROM _rows',
            )
        finally:
            with contextlib.suppress(duckdb.Error):  # an aborted transaction refuses even this
                ctx.con.unregister("_rows")
    except (OverflowError, pa.ArrowException, duckdb.Error) as exc:  # e.g. a rank id or step past 2^31
        raise BadInputError(ctx.display, f"a value out of range for {table}: {one_line(exc, 200)}") from None
    return len(rows)


def _walk(data: dict[str, Any], display: str):
    for step_key, kinds in data.items():
        if not isinstance(kinds, dict):
            raise BadInputError(display, f"step {step_key!r} is not an object")
        for kind in ("collective", "p2p"):
            ops = kinds.get(kind) or {}
            if not isinstance(ops, dict):
                raise BadInputError(display, f"{step_key}.{kind} is not an object")
            for op_key, body in ops.items():
                if op_key == "Total Op Info" or not isinstance(body, dict):
                    continue
                yield _step(step_key), kind, op_key, body


class CommunicationParser:
    name = "ascend_communication"
    version = 1
    platform = "ascend"

    def detect(self, probe: Probe) -> bool:
        return bool(_STEP_KEY.match(probe.text)) and "Communication Time Info" in probe.text

    def parse(self, ctx: ParseContext) -> ParseResult:
        data = load_json_object(ctx)
        ops: list[dict[str, Any]] = []
        bws: list[dict[str, Any]] = []
        for step, kind, op_key, body in _walk(data, ctx.display):
            name, group = _split_op(op_key)
            t = body.get("Communication Time Info") or {}
            ops.append(
                {
                    "step": step,
                    "kind": kind,
                    "op_name": name,
                    "group_name": group,
                    "start_ns": _ns(t.get("Start Timestamp(us)"), Decimal(1000)),
                    "elapse_ns": _ns(t.get("Elapse Time(ms)")),
                    "transit_ns": _ns(t.get("Transit Time(ms)")),
                    "wait_ns": _ns(t.get("Wait Time(ms)")),
                    "sync_ns": _ns(t.get("Synchronization Time(ms)")),
                    "idle_ns": _ns(t.get("Idle Time(ms)")),
                    "wait_ratio": _float(t.get("Wait Time Ratio")),
                    "sync_ratio": _float(t.get("Synchronization Time Ratio")),
                }
            )
            for transport, b in (body.get("Communication Bandwidth Info") or {}).items():
                if not isinstance(b, dict):
                    continue
                bws.append(
                    {
                        "step": step,
                        "kind": kind,
                        "op_name": name,
                        "group_name": group,
                        "transport": transport,
                        "size_bytes": _ns(b.get("Transit Size(MB)"), _MB),
                        "transit_ns": _ns(b.get("Transit Time(ms)")),
                        "bandwidth_gbps": _float(b.get("Bandwidth(GB/s)")),
                        "large_packet_ratio": _float(b.get("Large Packet Ratio")),
                    }
                )
        result = ParseResult()
        result.add("comm_ops", _insert(ctx, "comm_ops", ops))
        result.add("comm_bandwidth", _insert(ctx, "comm_bandwidth", bws))
        return result


class CommunicationMatrixParser:
    name = "ascend_communication_matrix"
    version = 1
    platform = "ascend"

    def detect(self, probe: Probe) -> bool:
        return (
            bool(_STEP_KEY.match(probe.text))
            and "Communication Time Info" not in probe.text
            and ("Transport Type" in probe.text or probe.name.startswith("communication_matrix"))
        )

    def parse(self, ctx: ParseContext) -> ParseResult:
        data = load_json_object(ctx)
        rows: list[dict[str, Any]] = []
        for step, kind, op_key, links in _walk(data, ctx.display):
            name, group = _split_op(op_key)
            for link, b in links.items():
                if not isinstance(b, dict):
                    continue
                src, _, dst = link.partition("-")
                rows.append(
                    {
                        "step": step,
                        "kind": kind,
                        "op_key": name,
                        "group_name": group,
                        "src_rank": int(src) if src.strip().isdigit() else None,
                        "dst_rank": int(dst) if dst.strip().isdigit() else None,
                        "transport": b.get("Transport Type"),
                        "size_bytes": _ns(b.get("Transit Size(MB)"), _MB),
                        "transit_ns": _ns(b.get("Transit Time(ms)")),
                        "bandwidth_gbps": _float(b.get("Bandwidth(GB/s)")),
                        "op_name": b.get("Op Name"),
                    }
                )
        result = ParseResult()
        result.add("comm_matrix", _insert(ctx, "comm_matrix", rows))
        return result


PARSER = CommunicationParser()
MATRIX_PARSER = CommunicationMatrixParser()
