"""Glossary: Ascend terms the pages use, each with its meaning for a CUDA engineer and its CUDA counterpart."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import glossary
from diag.i18n import t

st.title(t("page.glossary.title"))
st.caption(t("page.glossary.caption"))
needle = st.text_input(
    t("page.glossary.filter"), placeholder=t("page.glossary.placeholder"), key="glossary_filter"
).strip()
columns = tuple(t(f"page.glossary.col_{c}") for c in ("term", "zh", "meaning", "cuda"))
rows = [
    dict(zip(columns, (term.term, term.zh, term.explained(), term.counterpart()), strict=True))
    for term in glossary.terms()
    if not needle
    or needle.casefold()
    in " ".join(
        (term.term, term.zh, term.meaning, term.meaning_zh, term.cuda, term.cuda_zh, *term.aliases)
    ).casefold()
]
if not rows:
    st.info(t("page.glossary.no_match", needle=needle))
    st.stop()
st.table(pd.DataFrame(rows), hide_index=True, border="horizontal")  # a static table: long meanings wrap
