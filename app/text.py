"""Text that came from someone else's file (op, model, folder and file names, log lines, serving labels), made
safe for the two places that interpret it: Streamlit's Markdown (page text and widget labels) and Plotly's
pseudo-HTML (hover text, tick labels, legend names).

Only the interpolated value is escaped; the page keeps its own bold labels and units around it.
"""

from __future__ import annotations

import html
import re

# What makes Streamlit's Markdown (CommonMark, GFM autolinks and strikethrough, $math$, :colour[…] directives,
# raw HTML) draw something other than the characters: escaped wherever they stand.
_ALWAYS = set("\\`*[]<&!~$@")  # a lone ">" mid-line is inert: "<" cannot open a tag
_LINE_START = set(
    "#-+=|>"
)  # a heading, list, setext, table or quote marker: only the value's first character
_LIST_NUMBER = re.compile(r"\d{1,9}[.)]")
_WWW = re.compile(r"(?:^|\W)www$", re.IGNORECASE)  # "www." starts a GFM autolink: its dot is escaped


def _escape_at(s: str, i: int) -> bool:
    ch = s[i]
    if ch in _ALWAYS or (i == 0 and ch in _LINE_START):
        return True
    if ch == "_":  # emphasis opens or closes only at a word's edge: aclnnReduceSum_Cast stays as it is
        return not (0 < i < len(s) - 1 and s[i - 1].isalnum() and s[i + 1].isalnum())
    if ch == ":":  # "http://" is a GFM autolink
        return s[i + 1 : i + 2] == "/"
    if ch in ".)":  # "1. " or "1)" ending the value opens an ordered list; "0.986" does not
        opens_list = bool(_LIST_NUMBER.fullmatch(s[: i + 1])) and s[i + 1 : i + 2] in ("", " ")
        return opens_list or (ch == "." and bool(_WWW.search(s[:i])))
    return False


def md_text(value: object) -> str:
    """``value`` as literal Markdown inline text: no markup, link, image, HTML or line break survives.

    Only the characters that would act are escaped (a backslash before ASCII punctuation is a literal in
    CommonMark), so that the source of ordinary names and sentences reads as it is shown."""
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


def md_cells(rows: list[list[object]] | list[tuple[object, ...]]) -> list[list[object]]:
    """The rows of an ``st.table`` with each text cell as ``md_text``: st.table draws its cells as Markdown
    (an op or folder name holding ``![f](x.png)`` would be an image)."""
    return [[md_text(c) if isinstance(c, str) else c for c in row] for row in rows]
