"""Long-context scaling: time of attention (prefill, decode), matmul and the whole step against the length the
shapes give, per platform, and where Ascend's curve departs from its CUDA baseline's.

A point is a length and the mean time per step at that length.  Per step, the lengths come from the input shapes
of the step's ops, read by the axis rules of ``diag/rules/op_shape_axes.csv`` (``diag.analyses.ops_shapes``: of
the axes a rule names, those that vary between the shapes of one call site):

* Ascend: each kernel's own ``Input Shapes`` (kernel_details.csv / op_summary);
* CUDA kernels carry no shapes: the ``Input Dims`` of the framework ops (Kineto ``cpu_op``,
  ``record_shapes=True``) that ran inside the step give them (``aten::_flash_attention_forward``,
  ``aten::linear`` …; the ``aten::`` namespace is dropped before the rules are matched).

A step's prefill length is its largest query sequence (else tokens of a TND layout), its KV length the largest
KV length, its tokens the largest tokens (M) axis.  Groups and their length: attention prefill (op class
``attention_prefill`` time ↔ prefill length), attention decode (``attention_decode`` ↔ KV length), matmul
(``gemm`` + ``moe_gemm`` ↔ tokens), whole step (all kernel time of the step) of prefill steps ↔ prefill length
and of decode-only steps ↔ KV length.  A step that mixes prefills of several lengths counts at its largest.

Per platform a log-log least-squares fit gives the exponent (time ∝ length^k) and a linear one the ns per token;
with fewer than ``min_lengths`` distinct lengths there is no fit, and a note says so.  With a baseline, the ratio
(this run ÷ baseline) at each length both have; ``ratio_short`` is the median of the shortest ``short_points``;
the **departure length** is the smallest length from which every longer point's ratio exceeds ``ratio_short`` by
more than ``departure_rise`` (``[scaling]`` in rules/thresholds.toml), with at least ``min_departed_points``
there; ``ratio_long`` is the median ratio from the departure on (else of the longest ``short_points``).
All row work runs in DuckDB; Python sees only the distinct shape strings and the points.
"""

from __future__ import annotations

import math
import statistics
import tomllib
from pathlib import Path
from typing import Any

from diag.analyses import op_classes
from diag.analyses.counts import KERNEL_FILTER, UNIQUE_KERNELS, unique_tasks_sql
from diag.analyses.ops import KERNELS, TASKS, figures_table, platform_of
from diag.analyses.ops_shapes import varying_by_shape
from diag.i18n import t as tr
from diag.sql_text import FigureTable, OpClassPlatform, SqlFragment
from diag.store import Store

THRESHOLDS = Path(__file__).resolve().parent.parent / "rules" / "thresholds.toml"
GROUPS = {  # group → (what a person reads, the length's unit)
    "attention_prefill": ("attention prefill", "tokens"),
    "attention_decode": ("attention decode", "KV tokens"),
    "matmul": ("matmul", "tokens"),
    "step_prefill": ("whole step (prefill)", "tokens"),
    "step_decode": ("whole step (decode)", "KV tokens"),
}
QUERY_DIMS = ("query_seq", "batch_or_tokens")  # the prefill length, in this order of preference
# Kineto "Input Dims" ([[1, 4096, 3584], [4608, 3584], []]) as kernel_details writes shapes (1,4096,3584;4608,3584;)
_KINETO_DIMS = r"""regexp_replace(regexp_replace(replace(replace(input_dims, ' ', ''), '],[', ';'),
                   '^\[\[', ''), '\]\]$', '')"""


def thresholds() -> dict[str, Any]:
    with open(THRESHOLDS, "rb") as fh:
        return tomllib.load(fh)["scaling"]


