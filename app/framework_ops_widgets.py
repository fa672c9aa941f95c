"""The Framework ops section of the Compare page: each framework op's kernels on A and B, largest loss of A first
(diag.analyses.framework_ops through app.data's cached comparison). No SQL, no parsing."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from app import data
from app.tables import show_table
from app.text import md_text
from diag.i18n import t


def _ms(row: dict[str, Any], side: str, per_step: bool) -> float | None:
    """The side's time per step (ms), or its total where a side has no steps."""
    ms = (
        row[f"per_step_{side}_ms"]
        if per_step
        else row[f"device_{side}_ns"] and row[f"device_{side}_ns"] / 1e6
    )
    return None if ms is None else round(ms, 4)


def framework_ops_frame(block: dict[str, Any]) -> pd.DataFrame:
    """One row per framework op: calls, kernels per call and time on each side, A/B (or which side has it), loss."""
    per_step = block["per_step"]
    ms_a, ms_b, lost = ("ms_step_a", "ms_step_b", "lost_step") if per_step else ("ms_a", "ms_b", "lost")
    rows = []
    for r in block["rows"]:
        ratio = f"{r['ratio']:.2f}×" if r["ratio"] is not None else (
            t(f"framework_ops.only_{r['only']}") if r["only"] else None
        )  # fmt: skip
        loss = r["delta_per_step_ms"] if per_step else r["delta_ms"]
        rows.append(
            {
                t("framework_ops.op"): r["op"],
                t("framework_ops.calls_a"): r["calls_a"],
                t("framework_ops.calls_b"): r["calls_b"],
                t("framework_ops.kernels_per_call_a"): r["kernels_per_call_a"],
                t("framework_ops.kernels_per_call_b"): r["kernels_per_call_b"],
                t(f"framework_ops.{ms_a}"): _ms(r, "a", per_step),
                t(f"framework_ops.{ms_b}"): _ms(r, "b", per_step),
                t("framework_ops.ratio"): ratio,
                t(f"framework_ops.{lost}"): None if loss is None else round(loss, 4),
            }
        )
    return pd.DataFrame(rows)


def top_kernels_frame(block: dict[str, Any]) -> pd.DataFrame:
    """Per op, the kernel with most of its time on each side (kernel names are long: a table of their own)."""
    return pd.DataFrame(
        [
            {
                t("framework_ops.op"): r["op"],
                t("framework_ops.top_kernel_a"): r["top_kernel_a"],
                t("framework_ops.top_kernel_b"): r["top_kernel_b"],
            }
            for r in block["rows"]
        ]
    )


def framework_ops_section(fp: str, run_a: int, run_b: int) -> None:
    """The section: which framework op got slower, with how much device time each side could attribute."""
    st.subheader(t("framework_ops.heading"))
    block = data.comparison(fp, run_a, run_b).framework_ops
    if not block or not block["rows"]:
        sides = (block or {}).get("unlinked") or ["a", "b"]
        st.info(md_text(t("framework_ops.none" if len(sides) == 2 else f"framework_ops.unlinked_{sides[0]}")))
        return
    st.caption(md_text(t("framework_ops.caption")))
    show_table(framework_ops_frame(block), key="cmp_framework_ops")
    with st.expander(t("framework_ops.top_kernels")):
        show_table(top_kernels_frame(block), key="cmp_framework_ops_kernels")
    pct = {s: "—" if block[f"linked_pct_{s}"] is None else f"{block[f'linked_pct_{s}']:.1f}%" for s in "ab"}
    st.caption(md_text(t("framework_ops.linked", a=pct["a"], b=pct["b"])))
