"""Serving acceptance: each benchmark run judged on TTFT, TPOT, throughput, failed requests and memory; CUDA vs Ascend."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app import data, widgets
from app.tables import show_table
from app.text import md_text
from diag.i18n import t

BADGE = {"pass": ":green-badge[{}]", "fail": ":red-badge[{}]", "n/a": ":gray-badge[{}]"}


def verdict_text(verdict: str) -> str:
    """pass / fail / n/a in the language (the stored verdict stays the English word, as --json gives it)."""
    return t(f"page.serving.verdict_{verdict.replace('/', '')}")


def _summary(rows: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "id": r["serving_id"],
                "result": r["label"],
                "platform": r["platform"],
                "hardware": r["hardware"],
                "model": r["model"],
                "load": r["load"],
                "in tok/req": widgets.rounded(r["input_tokens_mean"], 0),
                "out tok/req": widgets.rounded(r["output_tokens_mean"], 0),
                "requests": r["successful_requests"],
                "TTFT p99 ms": r["ttft_p99_ms"],
                "TPOT p99 ms": r["tpot_p99_ms"],
                "out tok/s": r["output_throughput_tps"],
                "verdict": verdict_text(r["verdict"]),
            }
            for r in rows
        ]
    )


def _checks(row: dict) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "figure": c["figure"],
                "statistic": c.get("statistic"),
                "value": widgets.rounded(c["value"]),
                "limit": widgets.rounded(c["threshold"]),
                "unit": c["unit"],
                "verdict": verdict_text(c["verdict"]),
                "margin": widgets.rounded(c["margin"]),
                "margin %": widgets.rounded(c["margin_pct"], 1),
                "basis": c.get("detail"),
            }
            for c in row["checks"]
        ]
    )


st.title(t("page.serving.title"))
fp = data.fingerprint()
rows = data.serving_acceptance(fp)
if not rows:
    st.info(t("page.serving.empty"))
    st.stop()
st.caption(t("page.serving.caption"))
m = st.columns(3)
m[0].metric(t("page.serving.runs"), len(rows))
m[1].metric(verdict_text("pass"), sum(r["verdict"] == "pass" for r in rows))
m[2].metric(verdict_text("fail"), sum(r["verdict"] == "fail" for r in rows))
show_table(_summary(rows))
for r in rows:
    with st.expander(
        f"{r['serving_id']} · {widgets.md(r['label'])} — {verdict_text(r['verdict'])}",
        expanded=r["verdict"] == "fail",
    ):
        st.markdown(
            f"{BADGE[r['verdict']].format(verdict_text(r['verdict']))} {widgets.md(r['tool'])} · "
            f"{widgets.md(r['platform'] or t('page.serving.platform_unknown'))} · "
            f"{widgets.md(r['hardware'] or t('page.serving.hardware_unknown'))}"
            + (
                t("page.serving.hardware_from", source=widgets.md(r["hardware_from"]))
                if r["hardware_from"]
                else ""
            )
            + (
                t("page.serving.profile_runs", runs=", ".join(map(str, r["linked_runs"])))
                if r["linked_runs"]
                else ""
            )
        )
        show_table(_checks(r))

st.subheader(t("page.serving.versus"))
if len(rows) < 2:
    st.info(t("page.serving.need_two"))
    st.stop()
ids = [r["serving_id"] for r in rows]
names = {r["serving_id"]: f"{r['serving_id']} · {r['label']} · {r['platform'] or '?'}" for r in rows}
ascend = [r["serving_id"] for r in rows if r["platform"] == "ascend"]
cuda = [r["serving_id"] for r in rows if r["platform"] == "cuda"]
c1, c2 = st.columns(2)
a = c1.selectbox(
    t("page.serving.pick_a"),
    ids,
    index=ids.index(ascend[0]) if ascend else 0,
    format_func=names.get,
    key="srv_a",
)
b = c2.selectbox(
    t("page.serving.pick_b"), ids, index=ids.index(cuda[0]) if cuda else 1, format_func=names.get, key="srv_b"
)
if a == b:
    st.warning(t("page.serving.pick_two"))
    st.stop()
cmp = data.serving_comparison(fp, a, b)
for w in cmp["warnings"]:
    st.warning(md_text(w))
for line in cmp["headline"]:
    st.error(line)
show_table(widgets.serving_comparison_frame(cmp))
