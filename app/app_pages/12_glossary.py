"""Glossary: Ascend terms the pages use, each with its meaning for a CUDA engineer and its CUDA counterpart."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import glossary

st.title("Glossary")
st.caption(
    "Ascend / CANN words on these pages, explained for an engineer who knows CUDA. The same text shows as the "
    "tooltip (?) of a column or figure. Edit diag/rules/glossary.toml to add a term."
)
needle = st.text_input("Filter", placeholder="a term, a CUDA word or 中文", key="glossary_filter").strip()
rows = [
    {"term": t.term, "中文": t.zh, "meaning": t.meaning, "CUDA counterpart": t.cuda}
    for t in glossary.terms()
    if not needle or needle.casefold() in " ".join((t.term, t.zh, t.meaning, t.cuda, *t.aliases)).casefold()
]
if not rows:
    st.info(f"No term matches “{needle}”.")
    st.stop()
st.table(pd.DataFrame(rows), hide_index=True, border="horizontal")  # a static table: long meanings wrap
