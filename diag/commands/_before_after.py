"""``diag compare A B`` on two runs of the same platform: the before/after view (diag.analyses.before_after)."""

from __future__ import annotations

from typing import Any

from diag.analyses.before_after import steps
from diag.commands._common import console
from diag.commands._format import cell, escape, fmt_ms, fmt_num, fmt_pct, table


def print_before_after(result: dict[str, Any]) -> None:
    """The answer line, the significant changes (or the largest ones when none is), new and vanished ops, step
    time per bucket, and what differs between the two environments."""
    out = console()
    out.print(escape(result["answer"]))
    _changes(result)
    _one_side(result)
    _step_time(result)
    _environment(result)


def _title(result: dict[str, Any]) -> str:
    a, b = result["run_a"], result["run_b"]
    return (
        f"before = run {a['run_id']} {a['name']} ({steps(result['steps_a'])}), after = run {b['run_id']} "
        f"{b['name']} ({steps(result['steps_b'])})"
    )


def _changes(result: dict[str, Any]) -> None:
    significant = [r for r in result["ops"] if r["significant"]]
    rows = significant or result["ops"][:5]
    if significant:
        what = "changes beyond the step-to-step spread"
    elif result["can_tell"]:
        what = "largest changes (none beyond the spread)"
    else:
        what = "largest changes (too few steps to measure the spread)"
    tbl = table(
        "op type", "op class", "calls/step", "before ms/step", "after ms/step", "Δ ms/step", "Δ %", "spread ms",
        "verdict", title=escape(f"{what}; {_title(result)}"),
    )  # fmt: skip
    for r in rows:
        tbl.add_row(
            cell(r["name"]),
            cell(r["op_class"]),
            _calls(r),
            fmt_ms(r["per_step_a_ms"]),
            fmt_ms(r["per_step_b_ms"]),
            fmt_ms(r["delta_ms"], signed=True),
            fmt_pct(r["delta_pct"], signed=True),
            fmt_ms(r["spread_ms"]),
            cell(r["verdict"]),
        )
    console().print(tbl)


def _calls(r: dict[str, Any]) -> str:
    a, b = fmt_num(r["calls_per_step_a"], digits=1), fmt_num(r["calls_per_step_b"], digits=1)
    return a if a == b else f"{a} → {b}"


def _one_side(result: dict[str, Any]) -> None:
    rows = [("new after", r) for r in result["only_b"]] + [("gone after", r) for r in result["only_a"]]
    if not rows:
        return
    tbl = table("op type", "op class", "side", "ms/step", title="ops on one side only")
    for what, r in rows:
        tbl.add_row(
            cell(r["name"]), cell(r["op_class"]), what, fmt_ms(r["per_step_b_ms"] or r["per_step_a_ms"])
        )
    console().print(tbl)


def _step_time(result: dict[str, Any]) -> None:
    tbl = table("bucket", "before ms/step", "after ms/step", "Δ ms/step", "Δ %", title="device time per step")
    for s in result["step_time"]:
        if s["per_step_a_ms"] or s["per_step_b_ms"]:
            tbl.add_row(
                cell(s["label"]),
                fmt_ms(s["per_step_a_ms"]),
                fmt_ms(s["per_step_b_ms"]),
                fmt_ms(s["delta_ms"], signed=True),
                fmt_pct(s["delta_pct"], signed=True),
            )
    console().print(tbl)


def _environment(result: dict[str, Any]) -> None:
    envd = result["environment"]
    if not envd["changes"]:
        console().print(escape(envd["sentence"]))
        return
    tbl = table("version / setting", "before", "after", "owner", title="what differs between the two runs")
    for c in envd["changes"]:
        tbl.add_row(cell(c["label"]), cell(c["before"]), cell(c["after"]), cell(c["kind"]))
    console().print(tbl)
    for i, step in enumerate(envd["owner_steps"], 1):
        console().print(f"{i}. ({escape(step['owner'])}) {escape(step['step'])}")
