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
from diag.i18n import current_language, severity_word, t
from diag.report_blocks import html_escape as _e
from diag.report_blocks import html_evidence, html_table, md_escape, md_evidence, md_fence, md_table
from diag.report_chart import svg_chart
from diag.report_tables import (  # noqa: F401 - the app's Postmortem page reads them from here
    COMPARISON_COLUMNS,
    MAX_ROWS,
    RANK_COLUMNS,
    SERVING_COLUMNS,
    SERVING_COMPARE_COLUMNS,
    columns,
    comparison_rows,
    environment_rows,
    rank_cells,
    rank_rows,
    serving_compare_rows,
    serving_rows,
    serving_tables,
)

__all__ = ["md_escape", "md_fence", "render", "to_html", "to_json", "to_markdown"]


def actions_heading() -> str:
    """The section grouped by owner (rules/owners.toml), in the current language."""
    return t("report.section.actions")


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
        return RunClock(start, end, None, "the job's start")  # evidence_view's own wording (English)
    return RunClock()


def sections(pm: Postmortem) -> list[tuple[str, list[dict[str, Any]]]]:
    """The report's sections in order: (name, statements as dicts with text and evidence)."""
    rc = [pm.root_cause["statement"]] if pm.root_cause else []
    j = pm.to_json()
    memory = [(t("report.section.memory"), j["memory"])] if j["memory"] else []  # an OOM leads with memory
    return [
        *(memory if pm.memory_oom else []),
        (t("report.section.what_happened"), j["what_happened"]),
        (t("report.section.impact"), j["impact"]),
        *([] if pm.memory_oom else memory),
        (t("report.section.root_cause"), rc),
        (t("report.section.contributing"), j["contributing"]),
        (actions_heading(), j["actions"]),
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
    out = [f"# {md_escape(title(pm))}", "", t("report.scope", scope=md_escape(pm.scope)), ""]
    out += [md_escape(notes.get("summary") or pm.summary), ""]
    if notes.get("owner"):
        out += [t("report.owner", owner=md_escape(notes["owner"])), ""]
    if pm.root_cause:
        r = pm.root_cause
        out += [
            f"**{t('report.root_cause_category')}** {md_escape(r['category'])} ({md_escape(severity_word(r['severity']))}, "
            f"{t('report.root_cause_from', source=md_escape(r['source']))})",
            "",
        ]
        if r.get("explanation"):
            out += [md_escape(r["explanation"]), ""]
    for name, items in sections(pm):
        out += [f"## {name}", ""]
        if not items:
            out += [f"_{t('report.nothing')}_", ""]
        grouped = action_groups(items) if name == actions_heading() else [("", items[:MAX_ROWS])]
        for heading, group in grouped:
            out += [f"### {heading}", ""] if heading else []
            for st in group:
                out += [f"- {md_escape(st['text'])}"]
                out += (
                    [f"  _{t('report.in_this_order', order=md_escape(order))}_"]
                    if (order := steps_text(st))
                    else []
                )
                out += md_evidence(evidence_blocks(st.get("evidence") or {}, when))
            out += [""] if heading else []
        if len(items) > MAX_ROWS:
            out += [f"- {t('report.more', n=len(items) - MAX_ROWS)}"]
        out += [""]
    if pm.comparison:
        out += [f"## {t('report.section.comparison')}", ""]
        out += [
            f"- ⚠ {t('report.not_comparable', why=md_escape(w))}" for w in pm.comparison.get("warnings", [])
        ]
        out += [""] if pm.comparison.get("warnings") else []
        out += ["| " + " | ".join(columns(COMPARISON_COLUMNS)) + " |", "|---|---|---|---|---|"]
        for c in pm.comparison["top_losses"]:
            ratio = f"{c['ratio']:.2f}" if c["ratio"] else MISSING
            out += [
                f"| {md_escape(c['op_class'])} | {c['per_step_a_ns'] / 1e6:.3f} | {c['per_step_b_ns'] / 1e6:.3f} "
                f"| {ratio} | {c['delta_per_step_ms']:.3f} |"
            ]
        out += [""]
    out += _serving_md(pm)
    out += _md_ranks(pm)
    out += [f"## {t('report.section.environment')}", ""]
    for d in pm.environment_diff:
        vals = "; ".join(f"{md_escape(k)}: {md_escape(v)}" for k, v in d["values"].items())
        out += [
            f"- ⚠ **{t('report.ranks_differ')}** {t('report.ranks_differ_in', key=md_escape(d['key']), values=vals)}"
        ]
    if pm.environment_diff:
        out += [""]
    if not pm.environment:
        out += [f"_{t('report.no_environment')}_", ""]
    for k, v in pm.environment.items():
        if isinstance(v, dict):
            out += [f"- {md_escape(k)}:"] + [
                f"  - {md_escape(a)} = {md_escape(b)}" for a, b in list(v.items())[:MAX_ROWS]
            ]
        else:
            out += [f"- {md_escape(k)}: {md_escape(v)}"]
    out += [""]
    if notes.get("follow_ups"):
        out += [f"## {t('report.section.follow_ups')}", "", md_escape(notes["follow_ups"]), ""]
    if notes.get("updated_at"):
        out += [f"_{t('report.notes_saved', when=md_escape(notes['updated_at']))}_", ""]
    return "\n".join(out)


def _serving_md(pm: Postmortem) -> list[str]:
    out: list[str] = []
    if pm.serving:
        out += (
            [f"## {t('report.section.serving')}", ""]
            + md_table(columns(SERVING_COLUMNS), serving_rows(pm))
            + [""]
        )
    if pm.serving_comparison:
        out += [f"## {t('report.section.serving_baseline')}", ""]
        out += [f"- ⚠ {md_escape(w)}" for w in pm.serving_comparison["warnings"]] + [""]
        out += md_table(columns(SERVING_COMPARE_COLUMNS), serving_compare_rows(pm)) + [""]
    return out


def _serving_html(pm: Postmortem) -> list[str]:
    out: list[str] = []
    if pm.serving:
        out += [
            f"<h2>{_e(t('report.section.serving'))}</h2>",
            html_table(columns(SERVING_COLUMNS), serving_rows(pm)),
        ]
    if pm.serving_comparison:
        out.append(f"<h2>{_e(t('report.section.serving_baseline'))}</h2>")
        out += [f'<p class="muted">⚠ {_e(w)}</p>' for w in pm.serving_comparison["warnings"]]
        out.append(html_table(columns(SERVING_COMPARE_COLUMNS), serving_compare_rows(pm)))
    return out


def _md_ranks(pm: Postmortem) -> list[str]:
    if not pm.ranks or pm.job_id is None:
        return []
    out = [f"## {t('report.section.ranks')}", "", *md_table(columns(RANK_COLUMNS), rank_rows(pm))]
    if len(pm.ranks) > MAX_ROWS:
        out += [t("report.more_ranks", n=len(pm.ranks) - MAX_ROWS)]
    return [*out, ""]


# -- HTML --------------------------------------------------------------------------------------------------

# CJK system fonts by name, no web font: the report opens offline and renders Chinese with what the OS has
# (Linux: Noto / Source Han / WenQuanYi, macOS: PingFang, Windows: Microsoft YaHei).
FONT_STACK = (
    'system-ui,"Noto Sans CJK SC","Source Han Sans SC","PingFang SC","Microsoft YaHei","WenQuanYi Micro Hei",'
    "sans-serif"
)
CSS = (
    """body{font-family:"""
    + FONT_STACK
    + """;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
pre{background:#f5f5f5;padding:.6em;overflow-x:auto;white-space:pre-wrap;word-break:break-all;font-size:.85em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
.rc{background:#fff4f4;border-left:4px solid #c33;padding:.4em 1em}.diff li{color:#a40}.muted{color:#777}li{margin:.4em 0}"""
)


def to_html(pm: Postmortem) -> str:
    notes = pm.notes or {}
    when = clock(pm)
    out = [
        "<!DOCTYPE html>",
        f'<html lang="{HTML_LANG[current_language()]}"><head><meta charset="utf-8">',
        f"<title>{_e(title(pm))}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title(pm))}</h1>",
        f'<p class="muted">{_e(t("report.scope", scope=pm.scope))}</p>',
        f"<p>{_e(notes.get('summary') or pm.summary)}</p>",
    ]
    if notes.get("owner"):
        out.append(f"<p>{_e(t('report.owner', owner=notes['owner']))}</p>")
    if pm.root_cause:
        r = pm.root_cause
        out.append(
            f'<div class="rc"><b>{_e(t("report.root_cause_category"))}</b> {_e(r["category"])} ({_e(severity_word(r["severity"]))}, '
            f"{_e(t('report.root_cause_from', source=r['source']))})<br>{_e(r.get('explanation', ''))}</div>"
        )
    for name, items in sections(pm):
        out.append(f"<h2>{_e(name)}</h2>")
        if not items:
            out.append(f'<p class="muted">{_e(t("report.nothing"))}</p>')
            continue
        grouped = action_groups(items) if name == actions_heading() else [("", items[:MAX_ROWS])]
        for heading, group in grouped:
            out += [f"<h3>{_e(heading)}</h3>"] if heading else []
            out.append("<ul>")
            for st in group:
                out.append(f"<li>{_e(st['text'])}")
                out += (
                    [f'<br><span class="muted">{_e(t("report.in_this_order", order=order))}</span>']
                    if (order := steps_text(st))
                    else []
                )
                out += html_evidence(evidence_blocks(st.get("evidence") or {}, when))
                out.append("</li>")
            out.append("</ul>")
        if len(items) > MAX_ROWS:
            out.append(f"<p>{_e(t('report.more', n=len(items) - MAX_ROWS))}</p>")
    if pm.chart:
        out += [f"<h2>{_e(t('report.section.chart'))}</h2>", svg_chart(pm.chart, MAX_ROWS)]
    if pm.comparison:
        out += [
            f"<h2>{_e(t('report.section.comparison'))}</h2>",
            *(
                f'<p class="muted">⚠ {_e(t("report.not_comparable", why=w))}</p>'
                for w in pm.comparison.get("warnings", [])
            ),
            html_table(columns(COMPARISON_COLUMNS), comparison_rows(pm)),
        ]
    out += _serving_html(pm)
    if pm.ranks and pm.job_id is not None:
        out += [f"<h2>{_e(t('report.section.ranks'))}</h2>", html_table(columns(RANK_COLUMNS), rank_rows(pm))]
    out.append(f"<h2>{_e(t('report.section.environment'))}</h2>")
    if pm.environment_diff:
        out.append('<ul class="diff">')
        for d in pm.environment_diff:
            vals = "; ".join(f"{k}: {v}" for k, v in d["values"].items())
            out.append(
                f"<li>⚠ <b>{_e(t('report.ranks_differ'))}</b> {_e(t('report.ranks_differ_in', key=d['key'], values=vals))}</li>"
            )
        out.append("</ul>")
    out.append("<table>")
    for k, v in pm.environment.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}={b}" for a, b in list(v.items())[:MAX_ROWS])
        out.append(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>")
    out.append("</table>")
    if notes.get("follow_ups"):
        out.append(f"<h2>{_e(t('report.section.follow_ups'))}</h2><pre>{_e(notes['follow_ups'])}</pre>")
    if notes.get("updated_at"):
        out.append(f'<p class="muted">{_e(t("report.notes_saved", when=notes["updated_at"]))}</p>')
    out.append("</body></html>")
    return "\n".join(out)


HTML_LANG = {"en": "en", "zh": "zh-CN"}


def render(pm: Postmortem, fmt: str) -> str:
    if fmt == "md":
        return to_markdown(pm)
    if fmt == "html":
        return to_html(pm)
    if fmt == "json":
        return to_json(pm)
    raise ValueError(f"unknown format {fmt!r} (md, html, json)")
