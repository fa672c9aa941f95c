"""Two runs of the same platform, before and after an upgrade or a changed setting: what got slower, beyond noise?

Per op type (and per op class) the time per step before (run A) and after (run B) comes from the op table of
``diag.analyses.ops`` (kernel_details / op_summary, else the trace's device tasks): total ÷ the steps of the
device-time breakdown, as ``diag compare`` counts them.  The noise is the step-to-step spread: each op's
per-step totals (a step where the op did not run counts 0) give a standard error of the mean per run, and the
two runs' errors combine as sqrt(se_a² + se_b²).  A change is significant when |Δ| exceeds ``k`` × that spread,
the op changed by at least ``min_change_pct`` of its own time and the change is at least ``min_step_share_pct``
of the step time before (``[before_after]`` in rules/thresholds.toml).  With fewer than ``min_steps`` steps on
either side there is no spread to measure: the answer is "cannot tell".

Which owner's change it was comes from the recorded environments (``diag.analyses.before_after_env``).
"""

from __future__ import annotations

import math
from typing import Any

from diag.analyses import before_after_env as env
from diag.analyses.counts import KERNEL_FILTER, unique_tasks_sql
from diag.analyses.finding import Finding, thresholds
from diag.analyses.finding import severity as _severity
from diag.analyses.ops import KERNELS, NONE, TASKS, _class_case, _key, figures_table, op_table, platform_of
from diag.analyses.stall_breakdown import BUCKET_LABELS, BUCKETS, Breakdown, breakdown
from diag.i18n import t as tr
from diag.store import Store

SLOWER, FASTER, WITHIN, CANNOT_TELL, NEW, GONE = (
    "slower",
    "faster",
    "within noise",
    "cannot tell",
    "new",
    "gone",
)


def limits() -> dict[str, Any]:
    return thresholds()["before_after"]


def same_platform(store: Store, run_a: int, run_b: int) -> bool:
    """Both runs on the same platform (Ascend and Ascend, CUDA and CUDA): a before/after pair."""
    return platform_name(store, run_a) == platform_name(store, run_b)


def platform_name(store: Store, run_id: int) -> str:
    rows = store.cursor().execute("SELECT platform FROM runs WHERE run_id = ?", [run_id]).fetchall()
    if not rows:
        raise ValueError(f"no run {run_id}")
    return str(rows[0][0])


def _timed_rows_sql(table: str) -> str:
    """The kernels of ``ops.rows_sql`` (the same tables, filters and duplicate rule) with their start: the step
    windows place them, since a CUDA trace's kernels carry no step id."""
    if table == KERNELS:
        return """SELECT name, op_type AS op, task_kind AS kind, dur_ns, start_ns, step
                  FROM (SELECT DISTINCT ON (name, start_ns) * FROM kernels WHERE run_id = $run)"""
    return f"SELECT name, op, kind, dur_ns, start_ns, step FROM ({unique_tasks_sql()}) WHERE {KERNEL_FILTER}"


def _windows_sql(bd: Breakdown) -> tuple[str, str]:
    """(the step-window CTE, the step expression): the breakdown's steps by index, else the rows' own step ids."""
    if not bd.steps:
        return "w(i, lo, hi) AS (SELECT NULL::INT, NULL::BIGINT, NULL::BIGINT WHERE false)", "r.step"
    values = ", ".join(f"({i}, {s.start_ns}, {s.end_ns})" for i, s in enumerate(bd.steps))
    return f"w(i, lo, hi) AS (VALUES {values})", "w.i"


def _step_spread(store: Store, run_id: int, by: str, bd: Breakdown) -> tuple[int, dict[str, float]]:
    """(steps with kernels, key -> standard error of the key's per-step total in ns); one query."""
    table, platform = figures_table(store, run_id), platform_of(store, run_id)
    if table not in (KERNELS, TASKS):  # a kernel summary has no steps; a run of versions only has no kernels
        return 0, {}
    key = "op_class" if by == "class" else _key(by)
    windows, step = _windows_sql(bd)
    sql = f"""
        WITH {windows},
             r AS ({_timed_rows_sql(table)}),
             names AS (SELECT DISTINCT name, op, kind FROM r),
             classed AS (SELECT name, op, kind, {_class_case(platform)} AS op_class FROM names),
             k AS (SELECT r.*, c.op_class, {step} AS step_key FROM r JOIN classed c
                   ON c.name = r.name AND c.op IS NOT DISTINCT FROM r.op AND c.kind IS NOT DISTINCT FROM r.kind
                   LEFT JOIN w ON r.start_ns >= w.lo AND r.start_ns < w.hi),
             g AS (SELECT {key} AS key, step_key, dur_ns FROM k WHERE step_key IS NOT NULL),
             steps AS (SELECT DISTINCT step_key FROM g),
             keys AS (SELECT DISTINCT key FROM g),
             per AS (SELECT key, step_key, sum(dur_ns) AS ns FROM g GROUP BY key, step_key),
             filled AS (SELECT keys.key, steps.step_key, coalesce(per.ns, 0) AS ns
                        FROM keys CROSS JOIN steps LEFT JOIN per USING (key, step_key))
        SELECT key, count(*), coalesce(stddev_samp(ns), 0) FROM filled GROUP BY key"""
    got = store.cursor().execute(sql, {"run": run_id}).fetchall()
    steps = max((int(n) for _, n, _ in got), default=0)
    return steps, {k: (sd / math.sqrt(n) if n else 0.0) for k, n, sd in got}


