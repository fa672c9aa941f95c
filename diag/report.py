"""Render a Postmortem as Markdown, one self-contained HTML file (inline CSS and SVG, no script), or JSON.

Op names, log text and file paths are untrusted: HTML escapes them, Markdown escapes its specials and puts raw
log lines and evidence in fenced blocks whose fence is longer than any backtick run inside.
"""

from __future__ import annotations

import json
from typing import Any

from diag.analyses import owners
from diag.analyses.evidence_view import MISSING, RunClock, evidence_blocks
from diag.analyses.postmortem import Postmortem
from diag.analyses.postmortem_serving import check_text
from diag.report_blocks import html_escape as _e
from diag.report_blocks import html_evidence, html_table, md_escape, md_evidence, md_fence, md_table

__all__ = ["md_escape", "md_fence", "render", "to_html", "to_json", "to_markdown"]

MAX_ROWS = 20  # rows per table / statements per section
ACTIONS = "Suggested actions"  # the section grouped by owner (rules/owners.toml)


def clock(pm: Postmortem) -> RunClock:
    """The capture window the report's times are counted from: the run's, or (a job) from its first rank's start."""
    ranks = [
        r for r in pm.ranks if r.get("capture_start_ns") is not None and r.get("capture_end_ns") is not None
    ]
    if pm.run_id is not None:
        mine = [r for r in ranks if r["run_id"] == pm.run_id]
        return (
            RunClock(mine[0]["capture_start_ns"], mine[0]["capture_end_ns"], pm.run_id)
            if mine
            else RunClock()
        )
    if ranks:
        start, end = min(r["capture_start_ns"] for r in ranks), max(r["capture_end_ns"] for r in ranks)
        return RunClock(start, end, None, "the job's start")
    return RunClock()


def sections(pm: Postmortem) -> list[tuple[str, list[dict[str, Any]]]]:
    """The report's sections in order: (name, statements as dicts with text and evidence)."""
    rc = [pm.root_cause["statement"]] if pm.root_cause else []
    j = pm.to_json()
    memory = [("Memory", j["memory"])] if j["memory"] else []  # an OOM incident leads with its memory story
    return [
        *(memory if pm.memory_oom else []),
        ("What happened", j["what_happened"]),
        ("Impact", j["impact"]),
        *([] if pm.memory_oom else memory),
        ("Root cause", rc),
        ("Contributing factors", j["contributing"]),
        (ACTIONS, j["actions"]),
    ]


