"""The postmortem's tables as rows of text cells (the same figures in the md / html reports and the app's
Postmortem page): the baseline comparison, the serving figures, the ranks, the environment.

Column headings are catalog keys (``report.col.*``, diag/i18n); ``columns(keys)`` gives them in the current
language. Numbers are formatted the same in both languages.
"""

from __future__ import annotations

from typing import Any

from diag.analyses.evidence_view import MISSING
from diag.analyses.postmortem_env import CHECK_KEYS
from diag.analyses.postmortem_model import Postmortem
from diag.analyses.postmortem_serving import check_text
from diag.i18n import t

MAX_ROWS = 20  # rows per table / statements per section

COMPARISON_COLUMNS = ("op_class", "per_step_ms", "baseline_per_step_ms", "ratio", "lost_per_step_ms")
SERVING_COLUMNS = ("serving_run", "platform", "hardware", "concurrency", "ttft_p99_ms", "tpot_p99_ms",
                   "output_tps", "verdict", "failed_checks")  # fmt: skip
SERVING_COMPARE_COLUMNS = ("figure", "this_deployment", "baseline", "ratio", "gap")
RANK_COLUMNS = ("rank", "run", "steps", "mean_step_ms", "max_step_ms", "failed_steps", "first_fatal")


def columns(keys: tuple[str, ...]) -> tuple[str, ...]:
    """A table's column headings in the current language: ``("op class", "per step (ms)", …)``."""
    return tuple(t(f"report.col.{k}") for k in keys)


def _num(v: Any) -> str:
    if v is None:
        return MISSING
    return f"{int(v):,}" if isinstance(v, int) else f"{v:,.2f}"


def comparison_rows(pm: Postmortem) -> list[list[str]]:
    return [
        [str(c["op_class"]), f"{c['per_step_a_ns'] / 1e6:.3f}", f"{c['per_step_b_ns'] / 1e6:.3f}",
         f"{c['ratio']:.2f}" if c["ratio"] else MISSING, f"{c['delta_per_step_ms']:.3f}"]
        for c in (pm.comparison or {}).get("top_losses", [])[:MAX_ROWS]
    ]  # fmt: skip


def serving_rows(pm: Postmortem) -> list[list[str]]:
    return [
        [str(r["label"]), str(r["platform"] or "?"), str(r["hardware"] or "?"), _num(r["max_concurrency"]),
         _num(r["ttft_p99_ms"]), _num(r["tpot_p99_ms"]), _num(r["output_throughput_tps"]), str(r["verdict"]),
         "; ".join(check_text(c) for c in r["checks"] or [] if c["verdict"] == "fail") or MISSING]
        for r in pm.serving[:MAX_ROWS]
    ]  # fmt: skip


def serving_compare_rows(pm: Postmortem) -> list[list[str]]:
    cmp = pm.serving_comparison or {}
    return [
        [f"{f['figure']} ({f['unit']})", _num(f["a"]), _num(f["b"]), _num(f["ratio"]),
         MISSING if f["gap_pct"] is None else f"{f['gap_pct']:+.1f}%" + (" ⚠" if f["worse"] else "")]
        for f in cmp.get("figures", []) if f["a"] is not None or f["b"] is not None
    ]  # fmt: skip


def serving_tables(pm: Postmortem) -> list[tuple[str, list[str], tuple[str, ...], list[list[str]]]]:
    """(title, warnings, column headings, rows) of the serving sections."""
    out = []
    if pm.serving:
        out.append((t("report.section.serving"), [], columns(SERVING_COLUMNS), serving_rows(pm)))
    if pm.serving_comparison:
        out.append((t("report.section.serving_baseline"), list(pm.serving_comparison["warnings"]),
                    columns(SERVING_COMPARE_COLUMNS), serving_compare_rows(pm)))  # fmt: skip
    return out


def rank_cells(r: dict[str, Any]) -> list[str]:
    ff = r.get("first_fatal") or {}
    first = (
        f"{ff.get('category')} ({ff.get('file', '').rsplit('/', 1)[-1]}:{ff.get('line_no')})"
        if ff
        else MISSING
    )
    return [
        MISSING if r["rank"] is None else str(r["rank"]),
        str(r["run_id"]),
        f"{r['steps']} ({r['step_source']})" if r["step_source"] else t("report.no_step_data"),
        f"{r['step_mean_ns'] / 1e6:,.3f}" if r["step_mean_ns"] is not None else MISSING,
        f"{r['step_max_ns'] / 1e6:,.3f} ({t('report.step', step=r['slowest_step'])})"
        if r["step_max_ns"] is not None
        else MISSING,
        ", ".join(map(str, r["failed_steps"])) or "0",
        first,
    ]


def rank_rows(pm: Postmortem) -> list[list[str]]:
    return [rank_cells(r) for r in pm.ranks[:MAX_ROWS]] if pm.ranks and pm.job_id is not None else []


def environment_rows(pm: Postmortem) -> list[list[str]]:
    rows = []
    for k, v in pm.environment.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}={b}" for a, b in list(v.items())[:MAX_ROWS])
        # the environment check's own entries are diag's words (their JSON keys stay English); the rest are the
        # run's settings, named as the framework names them
        label = t(f"pm.env.{k.replace(' ', '_')}") if k in CHECK_KEYS else str(k)
        rows.append([label, MISSING if v in (None, "") else str(v)])
    return rows