def _n_steps(bd: Breakdown) -> int:
    return max(1, len([s for s in bd.steps if s.e2e_ns > 0]))


def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


def _verdict(delta: float, spread: float, before: float, step_before: float, can_tell: bool) -> str:
    t = limits()
    if not can_tell:
        return CANNOT_TELL
    big = abs(delta) > t["k"] * spread
    relative = before > 0 and 100 * abs(delta) / before >= t["min_change_pct"]
    visible = step_before > 0 and 100 * abs(delta) / step_before >= t["min_step_share_pct"]
    if big and relative and visible:
        return SLOWER if delta > 0 else FASTER
    return WITHIN


def _rows(side: dict[str, Any], by: str, step_before_ns: float, can_tell: bool) -> list[dict[str, Any]]:
    """One row per op type / class present on either side."""
    a, b = side["a"][by], side["b"][by]
    out = []
    for name in sorted(set(a) | set(b)):
        ra, rb = a.get(name), b.get(name)
        pa = ra["total_ns"] / side["steps_a"] if ra else 0.0
        pb = rb["total_ns"] / side["steps_b"] if rb else 0.0
        se = math.hypot(side["se_a"][by].get(name, 0.0), side["se_b"][by].get(name, 0.0))
        delta = pb - pa
        verdict = NEW if not ra else GONE if not rb else _verdict(delta, se, pa, step_before_ns, can_tell)
        out.append(
            {
                "name": name,
                "op_class": (ra or rb)["op_class"],
                "calls_per_step_a": ra["calls"] / side["steps_a"] if ra else 0.0,
                "calls_per_step_b": rb["calls"] / side["steps_b"] if rb else 0.0,
                "per_step_a_ms": pa / 1e6,
                "per_step_b_ms": pb / 1e6,
                "delta_ms": delta / 1e6,
                "delta_pct": 100 * delta / pa if pa else None,
                "spread_ms": se / 1e6 if can_tell else None,  # None: too few steps to measure it
                "verdict": verdict,
                "significant": verdict in (SLOWER, FASTER),
            }
        )
    out.sort(key=lambda r: (not r["significant"], -abs(r["delta_ms"]), r["name"]))
    return out


def _step_time(bd_a: Breakdown, bd_b: Breakdown, sa: int, sb: int) -> list[dict[str, Any]]:
    """Device time per step before and after, per breakdown bucket and end to end."""
    out = []
    for bucket in (*BUCKETS, "e2e"):
        va = (bd_a.total.e2e_ns if bucket == "e2e" else bd_a.total.buckets[bucket]) / sa if bd_a.total else 0
        vb = (bd_b.total.e2e_ns if bucket == "e2e" else bd_b.total.buckets[bucket]) / sb if bd_b.total else 0
        label = "Step (end to end)" if bucket == "e2e" else BUCKET_LABELS[bucket]
        out.append(
            {
                "bucket": bucket,
                "label": label,
                "per_step_a_ms": va / 1e6,
                "per_step_b_ms": vb / 1e6,
                "delta_ms": (vb - va) / 1e6,
                "delta_pct": 100 * (vb - va) / va if va else None,
            }
        )
    return out


def _run(store: Store, run_id: int) -> dict[str, Any]:
    names = (
        "run_id",
        "name",
        "platform",
        "device_name",
        "cann_version",
        "torch_npu_version",
        "profiler_level",
    )
    rows = (
        store.cursor().execute(f"SELECT {', '.join(names)} FROM runs WHERE run_id = ?", [run_id]).fetchall()
    )
    if not rows:
        raise ValueError(f"no run {run_id}")
    return dict(zip(names, rows[0], strict=True))


def _sides(store: Store, runs: dict[str, tuple[int, Breakdown]], sa: int, sb: int) -> dict[str, Any]:
    """Each side's op table by op type and by class, and the standard error of each key's per-step total."""
    side: dict[str, Any] = {
        "steps_a": sa,
        "steps_b": sb,
        "a": {},
        "b": {},
        "se_a": {},
        "se_b": {},
        "kernel_steps": {},
    }
    for tag, (run_id, bd) in runs.items():
        for by in ("op", "class"):
            rows = op_table(store, run_id, by=by) if figures_table(store, run_id) != NONE else []
            side[tag][by] = {r["name"]: r for r in rows}
            side["kernel_steps"][tag], side[f"se_{tag}"][by] = _step_spread(store, run_id, by, bd)
    return side


