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
from diag.i18n import t

SHOWN_WHEN_NONE = 5  # with no significant change, the largest few are shown so the user sees the spread


def steps(n: int) -> str:
    return t("page.before_after.one_step") if n == 1 else t("page.before_after.steps", n=n)


def verdict(value: str) -> str:
    """The analysis's verdict word (diag.analyses.before_after: slower, faster, …) in the session's language."""
    return {
        "slower": t("page.before_after.slower"),
        "faster": t("page.before_after.faster"),
        "within noise": t("page.before_after.within_noise"),
        "cannot tell": t("page.before_after.cannot_tell"),
        "new": t("page.before_after.new"),
        "gone": t("page.before_after.gone"),
    }.get(value, value)


def kind(value: str) -> str:
    """What kind of difference (diag.analyses.before_after_env: stack, config, hardware, code)."""
    return {
        "stack": t("page.before_after.kind_stack"),
        "config": t("page.before_after.kind_config"),
        "hardware": t("page.before_after.kind_hardware"),
        "code": t("page.before_after.kind_code"),
    }.get(value, value)


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def changes_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per op type or class: calls and ms per step before and after, the change, spread and verdict."""
    return pd.DataFrame(
        [
            {
                t("page.before_after.col.op"): r["name"],
                t("page.before_after.col.op_class"): r["op_class"],
                t("page.before_after.col.calls_before"): _round(r["calls_per_step_a"], 1),
                t("page.before_after.col.calls_after"): _round(r["calls_per_step_b"], 1),
                t("page.before_after.col.before_ms"): _round(r["per_step_a_ms"]),
                t("page.before_after.col.after_ms"): _round(r["per_step_b_ms"]),
                t("page.before_after.col.delta_ms"): _round(r["delta_ms"]),
                "Δ %": _round(r["delta_pct"], 1),
                t("page.before_after.col.spread_ms"): _round(r["spread_ms"]),
                t("page.before_after.col.verdict"): verdict(r["verdict"]),
            }
            for r in rows
        ]
    )


def step_time_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                t("page.before_after.col.bucket"): s["label"],
                t("page.before_after.col.before_ms"): _round(s["per_step_a_ms"]),
                t("page.before_after.col.after_ms"): _round(s["per_step_b_ms"]),
                t("page.before_after.col.delta_ms"): _round(s["delta_ms"]),
                "Δ %": _round(s["delta_pct"], 1),
            }
            for s in rows
            if s["per_step_a_ms"] or s["per_step_b_ms"]
        ]
    )


def environment_frame(changes: list[dict[str, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                t("page.before_after.col.setting"): c["label"],
                t("page.before_after.col.before"): c["before"],
                t("page.before_after.col.after"): c["after"],
                t("page.before_after.col.owner"): kind(c["kind"]),
            }
            for c in changes
        ]
    )


def _shown(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["significant"]] or rows[:SHOWN_WHEN_NONE]


def _ops_caption(result: dict[str, Any]) -> str:
    if any(r["significant"] for r in result["ops"]):
        return t("page.before_after.ops_beyond")
    if result["can_tell"]:
        return t("page.before_after.ops_largest")
    return t("page.before_after.ops_few_steps")


def before_after_section(fp: str, run_a: int, run_b: int) -> None:
    """Drawn only when both runs are one platform: A is read as before, B as after."""
    result = data.before_after(fp, run_a, run_b)
    if result is None:
        return
    st.subheader(t("page.before_after.title"))
    st.caption(
        t(
            "page.before_after.caption",
            platform=md_text(result["run_a"]["platform"]),
            steps_a=steps(result["steps_a"]),
            steps_b=steps(result["steps_b"]),
            k=f"{result['limits']['k']:g}",
        )
    )
    st.markdown(md_text(result["answer"]))
    st.caption(_ops_caption(result))
    show_table(changes_frame(_shown(result["ops"])), key="ba_ops")
    st.caption(t("page.before_after.by_class"))
    show_table(changes_frame(_shown(result["classes"])), key="ba_classes")
    one_side = [(t("page.before_after.new_after"), r) for r in result["only_b"]]
    one_side += [(t("page.before_after.gone_after"), r) for r in result["only_a"]]
    if one_side:
        st.caption(t("page.before_after.one_side"))
        show_table(
            pd.DataFrame(
                [{t("page.before_after.col.op"): r["name"], t("page.before_after.col.op_class"): r["op_class"],
                  t("page.before_after.col.side"): what,
                  t("page.before_after.col.ms_step"): _round(r["per_step_b_ms"] or r["per_step_a_ms"])}
                 for what, r in one_side]
            ),
            key="ba_one_side",
        )  # fmt: skip
    st.caption(t("page.before_after.step_time"))
    show_table(step_time_frame(result["step_time"]), key="ba_steps")
    _environment(result["environment"])


def _environment(envd: dict[str, Any]) -> None:
    if not envd["changes"]:
        st.info(md_text(envd["sentence"]))
        return
    st.caption(t("page.before_after.differs"))
    show_table(environment_frame(envd["changes"]), key="ba_env")
    for i, step in enumerate(envd["owner_steps"], 1):
        st.markdown(f"{i}. **{md_text(step['owner'])}** — {md_text(step['step'])}")
