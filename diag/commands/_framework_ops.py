"""``diag compare``'s framework-op section: the ops whose kernels lose A the most time (diag.analyses.framework_ops)."""

from __future__ import annotations

from typing import Any

from diag.commands._common import console
from diag.commands._format import cell, escape, fmt_count, fmt_ms, fmt_num, fmt_pct, fmt_ratio, table
from diag.i18n import t

TOP = 10


def _ms(row: dict[str, Any], side: str, per_step: bool) -> float | None:
    if per_step:
        return row[f"per_step_{side}_ms"]
    ns = row[f"device_{side}_ns"]
    return None if ns is None else ns / 1e6


def print_framework_ops(block: dict[str, Any] | None, top: int = TOP) -> None:
    """The top ``top`` framework ops by A's loss, and how much device time has a framework op on each side."""
    if not block:
        return
    out = console()
    rows = block["rows"]
    if not rows:
        sides = block.get("unlinked") or ["a", "b"]
        key = "framework_ops.none" if len(sides) == 2 else f"framework_ops.unlinked_{sides[0]}"
        out.print(escape(t(key)))
        return
    per_step = block["per_step"]
    title = t("framework_ops.title_per_step" if per_step else "framework_ops.title_totals", n=min(top, len(rows)),
              total=len(rows))  # fmt: skip
    ms_a, ms_b, lost = ("ms_step_a", "ms_step_b", "lost_step") if per_step else ("ms_a", "ms_b", "lost")
    tbl = table(
        *(t(f"framework_ops.{k}") for k in ("op", "calls_a", "calls_b", "kernels_per_call_a", "kernels_per_call_b",
                                            ms_a, ms_b, "ratio", lost)),
        title=escape(title),
    )  # fmt: skip
    for r in rows[:top]:
        ratio = fmt_ratio(r["ratio"]) if r["only"] is None else t(f"framework_ops.only_{r['only']}")
        tbl.add_row(
            cell(r["op"]), fmt_count(r["calls_a"]), fmt_count(r["calls_b"]),
            fmt_num(r["kernels_per_call_a"], digits=1), fmt_num(r["kernels_per_call_b"], digits=1),
            fmt_ms(_ms(r, "a", per_step)), fmt_ms(_ms(r, "b", per_step)), ratio,
            fmt_ms(r["delta_per_step_ms"] if per_step else r["delta_ms"], signed=True),
        )  # fmt: skip
    out.print(tbl)
    linked = t("framework_ops.linked", a=fmt_pct(block["linked_pct_a"]), b=fmt_pct(block["linked_pct_b"]))
    out.print(escape(linked))