def before_after(store: Store, run_a: int, run_b: int) -> dict[str, Any]:
    """Run A (before) against run B (after) of the same platform (module doc); ValueError otherwise."""
    a, b = _run(store, run_a), _run(store, run_b)
    if not same_platform(store, run_a, run_b):
        raise ValueError(
            f"runs {run_a} ({a['platform']}) and {run_b} ({b['platform']}) are not the same platform"
        )
    bd_a, bd_b = breakdown(store, run_a), breakdown(store, run_b)
    sa, sb = _n_steps(bd_a), _n_steps(bd_b)
    side = _sides(store, {"a": (run_a, bd_a), "b": (run_b, bd_b)}, sa, sb)
    ka, kb = side["kernel_steps"]["a"], side["kernel_steps"]["b"]
    can_tell = min(ka, kb) >= limits()["min_steps"]
    step_time = _step_time(bd_a, bd_b, sa, sb)
    step_before_ns = step_time[-1]["per_step_a_ms"] * 1e6
    ops = _rows(side, "op", step_before_ns, can_tell)
    changes = env.environment_changes(store, run_a, run_b)
    out = {
        "run_a": a,
        "run_b": b,
        "steps_a": ka,
        "steps_b": kb,
        "can_tell": can_tell,
        "ops": [r for r in ops if r["verdict"] not in (NEW, GONE)],
        "classes": [
            r for r in _rows(side, "class", step_before_ns, can_tell) if r["verdict"] not in (NEW, GONE)
        ],
        "only_a": [r for r in ops if r["verdict"] == GONE],
        "only_b": [r for r in ops if r["verdict"] == NEW],
        "step_time": step_time,
        "environment": {"changes": changes, "sentence": env.sentence(changes), **env.owner_of(changes)},
        "limits": limits(),
    }
    out["answer"] = answer(out)
    out["findings"] = [f.to_json() for f in regressions(out)]
    return out


def steps(n: int) -> str:
    return tr("before_after.one_step" if n == 1 else "before_after.steps", n=n)


def answer(result: dict[str, Any]) -> str:
    """The one line first: the biggest regression beyond noise (or that none is), then what changed."""
    what = result["environment"]["sentence"]
    if not result["can_tell"]:
        t = limits()["min_steps"]
        return tr(
            "before_after.cannot_tell",
            before=steps(result["steps_a"]),
            after=result["steps_b"],
            t=t,
            what=what,
        )
    slower = [r for r in result["ops"] if r["verdict"] == SLOWER]
    if not slower:
        faster = [r for r in result["ops"] if r["verdict"] == FASTER]
        head = (
            tr("before_after.none_slower", name=faster[0]["name"], pct=f"{-faster[0]['delta_pct']:.1f}")
            if faster
            else tr("before_after.none_changed")
        )
        return tr("before_after.then", head=head, what=what)
    r = max(slower, key=lambda x: x["delta_ms"])
    return tr(
        "before_after.slower",
        name=r["name"], pct=f"{r['delta_pct']:.1f}", ms=f"{r['delta_ms']:.2f}", spread=f"{r['spread_ms']:.2f}", what=what,
    )  # fmt: skip


def before_after_findings(store: Store, run_a: int, run_b: int) -> list[Finding]:
    """One ``regression`` finding per op slower beyond noise (on run B, the run after), with the owner of the
    change; not part of ``diag findings``, which reads one run."""
    return regressions(before_after(store, run_a, run_b))


def regressions(result: dict[str, Any]) -> list[Finding]:
    """The ``regression`` findings of a before/after result (see ``before_after_findings``)."""
    run_a, run_b = result["run_a"]["run_id"], result["run_b"]["run_id"]
    step_ms = result["step_time"][-1]["per_step_a_ms"]
    envd = result["environment"]
    out = []
    for r in result["ops"]:
        if r["verdict"] != SLOWER:
            continue
        pct = 100 * r["delta_ms"] / step_ms if step_ms else 0.0
        out.append(
            Finding(
                run_id=run_b,
                category="regression",
                severity=_severity(pct, thresholds()),
                title=tr(
                    "finding.regression.op_slower.title",
                    name=r["name"],
                    pct=r["delta_pct"],
                    run=run_a,
                    ms=r["delta_ms"],
                ),
                impact_pct=pct,
                impact_ns=round(r["delta_ms"] * 1e6 * max(1, result["steps_b"])),
                evidence={
                    "op": r["name"],
                    "before_run": run_a,
                    **{k: r[k] for k in r if k != "name"},
                    "environment_changes": envd["changes"],
                },  # fmt: skip
                suggestion=envd["owner_steps"][0]["step"],
                owner=envd["owner"],
                owner_reason=envd["owner_reason"],
                owner_steps=envd["owner_steps"],
                code="regression.op_slower",
            )
        )
    return out
