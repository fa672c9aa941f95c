"""Shapes of one op: its distinct input shapes with their time, the dimension that varies, and shapes per step.

The figures per shape are summed in DuckDB (``diag.analyses.ops.rows_sql``: the same rows as the op table); the
few distinct shape strings are then read in Python to find the axes whose size differs between them, named from
``diag/rules/op_shape_axes.csv`` (which input and axis of which op family is tokens, KV length, batch, heads…).
An axis no rule names is reported as ``input i axis j``: what varies is still a fact, its meaning is not guessed.

``OP State`` (kernel_details: dynamic | static) is carried per shape where stored: a dynamic-shape op recompiles
or re-tiles for every new shape, so many distinct shapes per step are the churn the bucket sizes should cover.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from diag.analyses.counts import OP_TYPE_SQL
from diag.analyses.ops import figures_table, platform_of, rows_sql
from diag.sql_text import OpsBy
from diag.store import Store

RULES = Path(__file__).resolve().parent.parent / "rules" / "op_shape_axes.csv"
DIMS = (
    "tokens",
    "query_seq",
    "kv_len",
    "batch",
    "batch_or_tokens",
    "heads",
    "head_dim",
    "hidden",
    "k",
    "n",
    "experts",
)
BY_SHAPE = ("op", "kernel")
# dimensions that change from call to call of one call site; the others (K, N, hidden, heads, head dim) are fixed
# by the model, so shapes that differ in them are different call sites (layers, projections)
ACTIVITY = ("tokens", "query_seq", "kv_len", "batch", "batch_or_tokens")


@dataclass(frozen=True)
class AxisRule:
    priority: int
    pattern: str
    input: int
    rank: int
    axis: int
    dim: str
    label: str
    example_op: str
    example_shapes: str
    example_value: int


@cache
def axis_rules() -> tuple[AxisRule, ...]:
    """The rules in priority order (read once per process)."""
    with open(RULES, encoding="utf-8") as fh:
        reader = csv.DictReader(line for line in fh if not line.startswith("#"))
        out = [
            AxisRule(int(r["priority"]), r["pattern"], int(r["input"]), int(r["rank"]), int(r["axis"]),
                     r["dim"], r["label"], r["example_op"], r["example_shapes"], int(r["example_value"]))
            for r in reader
        ]  # fmt: skip
    for r in out:
        if r.dim not in DIMS or not 0 <= r.axis < r.rank:
            raise ValueError(f"{RULES}: bad rule {r}")
    return tuple(sorted(out, key=lambda r: r.priority))


def axis_rule(op: str | None, input_index: int, rank: int, axis: int) -> AxisRule | None:
    """The first rule (by priority) whose pattern matches the lower-cased op and that names this input axis."""
    low = (op or "").lower()
    for r in axis_rules():
        if (r.input, r.rank, r.axis) == (input_index, rank, axis) and re.search(r.pattern, low):
            return r
    return None


def parse_shapes(text: str | None) -> list[tuple[int, ...] | None]:
    """``"16,3584;3584"`` → ``[(16, 3584), (3584,)]``; a tensor with a non-integer dim (or none) is None."""
    if not text:
        return []
    out: list[tuple[int, ...] | None] = []
    for tensor in text.split(";"):
        dims = [d.strip() for d in tensor.split(",")]
        out.append(tuple(int(d) for d in dims) if dims and all(d.isdigit() for d in dims) else None)
    return out


def _axes(text: str | None, op: str | None) -> list[tuple[int, int, int, int, AxisRule | None]]:
    """(input, rank, axis, size, rule) of every integer dim of a shape string."""
    out = []
    for i, dims in enumerate(parse_shapes(text)):
        for j, size in enumerate(dims or ()):
            out.append((i, len(dims or ()), j, size, axis_rule(op, i, len(dims or ()), j)))
    return out


def _site(text: str | None, op: str | None) -> tuple:
    """The shape with its activity axes (tokens, sequence, KV length, batch) blanked: what stays the same from
    call to call of one call site (weights, hidden size, heads)."""
    return (len(parse_shapes(text)),) + tuple(
        (i, rank, j, None if rule and rule.dim in ACTIVITY else size)
        for i, rank, j, size, rule in _axes(text, op)
    )


def varying_by_shape(shapes: list[str | None], op: str | None) -> dict[str | None, list[dict[str, Any]]]:
    """For each distinct shape: the activity axes whose size differs between the shapes of its call site (the
    same shape but for those axes), with this shape's value. MatMuls of different layers differ in K and N: they
    are different sites, so a K that differs between layers is not reported as varying."""
    sites: dict[tuple, list[str | None]] = {}
    for text in shapes:
        sites.setdefault(_site(text, op), []).append(text)
    out: dict[str | None, list[dict[str, Any]]] = {}
    for members in sites.values():
        sizes: dict[tuple[int, int, int], set[int]] = {}
        for text in members:
            for i, rank, j, size, rule in _axes(text, op):
                if rule and rule.dim in ACTIVITY:
                    sizes.setdefault((i, rank, j), set()).add(size)
        for text in members:
            found = [
                {"dim": rule.dim, "label": rule.label, "value": size}
                for i, rank, j, size, rule in _axes(text, op)
                if rule and len(sizes.get((i, rank, j), ())) > 1
            ]  # key and value both carry the KV length: each (label, value) once
            out[text] = [v for k, v in enumerate(found) if v not in found[:k]]
    return out


def varying_axes(shapes: list[str | None], op: str | None) -> list[dict[str, Any]]:
    """The activity dimensions that vary within a call site of the op, with the sizes seen, by label."""
    seen: dict[tuple[str, str], set[int]] = {}
    for values in varying_by_shape(shapes, op).values():
        for v in values:
            seen.setdefault((v["dim"], v["label"]), set()).add(v["value"])
    return [{"dim": d, "label": label, "sizes": sorted(s)} for (d, label), s in sorted(seen.items())]


def _key_sql(by: str) -> str:
    if by not in BY_SHAPE:
        raise ValueError(f"shapes are per op or per kernel, not by {by!r}")
    return OP_TYPE_SQL if by == "op" else "name"


def op_shapes(store: Store, run_id: int, name: str, by: OpsBy = "op") -> list[dict[str, Any]]:
    """Per distinct input shape of op type (or kernel) ``name``: calls, total / mean / min / max ns, steps it ran
    in, OP State, and the value of each varying axis (``varying``); largest total first."""
    table, platform = figures_table(store, run_id), platform_of(store, run_id)
    got = (
        store.cursor()
        .execute(
            f"""WITH r AS ({rows_sql(table, platform)})
                SELECT input_shapes, sum(n)::BIGINT, sum(dur_ns)::BIGINT, min(lo), max(hi),
                       count(DISTINCT step), string_agg(DISTINCT op_state, '/' ORDER BY op_state), mode(op)
                FROM r WHERE {_key_sql(by)} = $name GROUP BY input_shapes ORDER BY 3 DESC, 1""",
            {"run": run_id, "name": name},
        )
        .fetchall()
    )
    op = next((o for *_, o in got if o), name)
    varying = varying_by_shape([g[0] for g in got], op)
    return [
        {
            "input_shapes": shapes,
            "calls": int(calls),
            "total_ns": int(total),
            "mean_ns": total / calls if calls else None,
            "min_ns": None if lo is None else int(lo),
            "max_ns": None if hi is None else int(hi),
            "steps": int(steps) or None,
            "op_state": state,
            "varying": varying.get(shapes, []),
        }
        for shapes, calls, total, lo, hi, steps, state, _ in got
    ]


def shapes_by_step(store: Store, run_id: int, name: str, by: OpsBy = "op") -> list[dict[str, Any]]:
    """Per step of op type (or kernel) ``name``: calls, distinct input shapes, total ns (the dynamic-shape view)."""
    table, platform = figures_table(store, run_id), platform_of(store, run_id)
    got = (
        store.cursor()
        .execute(
            f"""WITH r AS ({rows_sql(table, platform)})
                SELECT step, sum(n)::BIGINT, count(DISTINCT input_shapes), sum(dur_ns)::BIGINT
                FROM r WHERE {_key_sql(by)} = $name AND step IS NOT NULL GROUP BY step ORDER BY step""",
            {"run": run_id, "name": name},
        )
        .fetchall()
    )
    return [{"step": int(s), "calls": int(n), "shapes": int(k), "total_ns": int(t)} for s, n, k, t in got]
