"""The HTML report's bar chart of where device time went: one bar per bucket, its label left of it.

The label column is as wide as the longest label needs (CJK characters are about one em wide, Latin ones about
0.6 em at the chart's 12 px), between ``MIN_LABEL_PX`` and ``MAX_LABEL_PX``; a label wider than that is cut with
"…" and its whole text is the bar's tooltip (an SVG ``<title>``), so no label runs into its bar."""

from __future__ import annotations

import math
import unicodedata
from typing import Any

from diag.i18n import t
from diag.report_blocks import html_escape as _e

FONT_PX = 12
BAR_H = 22
BARS_PX = 320  # the longest bar
PCT_PX = 80  # room right of a bar for its "12.3%"
MIN_LABEL_PX, MAX_LABEL_PX = 80, 360
GAP_PX = 10  # between a label and its bar


def char_px(ch: str) -> float:
    """About how wide ``ch`` draws at FONT_PX: wide (CJK, full-width) one em, others 0.6 em."""
    return FONT_PX * (1.0 if unicodedata.east_asian_width(ch) in "WF" else 0.6)


def text_px(text: str) -> float:
    return sum(char_px(ch) for ch in text)


def fitted(text: str, room_px: float) -> str:
    """``text`` as it fits in ``room_px``: whole, or cut with "…"."""
    if text_px(text) <= room_px:
        return text
    out, used = "", char_px("…")
    for ch in text:
        if used + char_px(ch) > room_px:
            break
        out, used = out + ch, used + char_px(ch)
    return out.rstrip() + "…"


def bar_label(bar: dict[str, Any]) -> str:
    """A bucket's label in the current language (the Ascend vs CUDA page's bucket names); else as given."""
    return t(f"page.compare.bucket.{bar['bucket']}") if bar.get("bucket") else bar["label"]


def svg_chart(chart: list[dict[str, Any]], max_rows: int) -> str:
    """``chart``: [{bucket, label, ns, pct}], the biggest ``max_rows`` drawn, biggest first."""
    if not chart:
        return ""
    rows = [{**c, "label": bar_label(c)} for c in sorted(chart, key=lambda c: -c["ns"])[:max_rows]]
    label_w = math.ceil(min(MAX_LABEL_PX, max(MIN_LABEL_PX, max(text_px(c["label"]) for c in rows))))
    x_bar = label_w + GAP_PX
    top = max(c["ns"] for c in rows) or 1
    width = x_bar + BARS_PX + PCT_PX
    parts = [f'<svg width="{width}" height="{BAR_H * len(rows) + 10}" role="img">']
    for i, c in enumerate(rows):
        w = int(BARS_PX * c["ns"] / top)
        y = i * BAR_H + 5
        shown = fitted(c["label"], label_w)
        tip = f"<title>{_e(c['label'])}</title>" if shown != c["label"] else ""
        parts += [
            f'<g>{tip}<text x="0" y="{y + 15}" font-size="{FONT_PX}">{_e(shown)}</text>',
            f'<rect x="{x_bar}" y="{y + 3}" width="{max(w, 1)}" height="{BAR_H - 6}" fill="#4a7ab5"/>',
            f'<text x="{x_bar + w + 4}" y="{y + 15}" font-size="{FONT_PX}">{c["pct"]:.1f}%</text></g>',
        ]
    return "\n".join([*parts, "</svg>"])
