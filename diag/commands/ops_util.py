"""``diag ops --util``: how close each op runs to the device's roofs (diag.analyses.op_util) — achieved TFLOPS and
GB/s, MFU, bandwidth utilization, arithmetic intensity, the roofline bound and the PMU pipes' bound."""

from __future__ import annotations

from typing import Any

from diag.analyses.op_util import UTIL_KEYS, op_utilization
from diag.commands._common import console, print_json
from diag.commands._format import cell, escape, fmt_count, fmt_ms, fmt_num, fmt_pct, table
from diag.errors import DiagError
from diag.i18n import t
from diag.store import Store


class UtilByError(DiagError):
    """--util is per op or kernel: a usage matter."""

    exit_code = 2


def with_utilization(store: Store, run_id: int, by: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The op table's rows with the utilization keys added (None where the op has no figures)."""
    if by not in ("op", "kernel"):
        raise UtilByError("--util is per op type or kernel: use --by op or --by kernel")
    util = {u["name"]: u for u in op_utilization(store, run_id, by)}
    empty = dict.fromkeys(UTIL_KEYS)
    return [r | {k: util.get(r["name"], empty).get(k) for k in UTIL_KEYS} for r in rows]


def _peaks(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["peak_from"] for r in rows if r.get("peak_from")))


def print_util(run_id: int, by: str, rows: list[dict[str, Any]], total_rows: int, as_json: bool) -> None:
    if as_json:
        print_json({"run_id": run_id, "by": by, "peaks": _peaks(rows), "rows": rows})
        return
    out = console()
    tbl = table("op type" if by == "op" else "kernel", "cost class", "calls", "total ms", "share", "TFLOPS",
                "MFU", "GB/s", "BW", "FLOP/B", "bound", "PMU bound",
                title=escape(f"run {run_id}: utilization by {by}"))  # fmt: skip
    for r in rows:
        tbl.add_row(cell(r["name"]), cell(r["cost_class"]), fmt_count(r["calls"]), fmt_ms(r["total_ns"] / 1e6),
                    fmt_pct(r["share_pct"]), fmt_num(r["achieved_tflops"], digits=1), fmt_pct(r["mfu_pct"]),
                    fmt_num(r["achieved_gbps"], digits=0), fmt_pct(r["bw_pct"]),
                    fmt_num(r["arithmetic_intensity"], digits=1), cell(r["bound"]), cell(r["pmu_bound"]))  # fmt: skip
    out.print(tbl)
    if total_rows > len(rows):
        out.print(f"{total_rows - len(rows)} more row(s): --top 0 shows every row")
    for peak in _peaks(rows) or [t("cli.ops_util_no_shapes")]:
        out.print(escape(t("cli.ops_util_peaks", peak=peak)))
    out.print(escape(t("cli.ops_util_legend")))