def action_groups(items: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Suggested actions under their owner's heading ("Change the code", "Change a setting"…), in the order of
    rules/owners.toml; the first MAX_ROWS actions only."""
    return [(h, g) for _, h, g in owners.group(items[:MAX_ROWS], lambda st: st.get("owner"))]


def steps_text(st: dict[str, Any]) -> str:
    """An action's owner steps in the order to try them: ``cast to int32 (code) → a later CANN (stack)``."""
    return " → ".join(f"{s['step']} ({s['owner']})" for s in st.get("owner_steps") or [])


def title(pm: Postmortem) -> str:
    return (pm.notes or {}).get("title") or pm.title


def to_json(pm: Postmortem) -> str:
    return json.dumps(pm.to_json(), ensure_ascii=False, indent=2, default=str)


# -- Markdown ----------------------------------------------------------------------------------------------


def to_markdown(pm: Postmortem) -> str:
    notes = pm.notes or {}
    when = clock(pm)
    out = [f"# {md_escape(title(pm))}", "", f"Scope: {md_escape(pm.scope)}", ""]
    out += [md_escape(notes.get("summary") or pm.summary), ""]
    if notes.get("owner"):
        out += [f"Owner: {md_escape(notes['owner'])}", ""]
    if pm.root_cause:
        r = pm.root_cause
        out += [
            f"**Root cause category:** {md_escape(r['category'])} ({md_escape(r['severity'])}, "
            f"from {md_escape(r['source'])} evidence)",
            "",
        ]
        if r.get("explanation"):
            out += [md_escape(r["explanation"]), ""]
    for name, items in sections(pm):
        out += [f"## {name}", ""]
        if not items:
            out += ["_Nothing in the data._", ""]
        grouped = action_groups(items) if name == ACTIONS else [("", items[:MAX_ROWS])]
        for heading, group in grouped:
            out += [f"### {heading}", ""] if heading else []
            for st in group:
                out += [f"- {md_escape(st['text'])}"]
                out += [f"  _In this order: {md_escape(order)}_"] if (order := steps_text(st)) else []
                out += md_evidence(evidence_blocks(st.get("evidence") or {}, when))
            out += [""] if heading else []
        if len(items) > MAX_ROWS:
            out += [f"- … {len(items) - MAX_ROWS} more (see the JSON report)"]
        out += [""]
    if pm.comparison:
        out += ["## Baseline comparison: top op classes losing time", ""]
        out += [f"- ⚠ not comparable: {md_escape(w)}" for w in pm.comparison.get("warnings", [])]
        out += [""] if pm.comparison.get("warnings") else []
        out += ["| op class | per step (ms) | baseline per step (ms) | ratio | lost per step (ms) |", "|---|---|---|---|---|"]  # fmt: skip
        for c in pm.comparison["top_losses"]:
            ratio = f"{c['ratio']:.2f}" if c["ratio"] else MISSING
            out += [
                f"| {md_escape(c['op_class'])} | {c['per_step_a_ns'] / 1e6:.3f} | {c['per_step_b_ns'] / 1e6:.3f} "
                f"| {ratio} | {c['delta_per_step_ms']:.3f} |"
            ]
        out += [""]
    out += _serving_md(pm)
    out += _md_ranks(pm)
    out += ["## Environment", ""]
    for d in pm.environment_diff:
        vals = "; ".join(f"{md_escape(k)}: {md_escape(v)}" for k, v in d["values"].items())
        out += [f"- ⚠ **ranks differ** in {md_escape(d['key'])}: {vals}"]
    if pm.environment_diff:
        out += [""]
    if not pm.environment:
        out += ["_No profiling run in scope: versions unknown._", ""]
    for k, v in pm.environment.items():
        if isinstance(v, dict):
            out += [f"- {md_escape(k)}:"] + [
                f"  - {md_escape(a)} = {md_escape(b)}" for a, b in list(v.items())[:MAX_ROWS]
            ]
        else:
            out += [f"- {md_escape(k)}: {md_escape(v)}"]
    out += [""]
    if notes.get("follow_ups"):
        out += ["## Follow-ups", "", md_escape(notes["follow_ups"]), ""]
    if notes.get("updated_at"):
        out += [f"_Notes saved {md_escape(notes['updated_at'])} UTC._", ""]
    return "\n".join(out)


SERVING_COLUMNS = ("serving run", "platform", "hardware", "concurrency", "TTFT p99 (ms)", "TPOT p99 (ms)",
                   "output tok/s", "verdict", "failed checks")  # fmt: skip
SERVING_COMPARE_COLUMNS = ("figure", "this deployment", "baseline", "ratio", "gap")


def _num(v: Any) -> str:
    if v is None:
        return MISSING
    return f"{int(v):,}" if isinstance(v, int) else f"{v:,.2f}"


def _serving_rows(pm: Postmortem) -> list[list[str]]:
    return [
        [str(r["label"]), str(r["platform"] or "?"), str(r["hardware"] or "?"), _num(r["max_concurrency"]),
         _num(r["ttft_p99_ms"]), _num(r["tpot_p99_ms"]), _num(r["output_throughput_tps"]), str(r["verdict"]),
         "; ".join(check_text(c) for c in r["checks"] or [] if c["verdict"] == "fail") or MISSING]
        for r in pm.serving[:MAX_ROWS]
    ]  # fmt: skip


def _serving_compare_rows(pm: Postmortem) -> list[list[str]]:
    cmp = pm.serving_comparison or {}
    return [
        [f"{f['figure']} ({f['unit']})", _num(f["a"]), _num(f["b"]), _num(f["ratio"]),
         MISSING if f["gap_pct"] is None else f"{f['gap_pct']:+.1f}%" + (" ⚠" if f["worse"] else "")]
        for f in cmp.get("figures", []) if f["a"] is not None or f["b"] is not None
    ]  # fmt: skip


def _serving_md(pm: Postmortem) -> list[str]:
    out: list[str] = []
    if pm.serving:
        out += (
            ["## Serving figures (same deployment)", ""] + md_table(SERVING_COLUMNS, _serving_rows(pm)) + [""]
        )
    if pm.serving_comparison:
        out += ["## Serving against the baseline deployment", ""]
        out += [f"- ⚠ {md_escape(w)}" for w in pm.serving_comparison["warnings"]] + [""]
        out += md_table(SERVING_COMPARE_COLUMNS, _serving_compare_rows(pm)) + [""]
    return out


def _serving_html(pm: Postmortem) -> list[str]:
    out: list[str] = []
    if pm.serving:
        out += ["<h2>Serving figures (same deployment)</h2>", html_table(SERVING_COLUMNS, _serving_rows(pm))]
    if pm.serving_comparison:
        out.append("<h2>Serving against the baseline deployment</h2>")
        out += [f'<p class="muted">⚠ {_e(w)}</p>' for w in pm.serving_comparison["warnings"]]
        out.append(html_table(SERVING_COMPARE_COLUMNS, _serving_compare_rows(pm)))
    return out


RANK_COLUMNS = (
    "rank",
    "run",
    "steps",
    "mean step (ms)",
    "max step (ms)",
    "failed steps",
    "first fatal error",
)


def _rank_cells(r: dict[str, Any]) -> list[str]:
    ff = r.get("first_fatal") or {}
    first = (
        f"{ff.get('category')} ({ff.get('file', '').rsplit('/', 1)[-1]}:{ff.get('line_no')})"
        if ff
        else MISSING
    )
    return [
        MISSING if r["rank"] is None else str(r["rank"]),
        str(r["run_id"]),
        f"{r['steps']} ({r['step_source']})" if r["step_source"] else "no step data",
        f"{r['step_mean_ns'] / 1e6:,.3f}" if r["step_mean_ns"] is not None else MISSING,
        f"{r['step_max_ns'] / 1e6:,.3f} (step {r['slowest_step']})"
        if r["step_max_ns"] is not None
        else MISSING,
        ", ".join(map(str, r["failed_steps"])) or "0",
        first,
    ]


def _md_ranks(pm: Postmortem) -> list[str]:
    if not pm.ranks or pm.job_id is None:
        return []
    out = ["## Ranks", "", *md_table(RANK_COLUMNS, [_rank_cells(r) for r in pm.ranks[:MAX_ROWS]])]
    if len(pm.ranks) > MAX_ROWS:
        out += [f"… {len(pm.ranks) - MAX_ROWS} more rank(s) (see the JSON report)"]
    return [*out, ""]


# -- HTML --------------------------------------------------------------------------------------------------

CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
pre{background:#f5f5f5;padding:.6em;overflow-x:auto;white-space:pre-wrap;word-break:break-all;font-size:.85em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
.rc{background:#fff4f4;border-left:4px solid #c33;padding:.4em 1em}.diff li{color:#a40}.muted{color:#777}li{margin:.4em 0}"""


def _svg_chart(chart: list[dict[str, Any]]) -> str:
    if not chart:
        return ""
    rows = sorted(chart, key=lambda c: -c["ns"])[:MAX_ROWS]
    width, bar_h, label_w = 700, 22, 300
    top = max(c["ns"] for c in rows) or 1
    parts = [f'<svg width="{width}" height="{bar_h * len(rows) + 10}" role="img">']  # noqa: E501
    for i, c in enumerate(rows):
        w = int((width - label_w - 80) * c["ns"] / top)
        y = i * bar_h + 5
        parts += [
            f'<text x="0" y="{y + 15}" font-size="12">{_e(c["label"])}</text>',
            f'<rect x="{label_w}" y="{y + 3}" width="{max(w, 1)}" height="{bar_h - 6}" fill="#4a7ab5"/>',
            f'<text x="{label_w + w + 4}" y="{y + 15}" font-size="12">{c["pct"]:.1f}%</text>',
        ]
    return "\n".join([*parts, "</svg>"])


def to_html(pm: Postmortem) -> str:
    notes = pm.notes or {}
    when = clock(pm)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title(pm))}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title(pm))}</h1>",
        f'<p class="muted">Scope: {_e(pm.scope)}</p>',
        f"<p>{_e(notes.get('summary') or pm.summary)}</p>",
    ]
    if notes.get("owner"):
        out.append(f"<p>Owner: {_e(notes['owner'])}</p>")
    if pm.root_cause:
        r = pm.root_cause
        out.append(
            f'<div class="rc"><b>Root cause category:</b> {_e(r["category"])} ({_e(r["severity"])}, from '
            f"{_e(r['source'])} evidence)<br>{_e(r.get('explanation', ''))}</div>"
        )
    for name, items in sections(pm):
        out.append(f"<h2>{_e(name)}</h2>")
        if not items:
            out.append('<p class="muted">Nothing in the data.</p>')
            continue
        grouped = action_groups(items) if name == ACTIONS else [("", items[:MAX_ROWS])]
        for heading, group in grouped:
            out += [f"<h3>{_e(heading)}</h3>"] if heading else []
            out.append("<ul>")
            for st in group:
                out.append(f"<li>{_e(st['text'])}")
                out += (
                    [f'<br><span class="muted">In this order: {_e(order)}</span>']
                    if (order := steps_text(st))
                    else []
                )
                out += html_evidence(evidence_blocks(st.get("evidence") or {}, when))
                out.append("</li>")
            out.append("</ul>")
        if len(items) > MAX_ROWS:
            out.append(f"<p>… {len(items) - MAX_ROWS} more (see the JSON report)</p>")
    if pm.chart:
        out += ["<h2>Device time by bucket</h2>", _svg_chart(pm.chart)]
    if pm.comparison:
        out += [
            "<h2>Baseline comparison: top op classes losing time</h2>",
            *(f'<p class="muted">⚠ not comparable: {_e(w)}</p>' for w in pm.comparison.get("warnings", [])),
            "<table>",
            "<tr><th>op class</th><th>per step (ms)</th><th>baseline per step (ms)</th><th>ratio</th>"
            "<th>lost per step (ms)</th></tr>",
        ]
        for c in pm.comparison["top_losses"][:MAX_ROWS]:
            ratio = f"{c['ratio']:.2f}" if c["ratio"] else MISSING
            out.append(
                f"<tr><td>{_e(c['op_class'])}</td><td>{c['per_step_a_ns'] / 1e6:.3f}</td>"
                f"<td>{c['per_step_b_ns'] / 1e6:.3f}</td><td>{ratio}</td><td>{c['delta_per_step_ms']:.3f}</td></tr>"
            )
        out.append("</table>")
    out += _serving_html(pm)
    if pm.ranks and pm.job_id is not None:
        out += ["<h2>Ranks</h2>", html_table(RANK_COLUMNS, [_rank_cells(r) for r in pm.ranks[:MAX_ROWS]])]
    out.append("<h2>Environment</h2>")
    if pm.environment_diff:
        out.append('<ul class="diff">')
        for d in pm.environment_diff:
            vals = "; ".join(f"{k}: {v}" for k, v in d["values"].items())
            out.append(f"<li>⚠ <b>ranks differ</b> in {_e(d['key'])}: {_e(vals)}</li>")
        out.append("</ul>")
    out.append("<table>")
    for k, v in pm.environment.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}={b}" for a, b in list(v.items())[:MAX_ROWS])
        out.append(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>")
    out.append("</table>")
    if notes.get("follow_ups"):
        out.append(f"<h2>Follow-ups</h2><pre>{_e(notes['follow_ups'])}</pre>")
    if notes.get("updated_at"):
        out.append(f'<p class="muted">Notes saved {_e(notes["updated_at"])} UTC.</p>')
    out.append("</body></html>")
    return "\n".join(out)


# -- tables for the app's Postmortem page (the same figures as the reports) ---------------------------------

COMPARISON_COLUMNS = ("op class", "per step (ms)", "baseline per step (ms)", "ratio", "lost per step (ms)")


def comparison_rows(pm: Postmortem) -> list[list[str]]:
    return [
        [str(c["op_class"]), f"{c['per_step_a_ns'] / 1e6:.3f}", f"{c['per_step_b_ns'] / 1e6:.3f}",
         f"{c['ratio']:.2f}" if c["ratio"] else MISSING, f"{c['delta_per_step_ms']:.3f}"]
        for c in (pm.comparison or {}).get("top_losses", [])[:MAX_ROWS]
    ]  # fmt: skip


def serving_tables(pm: Postmortem) -> list[tuple[str, list[str], tuple[str, ...], list[list[str]]]]:
    """(title, warnings, columns, rows) of the serving sections."""
    out = []
    if pm.serving:
        out.append(("Serving figures (same deployment)", [], SERVING_COLUMNS, _serving_rows(pm)))
    if pm.serving_comparison:
        out.append(("Serving against the baseline deployment", list(pm.serving_comparison["warnings"]),
                    SERVING_COMPARE_COLUMNS, _serving_compare_rows(pm)))  # fmt: skip
    return out


def rank_rows(pm: Postmortem) -> list[list[str]]:
    return [_rank_cells(r) for r in pm.ranks[:MAX_ROWS]] if pm.ranks and pm.job_id is not None else []


def environment_rows(pm: Postmortem) -> list[list[str]]:
    rows = []
    for k, v in pm.environment.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}={b}" for a, b in list(v.items())[:MAX_ROWS])
        rows.append([str(k), MISSING if v in (None, "") else str(v)])
    return rows


def render(pm: Postmortem, fmt: str) -> str:
    if fmt == "md":
        return to_markdown(pm)
    if fmt == "html":
        return to_html(pm)
    if fmt == "json":
        return to_json(pm)
    raise ValueError(f"unknown format {fmt!r} (md, html, json)")
