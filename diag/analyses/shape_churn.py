"""Dynamic shapes and compilation: the host's compile calls with their time and the step they stall, the
distinct token counts per step, the buckets that would cover them, and a ``recompile`` finding when compile time
is material.

Compile calls are host ops (CANN API rows of trace_view.json / msprof api, Python frames of a with_stack
capture) whose name matches a ``[[compile]]`` pattern of ``diag/rules/shape_fixes.toml``; a call inside another
compile call of the same thread (AscendCL@opCompile inside AscendCL@aclopCompileAndExecute) is not counted again,
so the time is the host's, once.  A call's step is the ProfilerStep range it starts in.

Token counts per step come from ``diag.analyses.scaling.step_lengths`` (the op_shape_axes rules); the buckets are
the powers of two at or above them (the next bucket of each length), the padding the extra tokens that padding
every step to its bucket would add.  All row work runs in DuckDB.
"""

from __future__ import annotations

import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from diag.analyses.scaling import step_lengths
from diag.i18n import current_language
from diag.i18n import t as tr
from diag.store import Store

RULES = Path(__file__).resolve().parent.parent / "rules" / "shape_fixes.toml"


@cache
def rules() -> dict[str, Any]:
    with open(RULES, "rb") as fh:
        return tomllib.load(fh)


def compile_pattern() -> str:
    """One regular expression of every compile pattern (DuckDB regexp_matches on the lower-cased name)."""
    return "|".join(f"(?:{r['pattern']})" for r in rules()["compile"])


def next_bucket(length: int) -> int:
    """The smallest power of two at or above ``length`` (≥ 1)."""
    return 1 << max(0, int(length) - 1).bit_length()


def buckets(lengths: list[int], max_buckets: int | None = None) -> dict[str, Any]:
    """The power-of-two buckets covering ``lengths`` (one per observed length, padded to the next), the distinct
    lengths, and the padding: extra tokens ÷ observed tokens, in %, over every length given (one per step)."""
    limit = max_buckets or rules()["thresholds"]["max_buckets"]
    good = [int(n) for n in lengths if n and n > 0]
    used = sorted({next_bucket(n) for n in good})
    padding = sum(next_bucket(n) - n for n in good)
    return {
        "buckets": used,
        "distinct_lengths": len(set(good)),
        "padding_pct": 100.0 * padding / sum(good) if good else None,
        "too_many": len(used) > limit,
    }


def bucket_text(b: dict[str, Any]) -> str:
    """ "pad tokens to the next of 5 buckets: 1,024, 2,048, … would cover the 37 observed lengths (+12% tokens)"."""
    used = b["buckets"]
    if not used:
        return ""
    if b["too_many"]:
        head = tr("finding_text.buckets_too_many", lengths=b["distinct_lengths"], low=used[0], high=used[-1],
                    count=len(used))  # fmt: skip
    else:
        head = tr("finding_text.buckets_pad", count=len(used), buckets=", ".join(f"{n:,}" for n in used),
                    lengths=b["distinct_lengths"])  # fmt: skip
    return head + tr("finding_text.buckets_padding", padding_pct=b["padding_pct"])


def compile_events(store: Store, run_id: int) -> dict[str, Any]:
    """Outermost compile calls of the run: count, host ns, per step, and the step they stall most."""
    got = (
        store.cursor()
        .execute(
            """WITH c AS (SELECT tid, start_ns, dur_ns FROM host_ops
                          WHERE run_id = $run AND regexp_matches(lower(name), $pattern)),
                    outer_calls AS (
                        SELECT c.* FROM c WHERE NOT EXISTS (
                            SELECT 1 FROM c p WHERE p.tid IS NOT DISTINCT FROM c.tid AND p.start_ns <= c.start_ns
                              AND p.start_ns + p.dur_ns >= c.start_ns + c.dur_ns
                              AND (p.start_ns, p.dur_ns) <> (c.start_ns, c.dur_ns))),
                    ranges AS (SELECT step, start_ns, end_ns FROM steps WHERE run_id = $run)
               SELECT g.step, count(*), sum(o.dur_ns)::BIGINT FROM outer_calls o
               LEFT JOIN ranges g ON o.start_ns >= g.start_ns AND o.start_ns < g.end_ns
               GROUP BY g.step ORDER BY 3 DESC, 1""",
            {"run": run_id, "pattern": compile_pattern()},
        )
        .fetchall()
    )
    per_step = [
        {"step": None if s is None else int(s), "calls": int(n), "total_ns": int(t)} for s, n, t in got
    ]
    stepped = [p for p in per_step if p["step"] is not None]
    return {
        "calls": sum(p["calls"] for p in per_step),
        "total_ns": sum(p["total_ns"] for p in per_step),
        "per_step": per_step,
        "worst_step": stepped[0] if stepped else None,
    }


