"""Markdown and HTML pieces shared by the reports (diag.report): escaping, fences, tables, and the evidence
blocks of diag.analyses.evidence_view drawn as a fenced log excerpt plus a ``<details>`` of tables.

Op names, log text and file paths are untrusted: HTML escapes them, Markdown escapes its specials and puts raw
log lines in fenced blocks whose fence is longer than any backtick run inside.
"""

from __future__ import annotations

import html
import re
from typing import Any

from diag.analyses.evidence_view import Block, LogLines, Table, TimeRange
from diag.i18n import t

_MD_SPECIALS = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~&])")


def md_escape(text: Any) -> str:
    """Inline text as literal Markdown: specials backslash-escaped, no line breaks."""
    return _MD_SPECIALS.sub(r"\\\1", " ".join(str(text).split()))


def md_fence(body: str, lang: str = "") -> str:
    runs = [len(m) for m in re.findall(r"`+", body)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{lang}\n{body}\n{fence}"


def md_table(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return out + ["| " + " | ".join(md_escape(c) for c in row) + " |" for row in rows]


def html_table(columns: tuple[str, ...], rows: list[list[str]]) -> str:
    head = "<tr>" + "".join(f"<th>{html_escape(c)}</th>" for c in columns) + "</tr>"
    return (
        "<table>"
        + head
        + "".join("<tr>" + "".join(f"<td>{html_escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        + "</table>"
    )


def indent(block: str) -> str:
    return "\n".join("  " + line for line in block.splitlines())


def html_escape(x: Any) -> str:
    return html.escape(str(x), quote=True)


def _log_text(block: LogLines) -> str:
    """Log lines as ``file:line: text`` (verbatim), each followed by its stored next lines."""
    out = []
    for line in block.lines:
        out.append(f"{line.where}: {line.text}")
        out += [f"    {c}" for c in line.context]
    return "\n".join(out + ([f"… {block.more} more line(s)"] if block.more else []))


def md_evidence(blocks: list[Block]) -> list[str]:
    """Log lines in a fence (always shown); tables and the time range in a <details> that GitHub renders."""
    out: list[str] = []
    for b in blocks:
        if isinstance(b, LogLines):
            out += ["", f"  {t('report.log_evidence')}", "", indent(md_fence(_log_text(b), "text")), ""]
    rest: list[str] = []
    for b in blocks:
        if isinstance(b, Table):
            rest += ([f"  {md_escape(b.title)}:", ""] if b.title else []) + [
                "  " + line for line in md_table(tuple(b.columns), b.rows)
            ]
            rest += [f"  {t('report.more_rows', n=b.more)}"] if b.more else []
            rest += [""]
        elif isinstance(b, TimeRange):
            rest += [f"  {t('report.time_range', text=md_escape(b.text))}", ""]
    if rest:
        out += [
            "",
            f"  <details><summary>{html_escape(t('report.evidence'))}</summary>",
            "",
            *rest,
            "  </details>",
            "",
        ]
    return out


def html_evidence(blocks: list[Block]) -> list[str]:
    out = [f"<pre>{html_escape(_log_text(b))}</pre>" for b in blocks if isinstance(b, LogLines)]
    rest = []
    for b in blocks:
        if isinstance(b, Table):
            rest.append(
                (f"<p><b>{html_escape(b.title)}</b></p>" if b.title else "")
                + html_table(tuple(b.columns), b.rows)
            )
            if b.more:
                rest.append(f'<p class="muted">{html_escape(t("report.more_rows", n=b.more))}</p>')
        elif isinstance(b, TimeRange):
            rest.append(f'<p class="muted">{html_escape(t("report.time_range", text=b.text))}</p>')
    if rest:
        summary = f"<details><summary>{html_escape(t('report.evidence'))}</summary>"
        out.append(summary + "".join(rest) + "</details>")
    return out
