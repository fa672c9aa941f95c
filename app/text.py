"""Text that came from someone else's file (op, model, folder and file names, log lines, serving labels), made
safe for the two places that interpret it: Streamlit's Markdown (page text and widget labels) and Plotly's
pseudo-HTML (hover text, tick labels, legend names).

Only the interpolated value is escaped; the page keeps its own bold labels and units around it.
"""

from __future__ import annotations

import html
import re

# Every character that is Markdown-active in Streamlit's dialect: CommonMark, GFM (tables, strikethrough,
# autolinks), math ($), colour directives (:red[…]) and raw HTML (<, >, &). A backslash before any ASCII
# punctuation is a literal in CommonMark, so escaping one too many only costs a backslash in the source.
_ACTIVE = set("\\`*_{}[]()#+-.!|<>~&$:@=")
# Harmless between two letters or digits (no emphasis opens intraword, no list starts mid-word): left as they
# are so that names such as aclnnReduceSum_CastAiCpu_Cast or trace_view.json read the same in the source.
_INTRAWORD = set("_-.:")
_WWW = re.compile(r"www$", re.IGNORECASE)  # "www." starts a GFM autolink: its dot is always escaped


def _escape_at(s: str, i: int) -> bool:
    ch = s[i]
    if ch not in _ACTIVE:
        return False
    if ch not in _INTRAWORD or i == 0 or i == len(s) - 1:
        return True
    if not (s[i - 1].isalnum() and s[i + 1].isalnum()):
        return True
    return ch == "." and bool(_WWW.search(s[:i]))


def md_text(value: object) -> str:
    """``value`` as literal Markdown inline text: no markup, link, image, HTML or line break survives."""
    s = " ".join(str(value).split())  # a newline would start a heading, list or table
    return "".join("\\" + ch if _escape_at(s, i) else ch for i, ch in enumerate(s))


def md_code(value: object) -> str:
    """``value`` as an inline code span: inside one nothing is active, so only the fence must outrun it."""
    s = " ".join(str(value).split())
    runs = [len(m) for m in re.findall(r"`+", s)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if s.startswith("`") or s.endswith("`") else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def plain(value: object) -> str:
    """``value`` for Plotly text, hover text, tick labels and legend names: tags shown as text, not drawn."""
    return html.escape(str(value), quote=False)


def template_text(value: object) -> str:
    """``value`` placed inside a Plotly hovertemplate: as ``plain`` and with ``%`` unable to start ``%{…}``."""
    return plain(value).replace("%", "&#37;")