def _device_sql(table: FigureTable, platform: OpClassPlatform) -> SqlFragment:
    """One row per device kernel of run ``$run``: op class, start, duration, shapes and step (a kernel without a
    step is put in the ProfilerStep range it starts in)."""
    if table == KERNELS:
        rows = f"""SELECT name, op_type AS op, task_kind AS kind, start_ns, dur_ns, input_shapes, step
                  FROM ({UNIQUE_KERNELS})"""
    elif table == TASKS:
        rows = f"""SELECT name, op, kind, start_ns, dur_ns, input_shapes, step
                   FROM ({unique_tasks_sql()}) WHERE {KERNEL_FILTER}"""
    else:  # a kernel summary has neither shapes nor steps
        rows = """SELECT NULL AS name, NULL AS op, NULL AS kind, 0 AS start_ns, 0 AS dur_ns,
                         NULL AS input_shapes, NULL::BIGINT AS step WHERE false"""
    return SqlFragment(f"""
        names AS (SELECT DISTINCT name, op FROM ({rows})),
        classed AS (SELECT name, op, {op_classes.sql_case("name", "op", platform)} AS op_class FROM names),
        ranges AS (SELECT step, start_ns, end_ns FROM steps WHERE run_id = $run),
        dev AS (SELECT r.name, coalesce(r.op, r.name) AS op, r.dur_ns, r.input_shapes, c.op_class,
                       coalesce(r.step, g.step) AS step
                FROM ({rows}) r JOIN classed c ON c.name IS NOT DISTINCT FROM r.name AND c.op IS NOT DISTINCT FROM r.op
                LEFT JOIN ranges g ON r.step IS NULL AND r.start_ns >= g.start_ns AND r.start_ns < g.end_ns),
        host AS (SELECT regexp_replace(h.name, '^[A-Za-z_]\\w*::', '') AS op,
                        CASE WHEN input_dims LIKE '[%' THEN {_KINETO_DIMS} ELSE input_dims END AS input_shapes,
                        g.step
                 FROM host_ops h JOIN ranges g ON h.start_ns >= g.start_ns AND h.start_ns < g.end_ns
                 WHERE h.run_id = $run AND h.input_dims IS NOT NULL AND h.input_dims NOT IN ('', '[]')),
        src AS (SELECT op, input_shapes, step FROM dev WHERE input_shapes IS NOT NULL AND step IS NOT NULL
                UNION ALL SELECT op, input_shapes, step FROM host)""")


def _length_map(store: Store, run_id: int, cte: SqlFragment) -> dict[str, list]:
    """(op, shapes, dim, value) of every distinct shape string whose rules name a varying length axis."""
    got = store.cursor().execute(f"WITH {cte} SELECT DISTINCT op, input_shapes FROM src", {"run": run_id})
    by_op: dict[str, list[str]] = {}
    for op, shapes in got.fetchall():
        by_op.setdefault(op, []).append(shapes)
    out: dict[str, list] = {"op": [], "shapes": [], "dim": [], "value": []}
    for op, shapes in by_op.items():
        for text, values in varying_by_shape(shapes, op).items():
            for v in values:
                for key, item in zip(out, (op, text, v["dim"], v["value"]), strict=True):
                    out[key].append(item)
    return out


_STEP_LEN = """
        lens AS (SELECT unnest($ops) AS op, unnest($shapes) AS input_shapes, unnest($dims) AS dim,
                        unnest($vals)::BIGINT AS value),
        per_step_len AS (
            SELECT s.step,
                   coalesce(max(value) FILTER (WHERE dim = 'query_seq'),
                            max(value) FILTER (WHERE dim = 'batch_or_tokens')) AS q_len,
                   max(value) FILTER (WHERE dim = 'kv_len') AS kv_len,
                   max(value) FILTER (WHERE dim = 'tokens') AS tokens
            FROM src s JOIN lens l ON l.op = s.op AND l.input_shapes = s.input_shapes GROUP BY s.step)"""


