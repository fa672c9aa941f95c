"""Pieces of page that several pages show the same way (Streamlit calls; the figures come from app.data)."""

from __future__ import annotations

import streamlit as st

from app.text import md_text
from diag.analyses.counts import KernelCounts
from diag.i18n import t


def kernel_count_metrics(counts: KernelCounts) -> None:
    """The run's three counts under one definition each (diag.analyses.counts), and its data-quality note."""
    k = st.columns(3)
    k[0].metric(t("page.counts.device_kernels"), f"{counts.device_kernels:,}")
    k[1].metric(t("page.counts.operator_types"), f"{counts.operator_types:,}")
    k[2].metric(
        t("page.counts.kernels_per_step"),
        "—" if counts.kernels_per_step is None else f"{counts.kernels_per_step:,.1f}",
    )
    if counts.note():
        st.info(t("page.counts.data_quality", note=md_text(counts.note())))  # it names the files
