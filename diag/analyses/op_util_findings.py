"""Utilization findings: ops with a material share of the run's device time that run far below their roof.

Thresholds are ``[utilization]`` of rules/thresholds.toml and the suggestions ``[advice]`` of rules/op_cost.toml.
Two kinds, one finding per op (at most ``max_ops``, largest time first):

* a matmul whose output has at most ``small_m`` rows (M = tokens of the step) and an MFU under
  ``finding_max_bound_pct``: decode-sized — its weight read dominates, whatever its bandwidth;
* any other op whose roofline bound is compute or memory and that reaches under ``finding_max_bound_pct`` of
  that roof (MFU, or HBM bandwidth).

A latency-bound op (short calls) is not one: no roof applies to it. Without a known device there is no roof:
no finding at all (the Ops page and `diag ops --util` say the device is not known), rather than a guess.
"""

from __future__ import annotations

from typing import Any

from diag.analyses.finding import Finding, thresholds
from diag.analyses.finding import pct as _pct
from diag.analyses.finding import severity as _severity
from diag.analyses.op_util import MATMUL_CLASSES, op_cost_rules, op_utilization
from diag.i18n import current_language
from diag.i18n import t as tr
from diag.store import Store

CATEGORY = "utilization"
# the finding code of each judgement (_judged's key; rules/finding_codes.toml)
CODES = {"matmul_small_m": "utilization.matmul_small_m", "compute": "utilization.compute_bound",
         "memory": "utilization.memory_bound"}  # fmt: skip


def _title(r: dict[str, Any], small_m: int) -> str:
    share = tr("finding_text.util_share", share_pct=r["share_pct"])
    dtype = r.get("dtype") or "—"
    if r["cost_class"] in MATMUL_CLASSES and r["m_max"] is not None and r["m_max"] <= small_m:
        m = f"{r['m_min']}" if r["m_min"] == r["m_max"] else f"{r['m_min']}–{r['m_max']}"
        return tr(f"finding.{CODES['matmul_small_m']}.title", name=r["name"], mfu=r["mfu_pct"], dtype=dtype, m=m,
                  share=share)  # fmt: skip
    if r["bound"] == "compute":
        unit = tr("finding_text.util_vector_unit") if r.get("unit") == "vector" else ""
        peak = tr("finding_text.util_peak", unit=unit, dtype=dtype)
        return tr(
            f"finding.{CODES['compute']}.title", name=r["name"], mfu=r["mfu_pct"], peak=peak, share=share
        )
    return tr(f"finding.{CODES['memory']}.title", name=r["name"], bw=r["bw_pct"], share=share)


def _judged(r: dict[str, Any], s: dict[str, Any]) -> str | None:
    """The advice key when ``r`` is far below its roof, else None."""
    if (r["share_pct"] or 0) < s["finding_min_share_pct"]:
        return None
    small = r["cost_class"] in MATMUL_CLASSES and r["m_max"] is not None and r["m_max"] <= s["small_m"]
    if (
        small
        and r["mfu_pct"] is not None
        and r["mfu_pct"] < s["finding_max_bound_pct"]
        and r["bound"] != "latency"
    ):
        return "matmul_small_m"
    if r["bound"] in ("compute", "memory") and r["bound_pct"] is not None:
        return r["bound"] if r["bound_pct"] < s["finding_max_bound_pct"] else None
    return None


def _evidence(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("name", "calls", "total_ns", "share_pct", "cost_class", "flops", "bytes", "achieved_tflops",
            "achieved_gbps", "mfu_pct", "bw_pct", "arithmetic_intensity", "ridge_flops_per_byte", "bound",
            "pmu_bound", "peak_from", "m_min", "m_max", "unit")  # fmt: skip
    return {k: r.get(k) for k in keys}


def _ops(n: int) -> str:
    return "1 op has" if n == 1 else f"{n} ops have"


def utilization_findings(store: Store, run_id: int, e2e: int) -> list[Finding]:
    t = thresholds()
    s = t["utilization"]
    rows = op_utilization(store, run_id)
    advice = op_cost_rules()["advice"]
    costed = [r for r in rows if r["costed_calls"] and (r["share_pct"] or 0) >= s["finding_min_share_pct"]]
    if costed and costed[0]["mfu_pct"] is None and costed[0]["bw_pct"] is None:
        # No device peak: nothing to judge against.  `diag ops --util` and the Ops page still show the FLOPs and
        # bytes and say which device is missing; a finding here would sit on every run of an unnamed device.
        return []
    out = []
    for r in rows:
        key = _judged(r, s)
        if key is None:
            continue
        pct = _pct(r["total_ns"], e2e)
        out.append(
            Finding(run_id, CATEGORY, _severity(pct, t), _title(r, s["small_m"]), pct, r["total_ns"],
                    _evidence(r), advice.get(f"{key}_{current_language()}") or advice[key], code=CODES[key])
        )  # fmt: skip
        if len(out) >= s["max_ops"]:
            break
    return out