def _points_sql(cte: str) -> str:
    return f"""
        WITH {cte}, {_STEP_LEN},
        per_step_time AS (
            SELECT step,
                   sum(dur_ns) FILTER (WHERE op_class = 'attention_prefill') AS t_prefill,
                   sum(dur_ns) FILTER (WHERE op_class = 'attention_decode') AS t_decode,
                   sum(dur_ns) FILTER (WHERE op_class IN ('gemm', 'moe_gemm')) AS t_matmul,
                   sum(dur_ns) AS t_step
            FROM dev WHERE step IS NOT NULL GROUP BY step),
        s AS (SELECT * FROM per_step_time JOIN per_step_len USING (step)),
        pts AS (
            SELECT 'attention_prefill' AS grp, q_len AS length, t_prefill AS t FROM s WHERE t_prefill > 0
            UNION ALL SELECT 'attention_decode', kv_len, t_decode FROM s WHERE t_decode > 0
            UNION ALL SELECT 'matmul', tokens, t_matmul FROM s WHERE t_matmul > 0
            UNION ALL SELECT 'step_prefill', q_len, t_step FROM s WHERE t_prefill > 0
            UNION ALL SELECT 'step_decode', kv_len, t_step FROM s WHERE t_decode > 0 AND coalesce(t_prefill, 0) = 0)
        SELECT grp, length, avg(t)::DOUBLE, count(*) FROM pts WHERE length IS NOT NULL
        GROUP BY grp, length ORDER BY grp, length"""


def _query(store: Store, run_id: int, sql_of: Any) -> list[tuple]:
    """Run ``sql_of(cte)`` with the run's length map bound; [] when no shape names a varying length."""
    table, platform = figures_table(store, run_id), platform_of(store, run_id)
    cte = _device_sql(table, platform)
    lens = _length_map(store, run_id, cte)
    if not lens["op"]:
        return []
    params = {
        "run": run_id,
        "ops": lens["op"],
        "shapes": lens["shapes"],
        "dims": lens["dim"],
        "vals": lens["value"],
    }
    return store.cursor().execute(sql_of(cte), params).fetchall()


def points(store: Store, run_id: int) -> dict[str, list[tuple[int, float, int]]]:
    """Per group, (length, mean time per step in ns, steps) by ascending length."""
    out: dict[str, list[tuple[int, float, int]]] = {}
    for grp, length, t, n in _query(store, run_id, _points_sql):
        out.setdefault(grp, []).append((int(length), float(t), int(n)))
    return out


def step_lengths(store: Store, run_id: int) -> list[dict[str, int | None]]:
    """Per step with a length: its prefill length (q_len), KV length and tokens, by step."""
    got = _query(
        store, run_id, lambda cte: f"WITH {cte}, {_STEP_LEN} SELECT * FROM per_step_len ORDER BY step"
    )
    return [{"step": int(s), "q_len": q, "kv_len": kv, "tokens": tok} for s, q, kv, tok in got]


def fit(pts: list[tuple], min_lengths: int = 3) -> dict[str, float] | None:
    """Least squares of log(time) on log(length) (``exponent``) and of time on length (``ns_per_token``) over
    (length, time, …) points; None with fewer than ``min_lengths`` distinct positive lengths."""
    good = [(float(p[0]), float(p[1])) for p in pts if p[0] > 0 and p[1] > 0]
    if len({x for x, _ in good}) < min_lengths:
        return None
    return {"exponent": _slope([(math.log(x), math.log(y)) for x, y in good]), "ns_per_token": _slope(good)}


def _slope(xy: list[tuple[float, float]]) -> float:
    mx, my = statistics.fmean(x for x, _ in xy), statistics.fmean(y for _, y in xy)
    return sum((x - mx) * (y - my) for x, y in xy) / sum((x - mx) ** 2 for x, _ in xy)


def departure(
    curve: list[tuple[int, float]], t: dict[str, Any]
) -> tuple[int | None, float | None, float | None]:
    """(departure length, ratio_short, ratio_long) of (length, ratio) points by ascending length (module doc)."""
    if not curve:
        return None, None, None
    n, short = len(curve), t["short_points"]
    ratio_short = statistics.median(r for _, r in curve[:short])
    limit = ratio_short * (1 + t["departure_rise"])
    k = n
    while k > short and curve[k - 1][1] > limit:
        k -= 1
    if n - k >= t["min_departed_points"] and n >= t["min_lengths"]:
        return curve[k][0], ratio_short, statistics.median(r for _, r in curve[k:])
    return None, ratio_short, statistics.median(r for _, r in curve[-short:])


