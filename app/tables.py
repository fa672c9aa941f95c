"""Every page's tables drawn one way: `—` for a missing value, columns wide enough for their label and content,
the height of the rows up to a cap, and a hint when the table is wider than the page.

Streamlit draws a missing number as the word "None", so a numeric column with a gap is turned into right-aligned
text (thousands separators, the column's own decimals) with `—` in the gap; a complete numeric column stays a
number (it sorts as one).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
import streamlit as st

from diag.commands._format import header_text
from diag.i18n import t

MISSING = "—"
ROW_PX, HEADER_PX, MAX_ROWS_SHOWN = 35, 38, 16
CHAR_PX, PAD_PX, MAX_COL_PX = 7, 24, 420  # Streamlit's grid font is ~7 px a character
WIDE_COLUMNS = 10  # more columns than this rarely fit a laptop screen: say the table scrolls


def is_missing(value: object) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)


def _decimals(values: pd.Series) -> int:
    """Decimals the column's figures were rounded to (at most 4), so that text keeps them."""
    most = 0
    for v in values:
        if isinstance(v, float) and not v.is_integer():
            most = max(most, len(f"{v:.4f}".rstrip("0").split(".")[1]))
    return most


def cell_text(value: object, decimals: int = 0) -> str:
    if is_missing(value):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{decimals}f}"
    if isinstance(value, list | tuple | set):
        return ", ".join(cell_text(v) for v in value) or MISSING
    if isinstance(value, dict):
        return ", ".join(f"{k} {cell_text(v)}" for k, v in value.items()) or MISSING
    return str(value)


def for_display(df: pd.DataFrame) -> tuple[pd.DataFrame, set[str]]:
    """The frame with `—` for every missing value; returns it and the numeric columns turned into text."""
    out = df.copy()
    as_text: set[str] = set()
    for col in out.columns:
        series = out[col]
        numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
        if numeric and not series.isna().any():
            continue
        if numeric or series.map(lambda v: isinstance(v, int | float) and not isinstance(v, bool)).any():
            as_text.add(str(col))
        present = series[~series.map(is_missing)]
        digits = _decimals(pd.Series([float(v) for v in present if isinstance(v, int | float)], dtype=float))
        out[col] = series.map(lambda v, d=digits: cell_text(v, d)).astype(object)
    return out, as_text


def _width_px(df: pd.DataFrame, col: str) -> int:
    """Wide enough for the label always (a clipped header hides what the column is), and for the content up to
    a cap (a long path scrolls inside its cell)."""
    content = max([0] + [len(str(v)) for v in df[col].head(200)])
    return max(PAD_PX + CHAR_PX * len(str(col)), min(MAX_COL_PX, PAD_PX + CHAR_PX * content))


def height_px(rows: int, max_rows: int = MAX_ROWS_SHOWN) -> int:
    """Tall enough for every row up to ``max_rows``; beyond that the table scrolls."""
    return HEADER_PX + ROW_PX * max(1, min(rows, max_rows))


def column_config(
    df: pd.DataFrame, as_text: set[str], helps: Mapping[str, str] | None = None
) -> dict[str, object]:
    helps = helps or {}
    config: dict[str, object] = {}
    for col in map(str, df.columns):
        common = {"width": _width_px(df, col), "help": helps.get(col)}
        if col in as_text:
            config[col] = st.column_config.TextColumn(col, alignment="right", **common)
        elif pd.api.types.is_float_dtype(df[col]):  # one number of decimals down the column
            config[col] = st.column_config.NumberColumn(col, format=f"%.{_decimals(df[col])}f", **common)
        elif pd.api.types.is_numeric_dtype(df[col]) and not pd.api.types.is_bool_dtype(df[col]):
            config[col] = st.column_config.NumberColumn(col, **common)
        else:
            config[col] = st.column_config.TextColumn(col, **common)
    return config


def show_table(
    df: pd.DataFrame,
    *,
    helps: Mapping[str, str] | None = None,
    key: str | None = None,
    max_rows: int = MAX_ROWS_SHOWN,
) -> None:
    """Draw ``df`` the app's one way (see the module docstring); ``helps`` are column-label tooltips."""
    if df.empty:
        st.caption(t("table.no_rows"))
        return
    shown, as_text = for_display(df)
    # Column headers in the language (diag/rules/cli_headers.csv, shared with the CLI's tables); a header the
    # file does not list shows as written, and a translation that would clash with another column is not used.
    names = {str(c): header_text(str(c)) for c in shown.columns}
    if len(set(names.values())) == len(names):
        shown = shown.rename(columns=names)
        as_text = {names[c] for c in as_text}
        helps = {names.get(k, k): v for k, v in (helps or {}).items()}
    st.dataframe(
        shown,
        hide_index=True,
        width="stretch",
        height=height_px(len(shown), max_rows),
        column_config=column_config(shown, as_text, helps),
        key=key,
    )
    hints = []
    if len(shown) > max_rows:
        hints.append(t("app.table.rows_hint", n=f"{len(shown):,}"))
    if len(shown.columns) > WIDE_COLUMNS:
        hints.append(t("app.table.columns_hint", n=len(shown.columns)))
    if hints:
        st.caption(" · ".join(hints))