def log_recompiles(store: Store, run_id: int) -> int:
    """Records of the run's logs that the log rules classify ``recompile`` (Dynamo / torchair recompiles)."""
    sql = "SELECT count(*) FROM log_records WHERE run_id = ? AND category = 'recompile'"
    return int(store.cursor().execute(sql, [run_id]).fetchall()[0][0])


def churn(store: Store, run_id: int, compiles: dict[str, Any] | None = None) -> dict[str, Any]:
    """Compile calls, log recompiles, token counts per step (a step's tokens: its matmul M, else its prefill
    length) and the buckets over them.  ``compiles``: the run's compile_events when the caller has them."""
    steps = step_lengths(store, run_id)
    tokens = [s["tokens"] or s["q_len"] for s in steps if (s["tokens"] or s["q_len"])]
    compiles = compile_events(store, run_id) if compiles is None else compiles
    return {"compile": compiles, "log_recompiles": log_recompiles(store, run_id),
            "steps_with_lengths": len(tokens), **buckets(tokens)}  # fmt: skip


def fixes(platform: str) -> list[dict[str, str]]:
    """The settings that fix shapes on ``platform`` ('rocm' reads as 'cuda'), with their sources."""
    p = "cuda" if platform in ("cuda", "rocm") else "ascend"
    lang = f"text_{current_language()}"  # text_zh beside the English text
    return [
        {"text": f.get(lang) or f["text"], "source": f["source"]}
        for f in rules()["fix"]
        if p in f["platforms"]
    ]


def _capture_ns(store: Store, run_id: int) -> int:
    got = store.cursor().execute("SELECT end_ns - start_ns FROM runs WHERE run_id = ?", [run_id]).fetchall()
    return int(got[0][0] or 0) if got else 0


def extend_recompile(found: list, store: Store, run_id: int, platform: str, severity_of: Any) -> list:
    """The ``recompile`` findings of diag.analyses.findings, extended: the timed compile finding replaces the
    count-only one (one finding per cause), and the all-dynamic finding names the buckets when the steps' token
    counts churn (at least ``min_distinct_lengths`` of them)."""
    compiles = compile_events(store, run_id)  # once: the timed finding and the churn both read them
    timed = compile_finding(store, run_id, platform, severity_of, compiles)
    out = found if timed is None else [f for f in found if "compile_calls" not in f.evidence] + [timed]
    dynamic = [f for f in out if "dynamic_ops" in f.evidence]
    if dynamic and timed is None:
        c = churn(store, run_id, compiles)
        if c["distinct_lengths"] >= rules()["thresholds"]["min_distinct_lengths"]:
            for f in dynamic:
                f.title += tr("finding.recompile.all_dynamic.title_buckets", buckets=bucket_text(c))
                f.evidence |= {"distinct_lengths": c["distinct_lengths"], "buckets": c["buckets"],
                               "padding_pct": c["padding_pct"], "fixes": fixes(platform)}  # fmt: skip
    return out


def compile_finding(
    store: Store, run_id: int, platform: str, severity_of: Any, compiles: dict[str, Any] | None = None
) -> Any:
    """The ``recompile`` Finding when compile time is material (``[thresholds]`` of shape_fixes.toml), with the
    step it stalls most and the buckets; else None.  ``severity_of(pct)`` is the findings' severity scale;
    ``compiles``: the run's compile_events when the caller has them."""
    from diag.analyses.finding import Finding

    comp = compile_events(store, run_id) if compiles is None else compiles
    t = rules()["thresholds"]
    capture = _capture_ns(store, run_id)
    pct = 100.0 * comp["total_ns"] / capture if capture else 0.0
    if comp["total_ns"] < t["min_compile_ms"] * 1e6 or pct < t["min_compile_pct"]:
        return None  # checked before the lengths are read: most runs stop here, cheaply
    c = churn(store, run_id, comp)
    key = "finding.recompile.compile_time.title"
    title = tr(key, calls=comp["calls"], ms=comp["total_ns"] / 1e6, pct=pct)
    worst = comp["worst_step"]
    if worst:
        title += tr(f"{key}_worst_step", step=worst["step"], calls=worst["calls"], ms=worst["total_ns"] / 1e6)
    if c["log_recompiles"]:
        title += tr(f"{key}_log_recompiles", records=c["log_recompiles"])
    if c["distinct_lengths"] > 1:
        title += tr(f"{key}_buckets", buckets=bucket_text(c))
    evidence = {"compile_calls": comp["calls"], "compile_host_ns": comp["total_ns"], "per_step": comp["per_step"],
                "log_recompiles": c["log_recompiles"], "distinct_lengths": c["distinct_lengths"], "buckets": c["buckets"], "padding_pct": c["padding_pct"],
                "fixes": fixes(platform)}  # fmt: skip
    suggestion = " ".join(f["text"] for f in fixes(platform))
    return Finding(run_id, "recompile", severity_of(pct), title, pct, comp["total_ns"], evidence, suggestion,
                   code="recompile.compile_time")  # fmt: skip