def _group(name: str, ours: list, theirs: list | None, t: dict[str, Any]) -> dict[str, Any]:
    base = {p[0]: p[1] for p in theirs or []}
    pts = [
        {"length": n, "time_ns": round(v), "baseline_time_ns": round(base[n]) if n in base else None,
         "ratio": v / base[n] if base.get(n) else None, "steps": steps}
        for n, v, steps in ours
    ]  # fmt: skip
    curve = [(p["length"], p["ratio"]) for p in pts if p["ratio"] is not None]
    dep, short, long_ = departure(curve, t) if theirs is not None else (None, None, None)
    return {"group": name, "label": GROUPS[name][0], "unit": GROUPS[name][1], "points": pts,
            "slope": fit(ours, t["min_lengths"]),
            "baseline_slope": fit(theirs, t["min_lengths"]) if theirs is not None else None,
            "departure_length": dep, "ratio_short": short, "ratio_long": long_,
            "compared_lengths": len(curve)}  # fmt: skip


def scaling(store: Store, run_id: int, baseline_run_id: int | None = None) -> dict[str, Any]:
    """Per group the points, slopes and, with a baseline, the ratio curve and departure length (module doc)."""
    t = thresholds()
    ours = points(store, run_id)
    theirs = points(store, baseline_run_id) if baseline_run_id is not None else {}
    groups, notes = [], []
    for name in GROUPS:
        if name not in ours:
            continue
        g = _group(name, ours[name], theirs.get(name) if baseline_run_id is not None else None, t)
        groups.append(g)
        notes += _notes(g, baseline_run_id, t)
    out = {"run_id": run_id, "baseline_run_id": baseline_run_id, "groups": groups, "notes": notes}
    out["answer"] = answer(out)
    return out


def _notes(g: dict[str, Any], baseline_run_id: int | None, t: dict[str, Any]) -> list[str]:
    out = []
    lengths = len(g["points"])
    if lengths < t["min_lengths"]:
        out.append(tr("scaling.note_few_lengths", label=g["label"], n=lengths, min=t["min_lengths"]))
    if baseline_run_id is not None and not g["compared_lengths"]:
        out.append(tr("scaling.note_no_common_lengths", label=g["label"]))
    return out


def group_answer(g: dict[str, Any]) -> str:
    """One sentence: the departure, or the ratio across lengths, or the slope alone without a baseline."""
    lo, hi = g["points"][0]["length"], g["points"][-1]["length"]
    span = f"{lo:,}–{hi:,} {g['unit']}" if lo != hi else f"{lo:,} {g['unit']}"
    short, long_ = g["ratio_short"], g["ratio_long"]
    label, ratios = (
        g["label"],
        {
            "short": f"{short:.2f}" if short is not None else "",
            "long": f"{long_:.2f}" if long_ is not None else "",
        },
    )
    if g["departure_length"] is not None:
        head = (tr("scaling.slower", pct=f"{(long_ - 1) * 100:.0f}") if long_ >= 1
                else tr("scaling.ratio_rises", pct=f"{(long_ / short - 1) * 100:.0f}"))  # fmt: skip
        return tr(
            "scaling.departs",
            label=label,
            head=head,
            length=f"{g['departure_length']:,}",
            unit=g["unit"],
            **ratios,
        )
    if short is not None:
        return tr("scaling.no_departure", label=label, span=span, **ratios)
    if g["slope"]:
        return tr("scaling.slope", label=label, exponent=f"{g['slope']['exponent']:.2f}", span=span)
    return tr("scaling.too_few", label=label, span=span)


def answer(result: dict[str, Any]) -> str:
    """The answer line: the departures first; else the first group's sentence."""
    groups = result["groups"]
    if not groups:
        return tr("scaling.no_curve")
    departed = [group_answer(g) for g in groups if g["departure_length"] is not None]
    if departed:
        return tr("scaling.sep").join(departed)
    if result["baseline_run_id"] is not None:
        return tr("scaling.none_departs", first=group_answer(groups[0]))
    return group_answer(groups[0])
