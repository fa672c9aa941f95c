"""The Before / after section of the Compare page: two runs of one platform (an upgrade, a changed setting), what
got slower or faster beyond the step-to-step spread and which versions or settings differ
(diag.analyses.before_after via app.data). No SQL, no parsing."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from app import data
from app.tables import show_table
from app.text import md_text

SHOWN_WHEN_NONE = 5  # with no significant change, the largest few are shown so the user sees the spread


def steps(n: int) -> str:
    return f"{n} step" if n == 1 else f"{n} steps"


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def changes_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per op type or class: calls and ms per step before and after, the change, spread and verdict."""
    return pd.DataFrame(
        [
            {
                "op": r["name"],
                "op class": r["op_class"],
                "calls/step before": _round(r["calls_per_step_a"], 1),
                "calls/step after": _round(r["calls_per_step_b"], 1),
                "before ms/step": _round(r["per_step_a_ms"]),
                "after ms/step": _round(r["per_step_b_ms"]),
                "Δ ms/step": _round(r["delta_ms"]),
                "Δ %": _round(r["delta_pct"], 1),
                "spread ms": _round(r["spread_ms"]),
                "verdict": r["verdict"],
            }
            for r in rows
        ]
    )


def step_time_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "bucket": s["label"],
                "before ms/step": _round(s["per_step_a_ms"]),
                "after ms/step": _round(s["per_step_b_ms"]),
                "Δ ms/step": _round(s["delta_ms"]),
                "Δ %": _round(s["delta_pct"], 1),
            }
            for s in rows
            if s["per_step_a_ms"] or s["per_step_b_ms"]
        ]
    )


def environment_frame(changes: list[dict[str, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"version / setting": c["label"], "before": c["before"], "after": c["after"], "owner": c["kind"]}
            for c in changes
        ]
    )


def _shown(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["significant"]] or rows[:SHOWN_WHEN_NONE]


def _ops_caption(result: dict[str, Any]) -> str:
    if any(r["significant"] for r in result["ops"]):
        return "Op types beyond the step-to-step spread"
    if result["can_tell"]:
        return "Largest changes by op type (none beyond the spread)"
    return "Largest changes by op type (too few steps to measure the spread)"


def before_after_section(fp: str, run_a: int, run_b: int) -> None:
    """Drawn only when both runs are one platform: A is read as before, B as after."""
    result = data.before_after(fp, run_a, run_b)
    if result is None:
        return
    st.subheader("Before / after")
    st.caption(
        f"Both runs are {md_text(result['run_a']['platform'])}: A is read as before, B as after "
        f"({steps(result['steps_a'])} and {steps(result['steps_b'])}). A change counts when it exceeds "
        f"{result['limits']['k']:g}× the step-to-step spread (the standard error of the per-step totals)."
    )
    st.markdown(md_text(result["answer"]))
    st.caption(_ops_caption(result))
    show_table(changes_frame(_shown(result["ops"])), key="ba_ops")
    st.caption("By op class")
    show_table(changes_frame(_shown(result["classes"])), key="ba_classes")
    one_side = [("new after", r) for r in result["only_b"]] + [("gone after", r) for r in result["only_a"]]
    if one_side:
        st.caption("Ops on one side only")
        show_table(
            pd.DataFrame(
                [{"op": r["name"], "op class": r["op_class"], "side": what,
                  "ms/step": _round(r["per_step_b_ms"] or r["per_step_a_ms"])} for what, r in one_side]
            ),
            key="ba_one_side",
        )  # fmt: skip
    st.caption("Device time per step")
    show_table(step_time_frame(result["step_time"]), key="ba_steps")
    _environment(result["environment"])


def _environment(envd: dict[str, Any]) -> None:
    if not envd["changes"]:
        st.info(md_text(envd["sentence"]))
        return
    st.caption("What differs between the two runs")
    show_table(environment_frame(envd["changes"]), key="ba_env")
    for i, step in enumerate(envd["owner_steps"], 1):
        st.markdown(f"{i}. **{md_text(step['owner'])}** — {md_text(step['step'])}")
